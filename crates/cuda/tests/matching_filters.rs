//! Template matching with Fourier filters on CUDA: pytme's filter fixtures
//! (`tests/fixtures/matching-filters`, pytme's own filter arrays) run on the GPU must agree with
//! pytme and with the CPU. Skipped (with a line) without a device; `MONOMORPH_REQUIRE_CUDA=1`
//! makes a skip a failure. With the `cpu-stand-in` feature every body runs with `Cpu<P>` in
//! the device's place (see `common`).

mod common;

use monomorph_core::algo::filters::SpectralFilter;
use monomorph_core::algo::matching::{MatchParams, Prerotated, Score, match_template};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::{Backend, Memory, Precision, Real, Single};
use monomorph_cpu::Cpu;
use ndarray::{ArrayD, Axis, IxDyn};

use common::npy;

/// Stored half-grid weights (pytme's arrays).
struct Stored {
    template: Option<ArrayD<f64>>,
    target: Option<ArrayD<f64>>,
}

impl SpectralFilter for Stored {
    fn template_weight(&self, _: &[usize]) -> monomorph_core::Result<Option<ArrayD<f64>>> {
        Ok(self.template.clone())
    }
    fn target_weight(&self, _: &[usize]) -> monomorph_core::Result<Option<ArrayD<f64>>> {
        Ok(self.target.clone())
    }
}

fn max_abs_diff<'a>(a: impl IntoIterator<Item = &'a f64>, b: impl IntoIterator<Item = f64>) -> f64 {
    a.into_iter()
        .zip(b)
        .fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

/// One run: pytme's rotated volumes or the backend's own rotation, optionally tiled.
fn run<B: Backend>(
    b: &B,
    dir: &std::path::Path,
    filter: &Stored,
    prerotated: bool,
    tile: Option<Vec<usize>>,
) -> (Vec<f64>, Vec<i64>) {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    let score: Score = meta["score"].as_str().unwrap().parse().unwrap();
    let up = |a: &ArrayD<f32>| {
        let c: ArrayD<<B::Precision as Precision>::Float> = a.mapv(|v| Real::from_f64(v as f64));
        b.upload(c.view()).unwrap()
    };
    let split =
        |a: ArrayD<f32>| -> Vec<_> { a.axis_iter(Axis(0)).map(|v| up(&v.to_owned())).collect() };
    let need = |f: &str| npy(dir, f).unwrap_or_else(|| panic!("{}: {f} missing", dir.display()));
    let rot = need("rotations.npy");
    let rot = rot.into_dimensionality::<ndarray::Ix3>().unwrap();
    let target = up(&need("target.npy"));
    let template = up(&need("template.npy"));
    let mask = npy(dir, "template_mask.npy").map(|m| up(&m));
    // pytme's rotated volumes only when asked for (a case may not have them).
    let rt = if prerotated {
        split(need("rotated_templates.npy"))
    } else {
        Vec::new()
    };
    let rm = if prerotated {
        npy(dir, "rotated_masks.npy").map(split)
    } else {
        None
    };
    let mut p = MatchParams::new(score, RotationSet::from_array(rot.view()).unwrap());
    p.template_mask = mask.as_ref();
    p.filters = Some(filter);
    p.tile_shape = tile;
    if prerotated {
        p.prerotated = Some(Prerotated {
            templates: &rt,
            masks: rm.as_deref(),
        });
    }
    let r = match_template(b, &target, &template, &p).unwrap();
    let s = b.download(&r.scores).unwrap();
    let i = b.download(&r.rotation_index).unwrap();
    (
        s.iter().map(|v| v.as_f64()).collect(),
        i.iter().map(|v| v.as_f64() as i64).collect(),
    )
}

/// What a filter fixture folder holds, and so which comparisons it takes part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Scores and pytme's rotated volumes: every comparison.
    Prerotated,
    /// Scores without pytme's rotated volumes (`3d_whiten_flc`): the comparisons with the
    /// backend's own rotation.
    OwnRotation,
    /// Filter arrays only (no target, no scores): the filter tests of tests/suite, not here.
    FiltersOnly,
    /// A command-line case: pytme's maps cropped to their centre (`scores_center.npy`), its
    /// inputs shared with another folder (`copy_cases.py`); run end to end through the command
    /// by tests/suite's `cli_filters`, not here.
    CommandCrops,
}

fn layout(dir: &std::path::Path) -> Layout {
    let has = |f: &str| dir.join(f).exists();
    let name = dir.display();
    if has("scores.npy") {
        for f in ["target.npy", "template.npy", "rotations.npy"] {
            assert!(has(f), "{name}: scores.npy without {f}");
        }
        if has("rotated_templates.npy") {
            Layout::Prerotated
        } else {
            Layout::OwnRotation
        }
    } else if has("scores_center.npy") {
        assert!(
            has("rotation_index_center.npy"),
            "{name}: scores_center.npy alone"
        );
        Layout::CommandCrops
    } else if !has("target.npy") && (has("template_filter.npy") || has("target_filter.npy")) {
        Layout::FiltersOnly
    } else {
        panic!(
            "{name}: a case.json of no known layout (scores, centre crops, or filter arrays only)"
        )
    }
}

/// Every filter fixture on the GPU, each with the comparisons its files allow:
/// * with pytme's rotated volumes, within the README's tolerance of pytme (1e-4, CC 1e-5 ×
///   max |score|) and of the CPU, the same winning rotations (≥ 95 %);
/// * always, with the backend's own rotation, within 1e-3 × max |score| of the CPU's own
///   rotation, and tiled equal to untiled on the device;
/// * with `target_filtered.npy`, the filtered target equal to pytme's within
///   2·eps·log2(N) of its largest value (N the target's size: FFT round-off, in which cuFFT
///   differs from pocketfft).
#[test]
fn filter_fixtures_on_the_gpu() {
    let Some(gpu) = common::make::<Single>() else {
        return;
    };
    let Some(root) = common::fixtures("matching-filters") else {
        return;
    };
    let cpu = Cpu::<Single>::new();
    let mut seen: Vec<(String, Layout)> = Vec::new();
    for dir in common::case_dirs(&root) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let layout = layout(&dir);
        seen.push((name.clone(), layout));
        if matches!(layout, Layout::FiltersOnly | Layout::CommandCrops) {
            continue;
        }
        let f64s = |a: ArrayD<f32>| a.mapv(|v| v as f64);
        let filter = Stored {
            template: npy(&dir, "template_filter.npy").map(f64s),
            target: npy(&dir, "target_filter.npy").map(f64s),
        };
        let want: Vec<f64> = npy(&dir, "scores.npy")
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect();
        let wmax = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let meta = common::case_json(&dir);
        let tol = if meta["score"] == "CC" {
            1e-5 * wmax
        } else {
            1e-4
        };
        let prerotated = layout == Layout::Prerotated;

        if prerotated {
            let (g, gi) = run(&gpu, &dir, &filter, true, None);
            let (c, ci) = run(&cpu, &dir, &filter, true, None);
            let dp = max_abs_diff(&g, want.iter().copied());
            assert!(dp <= tol, "{name}: max |cuda − pytme| = {dp:e} > {tol:e}");
            let dc = max_abs_diff(&g, c.iter().copied());
            assert!(dc <= tol, "{name}: max |cuda − cpu| = {dc:e} > {tol:e}");
            let same = gi.iter().zip(&ci).filter(|(a, b)| a == b).count();
            assert!(
                same * 100 >= 95 * gi.len(),
                "{name}: {same}/{} indices",
                gi.len()
            );
        }

        let (g, _) = run(&gpu, &dir, &filter, false, None);
        let (c, _) = run(&cpu, &dir, &filter, false, None);
        let d = max_abs_diff(&g, c.iter().copied());
        assert!(
            d <= 1e-3 * wmax,
            "{name}: own rotation |cuda − cpu| = {d:e}"
        );

        let shape = npy(&dir, "target.npy").unwrap().shape().to_vec();
        let tile: Vec<usize> = shape.iter().map(|&n| n.div_ceil(2) + 1).collect();
        let (gt, _) = run(&gpu, &dir, &filter, prerotated, Some(tile));
        let (gu, _) = run(&gpu, &dir, &filter, prerotated, None);
        let d = max_abs_diff(&gt, gu.iter().copied());
        assert!(
            d <= 2e-6 * wmax.max(1.0),
            "{name}: tiled vs untiled on cuda {d:e}"
        );

        if let Some(ft) = npy(&dir, "target_filtered.npy") {
            // CC with a 1-voxel unit template reads the filtered target back.
            let t = gpu.upload(npy(&dir, "target.npy").unwrap().view()).unwrap();
            let one = gpu
                .upload(ArrayD::from_elem(IxDyn(&vec![1; shape.len()]), 1.0f32).view())
                .unwrap();
            let only_target = Stored {
                template: None,
                target: filter.target.clone(),
            };
            let mut p = MatchParams::new(Score::CC, RotationSet::identity(shape.len()).unwrap());
            p.filters = Some(&only_target);
            let r = match_template(&gpu, &t, &one, &p).unwrap();
            let got: Vec<f64> = gpu
                .download(&r.scores)
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect();
            let scale = ft.iter().fold(1.0f64, |m, &v| m.max((v as f64).abs()));
            // N: the target's voxels (its FFT grid is at most a few per cent larger; log2).
            let n: usize = shape.iter().product();
            let tol = 2.0 * f32::EPSILON as f64 * (n as f64).log2() * scale;
            let d = max_abs_diff(&got, ft.iter().map(|&v| v as f64));
            assert!(
                d <= tol,
                "{name}: filtered target |cuda − pytme| = {d:e} > {tol:e}"
            );
        }
    }
    let count = |l: Layout| seen.iter().filter(|c| c.1 == l).count();
    println!("filter cases: {seen:?}");
    assert!(
        count(Layout::Prerotated) >= 4 && count(Layout::OwnRotation) >= 1,
        "only {} cases with pytme's rotated volumes and {} without under {}",
        count(Layout::Prerotated),
        count(Layout::OwnRotation),
        root.display()
    );
}
