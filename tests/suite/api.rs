//! The public API as a user crate meets it: the README's snippet, the examples (run here with
//! their assertions, in both precisions), typed transfers, and the small conveniences.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};

use monomorph::ndarray::{Array1, Array2, Array3, ArrayD, Ix1, Ix2, IxDyn};
use monomorph::prelude::*;

/// The README's program, included as it stands (its `main` is private to this module).
mod readme {
    include!("../../examples/readme.rs");
    pub fn run() -> monomorph::Result<()> {
        main()
    }
}

#[allow(dead_code)]
#[path = "../../examples/match_peaks.rs"]
mod match_peaks;

#[allow(dead_code)]
#[path = "../../examples/cg.rs"]
mod cg_example;

#[allow(dead_code)]
#[path = "../../examples/ops.rs"]
mod ops_example;

#[allow(dead_code)]
#[path = "../../examples/devices.rs"]
mod devices_example;

#[test]
fn devices_example_merges_two_cpu_workers_bit_for_bit() {
    let score = devices_example::run().expect("examples/devices.rs");
    assert!(score > 0.9, "{score}");
}

#[test]
fn readme_shows_the_readme_example_byte_for_byte() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let example =
        std::fs::read_to_string(format!("{root}/examples/readme.rs")).expect("examples/readme.rs");
    let block = format!("```rust\n{example}```\n");
    assert!(
        readme.contains(&block),
        "README.md's Rust block must be examples/readme.rs verbatim (copy the file into it)"
    );
}

#[test]
fn readme_example_runs() {
    readme::run().expect("the README's program");
}

#[test]
fn example_match_peaks_finds_every_planted_copy() {
    for peaks in [
        match_peaks::run(&Cpu::<Single>::new()).expect("single"),
        match_peaks::run(&Cpu::<Double>::new()).expect("double"),
    ] {
        assert_eq!(peaks.len(), match_peaks::PLANTED.len());
    }
}

#[test]
fn example_cg_solves_with_own_and_built_in_operators() {
    let single = cg_example::run(&Cpu::<Single>::new()).expect("single");
    let double = cg_example::run(&Cpu::<Double>::new()).expect("double");
    // The double solve is held to a tighter tolerance and must meet it.
    assert!(double.iter().all(|&r| r < 1e-8), "{double:?}");
    assert!(single.iter().all(|&r| r < 1e-3), "{single:?}");
}

#[test]
fn example_ops_recovers_a_shift_and_blurs_like_a_direct_convolution() {
    let single = ops_example::run(&Cpu::<Single>::new()).expect("single");
    let double = ops_example::run(&Cpu::<Double>::new()).expect("double");
    assert!(double < 1e-12, "{double:e}");
    assert!(single < 1e-4, "{single:e}");
}

#[test]
fn upload_array_takes_any_real_type_and_dimension() {
    let b = Cpu::<Single>::new();
    let ints = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as i32 - 5);
    let a = b.upload_array(&ints).expect("i32");
    assert_eq!(a.shape(), &[3, 4]);
    assert_eq!(b.download_as::<i64, Ix2>(&a).unwrap(), ints.mapv(i64::from));

    let bytes = Array1::from_vec(vec![0u8, 7, 255]);
    let a = b.upload_array(&bytes).expect("u8");
    assert_eq!(
        b.download_as::<f32, Ix1>(&a).unwrap().to_vec(),
        vec![0.0, 7.0, 255.0]
    );
    let shorts = Array1::from_vec(vec![-300i16, 300]);
    let a = b.upload_array(&shorts).expect("i16");
    assert_eq!(b.download_as::<i16, Ix1>(&a).unwrap(), shorts);

    // f64 into a single-precision backend rounds as `as` does.
    let d = Array1::from_vec(vec![0.1f64, 1e300]);
    let a = b.upload_array(&d).expect("f64");
    assert_eq!(
        b.download_as::<f32, Ix1>(&a).unwrap().to_vec(),
        vec![0.1f32, f32::INFINITY]
    );

    // A non-standard layout (a transposed view) keeps its logical order, in the same type too.
    let m = Array2::from_shape_fn((2, 3), |(i, j)| (10 * i + j) as f32);
    let t = m.t();
    let a = b.upload_array(&t).expect("transposed");
    assert_eq!(b.download_as::<f32, Ix2>(&a).unwrap(), t.to_owned());
    // Same type, standard layout, IxDyn: the no-copy path.
    let dynamic = m.clone().into_dyn();
    let a = b.upload_array(&dynamic.view()).expect("dyn view");
    assert_eq!(b.download_as::<f32, IxDyn>(&a).unwrap(), dynamic);
}

#[test]
fn download_as_reports_a_dimension_mismatch() {
    let b = Cpu::<Double>::new();
    let a = b.upload_array(&Array3::<f64>::zeros((2, 3, 4))).unwrap();
    let err = b.download_as::<f64, Ix2>(&a).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Shape { .. }), "{msg}");
    assert!(
        msg.contains("2 axes") && msg.contains("3 axes") && msg.contains("(2, 3, 4)"),
        "{msg}"
    );
    // Index arrays download too.
    let i = b
        .upload(ArrayD::from_elem(IxDyn(&[2]), 3i64).view())
        .unwrap();
    assert_eq!(
        b.download_as::<f32, Ix1>(&i).unwrap().to_vec(),
        vec![3.0, 3.0]
    );
}

#[test]
fn match_result_peaks_equals_find_peaks_with_rotations() {
    let b = Cpu::<Single>::new();
    let (template, mask) = match_peaks::particle();
    let volume = match_peaks::volume(&template);
    let (v, t, m) = (
        b.upload_array(&volume).unwrap(),
        b.upload_array(&template).unwrap(),
        b.upload_array(&mask).unwrap(),
    );
    let mut params = MatchParams::new(Score::FLC, RotationSet::uniform(3, 120.0).unwrap());
    params.template_mask = Some(&m);
    let result = match_template(&b, &v, &t, &params).unwrap();
    let pp = PeakParams::with_min_distance(3);
    let ours = result.peaks(&b, &pp).unwrap();
    let theirs = find_peaks_with_rotations(
        &b,
        &result.scores,
        &pp,
        &result.rotation_index,
        result.rotations.to_array().view(),
    )
    .unwrap();
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs);
}

/// One counting closure (an atomic counter: `Fn + Sync`) serves both the matching progress
/// callback and CG's observer (which takes any `FnMut`, so a plain `n += 1` closure works there
/// too).
#[test]
fn one_counting_closure_serves_matching_progress_and_cg_observer() {
    let b = Cpu::<Single>::new();
    let calls = AtomicUsize::new(0);
    let count = |_: usize, _: usize| {
        calls.fetch_add(1, Ordering::Relaxed);
        ControlFlow::Continue(())
    };

    let target = b.upload_array(&Array2::<f32>::ones((16, 16))).unwrap();
    let template = b.upload_array(&Array2::<f32>::ones((4, 4))).unwrap();
    let mut params = MatchParams::new(Score::CC, RotationSet::uniform(2, 90.0).unwrap());
    params.progress = Some(&count);
    match_template(&b, &target, &template, &params).unwrap();
    let after_matching = calls.load(Ordering::Relaxed);
    assert_eq!(after_matching, 4, "one call per rotation");

    let op = LaplacianOperator::new(&[8], Boundary::DirichletZero).unwrap();
    let y = b.upload_array(&Array2::<f32>::ones((1, 8))).unwrap();
    let res = conjugate_gradient_observed(&b, &op, &y, None, &SolveParams::default(), |_| {
        let _ = count(0, 0);
    })
    .unwrap();
    assert_eq!(
        calls.load(Ordering::Relaxed) - after_matching,
        1 + res.iterations[0]
    );

    let mut steps = 0;
    conjugate_gradient_observed(&b, &op, &y, None, &SolveParams::default(), |_| steps += 1)
        .unwrap();
    assert_eq!(steps, 1 + res.iterations[0]);
}

#[test]
fn label_says_the_precision() {
    assert_eq!(Cpu::<Single>::new().label(), "cpu (single)");
    assert_eq!(Cpu::<Double>::new().label(), "cpu (double)");
    assert_eq!(Cpu::<Double>::new().name(), "cpu");
}

#[test]
fn not_compiled_tells_a_dependency_user_which_feature_to_enable() {
    let msg = Error::NotCompiled("cuda").to_string();
    assert!(
        msg.contains("`cuda` feature of the `monomorph` crate"),
        "{msg}"
    );
    assert!(msg.contains("features = [\"cuda\"]"), "{msg}");
}

#[test]
fn rayon_pool_install_bounds_the_cpu_backend_threads() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let processors = pool.install(|| Cpu::<Single>::new().device().processors);
    assert_eq!(processors, 1);
}

/// `Cpu::with_threads(n)`: a pool of the backend's own, reported by `threads()` and the device
/// info; 0 threads is an error naming the argument; results are bit-identical to rayon's
/// global pool for 1 and 3 threads (ops entered from outside and inside `install`).
#[test]
fn own_thread_pool_is_reported_and_changes_no_bit() {
    let e = Cpu::<Single>::with_threads(0).expect_err("0 threads");
    assert!(e.to_string().contains("threads"), "{e}");
    let global = match_peaks::run(&Cpu::<Single>::new()).expect("global pool");
    for n in [1, 3] {
        let cpu = Cpu::<Single>::with_threads(n).expect("pool");
        assert_eq!(cpu.threads(), n);
        let d = cpu.device();
        assert_eq!(d.processors, n);
        assert!(
            d.description.contains(&format!("{n} own threads")),
            "{}",
            d.description
        );
        assert_eq!(
            match_peaks::run(&cpu).expect("own pool"),
            global,
            "{n} threads"
        );
        let inside = cpu
            .install(|| match_peaks::run(&cpu))
            .expect("inside install");
        assert_eq!(inside, global, "{n} threads, inside install");
        // A backend of the other precision made from it shares the pool.
        assert_eq!(Cpu::<Double>::sharing(&cpu).threads(), n);
    }
}
