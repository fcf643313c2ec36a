//! Compiles every kernel source with NVRTC, for the newest and the oldest supported
//! architecture. Needs no GPU and no driver, only `libnvrtc.so` (CI installs the
//! `nvidia-cuda-nvrtc` wheel and puts its `lib` folder on `LD_LIBRARY_PATH`). Without NVRTC
//! the tests print a skip line, unless `MONOMORPH_REQUIRE_NVRTC=1`, which makes that a failure.

use monomorph_cuda::kernels;

/// The architectures the backend supports: Hopper, and the oldest CUDA 13's NVRTC accepts
/// (Turing, compute_75).
const ARCHS: &[&str] = &["compute_90", "compute_75"];

fn nvrtc_available() -> bool {
    if monomorph_cuda::libraries().nvrtc {
        return true;
    }
    if std::env::var("MONOMORPH_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("MONOMORPH_REQUIRE_NVRTC=1 but libnvrtc.so could not be loaded (LD_LIBRARY_PATH?)");
    }
    println!("skipped: libnvrtc.so not found (set MONOMORPH_REQUIRE_NVRTC=1 to make this fail)");
    false
}

#[test]
fn whole_module_compiles_for_every_arch() {
    if !nvrtc_available() {
        return;
    }
    let src = kernels::source();
    for arch in ARCHS {
        if let Err(e) = kernels::compile(&src, arch) {
            panic!("kernel module failed for {arch}: {e}");
        }
    }
}

#[test]
fn each_file_compiles_alone() {
    if !nvrtc_available() {
        return;
    }
    for (name, _) in kernels::FILES {
        let src = kernels::file_source(name).expect("listed file");
        if let Err(e) = kernels::compile(&src, "compute_90") {
            panic!("{name} failed: {e}");
        }
    }
}

#[test]
fn every_instantiation_is_in_the_ptx() {
    if !nvrtc_available() {
        return;
    }
    let ptx = kernels::compile(&kernels::source(), "compute_90")
        .expect("compiles")
        .to_src();
    let mut expected: Vec<String> = Vec::new();
    for t in ["f32", "f64"] {
        for k in [
            "ew_binary",
            "ew_binary_assign",
            "ew_scalar",
            "ew_unary",
            "ew_axpy",
            "c_mul_conj",
            "c_mul",
            "c_scale",
            "c_norm_sq",
            "matvec_dense",
            "matvec_csr",
            "laplacian",
            "scale_rows",
            "axpy_rows",
            "xpay_rows",
            "cg_update_xr",
            "affine",
            "laplace",
        ] {
            expected.push(format!("{k}_{t}"));
        }
        for i in ["i32", "i64"] {
            expected.push(format!("running_max_{t}_{i}"));
            expected.push(format!("score_max_{t}_{i}"));
        }
    }
    for t in ["f32", "f64", "i32", "i64"] {
        for k in ["reduce_rows", "extreme", "maxf1d", "maxfp", "peaks"] {
            expected.push(format!("{k}_{t}"));
        }
        for d in ["f32", "f64", "i32", "i64"] {
            expected.push(format!("cast_{t}_{d}"));
        }
    }
    for b in ["b1", "b4", "b8", "b16"] {
        expected.push(format!("fill_{b}"));
        expected.push(format!("rearrange_{b}"));
        expected.push(format!("insert_block_{b}"));
    }
    expected.push("spline_axis_f64".into());
    for name in expected {
        assert!(
            ptx.contains(&format!(".entry {name}(")),
            "kernel {name} missing from the PTX"
        );
    }
}

#[test]
fn a_broken_kernel_is_rejected_with_the_nvrtc_log() {
    if !nvrtc_available() {
        return;
    }
    let src = format!(
        "{}\nextern \"C\" __global__ void broken() {{ undefined_name(); }}\n",
        kernels::COMMON
    );
    let err = kernels::compile(&src, "compute_90").expect_err("must not compile");
    let msg = err.to_string();
    assert!(msg.contains("undefined_name"), "log missing from: {msg}");
}
