//! `match` over a target that lives on a device (the Python package's GPU arrays, and CPU
//! DLPack producers taking the same path): one run on the backend of that device
//! ([`MatchJob::run_whole`](monomorph::work::MatchJob::run_whole)), the result kept there and
//! handed over as exported buffers; the input's values are checked where they live.

use std::time::Instant;

use monomorph::backend::{ExportedBuffer, ForeignBuffer, Location};
use monomorph::dispatch::BackendChoice;
use monomorph::io::HostArray;
use monomorph::work::{Control, ExtraTemplate, JobArray};
use monomorph::{Arr, ArrayMeta, Backend, BackendTask, Real};
use ndarray::{ArrayD, IxDyn};

use super::error::{CliError, CliResult};
use super::global::{BackendArg, Global};
use super::matching::{Job, MatchArgs, Matched, Prepared, job_dispatch, match_error, write};
use super::output::{Outputs, read_input};
use super::session::ARRAY;
use super::templates::check_same_ndim;

/// An input on a device ([`super::session::take_foreign`]): `dims` axes and no empty axis,
/// as [`read_input`] checks a host one (its values are checked where it lives).
pub(super) fn check_device_input(flag: &str, f: &ForeignBuffer, dims: &[usize]) -> CliResult<()> {
    let shape = f.shape();
    if !dims.contains(&shape.len()) || shape.contains(&0) {
        return Err(CliError::input(format!(
            "{flag} {ARRAY}: an array of shape {shape:?} in {}, expected a non-empty 2-D or 3-D \
             array",
            f.location()
        )));
    }
    Ok(())
}

/// A target on a device is matched in one run on that device, its result kept there: not
/// split over `--devices` or MPI ranks, not mirrored (`--check-hand`).
pub(super) fn check_kept_run(g: &Global, a: &MatchArgs) -> CliResult<()> {
    let flag = if a.devices.is_some() {
        "--devices"
    } else if a.check_hand.is_some() {
        "--check-hand"
    } else if g.ranks {
        "mpirun"
    } else {
        return Ok(());
    };
    Err(CliError::input(format!(
        "{flag}: not with a target on a device (matched in one run on its device, the result \
         kept there), expected a host target"
    )))
}

/// The templates of `a` (see [`super::templates::read_templates`]) with their voxel sizes; one
/// template on a device (with a host mask, if any) is taken where it lives.
#[allow(clippy::type_complexity)]
pub(super) fn read_job_templates(
    a: &MatchArgs,
    exclusive: &[(&str, bool)],
    tshape: &[usize],
) -> CliResult<(
    (JobArray, Option<[f32; 3]>),
    Vec<ExtraTemplate>,
    Option<HostArray>,
)> {
    let on_device = a
        .template
        .first()
        .and_then(|p| super::session::take_foreign("--template", p));
    let Some(f) = on_device else {
        let (t, more, mask) =
            super::templates::read_templates(&a.template, &a.template_mask, exclusive, tshape)?;
        return Ok(((JobArray::Host(t.data), t.voxel_size), more, mask));
    };
    check_device_input("--template", &f, &[2, 3])?;
    let p = &a.template[0];
    check_same_ndim("--template", p, f.shape(), tshape, false)?;
    if a.template.len() > 1 || a.template_mask.len() > 1 {
        return Err(CliError::input(
            "--template: one template on a device (with at most one --template-mask), expected \
             host arrays for several templates",
        ));
    }
    let mask = match a.template_mask.first() {
        Some(mp) => {
            let m = read_input("--template-mask", mp, &[2, 3])?;
            check_same_ndim("--template-mask", mp, m.data.shape(), f.shape(), true)?;
            Some(m.data)
        }
        None => None,
    };
    Ok(((JobArray::Foreign(f), None), Vec::new(), mask))
}

/// One map of a result: downloaded and converted on the host by `host` (no `kept`), or
/// converted to `D` on the backend and exported ([`Matched::exported`], under `name`),
/// downloaded too only for files (`kept == Some(true)`; an empty host array otherwise).
pub(super) fn map_out<B: Backend, S: Real, D: Real>(
    b: &B,
    a: &Arr<B, S>,
    host: impl Fn(S) -> D,
    kept: Option<bool>,
    name: &'static str,
    exported: &mut Vec<(&'static str, ExportedBuffer)>,
) -> monomorph::Result<ArrayD<D>> {
    let Some(files) = kept else {
        return Ok(b.download(a)?.mapv(host));
    };
    // `D::from_f64(S::as_f64)`: the host conversion (`as`, through f64), on the device.
    let mut d = b.zeros::<D>(a.shape())?;
    b.cast(a, &mut d)?;
    let h = if files {
        b.download(&d)?
    } else {
        ArrayD::zeros(IxDyn(&[0]))
    };
    exported.push((name, b.export(d)?));
    Ok(h)
}

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
