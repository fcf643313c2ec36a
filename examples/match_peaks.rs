//! Template matching and peak calling on a planted 3-D volume, generic over the backend.
//!
//! An asymmetric particle is planted at known positions in a noisy volume; FLC matching over a
//! rotation search and peak calling must find every copy, at its centre, with the identity as
//! its best rotation.
//!
//! `cargo run --release --example match_peaks`

use monomorph::ndarray::{Array3, s};
use monomorph::prelude::*;

/// Where each copy of the template's corner was planted.
pub const PLANTED: [[usize; 3]; 3] = [[4, 6, 5], [22, 8, 20], [10, 24, 26]];
/// Template edge.
pub const N: usize = 9;

/// An asymmetric particle (three Gaussian blobs) and a spherical mask.
pub fn particle() -> (Array3<f32>, Array3<f32>) {
    let c = (N as f32 - 1.0) / 2.0;
    let blob = |p: [f32; 3], q: [f32; 3], s: f32| {
        let d2: f32 = p.iter().zip(q).map(|(a, b)| (a - b).powi(2)).sum();
        (-d2 / (2.0 * s * s)).exp()
    };
    let template = Array3::from_shape_fn((N, N, N), |(z, y, x)| {
        let p = [z as f32, y as f32, x as f32];
        blob(p, [c - 2.0, c - 2.0, c - 1.0], 1.6)
            + 0.7 * blob(p, [c + 2.0, c - 1.0, c + 2.0], 1.2)
            + 0.5 * blob(p, [c, c + 2.5, c - 2.0], 1.0)
    });
    let mask = Array3::from_shape_fn((N, N, N), |(z, y, x)| {
        let d2 = (z as f32 - c).powi(2) + (y as f32 - c).powi(2) + (x as f32 - c).powi(2);
        if d2 <= (c + 0.5).powi(2) { 1.0 } else { 0.0 }
    });
    (template, mask)
}

/// A 40³ volume of uniform noise with the template added at [`PLANTED`].
pub fn volume(template: &Array3<f32>) -> Array3<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32 * 0.5
    };
    let mut v = Array3::from_shape_simple_fn((40, 40, 40), &mut noise);
    for [z, y, x] in PLANTED {
        let mut window = v.slice_mut(s![z..z + N, y..y + N, x..x + N]);
        window += template;
    }
    v
}

/// Matches, calls peaks, and returns them best first (each with its best rotation).
pub fn pick<B: Backend>(
    b: &B,
    volume: &Array3<f32>,
    template: &Array3<f32>,
    mask: &Array3<f32>,
) -> Result<Vec<Peak>> {
    let (v, t, m) = (
        b.upload_array(volume)?,
        b.upload_array(template)?,
        b.upload_array(mask)?,
    );
    let mut params = MatchParams::new(Score::FLC, RotationSet::uniform(3, 90.0)?);
    params.template_mask = Some(&m);
    let result = match_template(b, &v, &t, &params)?;
    let peaks = PeakParams {
        min_distance: N / 2,
        num_peaks: Some(PLANTED.len()),
        ..PeakParams::default()
    };
    result.peaks(b, &peaks)
}

/// Runs [`pick`] on `b` and checks every planted copy was found at its centre, unrotated.
pub fn run<B: Backend>(b: &B) -> Result<Vec<Peak>> {
    let (template, mask) = particle();
    let peaks = pick(b, &volume(&template), &template, &mask)?;
    for corner in PLANTED {
        let centre: Vec<usize> = corner.iter().map(|c| c + N / 2).collect();
        let p = peaks.iter().find(|p| p.coord == centre);
        let p = p.unwrap_or_else(|| panic!("{}: no peak at {centre:?}: {peaks:?}", b.label()));
        assert_eq!(
            p.rotation.as_ref().map(|r| r.0),
            Some(0),
            "{}: identity expected",
            b.label()
        );
        assert!(p.score > 0.5, "{}: weak peak {p:?}", b.label());
    }
    Ok(peaks)
}

fn main() -> Result<()> {
    for peaks in [run(&Cpu::<Single>::new())?, run(&Cpu::<Double>::new())?] {
        for p in &peaks {
            println!(
                "at {:?} score {:.3} rotation {:?}",
                p.coord,
                p.score,
                p.rotation.as_ref().map(|r| r.0)
            );
        }
    }
    println!(
        "all {} planted copies found in both precisions",
        PLANTED.len()
    );
    Ok(())
}
