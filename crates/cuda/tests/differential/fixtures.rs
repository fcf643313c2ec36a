//! pytme's fixtures matched on the device: the library's and the command's cases.

use crate::common::{self, Dev, make};
use crate::{max_abs_diff, to_f64};
use monomorph_core::algo::matching::{MatchParams, Score, match_template};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::{Memory, Single};
use monomorph_cpu::Cpu;

/// A little-endian i32 word of an MRC header.
fn mrc_word(h: &[u8], i: usize) -> i32 {
    i32::from_le_bytes(h[4 * i..4 * i + 4].try_into().unwrap())
}

/// An MRC volume of mode 2 (f32) in file order `(z, y, x)` (sections, rows, columns), as the
/// command line reads it; anything else is a failure naming the file.
fn read_mrc(path: &std::path::Path) -> ndarray::ArrayD<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() >= 1024,
        "{}: shorter than a header",
        path.display()
    );
    let (nx, ny, nz) = (
        mrc_word(&bytes, 0),
        mrc_word(&bytes, 1),
        mrc_word(&bytes, 2),
    );
    let (mode, ext) = (mrc_word(&bytes, 3), mrc_word(&bytes, 23));
    let axes = [
        mrc_word(&bytes, 16),
        mrc_word(&bytes, 17),
        mrc_word(&bytes, 18),
    ];
    assert!(
        mode == 2 && axes == [1, 2, 3] && nx > 0 && ny > 0 && nz > 0 && ext >= 0,
        "{}: mode {mode}, axes {axes:?}, size {nx}×{ny}×{nz}: only f32 in x, y, z order here",
        path.display()
    );
    let shape = [nz as usize, ny as usize, nx as usize];
    let n: usize = shape.iter().product();
    let start = 1024 + ext as usize;
    let data = bytes
        .get(start..start + 4 * n)
        .unwrap_or_else(|| panic!("{}: truncated data", path.display()));
    let v: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).unwrap()
}

/// Every pytme fixture case under `tests/fixtures/matching`, each by the files it holds:
///
/// * a library case (`target.npy`, pytme's own rotated templates, so only the score maths
///   differ): the device's map agrees with pytme's within the case's tolerance, and with the
///   CPU's;
/// * a command-line case (`target.mrc`, `rotations.npy` in file order, pytme's ssum in its
///   case.json: `3d_flc_nonfast`): run through the library with the backend's own rotation,
///   the device's map agrees with the CPU's and its ssum (over the whole FFT grid) with pytme's.
///
/// A folder of neither layout fails the test, so that a fixture added later is run or seen.
#[test]
fn pytme_fixtures_on_the_gpu() {
    let Some(gpu) = make::<Single>() else { return };
    let Some(root) = common::fixtures("matching") else {
        return;
    };
    let cpu = Cpu::<Single>::new();
    let (mut library, mut cli) = (Vec::new(), Vec::new());
    for dir in common::case_dirs(&root) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if dir.join("target.npy").exists() {
            library_case_on_the_gpu(&gpu, &cpu, &dir, &name);
            library.push(name);
        } else if dir.join("target.mrc").exists() {
            cli_case_on_the_gpu(&gpu, &cpu, &dir, &name);
            cli.push(name);
        } else {
            panic!("{name}: neither target.npy (a library case) nor target.mrc (a CLI case)");
        }
    }
    println!("library cases {library:?}; command-line cases {cli:?}");
    assert!(
        library.len() >= 9 && !cli.is_empty(),
        "only {} library and {} command-line cases under {}",
        library.len(),
        cli.len(),
        root.display()
    );
}

/// One library case of [`pytme_fixtures_on_the_gpu`].
fn library_case_on_the_gpu(
    gpu: &Dev<Single>,
    cpu: &Cpu<Single>,
    dir: &std::path::Path,
    name: &str,
) {
    use crate::common::npy;
    let meta = common::case_json(dir);
    let need = |f: &str| npy(dir, f).unwrap_or_else(|| panic!("{name}: {f} missing"));
    let score: Score = meta["score"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no score in case.json"))
        .parse()
        .unwrap();
    let pad = meta["pad_target_edges"]
        .as_bool()
        .unwrap_or_else(|| panic!("{name}: no pad_target_edges in case.json"));
    let target = need("target.npy");
    let template = need("template.npy");
    let rot = need("rotations.npy")
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap();
    let rotations = RotationSet::from_array(rot.view()).unwrap();
    let want = need("scores.npy");
    let split = |a: ndarray::ArrayD<f32>| -> Vec<ndarray::ArrayD<f32>> {
        a.axis_iter(ndarray::Axis(0))
            .map(|v| v.to_owned())
            .collect()
    };
    let rt = split(need("rotated_templates.npy"));
    let rm = npy(dir, "rotated_masks.npy").map(split);
    let mask = npy(dir, "template_mask.npy");
    let tmask = npy(dir, "target_mask.npy");
    macro_rules! go {
        ($b:expr) => {{
            let b = $b;
            let t = b.upload(target.view()).unwrap();
            let m = b.upload(template.view()).unwrap();
            let mk = mask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let tm = tmask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let drt: Vec<_> = rt.iter().map(|x| b.upload(x.view()).unwrap()).collect();
            let drm: Option<Vec<_>> = rm
                .as_ref()
                .map(|v| v.iter().map(|x| b.upload(x.view()).unwrap()).collect());
            let mut p = MatchParams::new(score, rotations.clone());
            p.template_mask = mk.as_ref();
            p.target_mask = tm.as_ref();
            p.pad_edges = pad;
            p.prerotated = Some(monomorph_core::algo::matching::Prerotated {
                templates: &drt,
                masks: drm.as_deref(),
            });
            let r = match_template(b, &t, &m, &p).unwrap();
            to_f64(&b.download(&r.scores).unwrap())
        }};
    }
    let g = go!(gpu);
    let c = go!(cpu);
    let scale = c.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&g, &c);
    assert!(
        d <= 1e-4 * scale,
        "{name}: max |cuda − cpu| = {d:e} (scale {scale:e})"
    );
    // Against pytme itself: the case's own absolute tolerance, outside the padded cases'
    // even-template first row (compared on the CPU side in tests/suite).
    let t = &meta["tolerances"];
    let w: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    let wmax = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = t["score_abs"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: no tolerances.score_abs"))
        .max(t["score_rel_to_max_abs"].as_f64().unwrap_or(0.0) * wmax);
    if !pad {
        let dp = max_abs_diff(&g, &w);
        assert!(dp <= tol, "{name}: max |cuda − pytme| = {dp:e} > {tol:e}");
    }
}

/// One command-line case of [`pytme_fixtures_on_the_gpu`] (FLC with a template mask, the
/// backend's own rotation): the device's map within 1e-3 of the CPU's maximum |score|, and
/// ssum within 1e-4 of pytme's (as tests/suite's command-line run).
fn cli_case_on_the_gpu(gpu: &Dev<Single>, cpu: &Cpu<Single>, dir: &std::path::Path, name: &str) {
    let meta = common::case_json(dir);
    let score: Score = meta["score"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no score in case.json"))
        .parse()
        .unwrap();
    let want = meta["pytme_ssum"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: no pytme_ssum in case.json"));
    let target = read_mrc(&dir.join("target.mrc"));
    let template = read_mrc(&dir.join("template.mrc"));
    let mask = dir.join("mask.mrc");
    let mask = mask.exists().then(|| read_mrc(&mask));
    let rot = common::npy(dir, "rotations.npy")
        .unwrap_or_else(|| panic!("{name}: rotations.npy missing"))
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap();
    let rotations = RotationSet::from_array(rot.view()).unwrap();
    if let Some(shape) = meta["target_shape_zyx"].as_array() {
        let shape: Vec<usize> = shape.iter().map(|v| v.as_u64().unwrap() as usize).collect();
        assert_eq!(
            target.shape(),
            shape.as_slice(),
            "{name}: target.mrc's shape"
        );
    }
    macro_rules! go {
        ($b:expr) => {{
            let b = $b;
            let t = b.upload(target.view()).unwrap();
            let m = b.upload(template.view()).unwrap();
            let mk = mask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let mut p = MatchParams::new(score, rotations.clone());
            p.template_mask = mk.as_ref();
            let r = match_template(b, &t, &m, &p).unwrap();
            (to_f64(&b.download(&r.scores).unwrap()), r.ssum)
        }};
    }
    let (g, gs) = go!(gpu);
    let (c, cs) = go!(cpu);
    let scale = c.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&g, &c);
    assert!(
        d <= 1e-3 * scale,
        "{name}: max |cuda − cpu| = {d:e} (scale {scale:e})"
    );
    for (who, s) in [("cuda", gs), ("cpu", cs)] {
        assert!(
            ((s - want) / want).abs() <= 1e-4,
            "{name}: {who} ssum {s} vs pytme {want} (over the FFT grid)"
        );
    }
}
