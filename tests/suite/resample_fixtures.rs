//! The CPU rotation against pytme/scipy: for every case of `tests/fixtures/matching`, rotate
//! `template.npy` by each `rotations.npy[i]` exactly as pytme 0.3.6 does (reverse all axes,
//! `affine_transform(order=3, mode="constant", prefilter=True)` with the float32 homogeneous
//! matrix `[[R, c − R c], [0, 1]]`, c = (n − 1)/2, reverse back) and compare with
//! `rotated_templates.npy[i]`; the masks likewise without prefilter against
//! `rotated_masks.npy[i]`. The LCC case's template is `laplace(template)` first (pytme's LCC
//! preprocessing). Plus the basic ops' semantics and error paths.

use monomorph::prelude::*;
use monomorph::{BorderMode, Interpolation, PadMode, Precision, Real};
use ndarray::{ArrayD, Axis, IxDyn};

use crate::common::{fixture, json, npy};

const CASES: [&str; 9] = [
    "2d_cc",
    "2d_flc",
    "2d_flc_padded",
    "2d_flcsphericalmask",
    "2d_lcc",
    "2d_mcc",
    "2d_ncc",
    "3d_cc",
    "3d_flc",
];

/// pytme's matrix and offset for rotation `r` (float32 d×d) about (n − 1)/2: the matrix is
/// `R` (float32 → float64); the offset `c − R·c` is computed in float64 from the float32 R,
/// stored in the float32 homogeneous matrix, then read back as float64 by scipy.
fn pytme_transform(r: &[f32], shape: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let d = shape.len();
    let c: Vec<f64> = shape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
    let m: Vec<f64> = r.iter().map(|&v| v as f64).collect();
    let offset = (0..d)
        .map(|h| {
            let rc: f64 = (0..d).map(|l| m[h * d + l] * c[l]).sum();
            ((0.0f32 as f64 + c[h]) - rc) as f32 as f64
        })
        .collect();
    (m, offset)
}

/// pytme's rotation of one volume on `Cpu<P>`; `prefilter` for templates, not for masks.
fn pytme_rotate<P: Precision>(
    cpu: &Cpu<P>,
    vol: &ArrayD<P::Float>,
    r: &[f32],
    prefilter: bool,
) -> ArrayD<P::Float> {
    let shape = vol.shape().to_vec();
    let all: Vec<usize> = (0..shape.len()).collect();
    let (m, off) = pytme_transform(r, &shape);
    let mut rev = ArrayD::<P::Float>::zeros(IxDyn(&shape));
    cpu.flip(vol, &all, &mut rev).expect("flip");
    if prefilter {
        cpu.spline_prefilter(&mut rev).expect("prefilter");
    }
    let mut out = ArrayD::<P::Float>::zeros(IxDyn(&shape));
    cpu.affine_transform(&rev, &m, &off, Interpolation::Cubic, &mut out)
        .expect("affine_transform");
    let mut back = ArrayD::<P::Float>::zeros(IxDyn(&shape));
    cpu.flip(&out, &all, &mut back).expect("flip back");
    back
}

fn max_abs_diff<T: Real>(a: &ArrayD<T>, b: ndarray::ArrayViewD<'_, f32>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x.as_f64() - *y as f64).abs())
        .fold(0.0, f64::max)
}

/// (max error over rotated templates, max error over rotated masks if any, max |template|).
fn run_case<P: Precision>(case: &str) -> (f64, Option<f64>, f64) {
    let cpu = Cpu::<P>::new();
    let meta = json(&format!("matching/{case}/case.json"));
    let conv = |a: &ArrayD<f32>| a.mapv(|v| <P::Float as Real>::from_f64(v as f64));
    let t32: ArrayD<f32> = npy(&format!("matching/{case}/template.npy"));
    let mut template = conv(&t32);
    if meta["score"].as_str() == Some("LCC") {
        let mut lap = ArrayD::<P::Float>::zeros(template.shape());
        cpu.laplace(&template, BorderMode::Reflect, &mut lap)
            .expect("laplace");
        template = lap;
    }
    let rots: ArrayD<f32> = npy(&format!("matching/{case}/rotations.npy"));
    let rotated: ArrayD<f32> = npy(&format!("matching/{case}/rotated_templates.npy"));
    let scale = rotated.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
    let mut err_t = 0.0f64;
    for (i, r) in rots.axis_iter(Axis(0)).enumerate() {
        let r: Vec<f32> = r.iter().copied().collect();
        let got = pytme_rotate(&cpu, &template, &r, true);
        err_t = err_t.max(max_abs_diff(&got, rotated.index_axis(Axis(0), i)));
    }
    let mask_file = format!("matching/{case}/rotated_masks.npy");
    let err_m = if fixture(&mask_file).exists() {
        let m32: ArrayD<f32> = npy(&format!("matching/{case}/template_mask.npy"));
        let mask = conv(&m32);
        let rotated_m: ArrayD<f32> = npy(&mask_file);
        let mut e = 0.0f64;
        for (i, r) in rots.axis_iter(Axis(0)).enumerate() {
            let r: Vec<f32> = r.iter().copied().collect();
            let got = pytme_rotate(&cpu, &mask, &r, false);
            e = e.max(max_abs_diff(&got, rotated_m.index_axis(Axis(0), i)));
        }
        Some(e)
    } else {
        None
    };
    (err_t, err_m, scale)
}

fn check_all<P: Precision>(tol: f64) {
    for case in CASES {
        let (et, em, scale) = run_case::<P>(case);
        println!(
            "{case} ({}): max |rotated template − pytme| = {et:.3e} (max |value| {scale:.3}), \
             mask: {}",
            P::NAME,
            em.map_or("-".to_string(), |e| format!("{e:.3e}"))
        );
        assert!(
            et <= tol * scale.max(1.0),
            "{case}: template error {et:e} > {tol:e}"
        );
        if let Some(em) = em {
            assert!(em <= tol, "{case}: mask error {em:e} > {tol:e}");
        }
    }
}

#[test]
fn rotation_matches_pytme_single() {
    check_all::<monomorph::Single>(1.2e-7);
}

#[test]
fn rotation_matches_pytme_double() {
    check_all::<monomorph::Double>(6e-8);
}

#[test]
fn linear_and_cubic_identity_and_edges_match_scipy() {
    // scipy: affine_transform(a, [[1]], offset, order, mode="constant", prefilter=False) on
    // a = [1, 2, 3, 4, 5]; values printed by scipy 1.17.1.
    let cpu = Cpu::<Double>::new();
    let a = ArrayD::from_shape_vec(IxDyn(&[5]), vec![1.0, 2.0, 3.0, 4.0, 5.0]).expect("a");
    let run = |off: f64, interp| {
        let mut out = ArrayD::<f64>::zeros(IxDyn(&[5]));
        cpu.affine_transform(&a, &[1.0], &[off], interp, &mut out)
            .expect("affine");
        out.into_raw_vec_and_offset().0
    };
    let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-7);
    let c = run(-1e-15, Interpolation::Cubic);
    assert!(close(&c, &[0.0, 2.0, 3.0, 4.0, 4.66666667]), "{c:?}");
    let c = run(-0.5, Interpolation::Cubic);
    assert!(close(&c, &[0.0, 1.54166667, 2.5, 3.5, 4.45833333]), "{c:?}");
    let c = run(0.01, Interpolation::Cubic);
    assert!(close(&c, &[1.333433, 2.01, 3.01, 4.00999967, 0.0]), "{c:?}");
    let c = run(-1.01, Interpolation::Cubic);
    assert!(close(&c, &[0.0, 0.0, 1.99000033, 2.99, 3.99]), "{c:?}");
    let l = run(-0.5, Interpolation::Linear);
    assert!(close(&l, &[0.0, 1.5, 2.5, 3.5, 4.5]), "{l:?}");
    let l = run(1e-12, Interpolation::Linear);
    assert!(close(&l, &[1.0, 2.0, 3.0, 4.0, 0.0]), "{l:?}");
}

#[test]
fn rotate_then_inverse_is_smooth_and_close() {
    // R then Rᵀ about the centre returns the volume (up to spline smoothing) in the interior.
    let cpu = Cpu::<Double>::new();
    let n = 24usize;
    let c = (n as f64 - 1.0) / 2.0;
    let vol = ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |i| {
        let r2: f64 = (0..3).map(|k| (i[k] as f64 - c).powi(2)).sum();
        (-r2 / 18.0).exp()
    });
    let (a, b, g) = (0.3f64, 0.7f64, -0.4f64);
    let rz = |t: f64| [t.cos(), -t.sin(), 0.0, t.sin(), t.cos(), 0.0, 0.0, 0.0, 1.0];
    let ry = |t: f64| [t.cos(), 0.0, t.sin(), 0.0, 1.0, 0.0, -t.sin(), 0.0, t.cos()];
    let mul = |p: [f64; 9], q: [f64; 9]| {
        let mut r = [0.0; 9];
        for i in 0..3 {
            for j in 0..3 {
                r[i * 3 + j] = (0..3).map(|k| p[i * 3 + k] * q[k * 3 + j]).sum();
            }
        }
        r
    };
    let rot = mul(mul(rz(a), ry(b)), rz(g));
    let mut rt = [0.0; 9];
    for i in 0..3 {
        for j in 0..3 {
            rt[i * 3 + j] = rot[j * 3 + i];
        }
    }
    let off = |m: &[f64; 9]| -> Vec<f64> {
        (0..3)
            .map(|h| c - (0..3).map(|l| m[h * 3 + l] * c).sum::<f64>())
            .collect()
    };
    let mut coef = vol.clone();
    cpu.spline_prefilter(&mut coef).expect("prefilter");
    let mut once = ArrayD::<f64>::zeros(IxDyn(&[n, n, n]));
    cpu.affine_transform(&coef, &rot, &off(&rot), Interpolation::Cubic, &mut once)
        .expect("affine");
    cpu.spline_prefilter(&mut once).expect("prefilter");
    let mut back = ArrayD::<f64>::zeros(IxDyn(&[n, n, n]));
    cpu.affine_transform(&once, &rt, &off(&rt), Interpolation::Cubic, &mut back)
        .expect("affine");
    let err = back
        .iter()
        .zip(vol.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(err < 2e-3, "R then Rᵀ: max error {err}");
}

fn row(a: &ArrayD<f32>, i: usize) -> Vec<f32> {
    a.index_axis(Axis(0), i).iter().copied().collect()
}

#[test]
fn pad_crop_flip_roll_follow_numpy() {
    let cpu = Cpu::<Single>::new();
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |i| (i[0] * 3 + i[1]) as f32);
    // np.pad(a, ((1, 2), (2, 1)), mode="symmetric")
    let mut p = ArrayD::<f32>::zeros(IxDyn(&[5, 6]));
    cpu.pad(&a, &[1, 2], PadMode::Symmetric, &mut p)
        .expect("pad");
    let want = [
        [1., 0., 0., 1., 2., 2.],
        [1., 0., 0., 1., 2., 2.],
        [4., 3., 3., 4., 5., 5.],
        [4., 3., 3., 4., 5., 5.],
        [1., 0., 0., 1., 2., 2.],
    ];
    for i in 0..5 {
        for j in 0..6 {
            assert_eq!(p[[i, j]], want[i][j], "symmetric pad at ({i}, {j})");
        }
    }
    let mut z = ArrayD::<f32>::zeros(IxDyn(&[3, 5]));
    cpu.pad(&a, &[1, 0], PadMode::Zero, &mut z)
        .expect("pad zero");
    assert_eq!(row(&z, 0), vec![0.0; 5]);
    assert_eq!(row(&z, 2), vec![3., 4., 5., 0., 0.]);
    // crop back
    let mut c = ArrayD::<f32>::zeros(IxDyn(&[2, 3]));
    cpu.crop(&p, &[1, 2], &mut c).expect("crop");
    assert_eq!(c, a);
    // flip
    let mut f = ArrayD::<f32>::zeros(IxDyn(&[2, 3]));
    cpu.flip(&a, &[1], &mut f).expect("flip");
    assert_eq!(row(&f, 0), vec![2., 1., 0.]);
    // np.roll(a, (1, -1)) = [[4, 5, 3], [1, 2, 0]]
    let mut r = ArrayD::<f32>::zeros(IxDyn(&[2, 3]));
    cpu.roll(&a, &[1, -1], &mut r).expect("roll");
    assert_eq!(row(&r, 0), vec![4., 5., 3.]);
    assert_eq!(row(&r, 1), vec![1., 2., 0.]);
    cpu.roll(&a, &[-7, 8], &mut r).expect("roll big");
    // np.roll(a, (-7, 8)) = np.roll(a, (1, 2))
    assert_eq!(row(&r, 0), vec![4., 5., 3.]);
}

#[test]
fn resample_ops_reject_bad_input() {
    let cpu = Cpu::<Single>::new();
    let a = ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
    let mut small = ArrayD::<f32>::zeros(IxDyn(&[3, 4]));
    let mut d3 = ArrayD::<f32>::zeros(IxDyn(&[4, 4, 1]));
    let mut same = ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
    assert!(matches!(
        cpu.pad(&a, &[0, 0], PadMode::Zero, &mut small),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.pad(&a, &[0], PadMode::Zero, &mut same),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.crop(&a, &[2, 0], &mut small),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.crop(&a, &[0, 0], &mut d3),
        Err(Error::Shape { .. })
    ));
    assert!(cpu.flip(&a, &[2], &mut same).is_err());
    assert!(cpu.flip(&a, &[1, 1], &mut same).is_err());
    assert!(matches!(
        cpu.flip(&a, &[0], &mut small),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.roll(&a, &[1], &mut same),
        Err(Error::Shape { .. })
    ));
    let id = [1.0, 0.0, 0.0, 1.0];
    let cubic = Interpolation::Cubic;
    assert!(matches!(
        cpu.affine_transform(&a, &id[..3], &[0.0, 0.0], cubic, &mut same),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.affine_transform(&a, &id, &[0.0], cubic, &mut same),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.affine_transform(&a, &id, &[0.0, 0.0], cubic, &mut d3),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.affine_transform(
            &a,
            &[1.0, f64::NAN, 0.0, 1.0],
            &[0.0, 0.0],
            cubic,
            &mut same
        ),
        Err(Error::NonFinite { .. })
    ));
    let e = ArrayD::<f32>::zeros(IxDyn(&[0, 4]));
    assert!(matches!(
        cpu.affine_transform(&e, &id, &[0.0, 0.0], cubic, &mut same),
        Err(Error::Empty(_))
    ));
    let mut big = ArrayD::<f32>::zeros(IxDyn(&[2, 2, 2, 2]));
    let b4 = ArrayD::<f32>::zeros(IxDyn(&[2, 2, 2, 2]));
    assert!(
        cpu.affine_transform(&b4, &[0.0; 16], &[0.0; 4], cubic, &mut big)
            .is_err()
    );
}
