//! Algorithms of one's own on the op traits, generic over the backend: an FFT cross-correlation
//! that recovers a circular shift, and a Gaussian blur by FFT checked against a direct
//! convolution on the host.
//!
//! `cargo run --release --example ops`

use monomorph::ndarray::{Array2, ArrayView2, Ix2};
use monomorph::prelude::*;

/// Circular cross-correlation `c[s] = Σ_i f[i] · g[i + s]` of two same-shaped 2-D arrays,
/// computed as `irfft(conj(F) · G) / N` on the device.
pub fn cross_correlate<B: Backend>(
    b: &B,
    f: &Arr<B, FloatOf<B>>,
    g: &Arr<B, FloatOf<B>>,
) -> Result<Arr<B, FloatOf<B>>> {
    let plan = b.fft_plan(f.shape(), &[0, 1])?;
    let mut fs = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    let mut gs = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    b.rfft(&plan, f, &mut fs)?;
    b.rfft(&plan, g, &mut gs)?;
    let mut prod = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    b.complex_mul_conj(&gs, &fs, &mut prod)?; // G · conj(F)
    let mut c = b.zeros::<FloatOf<B>>(plan.real_shape())?;
    b.irfft(&plan, &mut prod, &mut c)?; // unnormalised
    b.scalar_assign(BinaryOp::Div, &mut c, f.len() as f64)?;
    Ok(c)
}

/// The circular shift `s` (per axis) that best aligns `g` to `f` (`g ≈ roll(f, s)`).
pub fn find_shift<B: Backend>(
    b: &B,
    f: &Arr<B, FloatOf<B>>,
    g: &Arr<B, FloatOf<B>>,
) -> Result<[usize; 2]> {
    let c = cross_correlate(b, f, g)?;
    let (flat, _) = b.argmax(&c)?;
    let nx = c.shape()[1];
    Ok([flat / nx, flat % nx])
}

/// A periodic Gaussian blur of width `sigma` (pixels): the image's spectrum times the kernel's.
pub fn gaussian_blur<B: Backend>(
    b: &B,
    image: &Arr<B, FloatOf<B>>,
    sigma: f64,
) -> Result<Arr<B, FloatOf<B>>> {
    let (ny, nx) = (image.shape()[0], image.shape()[1]);
    // The kernel centred on pixel (0, 0), wrapped, normalised to sum 1.
    let wrapped = |i: usize, n: usize| i.min(n - i) as f64;
    let mut kernel = Array2::from_shape_fn((ny, nx), |(y, x)| {
        (-(wrapped(y, ny).powi(2) + wrapped(x, nx).powi(2)) / (2.0 * sigma * sigma)).exp()
    });
    kernel /= kernel.sum();
    let k = b.upload_array(&kernel)?;
    let plan = b.fft_plan(&[ny, nx], &[0, 1])?;
    let mut ks = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    let mut is = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    b.rfft(&plan, &k, &mut ks)?;
    b.rfft(&plan, image, &mut is)?;
    let mut prod = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    b.complex_mul(&is, &ks, &mut prod)?;
    let mut out = b.zeros::<FloatOf<B>>(plan.real_shape())?;
    b.irfft(&plan, &mut prod, &mut out)?;
    b.scalar_assign(BinaryOp::Div, &mut out, (ny * nx) as f64)?;
    Ok(out)
}

/// The same blur by direct circular convolution on the host (the reference).
pub fn gaussian_blur_host(image: ArrayView2<'_, f64>, sigma: f64) -> Array2<f64> {
    let (ny, nx) = image.dim();
    let wrapped = |i: usize, n: usize| i.min(n - i) as f64;
    let kernel = Array2::from_shape_fn((ny, nx), |(y, x)| {
        (-(wrapped(y, ny).powi(2) + wrapped(x, nx).powi(2)) / (2.0 * sigma * sigma)).exp()
    });
    let kernel = &kernel / kernel.sum();
    Array2::from_shape_fn((ny, nx), |(y, x)| {
        let mut s = 0.0;
        for ((v, u), &w) in kernel.indexed_iter() {
            s += w * image[[(y + ny - v) % ny, (x + nx - u) % nx]];
        }
        s
    })
}

/// A deterministic 2-D test image.
pub fn image(ny: usize, nx: usize) -> Array2<f64> {
    Array2::from_shape_fn((ny, nx), |(y, x)| {
        ((y * 7 + x * 3) as f64 * 0.61).sin() + ((x * x + y) % 5) as f64 * 0.2
    })
}

/// Both programs on `b`, with their checks; returns the blur's largest error.
pub fn run<B: Backend>(b: &B) -> Result<f64> {
    let f = image(24, 30);
    let shift = [5usize, 11usize];
    let g = Array2::from_shape_fn(f.dim(), |(y, x)| {
        f[[(y + 24 - shift[0]) % 24, (x + 30 - shift[1]) % 30]]
    });
    let (fd, gd) = (b.upload_array(&f)?, b.upload_array(&g)?);
    assert_eq!(find_shift(b, &fd, &gd)?, shift, "{}", b.label());

    let blurred = gaussian_blur(b, &fd, 1.5)?;
    let got = b.download_as::<f64, Ix2>(&blurred)?;
    let want = gaussian_blur_host(f.view(), 1.5);
    let err = (&got - &want)
        .mapv(f64::abs)
        .fold(0.0, |m: f64, &v| m.max(v));
    let tol = 1e3 * FloatOf::<B>::EPS.as_f64();
    assert!(
        err < tol,
        "{}: blur differs from the direct convolution by {err:e}",
        b.label()
    );
    assert!(
        (got.sum() - f.sum()).abs() < tol * f.len() as f64,
        "a blur keeps the sum"
    );
    Ok(err)
}

fn main() -> Result<()> {
    let single = run(&Cpu::<Single>::new())?;
    let double = run(&Cpu::<Double>::new())?;
    println!(
        "shift recovered; blur vs direct convolution: max error {single:.1e} (single), {double:.1e} (double)"
    );
    Ok(())
}
