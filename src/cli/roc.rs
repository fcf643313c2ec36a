//! `monomorph roc`: pytom-match-pick's ROC estimate (`pytom_estimate_roc.py`) of a score map:
//! extraction with cut 0, the two-Gaussian fit of the extracted scores' histogram, and the
//! threshold maximising recall · (1 − FDR), written as JSON (and a PNG of the fit).

use std::path::PathBuf;

use clap::Args;
use monomorph::algo::peaks::{PytomParams, Roc, RocParams, estimate_roc};
use monomorph::io::plot::{Canvas, Rgb, tick_label, ticks};
use serde_json::json;

use super::output::{Outputs, check_distinct, check_out_file};
use super::pytom::{PytomTask, find_run, radius, read_scores, voxel_size};
use super::{CliError, CliResult, Global};

/// Options of `monomorph roc`.
#[derive(Args, Debug, Clone)]
pub struct RocArgs {
    /// Score map (`.npy` or MRC), 3-D.
    #[arg(long, value_name = "S")]
    pub scores: PathBuf,
    /// The `match` output folder whose run.json gives the voxel size, or a pytom-match-pick
    /// job file (default: a run.json beside --scores, when there is one).
    #[arg(long, value_name = "DIR")]
    pub match_run: Option<PathBuf>,
    /// Particle diameter in Å: the extraction's exclusion radius `int(D/2/voxel)`, as
    /// `peaks --caller pytom`.
    #[arg(long, value_name = "Å")]
    pub particle_diameter: Option<f64>,
    /// Voxel size in Å when neither the scores' header nor the run.json gives one.
    #[arg(long, value_name = "Å")]
    pub sampling_rate: Option<f64>,
    /// Particles to extract (pytom's -n; it advises about 3× the particles expected).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub num_peaks: usize,
    /// Histogram bins of the extracted scores.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub bins: usize,
    /// Accept NaN scores and treat them as never a peak.
    #[arg(long)]
    pub allow_nan: bool,
    /// Output JSON: threshold, n_particles, noise and particles Gaussians, recall and fdr at
    /// the threshold, the curve and the histogram.
    #[arg(long, value_name = "roc.json")]
    pub out: PathBuf,
    /// Also draw the histogram, both fitted Gaussians and the threshold as a PNG.
    #[arg(long, value_name = "roc.png")]
    pub png: Option<PathBuf>,
}

const GREY: Rgb = [150, 150, 150];
const LIGHT: Rgb = [222, 222, 222];
const BLUE: Rgb = [31, 119, 180];
const ORANGE: Rgb = [255, 127, 14];
const BLACK: Rgb = [0, 0, 0];

/// The figure: histogram bars, the two-Gaussian model (blue), the particle Gaussian (orange),
/// the threshold (dashed), axes with numbers; on the right the estimated recall against FDR
/// with the chosen threshold marked.
pub fn draw(roc: &Roc) -> Canvas {
    let (w, h) = (1000usize, 460usize);
    let mut c = Canvas::new(w, h, [255; 3]);
    // left panel: histogram
    let (l, r, t, b) = (70.0, 640.0, 20.0, 400.0);
    let (x0, x1) = (roc.edges[0], *roc.edges.last().unwrap_or(&1.0));
    let model = |x: f64| roc.noise.at(x) + roc.particles.at(x);
    let n = 400;
    let xs: Vec<f64> = (0..=n)
        .map(|i| x0 + (x1 - x0) * i as f64 / n as f64)
        .collect();
    let ymax = roc
        .counts
        .iter()
        .map(|&v| v as f64)
        .chain(xs.iter().map(|&x| roc.particles.at(x)))
        .fold(1.0, f64::max)
        * 1.15;
    let px = |x: f64| l + (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE) * (r - l);
    let py = |y: f64| b - (y / ymax).clamp(0.0, 1.0) * (b - t);
    for (i, &v) in roc.counts.iter().enumerate() {
        let (a, z) = (px(roc.edges[i]), px(roc.edges[i + 1]));
        c.fill_rect(
            a as i64 + 1,
            py(v as f64) as i64,
            z as i64 - 1,
            b as i64,
            LIGHT,
        );
        c.line(a, py(v as f64), z, py(v as f64), 2, GREY, None);
        c.line(a, b, a, py(v as f64), 1, GREY, None);
        c.line(z, b, z, py(v as f64), 1, GREY, None);
    }
    // the curves, left out where they run above the frame (the noise Gaussian's peak)
    let top = ymax / 1.02;
    for win in xs.windows(2) {
        let (m0, m1) = (model(win[0]), model(win[1]));
        if m0 <= top || m1 <= top {
            c.line(px(win[0]), py(m0), px(win[1]), py(m1), 3, BLUE, None);
        }
        let (p0, p1) = (roc.particles.at(win[0]), roc.particles.at(win[1]));
        c.line(px(win[0]), py(p0), px(win[1]), py(p1), 3, ORANGE, None);
    }
    c.line(
        px(roc.threshold),
        b,
        px(roc.threshold),
        t,
        2,
        BLACK,
        Some((8, 6)),
    );
    let label = tick_label(roc.threshold);
    c.text(px(roc.threshold) as i64 + 6, t as i64 + 4, &label, 3, BLACK);
    axes(&mut c, (l, r, t, b), (x0, x1), (0.0, ymax));
    // right panel: recall against FDR
    let (l2, r2, t2, b2) = (720.0, 980.0, 140.0, 400.0);
    let qx = |f: f64| l2 + f.clamp(0.0, 1.0) * (r2 - l2);
    let qy = |v: f64| b2 - v.clamp(0.0, 1.0) * (b2 - t2);
    c.line(qx(0.0), qy(0.0), qx(1.0), qy(1.0), 1, GREY, Some((4, 4)));
    for p in &roc.curve {
        let (x, y) = (qx(p.fdr) as i64, qy(p.recall) as i64);
        c.fill_rect(x - 2, y - 2, x + 2, y + 2, GREY);
    }
    let (x, y) = (qx(roc.fdr) as i64, qy(roc.recall) as i64);
    c.fill_rect(x - 5, y - 5, x + 5, y + 5, BLACK);
    axes(&mut c, (l2, r2, t2, b2), (0.0, 1.0), (0.0, 1.0));
    c
}

/// A frame with ticks and numbers on the bottom and left sides.
fn axes(c: &mut Canvas, frame: (f64, f64, f64, f64), xr: (f64, f64), yr: (f64, f64)) {
    let (l, r, t, b) = frame;
    for (a, z) in [
        ((l, b), (r, b)),
        ((l, t), (l, b)),
        ((l, t), (r, t)),
        ((r, t), (r, b)),
    ] {
        c.line(a.0, a.1, z.0, z.1, 2, BLACK, None);
    }
    for v in ticks(xr.0, xr.1, 5) {
        let x = l + (v - xr.0) / (xr.1 - xr.0) * (r - l);
        c.line(x, b, x, b + 6.0, 2, BLACK, None);
        let s = tick_label(v);
        c.text(
            x as i64 - (s.len() as i64 * 8) / 2,
            b as i64 + 12,
            &s,
            2,
            BLACK,
        );
    }
    for v in ticks(yr.0, yr.1, 5) {
        let y = b - (v - yr.0) / (yr.1 - yr.0) * (b - t);
        c.line(l - 6.0, y, l, y, 2, BLACK, None);
        let s = tick_label(v);
        c.text(
            l as i64 - 10 - s.len() as i64 * 8,
            y as i64 - 5,
            &s,
            2,
            BLACK,
        );
    }
}

/// The roc.json document.
pub fn to_json(roc: &Roc, extra: serde_json::Value) -> serde_json::Value {
    let g = |q: &monomorph::algo::peaks::Gaussian| json!({"amplitude": q.amplitude, "mean": q.mean, "std": q.std});
    let mut v = json!({
        "threshold": roc.threshold,
        "n_particles": roc.n_particles,
        "noise": g(&roc.noise),
        "particles": g(&roc.particles),
        "recall": roc.recall,
        "fdr": roc.fdr,
        "curve": roc.curve.iter().map(|p| json!({"threshold": p.threshold, "recall": p.recall, "fdr": p.fdr})).collect::<Vec<_>>(),
        "histogram": {"counts": roc.counts, "edges": roc.edges},
        "ruc": roc.ruc,
        "threshold_index": roc.index,
        "n_selected": roc.n_selected,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// Runs `monomorph roc`.
pub fn run(g: &Global, a: RocArgs) -> CliResult<()> {
    if a.num_peaks == 0 {
        return Err(CliError::input(
            "--num-peaks 0: expected at least 1 particle",
        ));
    }
    if a.bins < 5 {
        return Err(CliError::input(format!(
            "--bins {}: expected at least 5 (the fit has 4 parameters and skips the first bin)",
            a.bins
        )));
    }
    check_out_file("--out", &a.out)?;
    let mut outputs = vec![("--out", a.out.clone())];
    if let Some(p) = &a.png {
        check_out_file("--png", p)?;
        outputs.push(("--png", p.clone()));
    }
    check_distinct(&outputs, &[("--scores", a.scores.as_path())])?;
    let vol = read_scores(&a.scores, a.allow_nan)?;
    let g = &g.for_input("--scores", &a.scores, &vol.data)?;
    let shape = vol.data.shape().to_vec();
    let run = find_run(a.match_run.as_deref(), &a.scores, &shape)?;
    let voxel = voxel_size(vol.voxel_size, run.as_ref(), a.sampling_rate)?;
    let r = radius(a.particle_diameter, voxel)?;
    // the noise Gaussian: mean and standard deviation of the whole map (searched voxels)
    let vals = vol.data.to_float::<f64>();
    let (mut n, mut s, mut s2) = (0usize, 0.0f64, 0.0f64);
    for &v in vals.iter().filter(|v| v.is_finite()) {
        n += 1;
        s += v;
        s2 += v * v;
    }
    let mean = s / n.max(1) as f64;
    let std = (s2 / n.max(1) as f64 - mean * mean).max(0.0).sqrt();
    let double = vol.data.dtype() == "float64";
    let task = PytomTask {
        scores: vol.data,
        mask: None,
        rotations: None,
        params: PytomParams {
            num_peaks: a.num_peaks,
            radius: r,
            cut_off: 0.0,
            tophat: None,
        },
    };
    let ex = monomorph::dispatch(g.dispatch(None), task)?;
    let params = RocParams {
        bins: a.bins,
        peak_index: None,
    };
    let scores: Vec<f64> = ex.peaks.iter().map(|p| p.score).collect();
    let fitted = if double {
        estimate_roc(&scores, mean, std, n, &params)
    } else {
        let s32: Vec<f32> = scores.iter().map(|&v| v as f32).collect();
        estimate_roc(&s32, mean, std, n, &params)
    };
    let roc = fitted.map_err(|e| match e {
        monomorph::Error::InvalidArgument { reason, .. } => {
            CliError::input(format!("--scores {}: {reason}", a.scores.display()))
        }
        other => CliError::from(other),
    })?;
    let doc = to_json(
        &roc,
        json!({
            "scores_file": a.scores.display().to_string(),
            "particle_diameter": a.particle_diameter, "voxel_size": voxel, "radius": r,
            "num_peaks": a.num_peaks, "bins": a.bins, "n_extracted": scores.len(),
            "extracted_scores": scores,
            "map": {"mean": mean, "std": std, "voxels": n},
            "definition": "pytom-match-pick 0.14 pytom_estimate_roc: extraction with cut 0, two-Gaussian fit (noise mean and amplitude fixed by the map) to the histogram of the extracted scores, threshold maximising recall*(1-fdr)",
        }),
    );
    let text = serde_json::to_string_pretty(&doc).map_err(|e| CliError::failure(e.to_string()))?;
    let mut out = Outputs::files();
    out.stage_file("--out", &a.out, |p| {
        std::fs::write(p, text + "\n")
            .map_err(|e| monomorph::io::io_err(p, format!("cannot write: {e}")))
    })?;
    if let Some(p) = &a.png {
        let canvas = draw(&roc);
        out.stage_file("--png", p, |q| canvas.write_png(q))?;
    }
    out.commit()?;
    if !g.quiet {
        note!(
            "ROC: threshold {} selects about {:.1} of {:.1} estimated particles (recall {:.3}, \
             FDR {:.3}); written to {}",
            roc.threshold,
            roc.n_selected,
            roc.n_particles,
            roc.recall,
            roc.fdr,
            a.out.display()
        );
    }
    Ok(())
}
