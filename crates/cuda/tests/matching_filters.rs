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

/// `tests/fixtures/matching-filters` of the repository: under `MONOMORPH_FIXTURES`, else beside
/// the sources, else under the working directory.
fn fixtures() -> Option<std::path::PathBuf> {
    let mut c: Vec<std::path::PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("MONOMORPH_FIXTURES") {
        c.push(p.into());
    }
    c.push(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures"));
    c.push("tests/fixtures".into());
    c.into_iter()
        .map(|p| p.join("matching-filters"))
        .find(|p| p.is_dir())
}

fn npy(dir: &std::path::Path, name: &str) -> Option<ArrayD<f32>> {
    let p = dir.join(name);
    p.exists()
        .then(|| ndarray_npy::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

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
    let rot = npy(dir, "rotations.npy").unwrap();
    let rot = rot.into_dimensionality::<ndarray::Ix3>().unwrap();
    let target = up(&npy(dir, "target.npy").unwrap());
    let template = up(&npy(dir, "template.npy").unwrap());
    let mask = npy(dir, "template_mask.npy").map(|m| up(&m));
    let rt = split(npy(dir, "rotated_templates.npy").unwrap());
    let rm = npy(dir, "rotated_masks.npy").map(split);
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

/// Every filter fixture on the GPU: with pytme's rotated volumes within the README's tolerance
/// of pytme (1e-4, CC 1e-5 × max |score|) and of the CPU; with the GPU's own rotation within
/// 1e-3 × max |score| of the CPU's own rotation; tiled equal to untiled; the filtered target
/// equal to pytme's.
#[test]
fn filter_fixtures_on_the_gpu() {
    let Some(gpu) = common::make::<Single>() else {
        return;
    };
    let Some(root) = fixtures() else {
        assert!(
            std::env::var("MONOMORPH_REQUIRE_CUDA").as_deref() != Ok("1"),
            "MONOMORPH_REQUIRE_CUDA=1 but tests/fixtures/matching-filters was not found"
        );
        println!("skipped: tests/fixtures/matching-filters not found");
        return;
    };
    let cpu = Cpu::<Single>::new();
    let mut cases = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("case.json").exists() || !dir.join("scores.npy").exists() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
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
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let tol = if meta["score"] == "CC" {
            1e-5 * wmax
        } else {
            1e-4
        };

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

        let (g, _) = run(&gpu, &dir, &filter, false, None);
        let (c, _) = run(&cpu, &dir, &filter, false, None);
        let d = max_abs_diff(&g, c.iter().copied());
        assert!(
            d <= 1e-3 * wmax,
            "{name}: own rotation |cuda − cpu| = {d:e}"
        );

        let shape = npy(&dir, "target.npy").unwrap().shape().to_vec();
        let tile: Vec<usize> = shape.iter().map(|&n| n.div_ceil(2) + 1).collect();
        let (gt, _) = run(&gpu, &dir, &filter, true, Some(tile));
        let (gu, _) = run(&gpu, &dir, &filter, true, None);
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
            let d = max_abs_diff(&got, ft.iter().map(|&v| v as f64));
            assert!(
                d <= 1e-6 * scale,
                "{name}: filtered target |cuda − pytme| = {d:e}"
            );
        }
        cases += 1;
    }
    assert!(
        cases >= 4,
        "only {cases} filter cases under {}",
        root.display()
    );
}
