//! Pick particles the way a user crate would: one generic `pick<B: Backend>` that matches a
//! template over a rotation search and calls peaks, instantiated for the CPU (and for CUDA
//! when built with `--features cuda` and a GPU is present).
//!
//! `cargo run --release --example pick`

use monomorph::ndarray::{self, Array2};
use monomorph::prelude::*;

/// A found particle: position (where template voxel n//2 lands), score, rotation index.
#[derive(Debug)]
struct Pick {
    at: Vec<usize>,
    score: f64,
    rotation: usize,
}

/// Matches `template` (with `mask`) in `target` over an even in-plane grid of `step` degrees
/// and returns at most `max` peaks at least `spacing` voxels apart.
fn pick<B: Backend>(
    b: &B,
    target: &Array2<f32>,
    template: &Array2<f32>,
    mask: &Array2<f32>,
    step: f64,
    spacing: usize,
    max: usize,
) -> monomorph::Result<Vec<Pick>> {
    let (t, m, k) = (
        b.upload_array(target)?,
        b.upload_array(template)?,
        b.upload_array(mask)?,
    );
    let mut params = MatchParams::new(Score::FLC, RotationSet::uniform(2, step)?);
    params.template_mask = Some(&k);
    let result = match_template(b, &t, &m, &params)?;
    let mut pp = PeakParams::with_min_distance(spacing);
    pp.threshold_abs = Some(0.4);
    pp.num_peaks = Some(max);
    let peaks = find_peaks(b, &result.scores, &pp)?;
    let index = b.download(&result.rotation_index)?;
    Ok(peaks
        .into_iter()
        .map(|p| {
            let r = index[ndarray::IxDyn(&p.coord)].as_f64() as usize;
            Pick {
                at: p.coord,
                score: p.score,
                rotation: r,
            }
        })
        .collect())
}

/// A small asymmetric particle (an "L" of two blobs) and a disc mask.
fn particle(n: usize) -> (Array2<f32>, Array2<f32>) {
    let c = (n as f32 - 1.0) / 2.0;
    let blob = |y: f32, x: f32, cy: f32, cx: f32, s: f32| {
        (-((y - cy).powi(2) + (x - cx).powi(2)) / (2.0 * s * s)).exp()
    };
    let t = Array2::from_shape_fn((n, n), |(y, x)| {
        let (y, x) = (y as f32, x as f32);
        blob(y, x, c - 3.0, c - 3.0, 2.5)
            + 0.7 * blob(y, x, c + 3.5, c - 2.0, 1.8)
            + 0.5 * blob(y, x, c - 2.0, c + 4.0, 1.5)
    });
    let m = Array2::from_shape_fn((n, n), |(y, x)| {
        if (y as f32 - c).powi(2) + (x as f32 - c).powi(2) <= (c + 0.5).powi(2) {
            1.0
        } else {
            0.0
        }
    });
    (t, m)
}

/// The template rotated by 90° · `quarter` with the pull-back convention (exact permutation).
fn rot90(t: &Array2<f32>, quarter: usize) -> Array2<f32> {
    let n = t.nrows();
    let mut r = t.clone();
    for _ in 0..quarter {
        r = Array2::from_shape_fn((n, n), |(y, x)| r[[n - 1 - x, y]]);
    }
    r
}

fn scene(size: usize, t: &Array2<f32>, planted: &[([usize; 2], usize)]) -> Array2<f32> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut noise = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32 * 0.6
    };
    let mut target = Array2::from_shape_fn((size, size), |_| noise());
    let n = t.nrows();
    for &(at, q) in planted {
        let r = rot90(t, q);
        for y in 0..n {
            for x in 0..n {
                target[[at[0] + y, at[1] + x]] += r[[y, x]];
            }
        }
    }
    target
}

fn run<B: Backend>(b: &B) -> monomorph::Result<()> {
    let n = 16;
    let (template, mask) = particle(n);
    // (top-left corner, quarter turns); a 30° grid holds 90° at index 3, 180° at 6, 270° at 9.
    let planted = [([10, 12], 0), ([60, 20], 1), ([30, 70], 2), ([75, 75], 3)];
    let target = scene(112, &template, &planted);
    let picks = pick(b, &target, &template, &mask, 30.0, n / 2, 8)?;
    println!("{} ({}):", b.name(), b.device().name);
    for p in &picks {
        println!(
            "  at {:?} score {:.3} rotation {} ({}°)",
            p.at,
            p.score,
            p.rotation,
            p.rotation * 30
        );
    }
    for (at, q) in planted {
        let want = [at[0] + n / 2, at[1] + n / 2];
        let found = picks.iter().any(|p| p.at == want && p.rotation == 3 * q);
        if !found {
            return Err(monomorph::Error::invalid(
                "example",
                format!("planted copy at {want:?} (rotation {}) not picked", 3 * q),
            ));
        }
    }
    println!("  all {} planted copies found", planted.len());
    Ok(())
}

fn main() -> monomorph::Result<()> {
    run(&Cpu::<Single>::new())?;
    #[cfg(feature = "cuda")]
    match monomorph::Cuda::<Single>::new(0) {
        Ok(gpu) => run(&gpu)?,
        Err(e) => println!("cuda: skipped ({e})"),
    }
    Ok(())
}
