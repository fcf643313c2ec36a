//! Template matching with Fourier filters against pytme 0.3.6 (tests/fixtures/matching-filters,
//! copied from the peer fixtures: pytme's `match_template.py` with its filter flags).
//!
//! The filters are pytme's own arrays (`template_filter.npy`, `target_filter.npy`) returned by a
//! test [`SpectralFilter`], so these tests check where and how the matching loop applies them,
//! apart from how they are built: the filtered target, the scores with pytme's rotated volumes
//! (score maths and filtering alone), and with monomorph's own rotation.

use monomorph::algo::filters::SpectralFilter;
use monomorph::algo::matching::{MatchParams, Prerotated, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use monomorph::{FloatOf, Precision};
use ndarray::{ArrayD, Axis, IxDyn};

use crate::common::{json, npy};

/// The cases (FLC and FLCSphericalMask with point-asymmetric gridded filters, CC, 2-D).
const CASES: [&str; 4] = [
    "3d_wedge_tilts_angle_flcsm",
    "3d_ctf_per_tilt_angle_flc",
    "3d_bandpass_cc",
    "2d_bandpass_whiten_flc",
];

/// A filter that returns stored weights (pytme's), whatever the shape asked: a wrong shape is
/// the matching code's to refuse.
#[derive(Clone)]
pub struct Stored {
    /// Template-box half-grid weight.
    pub template: Option<ArrayD<f64>>,
    /// FFT-grid half-grid weight of the target.
    pub target: Option<ArrayD<f64>>,
}

impl SpectralFilter for Stored {
    fn template_weight(&self, _shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(self.template.clone())
    }
    fn target_weight(&self, _fast_shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(self.target.clone())
    }
}

/// A wedge-and-bandpass-like weight made for any box (for runs whose FFT grid is not the
/// fixture's, e.g. pad_edges): zero in a ±60° wedge around the last axis in the plane of axes
/// 0 and last, times a Gaussian band in cycles/voxel; DC 0.
pub struct Synthetic;

impl Synthetic {
    /// The half-grid weight for a box of `shape`.
    pub fn weight(shape: &[usize]) -> ArrayD<f64> {
        let d = shape.len();
        let mut half = shape.to_vec();
        half[d - 1] = shape[d - 1] / 2 + 1;
        let freq = |i: usize, n: usize| {
            let (i, n) = (i as f64, n as f64);
            if i < n / 2.0 { i / n } else { (i - n) / n }
        };
        let cot30 = 1.0 / 30f64.to_radians().tan();
        ArrayD::from_shape_fn(IxDyn(&half), |ix| {
            let k: Vec<f64> = (0..d).map(|a| freq(ix[a], shape[a])).collect();
            let k2: f64 = k.iter().map(|v| v * v).sum();
            let band = (-k2 / 0.04).exp() * (1.0 - (-k2 / 0.0008).exp());
            if k[d - 1].abs() <= k[0].abs() * cot30 {
                band
            } else {
                0.0
            }
        })
    }
}

impl SpectralFilter for Synthetic {
    fn template_weight(&self, shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(Some(Self::weight(shape)))
    }
    fn target_weight(&self, fast_shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(Some(Self::weight(fast_shape)))
    }
}

struct Case {
    name: String,
    target: ArrayD<f32>,
    template: ArrayD<f32>,
    mask: Option<ArrayD<f32>>,
    rotations: RotationSet,
    rot_templates: Vec<ArrayD<f32>>,
    rot_masks: Option<Vec<ArrayD<f32>>>,
    scores: ArrayD<f32>,
    index: ArrayD<u8>,
    filter: Stored,
    score: Score,
}

fn exists(rel: &str) -> bool {
    crate::common::fixture(rel).exists()
}

fn split(a: ArrayD<f32>) -> Vec<ArrayD<f32>> {
    a.axis_iter(Axis(0)).map(|v| v.to_owned()).collect()
}

fn load(name: &str) -> Case {
    let f = |x: &str| format!("matching-filters/{name}/{x}");
    let opt = |x: &str| exists(&f(x)).then(|| npy::<f32>(&f(x)));
    let meta = json(&f("case.json"));
    let rot: ArrayD<f32> = npy(&f("rotations.npy"));
    let rot = rot.into_dimensionality::<ndarray::Ix3>().unwrap();
    let f64s = |a: ArrayD<f32>| a.mapv(|v| v as f64);
    Case {
        name: name.into(),
        target: npy(&f("target.npy")),
        template: npy(&f("template.npy")),
        mask: opt("template_mask.npy"),
        rotations: RotationSet::from_array(rot.view()).unwrap(),
        rot_templates: split(npy(&f("rotated_templates.npy"))),
        rot_masks: opt("rotated_masks.npy").map(split),
        scores: npy(&f("scores.npy")),
        index: npy(&f("rotation_index.npy")),
        filter: Stored {
            template: opt("template_filter.npy").map(f64s),
            target: opt("target_filter.npy").map(f64s),
        },
        score: meta["score"].as_str().unwrap().parse().unwrap(),
    }
}

fn up<B: Backend>(b: &B, a: &ArrayD<f32>) -> Arr<B, FloatOf<B>> {
    let c: ArrayD<FloatOf<B>> = a.mapv(|v| <FloatOf<B> as monomorph::Real>::from_f64(v as f64));
    b.upload(c.view()).unwrap()
}

/// How a case is run.
#[derive(Clone, Default)]
struct How {
    prerotated: bool,
    tile: Option<Vec<usize>>,
    pad_edges: bool,
    /// Replaces the case's filters (`Some(None)`: no filters at all).
    filter: Option<Option<Stored>>,
    /// Uses [`Synthetic`] instead of the case's filters.
    synthetic: bool,
    /// Only these rotations (indices into the case's set).
    only: Option<Vec<usize>>,
}

/// Runs a case on backend `B`; returns the scores and the rotation indices (into the rotations
/// run).
fn run<B: Backend>(b: &B, c: &Case, how: &How) -> (ArrayD<f64>, ArrayD<i64>) {
    let target = up(b, &c.target);
    let template = up(b, &c.template);
    let mask = c.mask.as_ref().map(|m| up(b, m));
    let pick: Vec<usize> = how
        .only
        .clone()
        .unwrap_or_else(|| (0..c.rotations.len()).collect());
    let mats: Vec<f64> = pick
        .iter()
        .flat_map(|&r| c.rotations.matrix(r).to_vec())
        .collect();
    let rotations = RotationSet::from_matrices(c.rotations.dim(), &mats).unwrap();
    let rt: Vec<_> = pick.iter().map(|&r| up(b, &c.rot_templates[r])).collect();
    let rm: Option<Vec<_>> = c
        .rot_masks
        .as_ref()
        .map(|v| pick.iter().map(|&r| up(b, &v[r])).collect());
    let filter = how.filter.clone().unwrap_or_else(|| Some(c.filter.clone()));
    let mut p = MatchParams::new(c.score, rotations);
    p.template_mask = mask.as_ref();
    p.tile_shape = how.tile.clone();
    p.pad_edges = how.pad_edges;
    p.filters = if how.synthetic {
        Some(&Synthetic)
    } else {
        filter.as_ref().map(|f| f as &dyn SpectralFilter)
    };
    if how.prerotated {
        p.prerotated = Some(Prerotated {
            templates: &rt,
            masks: rm.as_deref(),
        });
    }
    let r = match_template(b, &target, &template, &p).unwrap();
    let s = b
        .download(&r.scores)
        .unwrap()
        .mapv(<FloatOf<B> as monomorph::Real>::as_f64);
    let i = b
        .download(&r.rotation_index)
        .unwrap()
        .mapv(|v| <<B::Precision as Precision>::Int as monomorph::Real>::as_f64(v) as i64);
    (s, i)
}

fn max_abs(a: impl IntoIterator<Item = f64>) -> f64 {
    a.into_iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// The README's tolerance for a float32 port with pytme's rotated volumes: 1e-4 absolute for
/// the normalised scores, 1e-5 × max |score| for CC.
fn tol(c: &Case) -> f64 {
    if c.score == Score::CC {
        1e-5 * max_abs(c.scores.iter().map(|&v| v as f64))
    } else {
        1e-4
    }
}

/// Per-voxel margin between the best and second-best rotation (pytme's rotated volumes, one
/// run per rotation).
fn margins<B: Backend>(b: &B, c: &Case) -> ArrayD<f64> {
    let mut best = ArrayD::from_elem(c.scores.shape(), f64::NEG_INFINITY);
    let mut second = best.clone();
    for r in 0..c.rotations.len() {
        let how = How {
            prerotated: true,
            only: Some(vec![r]),
            ..How::default()
        };
        let (s, _) = run(b, c, &how);
        for ((bv, sv), &v) in best.iter_mut().zip(second.iter_mut()).zip(s.iter()) {
            if v > *bv {
                *sv = *bv;
                *bv = v;
            } else if v > *sv {
                *sv = v;
            }
        }
    }
    best - second
}

/// Scores within `tol` of pytme's over the whole map, and pytme's rotation wherever the best
/// rotation wins by more than `clear`; returns (worst difference, voxels whose index was
/// compared).
fn compare(c: &Case, s: &ArrayD<f64>, i: &ArrayD<i64>, m: &ArrayD<f64>, t: f64, clear: f64) {
    let worst = max_abs(s.iter().zip(c.scores.iter()).map(|(&a, &b)| a - b as f64));
    assert!(
        s.iter().all(|v| v.is_finite()),
        "{}: non-finite scores",
        c.name
    );
    assert!(
        worst <= t,
        "{}: max |score − pytme| = {worst:.3e} > {t:.3e}",
        c.name
    );
    println!(
        "{}: max |score − pytme| = {worst:.3e} (tolerance {t:.1e})",
        c.name
    );
    let mut checked = 0usize;
    for (idx, &ix) in i.indexed_iter() {
        if m[&idx] > clear {
            assert_eq!(
                ix, c.index[&idx] as i64,
                "{}: rotation index at {idx:?} (margin {:.3e})",
                c.name, m[&idx]
            );
            checked += 1;
        }
    }
    assert!(
        checked > s.len() / 2,
        "{}: only {checked} of {} voxels with a clear margin",
        c.name,
        s.len()
    );
}

/// (a) pytme's rotated volumes: the filtered scores equal pytme's within the README's
/// tolerance over the whole map, and the best rotation wherever it is clear (2 × tolerance).
/// The gridded filters of the FLC and FLCSphericalMask cases are not point-symmetric on the
/// DC plane: this holds because the weights are symmetrised there (notes §7.3).
#[test]
fn filtered_scores_equal_pytme_with_its_rotated_volumes() {
    let b = Cpu::<Single>::new();
    for name in CASES {
        let c = load(name);
        let how = How {
            prerotated: true,
            ..How::default()
        };
        let (s, i) = run(&b, &c, &how);
        let t = tol(&c);
        compare(&c, &s, &i, &margins(&b, &c), t, 2.0 * t);
    }
}

/// (b) monomorph's own rotation (cubic spline): within 1e-3 × max |score| of pytme, same best
/// rotation wherever pytme's margin is larger than twice that.
#[test]
fn filtered_scores_close_to_pytme_with_own_rotation() {
    let b = Cpu::<Single>::new();
    for name in CASES {
        let c = load(name);
        let (s, i) = run(&b, &c, &How::default());
        let t = 1e-3 * max_abs(c.scores.iter().map(|&v| v as f64));
        compare(&c, &s, &i, &margins(&b, &c), t, 2.0 * t);
    }
}

/// The filtered target equals pytme's `target_filtered.npy`: read through a CC with a 1-voxel
/// unit template (score[x] = f'[x]) and no template filter.
#[test]
fn filtered_target_equals_pytme() {
    let b = Cpu::<Single>::new();
    for name in ["3d_wedge_tilts_angle_flcsm", "2d_bandpass_whiten_flc"] {
        let c = load(name);
        let want: ArrayD<f32> = npy(&format!("matching-filters/{name}/target_filtered.npy"));
        let d = c.target.ndim();
        let one = ArrayD::from_elem(IxDyn(&vec![1; d]), 1.0f32);
        let (target, unit) = (up(&b, &c.target), up(&b, &one));
        let filter = Stored {
            template: None,
            target: c.filter.target.clone(),
        };
        let mut p = MatchParams::new(Score::CC, RotationSet::identity(d).unwrap());
        p.filters = Some(&filter);
        let r = match_template(&b, &target, &unit, &p).unwrap();
        let got = b.download(&r.scores).unwrap();
        let scale = max_abs(want.iter().map(|&v| v as f64));
        let worst = max_abs(got.iter().zip(want.iter()).map(|(&a, &w)| (a - w) as f64));
        assert!(
            worst <= 1e-6 * scale.max(1.0),
            "{name}: max |filtered target − pytme| = {worst:.3e} (scale {scale:.3})"
        );
        println!("{name}: max |filtered target − pytme| = {worst:.3e} (scale {scale:.3})");
        // And it is not the unfiltered target.
        let raw = max_abs(
            c.target
                .iter()
                .zip(want.iter())
                .map(|(&a, &w)| (a - w) as f64),
        );
        assert!(
            raw > 100.0 * worst.max(1e-6),
            "{name}: the filter changes nothing?"
        );
    }
}

/// The target is filtered once, on the whole target: a tiled run equals the untiled one, also
/// with pad_edges (whose tiles read the filtered extension).
#[test]
fn tiled_equals_untiled_with_filters() {
    let b = Cpu::<Single>::new();
    for (name, tile, pad) in [
        ("3d_ctf_per_tilt_angle_flc", vec![20, 48, 30], false),
        ("3d_ctf_per_tilt_angle_flc", vec![30, 20, 48], true),
        ("2d_bandpass_whiten_flc", vec![100, 70], true),
    ] {
        let c = load(name);
        // pad_edges filters the extension, on an FFT grid that is not the fixture's.
        let whole = How {
            prerotated: true,
            pad_edges: pad,
            synthetic: pad,
            ..How::default()
        };
        let tiled = How {
            tile: Some(tile),
            ..whole.clone()
        };
        let (s0, i0) = run(&b, &c, &whole);
        let (s1, i1) = run(&b, &c, &tiled);
        let scale = max_abs(s0.iter().copied()).max(1.0);
        let worst = max_abs((&s0 - &s1).iter().copied());
        assert!(
            worst <= 2e-6 * scale,
            "{name} pad {pad}: tiled vs untiled {worst:.3e}"
        );
        println!("{name} pad {pad}: tiled vs untiled {worst:.3e}");
        let m = margins(&b, &c);
        for (idx, &v) in i0.indexed_iter() {
            if !pad && m[&idx] > 1e-4 * scale {
                assert_eq!(v, i1[&idx], "{name}: index at {idx:?}");
            }
        }
        if pad {
            // The padded run differs from the circular one only near the edges.
            let (sc, _) = run(
                &b,
                &c,
                &How {
                    pad_edges: false,
                    ..whole.clone()
                },
            );
            assert!(max_abs((&s0 - &sc).iter().copied()) > 0.0);
        }
    }
}

/// A weight of all ones (DC included) is the identity: the run equals the unfiltered one bit
/// for bit (it is detected and skipped). A weight of ones except one bin does filter.
#[test]
fn all_ones_filter_equals_no_filter_bit_for_bit() {
    let b = Cpu::<Single>::new();
    let c = load("3d_ctf_per_tilt_angle_flc");
    let ones = |w: &Option<ArrayD<f64>>| w.as_ref().map(|w| w.mapv(|_| 1.0));
    let all_ones = Stored {
        template: ones(&c.filter.template),
        target: ones(&c.filter.target),
    };
    let only = Some(vec![0, 6]);
    let none = How {
        filter: Some(None),
        only: only.clone(),
        ..How::default()
    };
    let with = How {
        filter: Some(Some(all_ones.clone())),
        ..none.clone()
    };
    let (s0, i0) = run(&b, &c, &none);
    let (s1, i1) = run(&b, &c, &with);
    assert!(
        s0.iter()
            .zip(s1.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert_eq!(i0, i1);
    // Nearly all ones: filtered (round trip through the FFTs), close to the unfiltered run.
    let mut near = all_ones;
    if let Some(w) = near.template.as_mut() {
        w[IxDyn(&[1, 2, 3])] = 0.999;
    }
    let (s2, _) = run(
        &b,
        &c,
        &How {
            filter: Some(Some(near)),
            ..none
        },
    );
    let d = max_abs((&s0 - &s2).iter().copied());
    assert!(d > 0.0 && d < 1e-2, "{d}");
}

/// A weight of the wrong shape, or with NaN, is refused with a clear error.
#[test]
fn bad_filter_weights_are_refused() {
    let b = Cpu::<Single>::new();
    let c = load("2d_bandpass_whiten_flc");
    let (target, template) = (up(&b, &c.target), up(&b, &c.template));
    let mask = up(&b, c.mask.as_ref().unwrap());
    let try_with = |f: Stored| {
        let mut p = MatchParams::new(Score::FLC, RotationSet::identity(2).unwrap());
        p.template_mask = Some(&mask);
        p.filters = Some(&f);
        match_template(&b, &target, &template, &p)
            .err()
            .expect("refused")
            .to_string()
    };
    let e = try_with(Stored {
        template: Some(ArrayD::zeros(IxDyn(&[24, 24]))),
        target: None,
    });
    assert!(
        e.contains("template filter") && e.contains("(24, 13)"),
        "{e}"
    );
    let mut nan = c.filter.target.clone().unwrap();
    nan[[3, 4]] = f64::NAN;
    let e = try_with(Stored {
        template: None,
        target: Some(nan),
    });
    assert!(e.contains("target filter"), "{e}");
    // The target filter's transient arrays are checked against the memory limit.
    let f = c.filter.clone();
    let mut p = MatchParams::new(Score::FLC, RotationSet::identity(2).unwrap());
    p.template_mask = Some(&mask);
    p.filters = Some(&f);
    p.memory_limit = Some(300_000);
    let e = match_template(&b, &target, &template, &p).err().unwrap();
    assert!(
        matches!(e, monomorph::Error::OutOfMemory { .. })
            && e.to_string().contains("filtering the target"),
        "{e}"
    );
}
