//! The Fourier filters (missing wedge, CTF, band-pass, whitening) against the arrays pytme
//! 0.3.6 built for every case of `tests/fixtures/matching-filters/`: binary masks bit for bit,
//! smooth filters and the whitening profile within 1e-5; plus the (z, y, x) frame, in which the
//! same filters come out transposed.

use monomorph::algo::filters::{
    AxisOrder, CtfCorrection, CtfSpec, FilterSpec, Filters, Microscope, SpectralFilter, TiltCtf,
    TiltWeighting, WedgeSpec,
};
use monomorph::prelude::*;
use ndarray::{ArrayD, IxDyn};

use crate::common::{fixture, json, npy};

const CASES: [&str; 9] = [
    "2d_bandpass_whiten_flc",
    "2d_ctf_raw_flc",
    "3d_bandpass_cc",
    "3d_cli_wedge_asym_bandpass_flc",
    "3d_ctf_flc",
    "3d_ctf_per_tilt_angle_flc",
    "3d_wedge_continuous_flc",
    "3d_wedge_tilts_angle_flcsm",
    "3d_whiten_flc",
];

fn f64s(v: &serde_json::Value) -> Vec<f64> {
    match v.as_array() {
        Some(a) => a.iter().map(|x| x.as_f64().expect("number")).collect(),
        None => vec![v.as_f64().expect("number")],
    }
}

fn shape_of(v: &serde_json::Value) -> Vec<usize> {
    v.as_array()
        .expect("shape")
        .iter()
        .map(|x| x.as_u64().expect("int") as usize)
        .collect()
}

/// The tool-neutral `case.json["filters"]` as a [`FilterSpec`] in pytme's axis order.
fn spec_of(f: &serde_json::Value) -> FilterSpec {
    let mut s = FilterSpec::new(f["voxel_size"].as_f64().expect("voxel_size"));
    s.axis_order = AxisOrder::Pytme;
    let axes = shape_of(&f["wedge_axes"]);
    s.wedge_axes = Some([axes[0], axes[1]]);
    s.wedge = match f["wedge"].as_str() {
        None => None,
        Some("continuous") => {
            let a = f64s(&f["tilt_angles"]);
            Some(WedgeSpec::Continuous { a: a[0], b: a[1] })
        }
        Some("tilt_series") => Some(WedgeSpec::TiltSeries {
            angles: f64s(&f["tilt_angles"]),
            doses: (!f["doses"].is_null()).then(|| f64s(&f["doses"])),
        }),
        Some(w) => panic!("unknown wedge {w}"),
    };
    s.tilt_weighting = match f["tilt_weighting"].as_str() {
        None => None,
        Some("angle") => Some(TiltWeighting::Angle),
        Some("relion") => Some(TiltWeighting::Relion),
        Some("grigorieff") => Some(TiltWeighting::Grigorieff),
        Some(w) => panic!("unknown weighting {w}"),
    };
    if !f["ctf"].is_null() {
        s.microscope = Microscope {
            voltage_kv: f["voltage"].as_f64().expect("voltage"),
            cs: f["cs"].as_f64().expect("cs") * 1e7,
            amplitude_contrast: f["amplitude_contrast"].as_f64().expect("amplitude"),
        };
        s.ctf_correction = match f["ctf_correction"].as_str() {
            Some("raw") => CtfCorrection::Raw,
            _ => CtfCorrection::PhaseFlip,
        };
        let ps = f["phase_shift_rad"].as_f64().unwrap_or(0.0);
        s.ctf = match f["ctf"].as_str() {
            Some("single") => Some(CtfSpec::Single {
                defocus: f["defocus"].as_f64().expect("defocus"),
                phase_shift: ps,
            }),
            Some("per_tilt") => {
                let df = f64s(&f["defocus"]);
                let dd = f64s(&f["defocus_delta"]);
                let aa = f64s(&f["astigmatism_angle"]);
                Some(CtfSpec::PerTilt(
                    (0..df.len())
                        .map(|i| TiltCtf {
                            defocus: df[i],
                            defocus_delta: dd[i],
                            astigmatism_angle: aa[i],
                            phase_shift: ps,
                        })
                        .collect(),
                ))
            }
            Some(c) => panic!("unknown ctf {c}"),
            None => None,
        };
    }
    s.lowpass = f["lowpass"].as_f64();
    s.highpass = f["highpass"].as_f64();
    s.whiten = f["whiten"].as_bool().unwrap_or(false);
    s.filter_target = f["filter_target"].as_bool().unwrap_or(true);
    s
}

fn build(case: &str, spec: &FilterSpec, transpose: bool) -> (Filters, serde_json::Value) {
    let c = json(&format!("matching-filters/{case}/case.json"));
    let mut tshape = shape_of(&c["template_shape"]);
    let cpu = Cpu::<Double>::new();
    let mut target: ArrayD<f64> = if spec.whiten {
        npy::<f32>(&format!("matching-filters/{case}/target.npy")).mapv(f64::from)
    } else {
        ArrayD::zeros(IxDyn(&shape_of(&c["target_shape"])))
    };
    if transpose {
        target = target.reversed_axes().as_standard_layout().to_owned();
        tshape.reverse();
    }
    let dev = cpu.upload(target.view()).expect("upload");
    (spec.build(&cpu, &dev, &tshape).expect("build"), c)
}

fn is_binary(a: &ArrayD<f32>) -> bool {
    a.iter().all(|&v| v == 0.0 || v == 1.0)
}

fn max_diff(a: &ArrayD<f64>, b: &ArrayD<f32>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.iter()
        .zip(b)
        .map(|(x, &y)| (x - f64::from(y)).abs())
        .fold(0.0, f64::max)
}

/// Checks one weight against pytme's array: bit-identical for a binary mask, else within tol.
fn check(what: &str, case: &str, got: Option<ArrayD<f64>>, want: Option<ArrayD<f32>>) -> f64 {
    match (got, want) {
        (None, None) => 0.0,
        (Some(g), Some(w)) => {
            let d = max_diff(&g, &w);
            if is_binary(&w) {
                assert_eq!(d, 0.0, "{case}: binary {what} differs from pytme's");
            }
            assert!(d <= 1e-5, "{case}: {what} max abs diff {d:e}");
            d
        }
        (g, w) => panic!(
            "{case}: {what} present here {} / in pytme {}",
            g.is_some(),
            w.is_some()
        ),
    }
}

fn maybe_npy(rel: &str) -> Option<ArrayD<f32>> {
    fixture(rel).exists().then(|| npy::<f32>(rel))
}

#[test]
fn every_filter_equals_pytmes_on_every_case() {
    let mut report = Vec::new();
    for case in CASES {
        let c = json(&format!("matching-filters/{case}/case.json"));
        let spec = spec_of(&c["filters"]);
        let (filters, c) = build(case, &spec, false);
        let tshape = shape_of(&c["template_shape"]);
        let fast = shape_of(&c["fast_shape"]);
        let dt = check(
            "template filter",
            case,
            filters.template_weight(&tshape).expect("template weight"),
            maybe_npy(&format!("matching-filters/{case}/template_filter.npy")),
        );
        let df = check(
            "target filter",
            case,
            filters.target_weight(&fast).expect("target weight"),
            maybe_npy(&format!("matching-filters/{case}/target_filter.npy")),
        );
        let mut dw = 0.0;
        if let Some(w) = maybe_npy(&format!("matching-filters/{case}/whitening_profile.npy")) {
            let got = filters.whitening_profile().expect("a whitening profile");
            assert_eq!(got.len(), w.len(), "{case}: whitening profile length");
            dw = got
                .iter()
                .zip(&w)
                .map(|(a, &b)| (a - f64::from(b)).abs())
                .fold(0.0, f64::max);
            assert!(dw <= 1e-5, "{case}: whitening profile max abs diff {dw:e}");
        }
        report.push(format!(
            "{case}: template {dt:.1e}, target {df:.1e}, whitening {dw:.1e}"
        ));
    }
    println!("{}", report.join("\n"));
}

/// The value pytme's inverse FFT effectively applies at integer frequency `u` (pytme order),
/// from its rfft half grid `h` (last axis halved) over a box of `shape`: `h` where the last
/// frequency is positive, `h(-k)` where negative, their mean on the DC and Nyquist planes.
fn effective(h: &ArrayD<f32>, shape: &[usize], u: &[i64]) -> f64 {
    let d = shape.len();
    let idx = |s: i64| -> Vec<usize> {
        (0..d)
            .map(|a| (s * u[a]).rem_euclid(shape[a] as i64) as usize)
            .collect()
    };
    let n = shape[d - 1] as i64;
    let ul = u[d - 1].rem_euclid(n);
    let at = |i: Vec<usize>| f64::from(h[IxDyn(&i)]);
    if ul == 0 || (n % 2 == 0 && ul == n / 2) {
        0.5 * (at(idx(1)) + at(idx(-1)))
    } else if ul < (n + 1) / 2 {
        at(idx(1))
    } else {
        at(idx(-1))
    }
}

/// Compares a (z, y, x)-frame weight `got` (half grid on the array's last axis) with pytme's
/// half grid `want` as the filter pytme applies.
fn reversed_diff(got: &ArrayD<f64>, want: &ArrayD<f32>, pshape: &[usize]) -> f64 {
    let d = pshape.len();
    let shape: Vec<usize> = pshape.iter().rev().copied().collect();
    let mut m = 0f64;
    for (ix, &g) in got.indexed_iter() {
        let u: Vec<i64> = (0..d)
            .map(|a| {
                let i = ix[d - 1 - a] as i64;
                let n = shape[d - 1 - a] as i64;
                if i < (n + 1) / 2 { i } else { i - n }
            })
            .collect();
        m = m.max((g - effective(want, pshape, &u)).abs());
    }
    m
}

#[test]
fn the_z_y_x_frame_gives_the_filter_pytme_applies_transposed() {
    let mut report = Vec::new();
    for case in CASES {
        let c = json(&format!("matching-filters/{case}/case.json"));
        let mut spec = spec_of(&c["filters"]);
        spec.axis_order = AxisOrder::Reversed;
        let d = shape_of(&c["template_shape"]).len();
        if let Some([o, t]) = spec.wedge_axes {
            spec.wedge_axes = Some([d - 1 - o, d - 1 - t]);
        }
        let (filters, c) = build(case, &spec, true);
        let tshape = shape_of(&c["template_shape"]);
        let fast = shape_of(&c["fast_shape"]);
        let rev = |s: &[usize]| s.iter().rev().copied().collect::<Vec<_>>();
        let mut line = format!("{case}:");
        for (what, shape, got) in [
            (
                "template",
                &tshape,
                filters.template_weight(&rev(&tshape)).unwrap(),
            ),
            ("target", &fast, filters.target_weight(&rev(&fast)).unwrap()),
        ] {
            let file = format!("matching-filters/{case}/{what}_filter.npy");
            match (got, maybe_npy(&file)) {
                (None, None) => {}
                (Some(g), Some(w)) => {
                    let dd = reversed_diff(&g, &w, shape);
                    assert!(dd <= 1e-5, "{case}: reversed {what} differs by {dd:e}");
                    line += &format!(" {what} {dd:.1e}");
                }
                (g, w) => panic!("{case}: {what} {} vs {}", g.is_some(), w.is_some()),
            }
        }
        if let Some(w) = maybe_npy(&format!("matching-filters/{case}/whitening_profile.npy")) {
            let got = filters.whitening_profile().expect("profile");
            let dw = got
                .iter()
                .zip(&w)
                .map(|(a, &b)| (a - f64::from(b)).abs())
                .fold(0.0, f64::max);
            assert!(dw <= 1e-5, "{case}: reversed whitening {dw:e}");
            line += &format!(" whitening {dw:.1e}");
        }
        report.push(line);
    }
    println!("{}", report.join("\n"));
}

#[test]
fn invalid_specs_are_refused_with_the_flag_named() {
    let cpu = Cpu::<Double>::new();
    let target = cpu
        .upload(ArrayD::<f64>::zeros(IxDyn(&[8, 8, 8])).view())
        .unwrap();
    let err = |s: &FilterSpec| s.build(&cpu, &target, &[4, 4, 4]).unwrap_err().to_string();
    let mut s = FilterSpec::new(8.0);
    s.lowpass = Some(40.0);
    s.highpass = Some(20.0);
    assert!(err(&s).contains("lowpass"), "{}", err(&s));
    let mut s = FilterSpec::new(8.0);
    s.wedge = Some(WedgeSpec::Continuous { a: 60.0, b: 60.0 });
    s.wedge_axes = Some([1, 1]);
    assert!(err(&s).contains("differ"), "{}", err(&s));
    s.wedge_axes = Some([3, 0]);
    assert!(err(&s).contains("out of range"), "{}", err(&s));
    let mut s = FilterSpec::new(8.0);
    s.wedge = Some(WedgeSpec::TiltSeries {
        angles: vec![-30.0, 0.0, 30.0],
        doses: None,
    });
    s.ctf = Some(CtfSpec::PerTilt(vec![
        TiltCtf {
            defocus: 3e4,
            defocus_delta: 0.0,
            astigmatism_angle: 0.0,
            phase_shift: 0.0
        };
        2
    ]));
    assert!(err(&s).contains("2 CTF lines for 3 tilt"), "{}", err(&s));
    s.ctf = None;
    s.tilt_weighting = Some(TiltWeighting::Relion);
    assert!(err(&s).contains("dose"), "{}", err(&s));
    let mut s = FilterSpec::new(8.0);
    s.ctf = Some(CtfSpec::Single {
        defocus: 3e4,
        phase_shift: 0.0,
    });
    s.microscope.voltage_kv = -300.0;
    assert!(err(&s).contains("acceleration-voltage"), "{}", err(&s));
    // 2-D with pytme's default axes 2,0
    let t2 = cpu
        .upload(ArrayD::<f64>::zeros(IxDyn(&[8, 8])).view())
        .unwrap();
    let mut s = FilterSpec::new(8.0);
    s.wedge = Some(WedgeSpec::Continuous { a: 60.0, b: 60.0 });
    let e = s.build(&cpu, &t2, &[4, 4]).unwrap_err().to_string();
    assert!(e.contains("wedge-axes"), "{e}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn built(spec: &FilterSpec, shape: &[usize]) -> Filters {
        let cpu = Cpu::<Double>::new();
        let t = cpu
            .upload(ArrayD::<f64>::zeros(IxDyn(shape)).view())
            .unwrap();
        let tshape: Vec<usize> = shape.iter().map(|&n| n / 2 + 1).collect();
        spec.build(&cpu, &t, &tshape).unwrap()
    }

    /// Every (k, -k) pair inside the half grid's `k_last = 0` plane.
    fn symmetric_in_plane(w: &ArrayD<f64>, shape: &[usize]) -> bool {
        let d = shape.len();
        w.indexed_iter().all(|(ix, &v)| {
            if ix[d - 1] != 0 {
                return true;
            }
            let neg: Vec<usize> = (0..d).map(|a| (shape[a] - ix[a]) % shape[a]).collect();
            v == w[IxDyn(&neg)]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn pointwise_filters_are_bounded_point_symmetric_and_zero_at_dc(
            n in prop::collection::vec(5usize..12, 3),
            a in 0.0f64..90.0,
            b in 0.0f64..90.0,
            df in 5000.0f64..50000.0,
            low in 10.0f64..40.0,
            reversed in any::<bool>(),
        ) {
            let mut s = FilterSpec::new(4.0);
            s.axis_order = if reversed { AxisOrder::Reversed } else { AxisOrder::Pytme };
            s.wedge = Some(WedgeSpec::Continuous { a, b });
            s.ctf = Some(CtfSpec::Single { defocus: df, phase_shift: 0.0 });
            s.lowpass = Some(low);
            s.highpass = Some(low * 4.0);
            let f = built(&s, &n);
            for w in [f.template_weight(&n).unwrap().unwrap(), f.target_weight(&n).unwrap().unwrap()] {
                prop_assert_eq!(w[IxDyn(&[0, 0, 0])], 0.0);
                prop_assert!(w.iter().all(|&v| (0.0..=1.0).contains(&v)));
                prop_assert!(symmetric_in_plane(&w, &n));
            }
            // the wedge alone is binary
            let mut s2 = s.clone();
            s2.ctf = None;
            s2.lowpass = None;
            s2.highpass = None;
            let w = built(&s2, &n).template_weight(&n).unwrap().unwrap();
            prop_assert!(w.iter().all(|&v| v == 0.0 || v == 1.0));
        }

        #[test]
        fn a_gridded_filter_in_the_z_y_x_frame_is_point_symmetric(
            m in 6usize..11,
            step in 5.0f64..30.0,
        ) {
            let angles: Vec<f64> = (-3..=3).map(|i| i as f64 * step).filter(|a| a.abs() <= 90.0).collect();
            let mut s = FilterSpec::new(4.0);
            s.wedge = Some(WedgeSpec::TiltSeries { angles, doses: None });
            s.tilt_weighting = Some(TiltWeighting::Angle);
            let shape = [m, m, m];
            let w = built(&s, &shape).template_weight(&shape).unwrap().unwrap();
            prop_assert!(symmetric_in_plane(&w, &shape));
            prop_assert!(w.iter().all(|&v| (0.0..=1.0).contains(&v)));
        }
    }
}
