//! Rotation sets users have (issue 17, item 4): pytme's own Karney sets
//! (`--angular-sampling-set pytme`), cones around seed orientations (`--orientations`,
//! `--orientations-cone`), and reflections. Fixtures: `tests/fixtures/pytme_sets/` (pytme
//! 0.3.6's matrices, made by its `reference.py`).

use monomorph::algo::rotations::{RotationSet, axis_angle_between, reverse_axes};
use ndarray::ArrayD;

use crate::common::npy;

/// A fixture's pytme matrices (acting on (x, y, z)) in monomorph's frame: P·R·P.
fn pytme_matrices(name: &str) -> Vec<Vec<f64>> {
    let r: ArrayD<f64> = npy(&format!("pytme_sets/{name}.npy"));
    r.as_slice()
        .expect("contiguous")
        .chunks(9)
        .map(|m| reverse_axes(m, 3))
        .collect()
}

fn max_diff(set: &RotationSet, want: &[Vec<f64>]) -> f64 {
    assert_eq!(set.len(), want.len(), "number of rotations");
    (0..set.len())
        .flat_map(|i| {
            set.matrix(i)
                .iter()
                .zip(&want[i])
                .map(|(a, b)| (a - b).abs())
        })
        .fold(0.0, f64::max)
}

#[test]
fn pytme_sets_are_pytmes_matrices_in_order() {
    for (step, name) in [
        (62.8, "set_62.8"),
        (44.48, "set_44.48"),
        (36.47, "set_36.47"),
    ] {
        let want = pytme_matrices(name);
        // pytme picks the set nearest the step: any step closer to it than to its neighbours.
        for s in [step, step + 0.1] {
            let d = max_diff(&RotationSet::pytme(s).unwrap(), &want);
            assert!(d <= 1e-15, "{s}°: max |Δ| {d:e} against pytme");
        }
    }
}

#[test]
fn cones_are_pytmes_get_cone_rotations() {
    for (cone, step, inplane) in [(30.0, 10.0, 30.0), (0.0, 10.0, 90.0), (60.0, 25.0, 45.0)] {
        let want = pytme_matrices(&format!("cone_{cone}_{step}_{inplane}"));
        let got = RotationSet::cone(cone, step, inplane).unwrap();
        // pytme rounds its aligning matrices to float32.
        let d = max_diff(&got, &want);
        assert!(d < 1e-6, "cone {cone} {step} {inplane}: max |Δ| {d:e}");
        let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        let widest = (0..got.len())
            .map(|i| axis_angle_between(got.matrix(i), &id))
            .fold(0.0, f64::max);
        assert!(widest <= cone + 1e-9, "{widest} > {cone}");
        // The Fibonacci cap reaches out to the cone: its last ring is within one step of it.
        assert!(widest > cone - step, "{widest} vs {cone}");
    }
}

#[test]
fn cones_around_seeds_contain_them_and_stay_within_the_angle() {
    let seeds =
        RotationSet::from_relion_euler(&[[40.0, 70.0, -110.0], [-150.0, 10.0, 20.0]]).unwrap();
    let cone = RotationSet::cone(15.0, 5.0, 20.0).unwrap();
    let r = RotationSet::around_seeds(&seeds, 15.0, 5.0, 20.0).unwrap();
    let per = cone.len() + 1;
    assert_eq!(r.len(), 2 * per);
    for s in 0..2 {
        assert_eq!(r.matrix(s * per), seeds.matrix(s), "the seed comes first");
        for i in 0..per {
            let a = axis_angle_between(r.matrix(s * per + i), seeds.matrix(s));
            assert!(a <= 15.0 + 1e-9, "seed {s} member {i}: {a}°");
        }
        // The spins: members sharing an axis differ by rotations about the template's own z.
        let (m1, m2) = (r.matrix(s * per + 1), r.matrix(s * per + 2));
        // (acos near 1 amplifies round-off: 1 ulp of the cosine is ~1e-6°.)
        assert!(axis_angle_between(m1, m2) < 1e-4);
        assert!(m1 != m2);
    }
}

#[test]
fn reflections_are_refused_with_the_matrix_index() {
    let mut flat = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    flat.extend([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0]);
    let e = RotationSet::from_matrices(3, &flat)
        .unwrap_err()
        .to_string();
    assert!(e.contains("matrix 1") && e.contains("reflection"), "{e}");
    assert!(e.contains("mirror"), "{e}");
}

#[cfg(feature = "cli")]
mod cli {
    use monomorph::algo::rotations::RotationSet;
    use ndarray::{Array2, Array3, ArrayD};
    use ndarray_npy::{read_npy, write_npy};

    use crate::cli_peaks::{fails2, ok, p, run, scratch};

    /// A tiny 3-D job: target, template; returns the base arguments.
    fn job(dir: &std::path::Path) -> (String, String) {
        let target = Array3::<f32>::from_shape_fn((12, 12, 12), |(z, y, x)| {
            ((z * 7 + y * 3 + x) % 11) as f32
        });
        let template =
            Array3::<f32>::from_shape_fn((4, 4, 4), |(z, y, x)| ((z + 2 * y + 3 * x) % 5) as f32);
        let (t, tp) = (dir.join("t.npy"), dir.join("p.npy"));
        write_npy(&t, &target).expect("write");
        write_npy(&tp, &template).expect("write");
        (p(&t).to_string(), p(&tp).to_string())
    }

    fn rotations(out: &std::path::Path) -> ArrayD<f32> {
        read_npy(out.join("rotations.npy")).expect("rotations.npy")
    }

    fn assert_set(got: &ArrayD<f32>, want: &RotationSet) {
        assert_eq!(got.shape()[0], want.len());
        for (g, w) in got.iter().zip(want.as_flat()) {
            assert!((*g as f64 - w).abs() < 1e-6, "{g} vs {w}");
        }
    }

    #[test]
    fn pytme_set_runs_and_says_what_is_built_in() {
        let dir = scratch("pytme-set");
        let (t, tp) = job(&dir);
        let out = dir.join("o");
        let base = ["match", "-m", &t, "-i", &tp, "-s", "cc", "--quiet"];
        let mut a = base.to_vec();
        a.extend(["-a", "36", "--angular-sampling-set", "pytme", "-o", p(&out)]);
        ok(&a);
        assert_set(&rotations(&out), &RotationSet::pytme(36.0).unwrap());
        // A set that is not built in: exit 2, naming it and the way out.
        let mut a = base.to_vec();
        a.extend(["-a", "10", "--angular-sampling-set", "pytme", "-o", p(&out)]);
        let e = fails2(&a);
        assert!(e.contains("c48n309") && e.contains("--pytme-data"), "{e}");
        // Read from a pytme data folder: (n, 5) rows w, x, y, z, weight.
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let q = monomorph::algo::rotations::embedded_quaternions("c48n9").unwrap();
        let rows = Array2::from_shape_fn(
            (7416, 5),
            |(i, k)| {
                if k == 4 { 1.0 } else { q[i % q.len()][k] }
            },
        );
        let mut a = base.to_vec();
        let out2 = dir.join("o2");
        a.extend([
            "-a",
            "10",
            "--angular-sampling-set",
            "pytme",
            "-o",
            p(&out2),
        ]);
        a.extend(["--pytme-data", p(&data)]);
        let e = fails2(&a);
        assert!(e.contains("c48n309.npy"), "{e}");
        write_npy(data.join("c48n309.npy"), &rows).unwrap();
        ok(&a);
        let got = rotations(&out2);
        assert_eq!(got.shape()[0], 7416);
        let first = RotationSet::from_pytme_quaternions(&q[..1]).unwrap();
        assert_set(
            &got.slice(ndarray::s![0..1, .., ..]).to_owned().into_dyn(),
            &first,
        );
        // A wrong shape names the file.
        write_npy(data.join("c48n309.npy"), &Array2::<f64>::zeros((3, 5))).unwrap();
        let e = fails2(&a);
        assert!(e.contains("(7416, 5)"), "{e}");
        // 2-D targets have no Karney sets.
        let t2 = dir.join("t2.npy");
        write_npy(&t2, &ndarray::Array2::<f32>::ones((8, 8))).unwrap();
        let p2 = dir.join("p2.npy");
        write_npy(&p2, &ndarray::Array2::<f32>::ones((3, 3))).unwrap();
        let e = fails2(&[
            "match",
            "-m",
            p(&t2),
            "-i",
            p(&p2),
            "--angular-sampling-set",
            "pytme",
            "-o",
            p(&out),
            "--quiet",
        ]);
        assert!(e.contains("3-D"), "{e}");
        // Conflicting sets are a usage error (exit 2).
        let o = run(&[
            "match",
            "-m",
            &t,
            "-i",
            &tp,
            "--angular-sampling-set",
            "pytme",
            "--euler",
            "x.csv",
            "-o",
            p(&out),
        ]);
        assert_eq!(o.status.code(), Some(2));
    }

    #[test]
    fn orientations_cone_runs_and_bad_inputs_exit_2() {
        let dir = scratch("orientations");
        let (t, tp) = job(&dir);
        let star = dir.join("seeds.star");
        std::fs::write(
            &star,
            "data_particles\n\nloop_\n_rlnCoordinateX #1\n_rlnCoordinateY #2\n\
             _rlnCoordinateZ #3\n_rlnAngleRot #4\n_rlnAngleTilt #5\n_rlnAnglePsi #6\n\
             5 5 5 30 60 -90\n6 6 6 30 60 -90\n7 7 7 -120 20 45\n",
        )
        .unwrap();
        let out = dir.join("o");
        let base = [
            "match",
            "-m",
            &t,
            "-i",
            &tp,
            "-s",
            "cc",
            "--quiet",
            "-o",
            p(&out),
        ];
        let mut a = base.to_vec();
        a.extend([
            "--orientations",
            p(&star),
            "--orientations-cone",
            "20",
            "-a",
            "10",
        ]);
        a.extend(["--orientations-inplane-step", "45"]);
        ok(&a);
        let seeds =
            RotationSet::from_relion_euler(&[[30.0, 60.0, -90.0], [-120.0, 20.0, 45.0]]).unwrap();
        let want = RotationSet::around_seeds(&seeds, 20.0, 10.0, 45.0).unwrap();
        assert_eq!(want.len(), 2 * (13 * 8 + 1));
        assert_set(&rotations(&out), &want);
        // Bad inputs: one line, exit 2, naming the flag and file.
        let bad = dir.join("bad.star");
        std::fs::write(&bad, "data_\nloop_\n_rlnAngleRot\n_rlnAngleTilt\n1 2\n").unwrap();
        let mut a = base.to_vec();
        a.extend(["--orientations", p(&bad), "--orientations-cone", "20"]);
        let e = fails2(&a);
        assert!(
            e.contains("--orientations") && e.contains("_rlnAnglePsi"),
            "{e}"
        );
        std::fs::write(
            &bad,
            "loop_\n_rlnAngleRot\n_rlnAngleTilt\n_rlnAnglePsi\n1 2 nan\n",
        )
        .unwrap();
        let e = fails2(&a);
        assert!(e.contains("line 5"), "{e}");
        let mut a = base.to_vec();
        a.extend(["--orientations", p(&star), "--orientations-cone", "200"]);
        let e = fails2(&a);
        assert!(e.contains("--orientations-cone 200"), "{e}");
        let missing = dir.join("missing.star");
        let mut a = base.to_vec();
        a.extend(["--orientations", p(&missing), "--orientations-cone", "5"]);
        let e = fails2(&a);
        assert!(e.contains("missing.star"), "{e}");
        // --orientations without a cone, or a cone without seeds: usage errors.
        let mut a = base.to_vec();
        a.extend(["--orientations", p(&star)]);
        assert_eq!(run(&a).status.code(), Some(2));
        let mut a = base.to_vec();
        a.extend(["--orientations-cone", "5"]);
        assert_eq!(run(&a).status.code(), Some(2));
    }

    #[test]
    fn reflections_in_rotation_files_are_refused_naming_file_and_index() {
        let dir = scratch("reflections");
        let (t, tp) = job(&dir);
        let mut r = Array3::<f32>::zeros((3, 3, 3));
        for i in 0..3 {
            for k in 0..3 {
                r[[i, k, k]] = 1.0;
            }
        }
        r[[2, 0, 0]] = -1.0;
        let rp = dir.join("r.npy");
        write_npy(&rp, &r).unwrap();
        let out = dir.join("o");
        let e = fails2(&[
            "match",
            "-m",
            &t,
            "-i",
            &tp,
            "--rotations",
            p(&rp),
            "-o",
            p(&out),
            "--quiet",
        ]);
        assert!(e.contains("r.npy") && e.contains("matrix 2"), "{e}");
        assert!(e.contains("reflection"), "{e}");
    }
}
