//! Template matching over the ranks of an MPI communicator, from a user crate: each rank searches
//! its share of the rotations and rank 0 gets the merged result, bit-identical to one process.
//!
//! ```sh
//! cargo build --release --features mpi --example mpi_match
//! mpirun -n 4 --bind-to none target/release/examples/mpi_match
//! ```
//!
//! Runs on any communicator: here the world, split in two halves that each match their own
//! target (as a job over many tomograms would), then the world checks the halves agree. Then a
//! list of jobs of unequal sizes runs over the world with [`dist::Ranks`] (items on demand from
//! rank 0), and rank 0 checks every job equals one process's result bit for bit.

use std::process::ExitCode;

use monomorph::HostArray;
use monomorph::algo::matching::Score;
use monomorph::algo::rotations::RotationSet;
use monomorph::dist::{self, mpi, mpi::traits::*};
use monomorph::prelude::*;
use monomorph::work::{Control, Done, JobSize, MatchJob, Plan, RunError, Serial};
use ndarray::{ArrayD, IxDyn};

/// A 32³ target with the template planted at (12, 16, 20), same on every rank.
fn inputs() -> (ArrayD<f32>, ArrayD<f32>) {
    let template = ArrayD::from_shape_fn(IxDyn(&[8, 8, 8]), |i| {
        ((i[0] * 7 + i[1] * 3 + i[2]) % 11) as f32 - 5.0
    });
    let mut target = ArrayD::<f32>::zeros(IxDyn(&[32, 32, 32]));
    for (i, v) in template.indexed_iter() {
        target[[8 + i[0], 12 + i[1], 16 + i[2]]] = *v;
    }
    (target, template)
}

fn run(comm: &impl Communicator) -> Result<Option<(usize, f32, f64)>, dist::RankError> {
    let b = Cpu::<Single>::new();
    let (target, template) = inputs();
    // The job is owned host data: the same on every rank; each rank runs its rotation range
    // (agreed on: a step that fails on one rank fails on all), rank 0 merges.
    let rotations = dist::agree(comm, RotationSet::uniform(3, 45.0))?;
    let job = MatchJob::new(
        HostArray::F32(target),
        HostArray::F32(template),
        Score::NCC,
        rotations,
    );
    let merged = dist::match_template(comm, &b, &job, &Control::new())?;
    // Rank 0 of `comm`: the best voxel and the run's Σ score² statistic.
    let best = merged.map(|r| -> Result<(usize, f32, f64), Error> {
        let s = b.download(&r.scores)?;
        let (at, v) =
            s.iter().enumerate().fold(
                (0, f32::NEG_INFINITY),
                |m, (i, &v)| if v > m.1 { (i, v) } else { m },
            );
        Ok((at, v, r.ssum))
    });
    dist::agree(comm, best.transpose())
}

/// Jobs of unequal sizes (the template planted in each), the same on every rank.
fn list_jobs() -> Vec<std::sync::Arc<MatchJob>> {
    let (_, template) = inputs();
    [40usize, 16, 24, 20]
        .iter()
        .map(|&n| {
            let mut target = ArrayD::<f32>::zeros(IxDyn(&[n, n, n]));
            for (i, v) in template.indexed_iter() {
                target[[2 + i[0], 3 + i[1], 4 + i[2]]] = *v;
            }
            let rotations = RotationSet::uniform(3, 60.0).expect("a rotation set");
            let job = MatchJob::new(
                HostArray::F32(target),
                HostArray::F32(template.clone()),
                Score::FLC,
                rotations,
            );
            std::sync::Arc::new(job)
        })
        .collect()
}

/// A finished job's bits: (scores, rotation index, Σ score²) as host data.
type Bits = (Vec<u32>, Vec<i64>, u64);

fn bits(done: Done) -> Result<Bits, Error> {
    let b = Cpu::<Single>::new();
    let r = done.matching.finish(&b, done.part)?;
    let scores = b.download(&r.scores)?.iter().map(|v| v.to_bits()).collect();
    let index = b
        .download(&r.rotation_index)?
        .iter()
        .map(|&v| i64::from(v))
        .collect();
    Ok((scores, index, r.ssum.to_bits()))
}

/// The list over the world's ranks, checked on rank 0 against one process.
fn run_list(world: &impl Communicator) -> Result<Option<usize>, dist::RankError> {
    let jobs = list_jobs();
    let sizes: Vec<JobSize> = jobs
        .iter()
        .map(|j| JobSize {
            voxels: j.target.shape().iter().product::<usize>() as u64,
            rotations: j.rotations.len() as u64,
        })
        .collect();
    let plan = Plan::balanced(&sizes, world.size() as usize);
    let describe = |e: RunError<Error>| (1, format!("{e:?}"));
    let ranks = dist::Ranks::default().run(&jobs, &plan, &Control::new(), bits, describe)?;
    let Some(ranks) = ranks else { return Ok(None) };
    // Rank 0: one process's results, every job whole.
    let whole = Plan::whole(&jobs.iter().map(|j| j.rotations.len()).collect::<Vec<_>>());
    let mut one = Vec::new();
    Serial::default()
        .run(&jobs, &whole, &Control::new(), |d| {
            bits(d).map(|b| one.push(b))
        })
        .map_err(|e| dist::RankError {
            rank: 0,
            code: 1,
            message: format!("{e:?}"),
        })?;
    for (k, (r, o)) in ranks.iter().zip(&one).enumerate() {
        if r.value != *o {
            return Err(dist::RankError {
                rank: 0,
                code: 1,
                message: format!("job {k} differs from one process"),
            });
        }
    }
    Ok(Some(ranks.len()))
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI was already initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    // Two groups (one when run on a single rank), each its own communicator.
    let color = if world.size() > 1 {
        world.rank() % 2
    } else {
        0
    };
    let half = world
        .split_by_color(mpi::topology::Color::with_value(color))
        .expect("every rank has a color");
    let result = run(&half);
    // Everyone learns whether every group succeeded (the groups ran independently).
    let all = dist::agree(&world, result);
    match all {
        Ok(Some((at, score, ssum))) => {
            let (z, y, x) = (at / 1024, at / 32 % 32, at % 32);
            println!(
                "group {color} (rank {} of the world): best score {score:.4} at ({z}, {y}, {x}), ssum {ssum:e}",
                world.rank()
            );
        }
        Ok(None) => {}
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("error: {e}");
            }
            return ExitCode::FAILURE;
        }
    }
    match run_list(&world) {
        Ok(Some(n)) => println!(
            "list: {n} jobs over {} ranks, each equal to one process bit for bit",
            world.size()
        ),
        Ok(None) => {}
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("error: {e}");
            }
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
