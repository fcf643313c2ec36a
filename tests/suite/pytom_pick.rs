//! pytom-match-pick 0.14's extraction, top-hat mask and ROC estimate in the library, against
//! the oracle cases of `tests/fixtures/pipeline/oracle/` (made by pytom's own code,
//! `make_oracles.py`): the same particles in the same order with the same float32 scores, the
//! top-hat mask voxel for voxel, the ROC numbers to 1e-6 relative; and the white top-hat
//! against scipy (`tests/fixtures/pipeline/tophat/`).

use monomorph::algo::peaks::{
    PytomParams, RocParams, TophatParams, estimate_roc, extract_pytom, pytom_cut_off, pytom_radius,
    white_tophat,
};
use monomorph::prelude::*;
use ndarray::ArrayD;

use crate::common::{json, npy};

fn cpu() -> Cpu<Single> {
    Cpu::new()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// The case's particle positions as monomorph's (z, y, x) indices and their scores.
fn oracle_particles(case: &serde_json::Value) -> Vec<(Vec<usize>, f32)> {
    let p = &case["params"];
    let parts = case["particles"].as_array().expect("particles");
    parts
        .iter()
        .map(|q| {
            let xyz: Vec<f64> = if q.get("rlnCoordinateX").is_some() {
                ["rlnCoordinateX", "rlnCoordinateY", "rlnCoordinateZ"]
                    .iter()
                    .map(|k| q[*k].as_f64().expect("coordinate"))
                    .collect()
            } else {
                // RELION 5 compatible output: (i·b − (dims·b/2 − 1))·ps back to the index i
                let b = p["relion5"]["binning"].as_f64().expect("binning");
                let ps = p["relion5"]["tilt_series_pixel_size"].as_f64().expect("ps");
                let dims: Vec<f64> = p["shape_xyz"]
                    .as_array()
                    .expect("shape")
                    .iter()
                    .map(|v| v.as_f64().expect("dim"))
                    .collect();
                [
                    "rlnCenteredCoordinateXAngst",
                    "rlnCenteredCoordinateYAngst",
                    "rlnCenteredCoordinateZAngst",
                ]
                .iter()
                .enumerate()
                .map(|(k, key)| {
                    let c = q[*key].as_f64().expect("coordinate");
                    ((c / ps + dims[k] * b / 2.0 - 1.0) / b).round()
                })
                .collect()
            };
            let zyx = vec![xyz[2] as usize, xyz[1] as usize, xyz[0] as usize];
            (zyx, q["rlnLCCmax"].as_f64().expect("score") as f32)
        })
        .collect()
}

fn stats(case: &serde_json::Value) -> (f64, f64) {
    let s = &case["job_stats"];
    (
        s["search_space"].as_f64().expect("space"),
        s["std"].as_f64().expect("std"),
    )
}

#[test]
fn extract_auto_matches_pytom() {
    let case = json("pipeline/oracle/extract_auto/case.json");
    let scores: ArrayD<f32> = npy("pipeline/oracle/extract_auto/scores.npy");
    let (space, std) = stats(&case);
    let cut = pytom_cut_off(1.0, space, std).expect("cut");
    let want_cut = case["score_cut_off (erfcinv(2*nFP/search_space)*sqrt(2)*std)"]
        .as_f64()
        .expect("cut");
    assert!(rel(cut, want_cut) < 1e-12, "{cut} vs {want_cut}");
    let r = pytom_radius(60.0, 10.0).expect("radius");
    assert_eq!(r, 3);
    let b = cpu();
    let s = b.upload_owned(scores).expect("upload");
    let p = PytomParams {
        num_peaks: 40,
        radius: r,
        cut_off: cut,
        tophat: None,
    };
    let got = extract_pytom(&b, &s, None, &p).expect("extract");
    let want = oracle_particles(&case);
    assert_eq!(want.len(), 10);
    let got_list: Vec<(Vec<usize>, f32)> = got
        .peaks
        .iter()
        .map(|q| (q.coord.clone(), q.score as f32))
        .collect();
    assert_eq!(got_list, want);
    // the two companions (Chebyshev <= 3, Euclidean > 3) are not particles: pytom's cube
    let truth = &case["truth"]["positions_xyz"];
    let n = truth.as_array().expect("truth").len();
    for k in [n - 2, n - 1] {
        let c: Vec<usize> = truth[k]
            .as_array()
            .expect("pos")
            .iter()
            .rev()
            .map(|v| v.as_u64().expect("int") as usize)
            .collect();
        assert!(
            !got.peaks.iter().any(|q| q.coord == c),
            "companion {c:?} extracted"
        );
    }
}

#[test]
fn extract_tophat_matches_pytom() {
    let case = json("pipeline/oracle/extract_tophat_relion5/case.json");
    let scores: ArrayD<f32> = npy("pipeline/oracle/extract_tophat_relion5/scores.npy");
    let want_mask: ArrayD<bool> = npy("pipeline/oracle/extract_tophat_relion5/tophat_mask.npy");
    let (space, std) = stats(&case);
    let cut = pytom_cut_off(1.0, space, std).expect("cut");
    let b = cpu();
    let s = b.upload_owned(scores).expect("upload");
    let p = PytomParams {
        num_peaks: 40,
        radius: pytom_radius(60.0, 7.407407 * 1.35).expect("radius"),
        cut_off: cut,
        tophat: Some(TophatParams::default()),
    };
    let got = extract_pytom(&b, &s, None, &p).expect("extract");
    let th = got.tophat.as_ref().expect("tophat fit");
    let want = &case["tophat"];
    // the cut follows the log fit, which two LM implementations end ~1e-7 apart
    assert!(rel(th.cut_off, want["tophat_cut_off"].as_f64().expect("cut")) < 1e-5);
    assert_eq!(th.mask_voxels, 11);
    assert_eq!(th.n_fit_points, 8);
    let counts: Vec<usize> = want["histogram_counts"]
        .as_array()
        .expect("counts")
        .iter()
        .map(|v| v.as_u64().expect("count") as usize)
        .collect();
    assert_eq!(th.counts, counts);
    // float32 edges (serde_json may read the printed f64 one ulp off: compare as f32)
    for (g, w) in th
        .edges
        .iter()
        .zip(want["histogram_edges"].as_array().expect("edges"))
    {
        assert_eq!(*g as f32, w.as_f64().expect("edge") as f32);
    }
    for (fit, key) in [
        (th.gauss, "gauss_fit_popt (amp, mu, sigma)"),
        (th.log_gauss, "log_gauss_fit_popt (amp, mu, sigma)"),
    ] {
        let w: Vec<f64> = want[key]
            .as_array()
            .expect("popt")
            .iter()
            .map(|v| v.as_f64().expect("popt"))
            .collect();
        // amplitude and width relative to themselves, the mean (near 0) to the width
        let errs = [
            rel(fit[0], w[0]),
            (fit[1] - w[1]).abs() / w[2].abs(),
            rel(fit[2], w[2]),
        ];
        assert!(errs.iter().all(|e| *e < 1e-5), "{key}: {fit:?} vs {w:?}");
    }
    // the mask voxel for voxel: the top-hat transform above the cut
    let t = white_tophat(&b, &s, 1).expect("tophat");
    let t = b.download(&t).expect("download");
    let mask = t.mapv(|v| f64::from(v) > th.cut_off);
    assert_eq!(mask, want_mask);
    assert_eq!(got.peaks.len(), 8);
    let got_list: Vec<(Vec<usize>, f32)> = got
        .peaks
        .iter()
        .map(|q| (q.coord.clone(), q.score as f32))
        .collect();
    assert_eq!(got_list, oracle_particles(&case));
}

#[test]
fn white_tophat_matches_scipy() {
    let map: ArrayD<f32> = npy("pipeline/tophat/map.npy");
    let b = cpu();
    let s = b.upload_owned(map).expect("upload");
    for c in 1..=3 {
        let want: ArrayD<f32> = npy(&format!("pipeline/tophat/tophat_c{c}.npy"));
        let got = b
            .download(&white_tophat(&b, &s, c).expect("tophat"))
            .expect("down");
        assert_eq!(got, want, "connectivity {c}");
    }
    assert!(white_tophat(&b, &s, 4).is_err());
}

#[test]
fn roc_matches_pytom() {
    let case = json("pipeline/oracle/roc/case.json");
    let scores: ArrayD<f32> = npy("pipeline/oracle/roc/scores.npy");
    let b = cpu();
    let s = b.upload_owned(scores.clone()).expect("upload");
    let p = PytomParams {
        num_peaks: 72,
        radius: 3,
        cut_off: 0.0,
        tophat: None,
    };
    let got = extract_pytom(&b, &s, None, &p).expect("extract");
    let roc = &case["roc"];
    let want_lcc: Vec<f32> = roc["lcc_max_values (extraction order)"]
        .as_array()
        .expect("lcc")
        .iter()
        .map(|v| v.as_f64().expect("lcc") as f32)
        .collect();
    let lcc: Vec<f32> = got.peaks.iter().map(|q| q.score as f32).collect();
    assert_eq!(lcc, want_lcc);
    let n = scores.len() as f64;
    let mean = scores.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = scores
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    let noise = roc["noise (mean, std, size of the whole score map)"]
        .as_array()
        .expect("noise");
    assert!(rel(mean, noise[0].as_f64().expect("mean")) < 1e-6);
    assert!(rel(var.sqrt(), noise[1].as_f64().expect("std")) < 1e-6);
    let est =
        estimate_roc(&lcc, mean, var.sqrt(), scores.len(), &RocParams::default()).expect("roc");
    let popt: Vec<f64> = roc["curve_fit"]["popt (sigma_1, mu_2, sigma_2, A_2)"]
        .as_array()
        .expect("popt")
        .iter()
        .map(|v| v.as_f64().expect("p"))
        .collect();
    let mine = [
        est.noise.std,
        est.particles.mean,
        est.particles.std,
        est.particles.amplitude,
    ];
    for (g, w) in mine.iter().zip(&popt) {
        assert!(rel(*g, *w) < 1e-4, "fit {mine:?} vs pytom {popt:?}");
    }
    assert_eq!(
        est.index,
        roc["optimal_index"].as_u64().expect("index") as usize
    );
    assert!(rel(est.threshold, roc["threshold"].as_f64().expect("t")) < 1e-6);
    assert!(rel(est.ruc, roc["ruc"].as_f64().expect("ruc")) < 1e-4);
    // pytom prints "estimation total number of true positives: 34.1", "selects 23.5"
    assert!((est.n_particles - 34.1).abs() < 0.05, "{}", est.n_particles);
    assert!((est.n_selected - 23.5).abs() < 0.05, "{}", est.n_selected);
    let counts: Vec<usize> = roc["histogram_counts"]
        .as_array()
        .expect("counts")
        .iter()
        .map(|v| v.as_f64().expect("c") as usize)
        .collect();
    assert_eq!(est.counts, counts);
    for (g, w) in est
        .edges
        .iter()
        .zip(roc["histogram_edges"].as_array().expect("e"))
    {
        assert_eq!(*g as f32, w.as_f64().expect("edge") as f32);
    }
    for (k, (name, arr)) in [("recall", &roc["recall"]), ("fdr", &roc["fdr"])]
        .into_iter()
        .enumerate()
    {
        for (i, w) in arr.as_array().expect(name).iter().enumerate() {
            let w = w.as_f64().expect("v");
            let g = if k == 0 {
                est.curve[i].recall
            } else {
                est.curve[i].fdr
            };
            assert!(
                rel(g, w) < 1e-3 || (g - w).abs() < 1e-12,
                "{name}[{i}]: {g} vs {w}"
            );
        }
    }
    // the ROC of a histogram too flat to fit is an error, not a cut
    let flat = vec![0.5f32; 40];
    assert!(estimate_roc(&flat, mean, var.sqrt(), scores.len(), &RocParams::default()).is_err());
}
