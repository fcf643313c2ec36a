//! `match` over a target that lives on a device (the Python package's GPU arrays, and CPU
//! DLPack producers taking the same path): one run on the backend of that device
//! ([`MatchJob::run_whole`](monomorph::work::MatchJob::run_whole)), the result kept there and
//! handed over as exported buffers; the input's values are checked where they live.

use std::time::Instant;

use monomorph::backend::Location;
use monomorph::dispatch::BackendChoice;
use monomorph::work::{Control, JobArray};
use monomorph::{Backend, BackendTask};

use super::error::{CliError, CliResult};
use super::global::BackendArg;
use super::matched::{Matched, write};
use super::matching::{Job, MatchArgs, Prepared, job_dispatch, match_error};
use super::output::Outputs;
use super::session::ARRAY;

/// The whole run kept on one backend (see the module docs).
struct Kept<'a, 'c> {
    job: &'a Job,
    control: &'a Control<'c>,
    /// Whether files are written (the maps downloaded for them).
    files: bool,
}

impl BackendTask for Kept<'_, '_> {
    type Output = Matched;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Matched> {
        let t0 = Instant::now();
        let r = self.job.job.run_whole(b, self.control, 0)?;
        self.job
            .matched_as(b, r, t0.elapsed().as_secs_f64(), Some(self.files))
    }
}

/// Runs a prepared match whose target lives on a device on that device's backend (the CUDA
/// device of its ordinal; the CPU for host memory), keeps the maps there and writes the run
/// as [`write`] does (files, when asked for, from a download). `--backend`/`--device` naming
/// another place are input errors.
pub fn run_kept(
    a: &MatchArgs,
    p: Prepared,
    job: &Job,
    out: Outputs,
    control: &Control<'_>,
) -> CliResult<()> {
    let mut opts = job_dispatch(&p.g, job, a.memory_limit);
    let at = job.job.target.location();
    let elsewhere = |flag: &str, v: String| {
        CliError::input(format!(
            "{flag} {v}: the target is an array in {at}, matched where it lives, expected \
             {flag} {} or none",
            match at {
                Location::Host => "cpu".to_string(),
                Location::Cuda(n) if flag == "--device" => n.to_string(),
                Location::Cuda(_) => "cuda".to_string(),
            }
        ))
    };
    match at {
        Location::Host => {
            if p.g.backend == BackendArg::Cuda {
                return Err(elsewhere("--backend", "cuda".into()));
            }
            opts.backend = BackendChoice::Cpu;
        }
        Location::Cuda(n) => {
            if p.g.backend == BackendArg::Cpu {
                return Err(elsewhere("--backend", "cpu".into()));
            }
            if let Some(d) = p.g.device.filter(|&d| d != n) {
                return Err(elsewhere("--device", d.to_string()));
            }
            opts.backend = BackendChoice::Cuda;
            opts.device = n;
        }
    }
    if let JobArray::Foreign(t) = &job.job.template
        && t.location() != at
    {
        return Err(CliError::input(format!(
            "--template {ARRAY}: an array in {}, expected the target's place ({at}) or host data",
            t.location()
        )));
    }
    let task = Kept {
        job,
        control,
        files: !out.in_memory(),
    };
    let m = monomorph::dispatch(opts, task).map_err(|e| match_error(e, a.memory_limit))?;
    write(a, p, out, m)
}
