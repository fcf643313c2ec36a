//! Seeded, constrained matching (local refinement, `MatchParams::seeds`,
//! `match --orientations-uncertainty`): inside each seed's neighbourhood the scores are a
//! whole run's with that seed's rotations (the target filtered as for a whole run), outside
//! every neighbourhood nothing is searched, overlaps keep the merge rule, and any split of the
//! rotations merges to the same bits; through the command, a coarse search, `peaks` into a
//! STAR and a refinement seeded by it bring the angular error of planted particles at random
//! orientations from about half the coarse step to a few degrees; bad input exits 2 naming
//! the flag.

use std::path::{Path, PathBuf};
use std::process::Command;

use monomorph::algo::filters::FilterSpec;
use monomorph::algo::matching::{Score, Seed, Seeds};
use monomorph::algo::rotations::{RotationSet, relion_euler_to_matrix};
use monomorph::prelude::*;
use monomorph::work::{Control, MatchJob, Part};
use monomorph::{HostArray, Interpolation};
use ndarray::{ArrayD, IxDyn};

type B = Cpu<Single>;

/// A small xorshift generator (deterministic test data).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-300), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
    /// A uniformly random rotation (Shoemake's quaternion), row-major.
    fn rotation(&mut self) -> [f64; 9] {
        let (u1, u2, u3) = (self.next(), self.next(), self.next());
        let tau = 2.0 * std::f64::consts::PI;
        let (a, b) = ((1.0 - u1).sqrt(), u1.sqrt());
        let (w, x, y, z) = (
            a * (tau * u2).sin(),
            a * (tau * u2).cos(),
            b * (tau * u3).sin(),
            b * (tau * u3).cos(),
        );
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - z * w),
            2.0 * (x * z + y * w),
            2.0 * (x * y + z * w),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - x * w),
            2.0 * (x * z - y * w),
            2.0 * (y * z + x * w),
            1.0 - 2.0 * (x * x + y * y),
        ]
    }
}

/// The asymmetric template's blobs: offset from the centre (z, y, x), σ, amplitude.
const BLOBS: [([f64; 3], f64, f64); 5] = [
    ([0.0, 0.0, 0.0], 1.8, 1.0),
    ([3.5, 0.0, 0.0], 1.2, 0.9),
    ([0.0, 3.0, 0.0], 1.1, 0.7),
    ([0.0, 0.0, -4.0], 1.0, 0.8),
    ([-2.0, 2.0, 2.5], 1.0, 0.6),
];

/// Adds the blobs, each offset `p` placed at `centre + Rᵀp` (the template seen through the
/// pull-back `R`, array order), to `a`.
fn plant(a: &mut ArrayD<f32>, centre: [f64; 3], r: &[f64; 9]) {
    let shape = a.shape().to_vec();
    for (p, sigma, amp) in BLOBS {
        let q: Vec<f64> = (0..3)
            .map(|i| centre[i] + (0..3).map(|k| r[k * 3 + i] * p[k]).sum::<f64>())
            .collect();
        for ((z, y, x), v) in a
            .view_mut()
            .into_dimensionality::<ndarray::Ix3>()
            .unwrap()
            .indexed_iter_mut()
        {
            let d2 =
                (z as f64 - q[0]).powi(2) + (y as f64 - q[1]).powi(2) + (x as f64 - q[2]).powi(2);
            if d2 < 36.0 * sigma * sigma {
                *v += (amp * (-d2 / (2.0 * sigma * sigma)).exp()) as f32;
            }
        }
    }
    let _ = shape;
}

fn template(n: usize) -> ArrayD<f32> {
    let mut t = ArrayD::zeros(IxDyn(&[n, n, n]));
    let c = (n / 2) as f64;
    plant(
        &mut t,
        [c; 3],
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
    );
    t
}

/// The geodesic angle in degrees between two rotations.
fn angle(a: &[f64], b: &[f64]) -> f64 {
    let tr: f64 = (0..9).map(|k| a[k] * b[k]).sum();
    ((tr - 1.0) / 2.0).clamp(-1.0, 1.0).acos().to_degrees()
}

/// A job on `target` with the test's template, whitening and a low-pass (the target is
/// filtered once for the whole run), FLCSphericalMask.
fn job(target: &ArrayD<f32>, rotations: RotationSet, pad: bool) -> MatchJob {
    let mut j = MatchJob::new(
        HostArray::F32(target.clone()),
        HostArray::F32(template(11)),
        Score::FLCSphericalMask,
        rotations,
    );
    let mut f = FilterSpec::new(1.0);
    f.lowpass = Some(3.0);
    f.whiten = true;
    j.filters = Some(f);
    j.pad_edges = pad;
    j.interpolation = Interpolation::Linear;
    j
}

/// Runs `job`'s rotations as the given ranges, merges the parts and assembles the result on
/// the host: (scores, rotation index, ssum).
fn run_parts(
    b: &B,
    job: &MatchJob,
    ranges: impl IntoIterator<Item = std::ops::Range<usize>>,
) -> (Vec<f32>, Vec<i64>, f64) {
    let mut part = Part::empty();
    for r in ranges {
        part.merge(job.run_range(b, r, &Control::new(), 0).unwrap())
            .unwrap();
    }
    let r = job.finish(b, part).unwrap();
    let s = b.download(&r.scores).unwrap().iter().copied().collect();
    let i = b
        .download(&r.rotation_index)
        .unwrap()
        .iter()
        .map(|&v| v as i64)
        .collect();
    (s, i, r.ssum)
}

#[test]
fn seeded_scores_are_a_whole_runs_with_each_seeds_rotations() {
    let b = B::new();
    let mut rng = Rng(0x5eed);
    let n = [30usize, 28, 26];
    let mut target = ArrayD::from_shape_fn(IxDyn(&n), |_| (0.3 * rng.normal()) as f32);
    plant(&mut target, [10.0, 12.0, 9.0], &rng.rotation());
    // Two seeds with their own sets (overlapping neighbourhoods), one at the target's edge.
    let a = RotationSet::uniform(3, 60.0).unwrap();
    let b2 = RotationSet::uniform(3, 80.0).unwrap();
    let mut flat = a.as_flat().to_vec();
    flat.extend_from_slice(b2.as_flat());
    let all = RotationSet::from_matrices(3, &flat).unwrap();
    let (na, nb) = (a.len(), b2.len());
    let seeds = Seeds::new(
        vec![
            Seed {
                position: vec![10, 12, 9],
                rotations: 0..na,
                pose: None,
            },
            Seed {
                position: vec![11, 13, 11],
                rotations: na..na + nb,
                pose: None,
            },
            Seed {
                position: vec![29, 0, 25],
                rotations: na..na + nb,
                pose: None,
            },
        ],
        vec![2.0, 1.5, 2.5],
    );
    for pad in [false, true] {
        let mut seeded = job(&target, all.clone(), pad);
        seeded.seeds = Some(seeds.clone());
        let nrot = all.len();
        let (s, i, ssum) = run_parts(&b, &seeded, std::iter::once(0..nrot));
        // Any split of the rotations (one cutting a seed's range) merges to the same bits.
        let (s3, i3, ssum3) = run_parts(&b, &seeded, [0..5, 5..na + 3, na + 3..nrot]);
        assert_eq!(i, i3);
        assert!(s.iter().zip(&s3).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert_eq!(ssum.to_bits(), ssum3.to_bits());
        // The whole run with each seed's own rotations, kept in the seed's neighbourhood.
        let whole = |set: &RotationSet| {
            run_parts(
                &b,
                &job(&target, set.clone(), pad),
                std::iter::once(0..set.len()),
            )
        };
        let (wa, wai, _) = whole(&a);
        let (wb, wbi, _) = whole(&b2);
        let mut searched = 0;
        for z in 0..n[0] {
            for y in 0..n[1] {
                for x in 0..n[2] {
                    let k = (z * n[1] + y) * n[2] + x;
                    let mut best: Option<(f32, i64)> = None;
                    for (sd, (ws, wi, base)) in seeds.seeds.iter().zip([
                        (&wa, &wai, 0),
                        (&wb, &wbi, na as i64),
                        (&wb, &wbi, na as i64),
                    ]) {
                        if seeds.contains(sd, &[z, y, x]) {
                            let c = (ws[k], wi[k] + base);
                            best = Some(match best {
                                Some(o) if o.0 >= c.0 => o,
                                _ => c,
                            });
                        }
                    }
                    match best {
                        None => assert!(s[k] == f32::NEG_INFINITY && i[k] == -1, "{z} {y} {x}"),
                        Some((ws, wi)) => {
                            searched += 1;
                            assert!(
                                (s[k] - ws).abs() <= 2e-5,
                                "pad {pad} at {z} {y} {x}: {} vs {ws}",
                                s[k]
                            );
                            // The same rotation unless two candidates score alike.
                            if i[k] != wi {
                                let other = if wi < na as i64 { wb[k] } else { wa[k] };
                                assert!(
                                    (other - ws).abs() <= 2e-5,
                                    "{z} {y} {x}: {} vs {wi}",
                                    i[k]
                                );
                            }
                        }
                    }
                }
            }
        }
        // 2·2·1.5·… voxels around each seed, fewer at the edge.
        assert!(searched > 40, "{searched}");
    }
}

#[test]
fn seeded_searches_refuse_what_they_cannot_define() {
    let b = B::new();
    let target = ArrayD::from_shape_fn(IxDyn(&[20, 20, 20]), |i| {
        (i[0] * 3 + i[1] + i[2] % 5) as f32
    });
    let set = RotationSet::uniform(3, 90.0).unwrap();
    let n = set.len();
    let cases: Vec<(Seeds, &str)> = vec![
        (
            Seeds::new(
                vec![Seed {
                    position: vec![20, 0, 0],
                    rotations: 0..n,
                    pose: None,
                }],
                vec![1.0; 3],
            ),
            "not a voxel of the target",
        ),
        (Seeds::new(vec![], vec![1.0; 2]), "one radius per axis"),
        (Seeds::new(vec![], vec![-1.0; 3]), "radius -1"),
    ];
    for (seeds, why) in cases {
        let mut j = job(&target, set.clone(), false);
        j.seeds = Some(seeds);
        let e = j
            .run_range(&b, 0..n, &Control::new(), 0)
            .expect_err("refused")
            .to_string();
        assert!(e.contains(why), "{e}");
    }
    let mut j = job(&target, set, false);
    j.seeds = Some(Seeds::new(vec![], vec![1.0; 3]));
    j.score_stats = true;
    let e = j
        .run_range(&b, 0..n, &Control::new(), 0)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("score statistics"), "{e}");
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-refine-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn monomorph(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_monomorph"))
        .args(args)
        .output()
        .expect("run monomorph")
}

fn ok(args: &[&str]) {
    let out = monomorph(args);
    assert!(
        out.status.success(),
        "monomorph {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `peaks` of a run folder into `out` (`.star` or `.csv`), the best `n`.
fn peaks(run: &Path, n: usize, out: &Path) {
    let p = |f: &str| run.join(f).display().to_string();
    ok(&[
        "peaks",
        "--scores",
        &p("scores.npy"),
        "--rotation-index",
        &p("rotation_index.npy"),
        "--rotations",
        &p("rotations.npy"),
        "--min-distance",
        "6",
        "--num-peaks",
        &n.to_string(),
        "--out",
        &out.display().to_string(),
    ]);
}

/// Mean angular error (degrees) of the peaks in `csv` (`z,y,x,score,rotation,rot,tilt,psi`)
/// against the planted particles, each matched to the peak nearest its centre (within 2
/// voxels).
fn mean_error(csv: &Path, planted: &[([f64; 3], [f64; 9])]) -> f64 {
    let text = std::fs::read_to_string(csv).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter_map(|l| {
            let v: Vec<f64> = l.split(',').filter_map(|t| t.trim().parse().ok()).collect();
            (v.len() >= 8).then_some(v)
        })
        .collect();
    let mut sum = 0.0;
    for (c, r) in planted {
        let row = rows
            .iter()
            .find(|v| (0..3).all(|k| (v[k] - c[k]).abs() <= 2.0))
            .unwrap_or_else(|| panic!("no peak at {c:?} in {text}"));
        let m = relion_euler_to_matrix([row[5], row[6], row[7]]).concat();
        sum += angle(&m, r);
    }
    sum / planted.len() as f64
}

#[test]
fn refinement_seeded_by_a_coarse_search_finds_the_angles() {
    let dir = scratch("planted");
    let mut rng = Rng(0xc0a5e);
    let centres = [
        [12.0, 12.0, 12.0],
        [13.0, 34.0, 31.0],
        [34.0, 14.0, 33.0],
        [33.0, 34.0, 13.0],
    ];
    let mut target = ArrayD::from_shape_fn(IxDyn(&[48, 48, 48]), |_| (0.15 * rng.normal()) as f32);
    let planted: Vec<([f64; 3], [f64; 9])> = centres.iter().map(|&c| (c, rng.rotation())).collect();
    for (c, r) in &planted {
        plant(&mut target, *c, r);
    }
    let (t, m) = (dir.join("target.npy"), dir.join("template.npy"));
    ndarray_npy::write_npy(&t, &target).unwrap();
    ndarray_npy::write_npy(&m, &template(15)).unwrap();
    let s = |p: &Path| p.display().to_string();
    let (coarse, fine) = (dir.join("coarse"), dir.join("fine"));
    ok(&[
        "match",
        "--target",
        &s(&t),
        "--template",
        &s(&m),
        "--angular-step",
        "30",
        "--out",
        &s(&coarse),
    ]);
    let star = dir.join("p.star");
    peaks(&coarse, 4, &star);
    peaks(&coarse, 4, &dir.join("coarse.csv"));
    ok(&[
        "match",
        "--target",
        &s(&t),
        "--template",
        &s(&m),
        "--orientations",
        &s(&star),
        "--orientations-cone",
        "15",
        "--angular-step",
        "3",
        "--orientations-uncertainty",
        "2",
        "--orientations-inplane-range",
        "15",
        "--out",
        &s(&fine),
    ]);
    peaks(&fine, 4, &dir.join("fine.csv"));
    let before = mean_error(&dir.join("coarse.csv"), &planted);
    let after = mean_error(&dir.join("fine.csv"), &planted);
    eprintln!("mean angular error: coarse 30° search {before:.2}°, refined {after:.2}°");
    assert!(before > 6.0, "the coarse search is already fine: {before}");
    assert!(after <= 3.0, "refined error {after}° (coarse {before}°)");
    // Only the neighbourhoods were searched; run.json says how.
    let scores: ArrayD<f32> = ndarray_npy::read_npy(fine.join("scores.npy")).unwrap();
    let searched = scores.iter().filter(|v| v.is_finite()).count();
    assert!(searched > 0 && searched <= 4 * 33, "{searched}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fine.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["seeds"]["n_seeds"], 4);
    // Each seed's box is a restricted search of its own (it said 1, the whole target's).
    assert_eq!(run["tiles"], 4);
    assert_eq!(
        run["parameters"]["orientations_uncertainty"],
        serde_json::json!([2.0, 2.0, 2.0])
    );
    let per = run["seeds"]["seeds"][1]["rotations"][0].as_u64().unwrap();
    assert_eq!(run["parameters"]["n_rotations"].as_u64().unwrap(), 4 * per);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seeded_bad_input_exits_2_naming_the_flag() {
    let dir = scratch("bad");
    let target = ArrayD::from_shape_fn(IxDyn(&[24, 24, 24]), |i| {
        ((i[0] * 7 + i[1] * 3 + i[2]) % 11) as f32
    });
    let (t, m) = (dir.join("t.npy"), dir.join("m.npy"));
    ndarray_npy::write_npy(&t, &target).unwrap();
    ndarray_npy::write_npy(&m, &template(9)).unwrap();
    let star = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let head = "data_particles\nloop_\n_rlnCoordinateX #1\n_rlnCoordinateY #2\n_rlnCoordinateZ #3\n\
                _rlnAngleRot #4\n_rlnAngleTilt #5\n_rlnAnglePsi #6\n";
    let good = star("good.star", &format!("{head}5 6 7 10 20 30\n"));
    let outside = star("outside.star", &format!("{head}5 6 24 10 20 30\n"));
    let angles_only = star(
        "angles.star",
        "data_\nloop_\n_rlnAngleRot\n_rlnAngleTilt\n_rlnAnglePsi\n1 2 3\n",
    );
    let two_tomos = star(
        "tomos.star",
        "data_particles\nloop_\n_rlnTomoName\n_rlnCenteredCoordinateXAngst\n\
         _rlnCenteredCoordinateYAngst\n_rlnCenteredCoordinateZAngst\n_rlnAngleRot\n_rlnAngleTilt\n\
         _rlnAnglePsi\na 0 0 0 1 2 3\nb 0 0 0 1 2 3\n",
    );
    let centred = star(
        "centred.star",
        "data_particles\nloop_\n_rlnTomoName\n_rlnCenteredCoordinateXAngst\n\
         _rlnCenteredCoordinateYAngst\n_rlnCenteredCoordinateZAngst\n_rlnAngleRot\n_rlnAngleTilt\n\
         _rlnAnglePsi\na 0 0 0 1 2 3\n",
    );
    let (ts, ms, out) = (
        t.display().to_string(),
        m.display().to_string(),
        dir.join("o").display().to_string(),
    );
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "match",
            "--target",
            &ts,
            "--template",
            &ms,
            "--out",
            &out,
            "--angular-step",
            "20",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let seeded = |star: &str, r: &str, more: &[&str]| {
        let mut e = vec![
            "--orientations",
            star,
            "--orientations-cone",
            "10",
            "--orientations-uncertainty",
            r,
        ];
        e.extend_from_slice(more);
        base(&e)
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (seeded(&good, "-1", &[]), "--orientations-uncertainty"),
        (seeded(&good, "nan", &[]), "--orientations-uncertainty"),
        (seeded(&good, "1,2", &[]), "--orientations-uncertainty"),
        (
            seeded(&good, "2", &["--orientations-inplane-range", "0"]),
            "--orientations-inplane-range 0",
        ),
        (
            seeded(&good, "2", &["--orientations-inplane-range", "190"]),
            "--orientations-inplane-range 190",
        ),
        (seeded(&angles_only, "2", &[]), "no seed positions"),
        (seeded(&outside, "2", &[]), "outside the target"),
        (
            seeded(&two_tomos, "2", &["--sampling-rate", "2"]),
            "2 tomograms",
        ),
        (seeded(&centred, "2", &[]), "voxel size"),
        (seeded(&good, "2", &["--score-stats"]), "--score-stats"),
        (
            seeded(&good, "2", &["--background-correction", "phase-scrambling"]),
            "--background-correction",
        ),
        (seeded(&good, "2", &["--symmetry", "C2"]), "--symmetry"),
        (
            base(&["--orientations-uncertainty", "2"]),
            "--orientations-uncertainty",
        ),
    ];
    for (args, why) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = monomorph(&a);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(why), "{args:?}: {e}");
        assert!(!dir.join("o").join("run.json").exists());
    }
    // The centred form with the run's voxel size: the seed at the centre.
    let a = seeded(&centred, "1", &["--sampling-rate", "2"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    ok(&a);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("o/run.json")).unwrap()).unwrap();
    assert_eq!(
        run["seeds"]["seeds"][0]["voxel_zyx"],
        serde_json::json!([12, 12, 12])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cases of `tests/fixtures/orientation/uncertainty/ellipsoids.json` (pytme 0.3.6's own
/// acceptance ellipsoids, `reference.py` there): `(angles, radius (z, y, x), accepted offsets,
/// offsets round-off may decide)`.
#[allow(clippy::type_complexity)]
fn pytme_ellipsoids() -> Vec<([f64; 3], Vec<f64>, Vec<[i64; 3]>, Vec<[i64; 3]>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/orientation/uncertainty/ellipsoids.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let offsets = |a: &serde_json::Value| -> Vec<[i64; 3]> {
        a.as_array()
            .unwrap()
            .iter()
            .map(|p| [0, 1, 2].map(|k| p[k].as_i64().unwrap()))
            .collect()
    };
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let angles = [0, 1, 2].map(|k| c["angles"][k].as_f64().unwrap());
            let radius = (0..3)
                .map(|k| c["radius_zyx"][k].as_f64().unwrap())
                .collect();
            (
                angles,
                radius,
                offsets(&c["inside_zyx"]),
                offsets(&c["near_surface_zyx"]),
            )
        })
        .collect()
}

/// An anisotropic neighbourhood lies along the seed's pose, as pytme's: the library's test
/// accepts exactly the offsets pytme's own `create_mask(…, orientation=Rᵀ)` accepts, for
/// seeds at several poses (axis-aligned before: the tilted cases failed).
#[test]
fn seed_neighbourhoods_are_pytmes_oriented_ellipsoids() {
    for (angles, radius, inside, near) in pytme_ellipsoids() {
        let pose = RotationSet::from_relion_euler(&[angles]).unwrap();
        let m = radius.iter().cloned().fold(0.0, f64::max) as i64;
        let c = m as usize;
        let seeds = Seeds::new(
            vec![Seed {
                position: vec![c; 3],
                rotations: 0..1,
                pose: Some(pose.matrix(0).to_vec()),
            }],
            radius.clone(),
        );
        let (_, lo, hi) = seeds.boxes(&[0; 3], &[2 * c + 1; 3]).next().unwrap();
        let mut checked = 0;
        for z in -m..=m {
            for y in -m..=m {
                for x in -m..=m {
                    let d = [z, y, x];
                    if near.contains(&d) {
                        continue;
                    }
                    let p: Vec<usize> = d.iter().map(|&v| (v + m) as usize).collect();
                    let ours = seeds.contains(&seeds.seeds[0], &p);
                    assert_eq!(ours, inside.contains(&d), "{angles:?} {radius:?} {d:?}");
                    if ours {
                        assert!((0..3).all(|k| lo[k] <= p[k] && p[k] < hi[k]), "{p:?} box");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 0 && !inside.is_empty());
    }
}

/// Through the command: the positions a seeded run searches around a tilted seed are pytme's
/// oriented ellipsoid (the STAR's angles become the seed's pose).
#[test]
fn seeded_run_searches_the_oriented_ellipsoid() {
    let dir = scratch("oriented");
    let cases = pytme_ellipsoids();
    let (angles, radius, inside, near) = &cases[2];
    assert!(near.is_empty());
    let target = ArrayD::from_shape_fn(IxDyn(&[20, 20, 20]), |i| {
        ((i[0] * 7 + i[1] * 3 + i[2]) % 11) as f32
    });
    let (t, m) = (dir.join("t.npy"), dir.join("m.npy"));
    ndarray_npy::write_npy(&t, &target).unwrap();
    ndarray_npy::write_npy(&m, &template(7)).unwrap();
    let star = dir.join("seed.star");
    let seed = [9usize, 10, 11]; // (z, y, x)
    std::fs::write(
        &star,
        format!(
            "data_particles\nloop_\n_rlnCoordinateX\n_rlnCoordinateY\n_rlnCoordinateZ\n\
             _rlnAngleRot\n_rlnAngleTilt\n_rlnAnglePsi\n{} {} {} {} {} {}\n",
            seed[2], seed[1], seed[0], angles[0], angles[1], angles[2]
        ),
    )
    .unwrap();
    let out = dir.join("o");
    let r = radius
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let s = |p: &Path| p.display().to_string();
    ok(&[
        "match",
        "--target",
        &s(&t),
        "--template",
        &s(&m),
        "--orientations",
        &s(&star),
        "--orientations-cone",
        "0",
        "--angular-step",
        "90",
        "--orientations-uncertainty",
        &r,
        "--out",
        &s(&out),
    ]);
    let scores: ArrayD<f32> = ndarray_npy::read_npy(out.join("scores.npy")).unwrap();
    let mut searched: Vec<[i64; 3]> = scores
        .indexed_iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, _)| [0, 1, 2].map(|k| i[k] as i64 - seed[k] as i64))
        .collect();
    searched.sort();
    let mut want = inside.clone();
    want.sort();
    assert_eq!(searched, want);
    let _ = std::fs::remove_dir_all(&dir);
}
