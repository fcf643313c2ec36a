//! Whole matching runs: every score, 2-D and 3-D, tiled, with statistics and the
//! background, on the device against the CPU.

use crate::common::make;
use crate::{max_abs_diff, to_f64};
use monomorph_core::Real;
use monomorph_core::algo::matching::{MatchParams, Score, match_template};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::testing::Lcg;
use monomorph_core::{Backend, Double, Memory, Precision, Single};
use monomorph_cpu::Cpu;

/// Template matching of a small volume with a few rotations: scores and best rotations agree.
fn matching_agrees<P: Precision>(score: Score, tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(7);
    let target = rng.array::<<P as Precision>::Float>(&[24, 20, 22]);
    let template = rng.array::<<P as Precision>::Float>(&[7, 6, 8]);
    let rotations =
        RotationSet::from_euler_zyz(&[[0.0, 0.0, 0.0], [30.0, 20.0, 10.0], [90.0, 45.0, 0.0]])
            .expect("rotations");
    let run = |b: &dyn Fn() -> (Vec<f64>, Vec<f64>, f64)| b();
    let cpu_out = run(&|| {
        let t = cpu.upload(target.view()).unwrap();
        let m = cpu.upload(template.view()).unwrap();
        let r = match_template(&cpu, &t, &m, &MatchParams::new(score, rotations.clone())).unwrap();
        (
            to_f64(&cpu.download(&r.scores).unwrap()),
            to_f64(&cpu.download(&r.rotation_index).unwrap()),
            r.ssum,
        )
    });
    let gpu_out = run(&|| {
        let t = gpu.upload(target.view()).unwrap();
        let m = gpu.upload(template.view()).unwrap();
        let r = match_template(&gpu, &t, &m, &MatchParams::new(score, rotations.clone())).unwrap();
        (
            to_f64(&gpu.download(&r.scores).unwrap()),
            to_f64(&gpu.download(&r.rotation_index).unwrap()),
            r.ssum,
        )
    });
    let d = max_abs_diff(&cpu_out.0, &gpu_out.0);
    assert!(
        d <= tol,
        "{score}: max |cpu - cuda| score = {d:e} > {tol:e}"
    );
    let same_rot = cpu_out
        .1
        .iter()
        .zip(&gpu_out.1)
        .filter(|(a, b)| a == b)
        .count();
    // Near-ties between rotations may flip under different rounding; nearly all must agree.
    assert!(
        same_rot as f64 >= 0.99 * cpu_out.1.len() as f64,
        "{score}: only {same_rot}/{} best rotations agree",
        cpu_out.1.len()
    );
    assert!(((cpu_out.2 - gpu_out.2) / cpu_out.2.abs().max(1e-30)).abs() < 1e-3);
}

/// Score statistics and the phase-scrambling background on the device: the same maps as the
/// CPU's to round-off (3-D FLC, 2-D CC).
fn stats_and_background_agree<P: Precision>(tol: f64) {
    use monomorph_core::algo::matching::Background;
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(9);
    for (score, tshape, pshape) in [
        (Score::FLC, vec![20usize, 18, 16], vec![6usize, 6, 6]),
        (Score::CC, vec![30, 28], vec![7, 7]),
    ] {
        let target = rng.array::<<P as Precision>::Float>(&tshape);
        let template = rng.array::<<P as Precision>::Float>(&pshape);
        let rotations = RotationSet::uniform(tshape.len(), 60.0).expect("rotations");
        let run = |b: &dyn Fn() -> Vec<Vec<f64>>| b();
        macro_rules! on {
            ($b:expr) => {{
                let t = $b.upload(target.view()).unwrap();
                let m = $b.upload(template.view()).unwrap();
                let mut p = MatchParams::new(score, rotations.clone());
                p.score_stats = true;
                p.background = Some(Background::PhaseScrambling);
                let r = match_template($b, &t, &m, &p).unwrap();
                let st = r.statistics($b).unwrap().unwrap();
                vec![
                    to_f64(&$b.download(&r.scores).unwrap()),
                    to_f64(&$b.download(&st.mean).unwrap()),
                    to_f64(&$b.download(&st.std).unwrap()),
                ]
            }};
        }
        let c = run(&|| on!(&cpu));
        let g = run(&|| on!(&gpu));
        let scale = c[0].iter().fold(0.0f64, |a, v| a.max(v.abs())).max(1.0);
        for (k, what) in ["scores", "mean", "std"].iter().enumerate() {
            let d = max_abs_diff(&c[k], &g[k]);
            assert!(d <= tol * scale, "{score}: {what} differs by {d:e}");
        }
    }
}

#[test]
fn stats_and_background_single() {
    stats_and_background_agree::<Single>(1e-4);
}

#[test]
fn stats_and_background_double() {
    stats_and_background_agree::<Double>(1e-9);
}

#[test]
fn matching_cc_single() {
    matching_agrees::<Single>(Score::CC, 1e-3);
}

#[test]
fn matching_flc_spherical_single() {
    matching_agrees::<Single>(Score::FLCSphericalMask, 1e-4);
}

#[test]
fn matching_flc_double() {
    matching_agrees::<Double>(Score::FLC, 1e-9);
}

/// A run of `match_template` with every option the scores need, on any backend.
#[allow(clippy::too_many_arguments)]
fn match_run<B: Backend>(
    b: &B,
    score: Score,
    target: &ndarray::ArrayD<monomorph_core::FloatOf<B>>,
    template: &ndarray::ArrayD<monomorph_core::FloatOf<B>>,
    mask: Option<&ndarray::ArrayD<monomorph_core::FloatOf<B>>>,
    target_mask: Option<&ndarray::ArrayD<monomorph_core::FloatOf<B>>>,
    rotations: &RotationSet,
    pad_edges: bool,
    tile: Option<Vec<usize>>,
) -> (Vec<f64>, Vec<f64>, f64, usize) {
    let t = b.upload(target.view()).unwrap();
    let m = b.upload(template.view()).unwrap();
    let mk = mask.map(|x| b.upload(x.view()).unwrap());
    let tm = target_mask.map(|x| b.upload(x.view()).unwrap());
    let mut p = MatchParams::new(score, rotations.clone());
    p.template_mask = mk.as_ref();
    p.target_mask = tm.as_ref();
    p.pad_edges = pad_edges;
    p.tile_shape = tile;
    let r = match_template(b, &t, &m, &p).unwrap();
    (
        to_f64(&b.download(&r.scores).unwrap()),
        to_f64(&b.download(&r.rotation_index).unwrap()),
        r.ssum,
        r.tiles,
    )
}

pub(crate) fn ball<T: Real>(shape: &[usize]) -> ndarray::ArrayD<T> {
    let r = shape.iter().copied().min().unwrap() as f64 / 2.0 - 0.5;
    ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(shape), |i| {
        let d2: f64 = (0..shape.len())
            .map(|k| (i[k] as f64 - (shape[k] as f64 - 1.0) / 2.0).powi(2))
            .sum();
        T::from_f64(if d2 <= r * r { 1.0 } else { 0.0 })
    })
}

/// CPU and CUDA agree on a score: values within `tol` of the score scale, ≥ 99 % of the
/// winning rotations, Σ score² within 1e-3.
#[allow(clippy::too_many_arguments)]
fn scores_agree<P: Precision>(
    score: Score,
    target_shape: &[usize],
    template_shape: &[usize],
    rotations: &RotationSet,
    pad_edges: bool,
    tile: Option<Vec<usize>>,
    tol: f64,
) {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(31);
    let target = rng.array::<<P as Precision>::Float>(target_shape);
    let template = rng.array::<<P as Precision>::Float>(template_shape);
    let mask = ball::<<P as Precision>::Float>(template_shape);
    let tmask = ball::<<P as Precision>::Float>(target_shape);
    let needs_mask = matches!(
        score,
        Score::CAM | Score::FLC | Score::FLCSphericalMask | Score::MCC
    );
    let mk = needs_mask.then_some(&mask);
    let tm = (score == Score::MCC).then_some(&tmask);
    let c = match_run(
        &cpu,
        score,
        &target,
        &template,
        mk,
        tm,
        rotations,
        pad_edges,
        tile.clone(),
    );
    let g = match_run(
        &gpu, score, &target, &template, mk, tm, rotations, pad_edges, tile,
    );
    assert_eq!(c.3, g.3, "{score}: tile counts differ");
    let scale = c.0.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&c.0, &g.0);
    assert!(
        d <= tol * scale,
        "{score}: max |cpu − cuda| = {d:e} (scale {scale:e})"
    );
    let same = c.1.iter().zip(&g.1).filter(|(a, b)| a == b).count();
    assert!(
        same as f64 >= 0.99 * c.1.len() as f64,
        "{score}: only {same}/{} best rotations agree",
        c.1.len()
    );
    assert!(
        ((c.2 - g.2) / c.2.abs().max(1e-30)).abs() < 1e-3,
        "{score}: ssum {} vs {}",
        c.2,
        g.2
    );
}

fn rot3() -> RotationSet {
    RotationSet::from_euler_zyz(&[[0.0, 0.0, 0.0], [30.0, 20.0, 10.0], [90.0, 45.0, 0.0]])
        .expect("rotations")
}

fn rot2() -> RotationSet {
    let m = |deg: f64| {
        let (s, c) = deg.to_radians().sin_cos();
        [[c, -s], [s, c]]
    };
    let mats: Vec<[[f64; 2]; 2]> = [0.0, 25.0, 70.0, 140.0].iter().map(|&d| m(d)).collect();
    let flat: Vec<f64> = mats
        .iter()
        .flat_map(|r| r.iter().flatten().copied())
        .collect();
    let a = ndarray::Array3::from_shape_vec((mats.len(), 2, 2), flat).unwrap();
    RotationSet::from_array(a.view()).expect("2-D rotations")
}

#[test]
fn matching_mcc_single() {
    scores_agree::<Single>(
        Score::MCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-3,
    );
}

#[test]
fn matching_cam_single() {
    scores_agree::<Single>(
        Score::CAM,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_lcc_single() {
    scores_agree::<Single>(
        Score::LCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_ncc_single() {
    scores_agree::<Single>(
        Score::NCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_flc_single() {
    scores_agree::<Single>(
        Score::FLC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_mcc_cam_double() {
    for score in [Score::MCC, Score::CAM, Score::NCC] {
        scores_agree::<Double>(score, &[20, 18, 16], &[6, 7, 5], &rot3(), false, None, 1e-9);
    }
}

#[test]
fn matching_2d_every_score() {
    for score in Score::ALL {
        scores_agree::<Single>(score, &[64, 50], &[11, 9], &rot2(), false, None, 1e-3);
    }
    scores_agree::<Single>(Score::FLC, &[64, 50], &[11, 9], &rot2(), true, None, 1e-3);
}

#[test]
fn matching_tiled() {
    for (score, pad) in [(Score::FLC, false), (Score::CC, true), (Score::NCC, false)] {
        scores_agree::<Single>(
            score,
            &[40, 36, 30],
            &[8, 7, 6],
            &rot3(),
            pad,
            Some(vec![20, 18, 30]),
            1e-4,
        );
    }
}
