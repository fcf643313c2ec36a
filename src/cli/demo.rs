//! `monomorph demo`: a synthetic tomogram with a non-symmetric template planted at known
//! positions and rotations plus noise, matched end to end (FLC over a rotation set, peaks), and a
//! table of found vs planted particles.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use monomorph::algo::matching::Score;
use monomorph::algo::rotations::RotationSet;
use monomorph::io::{HostArray, PeakRow, write_mrc, write_npy, write_peaks, write_png};
use monomorph::{Backend, BackendTask, Interpolation};
use ndarray::{ArrayD, IxDyn};
use serde_json::json;
use tracing::info_span;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::matching::Job;
use super::output::{Outputs, check_memory, check_out_dir, peak_memory_bytes, run_info};
use super::peaks::{Caller, PeakQuery, euler_of};
use monomorph::work::{Control, MatchJob};

/// Options of `monomorph demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Edge of the cubic tomogram in voxels (at least 64; about 40·N³ bytes of memory).
    #[arg(long, default_value_t = 128)]
    pub size: usize,
    /// Edge of the cubic template box in voxels.
    #[arg(long, default_value_t = 24)]
    pub template_size: usize,
    /// Number of particles planted.
    #[arg(long, default_value_t = 8)]
    pub particles: usize,
    /// Angular step of the rotation set in degrees.
    #[arg(long, default_value_t = 40.0)]
    pub angular_step: f64,
    /// Standard deviation of the Gaussian noise, 0 to 1000 (the template's peak density is 1).
    #[arg(long, default_value_t = 0.6)]
    pub noise: f64,
    /// Seed of the positions, rotations and noise.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Write the tomogram, template, scores, peaks, a PNG and run.json here.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u = self.next().max(1e-300);
        let v = self.next();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// A non-symmetric template: a body and three arms of different lengths and widths.
fn make_template(n: usize) -> ArrayD<f64> {
    let c = (n as f64 - 1.0) / 2.0;
    let s = n as f64 / 24.0;
    let blobs = [
        ([0.0, 0.0, 0.0], 3.0 * s, 1.0),
        ([6.0 * s, 0.0, 0.0], 2.0 * s, 0.9),
        ([0.0, 4.0 * s, 0.0], 1.6 * s, 0.8),
        ([0.0, 0.0, -3.0 * s], 1.2 * s, 0.7),
        ([-3.0 * s, 3.0 * s, 2.0 * s], 1.4 * s, 0.6),
    ];
    ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |i| {
        let p = [i[0] as f64 - c, i[1] as f64 - c, i[2] as f64 - c];
        blobs
            .iter()
            .map(|(q, w, a)| {
                let d2: f64 = (0..3).map(|k| (p[k] - q[k]).powi(2)).sum();
                a * (-d2 / (2.0 * w * w)).exp()
            })
            .sum()
    })
}

/// Pull-back rotation about the centre with trilinear interpolation: `out[o] = t[R(o − c) + c]`.
fn rotate(t: &ArrayD<f64>, r: &[f64]) -> ArrayD<f64> {
    let n = t.shape()[0];
    let c = (n as f64 - 1.0) / 2.0;
    let at = |z: isize, y: isize, x: isize| -> f64 {
        if z < 0 || y < 0 || x < 0 || z >= n as isize || y >= n as isize || x >= n as isize {
            0.0
        } else {
            t[[z as usize, y as usize, x as usize]]
        }
    };
    ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |o| {
        let v = [o[0] as f64 - c, o[1] as f64 - c, o[2] as f64 - c];
        let s: Vec<f64> = (0..3)
            .map(|i| (0..3).map(|j| r[i * 3 + j] * v[j]).sum::<f64>() + c)
            .collect();
        let f: Vec<f64> = s.iter().map(|x| x.floor()).collect();
        let w: Vec<f64> = s.iter().zip(&f).map(|(a, b)| a - b).collect();
        let (z0, y0, x0) = (f[0] as isize, f[1] as isize, f[2] as isize);
        let mut acc = 0.0;
        for dz in 0..2 {
            for dy in 0..2 {
                for dx in 0..2 {
                    let wt = (if dz == 1 { w[0] } else { 1.0 - w[0] })
                        * (if dy == 1 { w[1] } else { 1.0 - w[1] })
                        * (if dx == 1 { w[2] } else { 1.0 - w[2] });
                    acc += wt * at(z0 + dz, y0 + dy, x0 + dx);
                }
            }
        }
        acc
    })
}

/// Angle in degrees between two 3×3 rotations (row-major).
fn rotation_error_deg(a: &[f64], b: &[f64]) -> f64 {
    // trace(Aᵀ B)
    let tr: f64 = (0..3)
        .map(|i| (0..3).map(|k| a[k * 3 + i] * b[k * 3 + i]).sum::<f64>())
        .sum();
    ((tr - 1.0) / 2.0).clamp(-1.0, 1.0).acos().to_degrees()
}

struct Planted {
    pos: [usize; 3],
    rot: usize,
}

/// Runs `monomorph demo`.
pub fn run(g: &Global, a: DemoArgs) -> CliResult<()> {
    check_args(&a)?;
    let t_all = Instant::now();
    let rotations = RotationSet::uniform(3, a.angular_step)
        .map_err(|e| CliError::for_flag(e, "--angular-step", super::error::show(a.angular_step)))?;
    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let t_build = Instant::now();
    let slots = shuffled_slots(&a, &mut rng)?;
    // Every flag checked: now the output folder may be created.
    let out = a
        .out
        .as_deref()
        .map(|d| Outputs::in_dir("--out", d))
        .transpose()?;
    let template = make_template(a.template_size);
    let planted = plant(&slots[..a.particles], rotations.len(), &mut rng);
    let tomo = build_tomogram(a.size, &template, &planted, &rotations, a.noise, &mut rng);
    let build_s = t_build.elapsed().as_secs_f64();
    let res = match_demo(g, &a, &tomo, &template, &rotations)?;
    let pairs = pair_peaks(&planted, &res.peaks, &rotations);
    let total_s = t_all.elapsed().as_secs_f64();
    let timings = Timings { build_s, total_s };
    if !g.quiet {
        print_table(&res, &pairs, planted.len(), rotations.len(), &timings)?;
    }
    if let Some(out) = out {
        let planted = Planting {
            tomo: &tomo,
            template: &template,
            planted: &planted,
            rotations: &rotations,
        };
        write_outputs(g, &a, out, &planted, &res, &pairs, &timings)?;
    }
    Ok(())
}

/// The flags' values, checked before anything is built (the output folder is not created).
fn check_args(a: &DemoArgs) -> CliResult<()> {
    let n = a.size;
    let m = a.template_size;
    if n < 64 {
        return Err(CliError::input(format!("--size {n}: expected at least 64")));
    }
    if !(8..=n / 2).contains(&m) {
        return Err(CliError::input(format!(
            "--template-size {m}: expected 8 to {}",
            n / 2
        )));
    }
    // Past ~1e3 the particles (peak density 1) are invisible, and far past it the tomogram
    // overflows single precision.
    if !(a.noise.is_finite() && (0.0..=1e3).contains(&a.noise)) {
        return Err(CliError::input(format!(
            "--noise {}: expected a value from 0 to 1000",
            super::error::show(a.noise)
        )));
    }
    // The tomogram (f64), its copy handed to matching, the copy matching converts and uploads,
    // and the score and index maps on the device and on the host: ~40 bytes a voxel before
    // matching's own buffers (which it tiles to the memory left).
    check_memory(
        "--size",
        &n.to_string(),
        (n as u128).checked_pow(3).and_then(|v| v.checked_mul(40)),
    )?;
    if let Some(d) = &a.out {
        check_out_dir("--out", d)?;
    }
    Ok(())
}

/// Positions on a jittered grid, at least one template apart and a template from the border,
/// in random order; refuses more `--particles` than the grid holds.
fn shuffled_slots(a: &DemoArgs, rng: &mut Rng) -> CliResult<Vec<[usize; 3]>> {
    let (n, m) = (a.size, a.template_size);
    let margin = m;
    let spacing = m + m / 2;
    let cells = (n - 2 * margin) / spacing + 1;
    let mut slots: Vec<[usize; 3]> = Vec::new();
    for z in 0..cells {
        for y in 0..cells {
            for x in 0..cells {
                slots.push([
                    margin + z * spacing,
                    margin + y * spacing,
                    margin + x * spacing,
                ]);
            }
        }
    }
    if a.particles == 0 || a.particles > slots.len() {
        return Err(CliError::input(format!(
            "--particles {}: expected 1 to {} for a {n}³ tomogram and a {m}³ template",
            a.particles,
            slots.len()
        )));
    }
    for i in (1..slots.len()).rev() {
        let j = (rng.next() * (i + 1) as f64) as usize % (i + 1);
        slots.swap(i, j);
    }
    Ok(slots)
}

/// One particle per slot: the slot jittered by up to 2 voxels per axis, a random rotation.
fn plant(slots: &[[usize; 3]], nrot: usize, rng: &mut Rng) -> Vec<Planted> {
    slots
        .iter()
        .map(|&p| {
            let jit = |rng: &mut Rng| (rng.next() * 3.0) as usize;
            Planted {
                pos: [p[0] + jit(rng), p[1] + jit(rng), p[2] + jit(rng)],
                rot: (rng.next() * nrot as f64) as usize % nrot,
            }
        })
        .collect()
}

/// The `n`³ tomogram: the template rotated into every planted place, plus Gaussian noise of
/// σ `noise`.
fn build_tomogram(
    n: usize,
    template: &ArrayD<f64>,
    planted: &[Planted],
    rotations: &RotationSet,
    noise: f64,
    rng: &mut Rng,
) -> ArrayD<f64> {
    let m = template.shape()[0];
    let mut tomo = ArrayD::<f64>::zeros(IxDyn(&[n, n, n]));
    for p in planted {
        let rt = rotate(template, rotations.matrix(p.rot));
        let h = m / 2;
        for ((k0, k1, k2), v) in rt.indexed_iter().map(|(i, v)| ((i[0], i[1], i[2]), *v)) {
            let (z, y, x) = (p.pos[0] + k0 - h, p.pos[1] + k1 - h, p.pos[2] + k2 - h);
            tomo[[z, y, x]] += v;
        }
    }
    tomo.mapv_inplace(|v| v + noise * rng.normal());
    tomo
}

/// FLC of the template (in a spherical mask) over the tomogram, and peaks above pytme's
/// 1-false-positive threshold.
fn match_demo(
    g: &Global,
    a: &DemoArgs,
    tomo: &ArrayD<f64>,
    template: &ArrayD<f64>,
    rotations: &RotationSet,
) -> CliResult<DemoResult> {
    let (n, m, nrot) = (a.size, a.template_size, rotations.len());
    let c = (m as f64 - 1.0) / 2.0;
    let mask = ArrayD::from_shape_fn(IxDyn(&[m, m, m]), |i| {
        let d2: f64 = (0..3).map(|k| (i[k] as f64 - c).powi(2)).sum();
        if d2.sqrt() <= c { 1.0f64 } else { 0.0 }
    });
    let query = PeakQuery {
        min_distance: m / 2,
        threshold_abs: None,
        threshold_rel: None,
        exclude_border: Some(m / 4),
        num_peaks: Some(4 * a.particles),
        false_positives: Some(1.0),
        caller: Caller::Skimage,
        run_stats: None,
        max_score: None,
        oversampling: None,
    };
    let mut job = MatchJob::new(
        HostArray::F64(tomo.clone()),
        HostArray::F64(template.clone()),
        Score::FLC,
        rotations.clone(),
    );
    job.template_mask = Some(HostArray::F64(mask));
    job.interpolation = Interpolation::Cubic;
    let job = Job {
        job: std::sync::Arc::new(job),
        peaks: Some(query),
        mirrored: None,
    };
    if !g.quiet {
        note!(
            "demo: {n}³ tomogram, {m}³ template planted {} times, noise σ = {}, FLC over {nrot} rotations (step {}°)",
            a.particles,
            a.noise,
            a.angular_step
        );
    }
    let _s = info_span!("demo_match").entered();
    Ok(monomorph::dispatch(
        g.dispatch(None),
        DemoTask(job, g.quiet),
    )?)
}

/// Planted particles paired with the peaks found.
struct Pairs {
    /// One row per planted particle (run.json's `particles`).
    rows: Vec<serde_json::Value>,
    /// How many were found.
    found: usize,
    /// Peaks called.
    called: usize,
}

impl Pairs {
    fn precision(&self) -> f64 {
        if self.called == 0 {
            0.0
        } else {
            self.found as f64 / self.called as f64
        }
    }
    fn recall(&self) -> f64 {
        self.found as f64 / self.rows.len() as f64
    }
}

/// Pairs each planted particle with the nearest peak within 3 voxels, each peak used once.
fn pair_peaks(
    planted: &[Planted],
    peaks: &[monomorph::algo::peaks::Peak],
    rotations: &RotationSet,
) -> Pairs {
    let mut used = vec![false; peaks.len()];
    let mut rows = Vec::new();
    let mut found = 0usize;
    for (i, p) in planted.iter().enumerate() {
        let best = peaks
            .iter()
            .enumerate()
            .filter(|(k, _)| !used[*k])
            .map(|(k, q)| {
                let d2: f64 = (0..3)
                    .map(|a| (q.coord[a] as f64 - p.pos[a] as f64).powi(2))
                    .sum();
                (k, d2.sqrt())
            })
            .filter(|(_, d)| *d <= 3.0)
            .min_by(|x, y| x.1.total_cmp(&y.1));
        match best {
            Some((k, d)) => {
                used[k] = true;
                found += 1;
                let q = &peaks[k];
                let rot_err = q
                    .rotation
                    .as_ref()
                    .map(|(_, r)| rotation_error_deg(rotations.matrix(p.rot), r));
                rows.push(json!({
                    "particle": i, "planted": p.pos, "planted_rotation": p.rot,
                    "found": q.coord, "position_error": d, "rotation_error_deg": rot_err,
                    "found_rotation": q.rotation.as_ref().map(|r| r.0), "score": q.score,
                }));
            }
            None => rows.push(json!({
                "particle": i, "planted": p.pos, "planted_rotation": p.rot, "found": null,
            })),
        }
    }
    Pairs {
        rows,
        found,
        called: peaks.len(),
    }
}

/// Seconds spent building the tomogram and in the whole command.
struct Timings {
    build_s: f64,
    total_s: f64,
}

/// The table of planted against found particles, the precision and recall, and the timings.
fn print_table(
    res: &DemoResult,
    pairs: &Pairs,
    n_planted: usize,
    nrot: usize,
    t: &Timings,
) -> CliResult<()> {
    say!("\n  #  planted (z, y, x)   found (z, y, x)     pos err  rot err   score")?;
    for r in &pairs.rows {
        let pl = &r["planted"];
        let fmt3 = |v: &serde_json::Value| {
            let c = |i: usize| v[i].as_u64().unwrap_or(0);
            format!("({:>3}, {:>3}, {:>3})", c(0), c(1), c(2))
        };
        if r["found"].is_null() {
            say!(
                "{:>3}  {}     not found",
                r["particle"].as_u64().unwrap_or(0),
                fmt3(pl)
            )?;
        } else {
            say!(
                "{:>3}  {}     {}  {:>5.2} vx  {:>6.2}°  {:.3}",
                r["particle"].as_u64().unwrap_or(0),
                fmt3(pl),
                fmt3(&r["found"]),
                r["position_error"].as_f64().unwrap_or(f64::NAN),
                r["rotation_error_deg"].as_f64().unwrap_or(f64::NAN),
                r["score"].as_f64().unwrap_or(f64::NAN)
            )?;
        }
    }
    say!(
        "\n{} peaks called above the 1-false-positive threshold {:.4}; found {}/{} planted: precision {:.2}, recall {:.2}",
        pairs.called,
        res.threshold,
        pairs.found,
        n_planted,
        pairs.precision(),
        pairs.recall()
    )?;
    say!(
        "timings: build {:.2} s, matching {:.2} s ({:.1} ms per rotation, {} on {}), peaks {:.3} s, total {:.2} s",
        t.build_s,
        res.matched.match_s,
        1e3 * res.matched.match_s / nrot as f64,
        res.matched.backend,
        res.matched.device,
        res.matched.peaks_s,
        t.total_s
    )?;
    Ok(())
}

/// What was planted: the tomogram, the template and the particles' places and rotations.
struct Planting<'a> {
    tomo: &'a ArrayD<f64>,
    template: &'a ArrayD<f64>,
    planted: &'a [Planted],
    rotations: &'a RotationSet,
}

/// `--out`: the tomogram, template, maps, peaks, the planted truth, a PNG and run.json (last:
/// it marks the run complete).
fn write_outputs(
    g: &Global,
    a: &DemoArgs,
    mut out: Outputs,
    p: &Planting<'_>,
    res: &DemoResult,
    pairs: &Pairs,
    t: &Timings,
) -> CliResult<()> {
    let (n, m, nrot) = (a.size, a.template_size, p.rotations.len());
    let scores = &res.matched.scores;
    out.stage("tomogram.mrc", |f| {
        write_mrc(f, &p.tomo.mapv(|v| v as f32), [1.0; 3])
    })?;
    out.stage("template.mrc", |f| {
        write_mrc(f, &p.template.mapv(|v| v as f32), [1.0; 3])
    })?;
    out.stage("scores.npy", |f| write_npy(f, scores))?;
    out.stage("rotation_index.npy", |f| {
        write_npy(f, &res.matched.rotation_index)
    })?;
    out.stage("rotations.npy", |f| {
        write_npy(f, &res.matched.rotations.mapv(|v| v as f32).into_dyn())
    })?;
    let peak_rows: Vec<PeakRow> = res
        .peaks
        .iter()
        .map(|q| PeakRow {
            position: q.coord.clone(),
            score: q.score,
            rotation: q.rotation.as_ref().map(|r| r.0),
            euler: q.rotation.as_ref().map(|r| euler_of(&r.1)),
            subvoxel: None,
            template: None,
        })
        .collect();
    out.stage("peaks.csv", |f| write_peaks(f, &peak_rows, 3))?;
    out.stage("peaks.star", |f| write_peaks(f, &peak_rows, 3))?;
    let truth: Vec<PeakRow> = p
        .planted
        .iter()
        .map(|q| PeakRow {
            position: q.pos.to_vec(),
            score: f64::NAN,
            rotation: Some(q.rot),
            euler: Some(euler_of(p.rotations.matrix(q.rot))),
            subvoxel: None,
            template: None,
        })
        .collect();
    out.stage("planted.csv", |f| write_peaks(f, &truth, 3))?;
    let coords: Vec<Vec<usize>> = res.peaks.iter().map(|q| q.coord.clone()).collect();
    out.stage("scores.png", |f| write_png(f, scores, &coords))?;
    let mut info = run_info(g, &res.matched.backend, &res.matched.device);
    if let Some(o) = info.as_object_mut() {
        o.insert(
            "parameters".into(),
            json!({"size": n, "template_size": m, "particles": a.particles,
                   "angular_step": a.angular_step, "n_rotations": nrot, "noise": a.noise,
                   "seed": a.seed, "score": "FLC", "min_distance": m / 2}),
        );
        o.insert("particles".into(), json!(pairs.rows));
        o.insert("peaks_called".into(), json!(pairs.called));
        o.insert("found".into(), json!(pairs.found));
        o.insert("precision".into(), json!(pairs.precision()));
        o.insert("recall".into(), json!(pairs.recall()));
        o.insert("threshold".into(), json!(res.threshold));
        o.insert(
            "timings".into(),
            json!({"build_s": t.build_s, "match_s": res.matched.match_s, "peaks_s": res.matched.peaks_s,
                   "per_rotation_s": res.matched.match_s / nrot as f64, "total_s": t.total_s}),
        );
        o.insert("peak_memory_bytes".into(), json!(peak_memory_bytes()));
    }
    out.json("run.json", &info)?;
    out.commit()?;
    if !g.quiet
        && let Some(dir) = &a.out
    {
        say!("wrote {}", dir.display())?;
    }
    Ok(())
}

struct DemoResult {
    matched: super::matched::Matched,
    peaks: Vec<monomorph::algo::peaks::Peak>,
    threshold: f64,
}

/// The demo's match on one backend (quiet or with a progress bar).
struct DemoTask(Job, bool);

impl BackendTask for DemoTask {
    type Output = DemoResult;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<DemoResult> {
        let (job, nrot) = (&self.0, self.0.job.rotations.len());
        let pb = super::trace::progress(nrot as u64, "rotations", self.1);
        let control = Control::new().with_progress(|d, _| pb.set_position(d));
        let t0 = std::time::Instant::now();
        let part = job.job.run_range(b, 0..nrot, &control, 0)?;
        let r = job.job.finish(b, part)?;
        b.synchronize()?;
        pb.finish_and_clear();
        let mut matched = job.matched(b, r, t0.elapsed().as_secs_f64())?;
        // The threshold the peak query used (1 expected false positive, pytme's rule).
        let threshold = matched
            .false_alarm
            .as_ref()
            .and_then(|f| f.threshold)
            .unwrap_or(f64::NAN);
        let peaks = std::mem::take(&mut matched.peaks);
        Ok(DemoResult {
            matched,
            peaks,
            threshold,
        })
    }
}
