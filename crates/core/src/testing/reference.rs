//! Plain, slow host references the backends are checked against (f64 throughout).

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

use crate::BorderMode;
use crate::shape::strides;

/// Index `i` (possibly out of range) of an axis of length `n` under `mode`; `None` = constant.
pub fn extend(i: isize, n: usize, mode: BorderMode) -> Option<usize> {
    let n = n as isize;
    if (0..n).contains(&i) {
        return Some(i as usize);
    }
    match mode {
        BorderMode::Constant(_) => None,
        BorderMode::Nearest => Some(i.clamp(0, n - 1) as usize),
        BorderMode::Wrap => Some(i.rem_euclid(n) as usize),
        BorderMode::Reflect => {
            // d c b a | a b c d | d c b a  (period 2n)
            let p = 2 * n;
            let m = i.rem_euclid(p);
            Some(if m < n { m } else { p - 1 - m } as usize)
        }
        BorderMode::Mirror => {
            if n == 1 {
                return Some(0);
            }
            // c b | a b c d | c b  (period 2n-2)
            let p = 2 * n - 2;
            let m = i.rem_euclid(p);
            Some(if m < n { m } else { p - m } as usize)
        }
    }
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = flat % shape[k];
        flat /= shape[k];
    }
    idx
}

/// Value of `a` at a (possibly out-of-range) multi-index under `mode`.
fn sample(a: &ArrayD<f64>, idx: &[isize], mode: BorderMode) -> f64 {
    let mut real = Vec::with_capacity(idx.len());
    for (k, &i) in idx.iter().enumerate() {
        match extend(i, a.shape()[k], mode) {
            Some(j) => real.push(j),
            None => {
                return match mode {
                    BorderMode::Constant(c) => c,
                    _ => unreachable!(),
                };
            }
        }
    }
    a[IxDyn(&real)]
}

/// scipy `maximum_filter` with a boolean footprint (centre `shape // 2`), brute force.
pub fn max_filter_footprint(
    a: &ArrayD<f64>,
    footprint: &[bool],
    fshape: &[usize],
    mode: BorderMode,
) -> ArrayD<f64> {
    let shape = a.shape().to_vec();
    let offsets: Vec<Vec<isize>> = (0..footprint.len())
        .filter(|&f| footprint[f])
        .map(|f| {
            unravel(f, fshape)
                .iter()
                .zip(fshape)
                .map(|(&o, &s)| o as isize - (s / 2) as isize)
                .collect()
        })
        .collect();
    ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        let mut m = f64::NEG_INFINITY;
        for off in &offsets {
            let idx: Vec<isize> = (0..shape.len()).map(|k| ix[k] as isize + off[k]).collect();
            let v = sample(a, &idx, mode);
            if v > m {
                m = v;
            }
        }
        m
    })
}

/// scipy `maximum_filter(size=size)`, brute force.
pub fn max_filter(a: &ArrayD<f64>, size: &[usize], mode: BorderMode) -> ArrayD<f64> {
    let n: usize = size.iter().product();
    max_filter_footprint(a, &vec![true; n], size, mode)
}

/// scipy `ndimage.laplace`, brute force.
pub fn laplace(a: &ArrayD<f64>, mode: BorderMode) -> ArrayD<f64> {
    let shape = a.shape().to_vec();
    ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        let base: Vec<isize> = (0..shape.len()).map(|k| ix[k] as isize).collect();
        let mut s = 0.0;
        for k in 0..shape.len() {
            let mut lo = base.clone();
            lo[k] -= 1;
            let mut hi = base.clone();
            hi[k] += 1;
            s += sample(a, &lo, mode) + sample(a, &hi, mode) - 2.0 * sample(a, &base, mode);
        }
        s
    })
}

/// Naive real DFT over `axes`, returning the half spectrum (largest axis in `axes` halved).
pub fn rfft(a: &ArrayD<f64>, axes: &[usize]) -> ArrayD<Complex<f64>> {
    let shape = a.shape().to_vec();
    let mut full: ArrayD<Complex<f64>> = a.mapv(|v| Complex::new(v, 0.0));
    for &ax in axes {
        let n = shape[ax];
        let st = strides(&shape);
        let src = full.clone();
        let (s, d) = (
            src.as_slice().expect("standard layout"),
            full.as_slice_mut().expect("standard layout"),
        );
        for flat in 0..d.len() {
            let idx = unravel(flat, &shape);
            let k = idx[ax];
            let base = flat - k * st[ax];
            let mut acc = Complex::new(0.0, 0.0);
            for j in 0..n {
                let ang = -2.0 * std::f64::consts::PI * (j * k % n) as f64 / n as f64;
                acc += s[base + j * st[ax]] * Complex::new(ang.cos(), ang.sin());
            }
            d[flat] = acc;
        }
    }
    let last = *axes.iter().max().expect("at least one axis");
    let mut half = shape.clone();
    half[last] = shape[last] / 2 + 1;
    ArrayD::from_shape_fn(IxDyn(&half), |ix| full[ix])
}

/// `y[b] = A x[b]` for a dense (m, n) matrix and x of shape (batch, n).
pub fn matvec(a: &ArrayD<f64>, x: &ArrayD<f64>) -> ArrayD<f64> {
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let batch = x.shape()[0];
    ArrayD::from_shape_fn(IxDyn(&[batch, m]), |ix| {
        (0..n).map(|j| a[[ix[1], j]] * x[[ix[0], j]]).sum()
    })
}

/// The Laplacian with h = 1 on `grid` (Dirichlet zero or periodic), for x of shape (batch, n).
pub fn laplacian(grid: &[usize], periodic: bool, x: &ArrayD<f64>) -> ArrayD<f64> {
    let batch = x.shape()[0];
    let n: usize = grid.iter().product();
    let mode = if periodic {
        BorderMode::Wrap
    } else {
        BorderMode::Constant(0.0)
    };
    let mut out = ArrayD::zeros(IxDyn(&[batch, n]));
    for b in 0..batch {
        let row: Vec<f64> = (0..n).map(|i| x[[b, i]]).collect();
        let g = ArrayD::from_shape_vec(IxDyn(grid), row).expect("grid size");
        let l = laplace(&g, mode);
        for (i, v) in l.iter().enumerate() {
            out[[b, i]] = *v;
        }
    }
    out
}
