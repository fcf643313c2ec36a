//! `monomorph match --devices 0,1` in one process: the rotations split over several devices,
//! one thread and one backend instance per device, merged exactly as MPI ranks are
//! ([`monomorph::split`]), so the outputs are byte-identical to a run on one device.
//!
//! Worker `k` of `n` searches the `k`-th contiguous rotation range
//! ([`monomorph::split::rotation_range`]), as rank `k` of `n` would. With `--backend cuda` a
//! worker is a CUDA device (ordinal as CUDA numbers them, after `CUDA_VISIBLE_DEVICES`); with
//! the CPU backend a "device" is a worker with a thread pool of its own, the listed workers
//! sharing rayon's threads (`RAYON_NUM_THREADS`, else the cores): `T` threads over `n` workers
//! give each `T / n`, the first `T % n` one more, and the ids must be below `T`. One progress
//! bar counts every worker's rotations. A worker that fails stops the others at their next
//! rotation; the command then exits 1 (2 for an input error such as a too small
//! `--memory-limit`) with one line naming the device and the cause.

use std::ops::{ControlFlow, Range};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use monomorph::dispatch::{BackendChoice, DefaultBackend, DispatchOptions};
use monomorph::{Backend, BackendTask, Real};
use serde_json::json;

use super::list::{Callback, FromParts, HostPart, host_part, merge_into, order_ssum};
use super::matching::{MatchArgs, MatchJob, Matched, match_error, prepare, write};
use super::output::Outputs;
use super::ranks::Watch;
use super::trace::progress;
use super::{CliError, CliResult, Global};

/// `--devices`: distinct device numbers, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices(pub Vec<usize>);

impl std::fmt::Display for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        f.write_str(&s.join(","))
    }
}

/// Parses `--devices`: a comma-separated list of distinct device numbers (`0,1,2,3`).
pub fn parse_devices(s: &str) -> Result<Devices, String> {
    let mut out: Vec<usize> = Vec::new();
    if s.trim().is_empty() {
        return Err("no device, expected a comma-separated list such as 0,1".into());
    }
    for t in s.split(',').map(str::trim) {
        let d: usize = t.parse().map_err(|_| {
            format!("'{t}' is not a device number, expected a comma-separated list such as 0,1")
        })?;
        if out.contains(&d) {
            return Err(format!(
                "device {d} is listed twice, expected each device once"
            ));
        }
        out.push(d);
    }
    Ok(Devices(out))
}

/// The backend a dispatch resolves to: `Cpu` or `Cuda` (`Auto` probes the machine).
pub fn resolved(opts: &DispatchOptions) -> BackendChoice {
    match opts.backend {
        BackendChoice::Auto => DefaultBackend::new().backend,
        b => b,
    }
}

/// The number of threads rayon gives this process (what the CPU workers share).
fn cpu_threads() -> usize {
    monomorph::Cpu::<monomorph::Single>::new().threads()
}

/// Checks `--devices` against the devices there are (an input error naming the flag): CUDA
/// devices, or under the CPU backend one worker per thread (`threads_split`: the CPU ids are
/// checked only where the CPU runs the threaded split, not under MPI, where a CPU rank uses no
/// device).
pub fn check_devices(g: &Global, devices: Option<&Devices>, threads_split: bool) -> CliResult<()> {
    let Some(d) = devices else { return Ok(()) };
    let (n, what) = match resolved(&g.dispatch(None)) {
        BackendChoice::Cuda => (
            monomorph::dispatch::cuda_device_count(),
            "CUDA device(s) visible",
        ),
        _ if !threads_split => return Ok(()),
        _ => (
            cpu_threads(),
            "CPU worker(s): one per thread, RAYON_NUM_THREADS or the cores",
        ),
    };
    match d.0.iter().find(|&&k| k >= n) {
        Some(bad) => Err(CliError::input(format!(
            "--devices {d}: device {bad} does not exist ({n} {what}), expected numbers below {n}"
        ))),
        None => Ok(()),
    }
}

/// The test hook `MONOMORPH_TEST_FAIL_DEVICE=D` (with `MONOMORPH_TEST_FAIL_AFTER=N`, default
/// 0): the worker on device D fails after N of its rotations, as a device error would.
fn fail_device() -> Option<(usize, usize)> {
    let d = std::env::var("MONOMORPH_TEST_FAIL_DEVICE")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((d, super::ranks::fail_after().unwrap_or(0)))
}

/// A rotation range of a job on one backend, downloaded as a [`HostPart`] (indices into the
/// whole rotation set): what a device thread and a scheduled list item run.
pub struct RangeTask<'a> {
    /// The job.
    pub job: &'a MatchJob,
    /// Called after every rotation; may stop the loop.
    pub cb: Callback<'a>,
    /// The rotations.
    pub range: Range<usize>,
}

impl BackendTask for RangeTask<'_> {
    type Output = HostPart;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<HostPart> {
        let (start, len) = (self.range.start, self.range.len());
        if len == 0 {
            // Nothing to search: an empty part in the backend's own types, no upload.
            let n = self.job.target.shape().iter().product();
            let lowest = <monomorph::FloatOf<B> as Real>::lowest().as_f64();
            return Ok(HostPart {
                start,
                len,
                scores: vec![lowest; n],
                index: vec![-1; n],
                ssum_parts: Vec::new(),
                moments: None,
                background: None,
            });
        }
        let up = self.job.upload(b)?;
        let mut params = self.job.params(&up);
        params.progress = Some(self.cb);
        let p = monomorph::split::match_range(b, &up.target, &up.template, &params, self.range)?;
        Ok(host_part::<B>(
            start,
            len,
            &p.scores,
            &p.rotation_index,
            p.ssum_parts,
            p.moments.as_ref().map(|(a, sc)| (a, *sc)),
            p.background.as_ref().map(|(a, c)| (a, *c)),
        ))
    }
}

/// One worker's progress, in its own steps (tiles × rotations).
#[derive(Default)]
struct Steps {
    done: AtomicUsize,
    total: AtomicUsize,
}

/// The job's rotations split over `devices` (threads), merged exactly; `cb` sees every
/// worker's rotations together, `(rotations done, rotations)`, and may stop them all; `watch`
/// reports such a stop. The result's `devices` says which device ran which rotations.
pub fn run_split(
    opts: DispatchOptions,
    devices: &Devices,
    job: MatchJob,
    cb: Callback<'_>,
    watch: &Watch,
) -> CliResult<Matched> {
    let n = devices.0.len();
    let nrot = job.rotations.len();
    let mem = opts.memory_limit;
    let backend = resolved(&opts);
    let cpu = backend != BackendChoice::Cuda;
    let threads = if cpu { cpu_threads() } else { 0 };
    let share = |k: usize| threads / n + usize::from(k < threads % n);
    let ranges: Vec<Range<usize>> = (0..n)
        .map(|k| monomorph::split::rotation_range(nrot, n, k))
        .collect();
    let steps: Vec<Steps> = (0..n).map(|_| Steps::default()).collect();
    let stop = AtomicBool::new(false);
    let caller_stopped = AtomicBool::new(false);
    let injected: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let first_failed: Mutex<Option<usize>> = Mutex::new(None);
    let report = Mutex::new(());
    let hook = fail_device();
    let t0 = Instant::now();
    let results: Vec<(monomorph::Result<HostPart>, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|k| {
                let (job, ranges, steps, stop) = (&job, &ranges, &steps, &stop);
                let (caller_stopped, injected) = (&caller_stopped, &injected);
                let (first_failed, report) = (&first_failed, &report);
                s.spawn(move || {
                    let wcb = |done: usize, total: usize| {
                        steps[k].done.store(done, Relaxed);
                        steps[k].total.store(total, Relaxed);
                        if hook.is_some_and(|(d, after)| d == devices.0[k] && done >= after) {
                            injected[k].store(true, Relaxed);
                            return ControlFlow::Break(());
                        }
                        if stop.load(Relaxed) {
                            return ControlFlow::Break(());
                        }
                        // Every worker's rotations so far (each in its own steps).
                        let all: usize = (0..n)
                            .map(|j| {
                                let (d, t) =
                                    (steps[j].done.load(Relaxed), steps[j].total.load(Relaxed));
                                (d * ranges[j].len()).checked_div(t).unwrap_or(0)
                            })
                            .sum();
                        let _one = report.lock().unwrap_or_else(|e| e.into_inner());
                        if cb(all, nrot).is_break() {
                            caller_stopped.store(true, Relaxed);
                            stop.store(true, Relaxed);
                            return ControlFlow::Break(());
                        }
                        ControlFlow::Continue(())
                    };
                    let o = DispatchOptions {
                        backend,
                        device: devices.0[k],
                        threads: cpu.then(|| share(k)),
                        ..opts
                    };
                    let t = Instant::now();
                    let task = RangeTask {
                        job,
                        cb: &wcb,
                        range: ranges[k].clone(),
                    };
                    let r = monomorph::dispatch(o, task);
                    let own = match &r {
                        Err(monomorph::Error::Cancelled { .. }) => injected[k].load(Relaxed),
                        Err(_) => true,
                        Ok(_) => false,
                    };
                    if own {
                        // This worker failed: the others stop at their next rotation.
                        let mut f = first_failed.lock().unwrap_or_else(|e| e.into_inner());
                        f.get_or_insert(k);
                        stop.store(true, Relaxed);
                    }
                    (r, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let e = monomorph::Error::invalid("worker", "a device thread panicked");
                    (Err(e), 0.0)
                })
            })
            .collect()
    });
    let match_s = t0.elapsed().as_secs_f64();
    let failed = *first_failed.lock().unwrap_or_else(|e| e.into_inner());
    let mut parts = Vec::with_capacity(n);
    let mut seconds = Vec::with_capacity(n);
    let mut cancelled = None;
    for (k, (r, t)) in results.into_iter().enumerate() {
        seconds.push(t);
        match r {
            Ok(p) => parts.push(p),
            Err(e) if Some(k) == failed => {
                let d = devices.0[k];
                let e = if injected[k].load(Relaxed) {
                    let after = hook.map_or(0, |h| h.1);
                    CliError::failure(format!(
                        "injected failure after {after} rotations (MONOMORPH_TEST_FAIL_DEVICE)"
                    ))
                } else {
                    match_error(e, mem)
                };
                return Err(CliError {
                    code: e.code,
                    message: format!("device {d}: {}", e.message),
                });
            }
            Err(e) => cancelled = cancelled.or(Some(e)),
        }
    }
    if let Some(e) = cancelled {
        // Stopped by the caller (a stop under MPI, the test hook) or, impossibly, by no one.
        let e = if caller_stopped.load(Relaxed) {
            e
        } else {
            monomorph::Error::invalid("worker", format!("a worker stopped unasked: {e}"))
        };
        return watch.outcome(Err(e), mem);
    }
    let t1 = Instant::now();
    let ssum = order_ssum(
        parts
            .iter()
            .map(|p| (p.start, p.len, p.ssum_parts.clone()))
            .collect(),
        nrot,
    )
    .map_err(CliError::failure)?;
    let mut it = parts.into_iter();
    let mut merged = it
        .next()
        .ok_or_else(|| CliError::failure("--devices: no worker ran"))?;
    for p in it {
        merge_into(&mut merged, p)?;
    }
    let shape = job.target.shape().to_vec();
    let task = FromParts {
        job,
        merged,
        ssum,
        shape,
        match_s,
    };
    let finish = DispatchOptions {
        backend,
        device: devices.0[0],
        ..opts
    };
    let mut m = monomorph::dispatch(finish, task).map_err(|e| match_error(e, mem))?;
    let workers: Vec<serde_json::Value> = (0..n)
        .map(|k| {
            json!({
                "device": devices.0[k],
                "threads": cpu.then(|| share(k)),
                "rotations": [ranges[k].start, ranges[k].end],
                "seconds": seconds[k],
            })
        })
        .collect();
    m.devices = Some(json!({
        "backend": if cpu { "cpu" } else { "cuda" },
        "workers": workers,
        "merge_s": t1.elapsed().as_secs_f64(),
    }));
    Ok(m)
}

/// `monomorph match --devices …` in one process.
pub fn run_match(g: &Global, a: &MatchArgs, devices: &Devices) -> CliResult<()> {
    let (mut p, job) = prepare(g, a)?;
    let out = Outputs::in_dir("--out", &a.out)?;
    let pb = progress(p.n_rot as u64, "rotations", p.g.quiet);
    let watch = Watch::default();
    let cb = |d: usize, t: usize| {
        pb.set_length(t as u64);
        pb.set_position(d as u64);
        watch.poll(d)
    };
    let opts = p.g.dispatch(a.memory_limit);
    let m = p
        .timings
        .time("total", || run_split(opts, devices, job, &cb, &watch));
    pb.finish_and_clear();
    write(a, p, out, m?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_or_say_why_not() {
        assert_eq!(parse_devices("0,1").unwrap(), Devices(vec![0, 1]));
        assert_eq!(parse_devices(" 3 , 1").unwrap(), Devices(vec![3, 1]));
        for (bad, why) in [
            ("", "no device"),
            ("0,0", "listed twice"),
            ("0,x", "'x' is not a device number"),
            ("0,", "'' is not"),
            ("-1", "'-1' is not"),
        ] {
            let e = parse_devices(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
