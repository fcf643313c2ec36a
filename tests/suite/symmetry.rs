//! `--symmetry`: the rotation set restricted to a point group's fundamental domain keeps the
//! rotations pytme 0.3.6's `reduce_rotations_by_symmetry` keeps, on pytme's own angular sets
//! (fixtures `tests/fixtures/rotations/symmetry/`, made by its `reference.py`), and the command
//! searches, records and checks it.

use monomorph::algo::rotations::{RotationSet, Symmetry, reverse_axes};
use ndarray::ArrayD;

use crate::common::npy;

const GROUPS: [&str; 6] = ["C2", "C3", "C4", "C6", "D2", "D3"];

/// pytme's matrices act on (x, y, z); monomorph's on (z, y, x): the same rotations are P·R·P.
fn pytme_set(step: u32) -> RotationSet {
    let r: ArrayD<f64> = npy(&format!("rotations/symmetry/rotations_{step}.npy"));
    let flat: Vec<f64> = r
        .as_slice()
        .expect("contiguous")
        .chunks(9)
        .flat_map(|m| reverse_axes(m, 3))
        .collect();
    RotationSet::from_matrices(3, &flat).expect("pytme's rotations")
}

#[test]
fn keeps_the_rotations_pytme_keeps() {
    for step in [30, 20] {
        let all = pytme_set(step);
        for g in GROUPS {
            let sym: Symmetry = g.parse().expect("group");
            let kept = all.reduce_by_symmetry(sym).expect("reduce");
            let want: ArrayD<i64> = npy(&format!("rotations/symmetry/kept_{step}_{g}.npy"));
            // The kept matrices are members of the set in its order: find their indices.
            let mut got = Vec::new();
            let mut j = 0;
            for i in 0..kept.len() {
                while all.matrix(j) != kept.matrix(i) {
                    j += 1;
                }
                got.push(j as i64);
                j += 1;
            }
            assert_eq!(
                got,
                want.iter().copied().collect::<Vec<_>>(),
                "{step}° {g}: {} kept here, {} by pytme",
                got.len(),
                want.len()
            );
        }
    }
}

#[cfg(feature = "cli")]
mod cli {
    use monomorph::algo::rotations::{RotationSet, Symmetry};
    use ndarray::{Array3, ArrayD};
    use ndarray_npy::{read_npy, write_npy};

    use crate::cli_peaks::{fails2, ok, p, scratch};

    #[test]
    fn match_searches_the_reduced_set_and_records_it() {
        let dir = scratch("symmetry");
        let target = Array3::<f32>::from_shape_fn((20, 20, 20), |(z, y, x)| {
            ((z * 7 + y * 3 + x) % 11) as f32
        });
        let template =
            Array3::<f32>::from_shape_fn((6, 6, 6), |(z, y, x)| ((z + 2 * y + 3 * x) % 5) as f32);
        let (t, tp) = (dir.join("t.npy"), dir.join("p.npy"));
        write_npy(&t, &target).expect("write");
        write_npy(&tp, &template).expect("write");
        let out = dir.join("o");
        let base = ["match", "-m", p(&t), "-i", p(&tp), "-a", "40", "-s", "cc"];
        let mut args = base.to_vec();
        args.extend(["--symmetry", "D2", "-o", p(&out), "--quiet"]);
        ok(&args);
        let rot: ArrayD<f32> = read_npy(out.join("rotations.npy")).expect("rotations.npy");
        let want = RotationSet::uniform(3, 40.0)
            .unwrap()
            .reduce_by_symmetry(Symmetry::Dihedral(2))
            .unwrap();
        assert_eq!(rot.shape()[0], want.len());
        let want32: Vec<f32> = want.as_flat().iter().map(|&v| v as f32).collect();
        assert_eq!(rot.as_slice().unwrap(), &want32[..]);
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
        assert_eq!(run["parameters"]["symmetry"], "D2", "{run}");
        assert_eq!(run["parameters"]["n_rotations"], want.len(), "{run}");
        let ri: ArrayD<i32> = read_npy(out.join("rotation_index.npy")).expect("index");
        assert!(ri.iter().all(|&i| (i as usize) < want.len()));

        // Bad groups and a 2-D dihedral group: exit 2 naming the flag, nothing written.
        let bad = dir.join("bad");
        for (g, needle) in [("T", "point group"), ("C0", "point group")] {
            let mut a = base.to_vec();
            a.extend(["--symmetry", g, "-o", p(&bad)]);
            let e = fails2(&a);
            assert!(e.contains("--symmetry") && e.contains(needle), "{e}");
        }
        let img = Array3::<f32>::from_shape_fn((1, 16, 16), |(_, y, x)| (x * y % 7) as f32)
            .into_shape_with_order((16, 16))
            .unwrap();
        let tpl = Array3::<f32>::from_shape_fn((1, 5, 5), |(_, y, x)| (x + y) as f32)
            .into_shape_with_order((5, 5))
            .unwrap();
        let (i2, t2) = (dir.join("i2.npy"), dir.join("t2.npy"));
        write_npy(&i2, &img).unwrap();
        write_npy(&t2, &tpl).unwrap();
        let e = fails2(&[
            "match",
            "-m",
            p(&i2),
            "-i",
            p(&t2),
            "--symmetry",
            "D2",
            "-o",
            p(&bad),
        ]);
        assert!(e.contains("--symmetry D2") && e.contains("3-D"), "{e}");
        assert!(!bad.exists());
    }
}
