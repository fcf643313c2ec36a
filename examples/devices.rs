//! One match split over two CPU workers, each with a thread pool of its own, merged exactly:
//! the same bits as one backend's `match_template` over every rotation.
//!
//! ```sh
//! cargo run --release --example devices
//! ```
//!
//! The work layer separates what to compute (an owned `MatchJob`) from where it runs (an
//! executor over a plan of items). `Threads` with `--backend cuda`'s options and device
//! ordinals would run the same plan on GPUs; `monomorph::dist` runs it on MPI ranks.

use monomorph::algo::matching::{MatchParams, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::ndarray::{ArrayD, IxDyn, s};
use monomorph::prelude::*;
use monomorph::work::{Control, MatchJob, Plan, Threads};
use monomorph::{BackendChoice, DispatchOptions, HostArray};

/// A 32³ target with an asymmetric 8³ particle planted at (9, 12, 14), and the particle.
fn inputs() -> (ArrayD<f32>, ArrayD<f32>) {
    let template = ArrayD::from_shape_fn(IxDyn(&[8; 3]), |i| {
        ((i[0] * 7 + i[1] * 3 + i[2]) % 11) as f32 - 5.0
    });
    let mut target = ArrayD::from_shape_fn(IxDyn(&[32; 3]), |i| {
        ((i[0] * 13 + i[1] * 5 + i[2] * 3) % 17) as f32 * 0.05
    });
    target
        .slice_mut(s![9..17, 12..20, 14..22])
        .assign(&template);
    (target, template)
}

/// Runs the split match and checks it against one backend; returns the best voxel's score.
pub fn run() -> monomorph::Result<f32> {
    let (target, template) = inputs();
    let rotations = RotationSet::uniform(3, 60.0)?;

    // What to compute: an owned job (Send + Sync), host arrays and options.
    let mut job = MatchJob::new(
        HostArray::F32(target.clone()),
        HostArray::F32(template.clone()),
        Score::FLC,
        rotations.clone(),
    );
    job.score_stats = true;
    let plan = Plan::split(job.rotations.len(), 2);
    let jobs = vec![std::sync::Arc::new(job)];

    // Where it runs: two CPU workers ("devices" 0 and 1), each on its own rayon pool, taking
    // the plan's items (here one contiguous rotation range each) on demand.
    let cpu = DispatchOptions {
        backend: BackendChoice::Cpu,
        ..DispatchOptions::default()
    };
    let workers = Threads::new(cpu, vec![0, 1]);
    let b = Cpu::<Single>::new();
    let mut split = None;
    workers
        .run(&jobs, &plan, &Control::new(), |done| {
            // One finished job: its parts merged; `finish` assembles the result once.
            assert_eq!(done.ran.len(), 2);
            split = Some(done.matching.finish(&b, done.part)?);
            Ok::<(), monomorph::Error>(())
        })
        .map_err(|e| monomorph::Error::invalid("workers", format!("{e:?}")))?;
    let split = split.expect("the job finished");

    // The same match on one backend, in one loop.
    let (t, p) = (b.upload_array(&target)?, b.upload_array(&template)?);
    let mut params = MatchParams::new(Score::FLC, rotations);
    params.score_stats = true;
    let one = match_template(&b, &t, &p, &params)?;

    let bits = |a: ArrayD<f32>| a.mapv(f32::to_bits);
    assert_eq!(
        bits(b.download(&split.scores)?),
        bits(b.download(&one.scores)?)
    );
    let (si, oi): (ArrayD<i32>, ArrayD<i32>) = (
        b.download(&split.rotation_index)?,
        b.download(&one.rotation_index)?,
    );
    assert_eq!(si, oi);
    assert_eq!(split.ssum.to_bits(), one.ssum.to_bits());
    let (ss, os) = (split.statistics(&b)?, one.statistics(&b)?);
    let (ss, os) = (ss.expect("stats"), os.expect("stats"));
    assert_eq!(bits(b.download(&ss.z)?), bits(b.download(&os.z)?));
    let (at, score) = b.argmax(&split.scores)?;
    assert_eq!(at, (13 * 32 + 16) * 32 + 18); // the particle's centre voxel (8 / 2 = 4 in)
    Ok(score)
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> monomorph::Result<()> {
    let score = run()?;
    println!("two CPU workers, merged: best score {score:.4}, bit-identical to one backend");
    Ok(())
}
