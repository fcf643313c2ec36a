//! Compiles every kernel source with NVRTC, for the newest and the oldest supported
//! architecture. Needs no GPU and no driver, only `libnvrtc.so` (CI installs the
//! `nvidia-cuda-nvrtc` wheel and puts its `lib` folder on `LD_LIBRARY_PATH`). Without NVRTC
//! the tests print a skip line, unless `MONOMORPH_REQUIRE_NVRTC=1`, which makes that a failure.
//!
//! Not built under the `cpu-stand-in` feature: nothing here runs on a device, so the default
//! test build already runs all of it (and NVRTC's compiles are the slowest tests of the crate).
#![cfg(not(feature = "cpu-stand-in"))]

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

/// Every kernel name the backend launches, in every precision and dtype it serves.
fn expected_kernels() -> Vec<String> {
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
            "axpy_pair_rows",
            "affine",
            "laplace",
        ] {
            expected.push(format!("{k}_{t}"));
        }
        for i in ["i32", "i64"] {
            expected.push(format!("score_max_{t}_{i}"));
        }
        expected.push(format!("spectrum_mul_conj_{t}"));
        expected.push(format!("std_sums_{t}"));
        expected.push(format!("std_apply_{t}"));
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
    expected.push("ssum_add".into());
    expected.extend(extra_kernels());
    expected
}

/// Kernels added after the first list (gather, van Herk max filter, top-k).
fn extra_kernels() -> Vec<String> {
    let mut v = Vec::new();
    for b in ["b1", "b4", "b8", "b16"] {
        v.push(format!("gather_{b}"));
    }
    for t in ["f32", "f64", "i32", "i64"] {
        for k in ["maxf1d_vh", "maxf1d_tile", "topk_hist", "topk_select"] {
            v.push(format!("{k}_{t}"));
        }
    }
    // The fused CG kernels (dots in f64 per block, summed in a fixed order).
    for t in ["f32", "f64"] {
        for k in [
            "laplacian_dot",
            "axpy_pair_rows_dots",
            "xpay_rows_masked",
            "matvec_dense_dot",
            "matvec_csr_dot",
            "axpy_pair_rows_ratio",
            "stencil",
            "stencil_dot",
        ] {
            v.push(format!("{k}_{t}"));
        }
    }
    v.push("row_partials_into".into());
    // The matching loop's windowed and two-pass kernels (MCC, standardisation).
    for t in ["f32", "f64"] {
        for k in [
            "inverse_denominator",
            "gather_window",
            "mcc_pass1",
            "mcc_pass2",
        ] {
            v.push(format!("{k}_{t}"));
        }
    }
    v.push("reduce_partials2".into());
    v
}

/// The kernel names defined in a PTX module (its `.entry` lines).
fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| {
            let rest = &l[l.find(".entry ")? + ".entry ".len()..];
            Some(rest[..rest.find('(')?].trim().to_string())
        })
        .collect()
}

/// The list above is every kernel of the module, not a sample: a kernel the module defines
/// but the list lacks (so the CUBIN check would not look for it) fails here.
#[test]
fn the_list_names_every_kernel_of_the_module() {
    if !nvrtc_available() {
        return;
    }
    let ptx = kernels::compile(&kernels::source(), "compute_90")
        .expect("compiles")
        .to_src();
    let listed = expected_kernels();
    let entries = ptx_entries(&ptx);
    assert!(entries.len() > 100, "{} entries parsed", entries.len());
    let unlisted: Vec<&String> = entries.iter().filter(|e| !listed.contains(e)).collect();
    assert!(
        unlisted.is_empty(),
        "kernels the module defines but the list lacks: {unlisted:?}"
    );
    let mut dedup = listed.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), listed.len(), "a kernel listed twice");
}

#[test]
fn every_instantiation_is_in_the_ptx() {
    if !nvrtc_available() {
        return;
    }
    let ptx = kernels::compile(&kernels::source(), "compute_90")
        .expect("compiles")
        .to_src();
    for name in expected_kernels() {
        assert!(
            ptx.contains(&format!(".entry {name}(")),
            "kernel {name} missing from the PTX"
        );
    }
}

/// Whether `bin` holds `name` as a NUL-terminated symbol string.
fn has_symbol(bin: &[u8], name: &str) -> bool {
    let mut pat = Vec::with_capacity(name.len() + 2);
    pat.push(0u8);
    pat.extend_from_slice(name.as_bytes());
    pat.push(0u8);
    bin.windows(pat.len()).any(|w| w == pat.as_slice())
}

/// The backend loads a CUBIN for the device's own sm_XY: every kernel, in every precision,
/// must compile to machine code for Hopper (sm_90) and for the oldest architecture CUDA 13's
/// NVRTC accepts (sm_75), and every instantiation must be a symbol of the image.
#[test]
fn whole_module_compiles_to_cubin_for_every_arch() {
    if !nvrtc_available() {
        return;
    }
    let src = kernels::source();
    let names = expected_kernels();
    for arch in ["sm_90", "sm_75"] {
        let bin = if arch == "sm_90" {
            // The image the backend itself builds for an H200 (cached for the next test).
            let img = kernels::module_image((9, 0)).expect("sm_90 image");
            assert_eq!(img.description, "CUBIN sm_90");
            img.cubin_bytes.expect("a CUBIN")
        } else {
            kernels::compile_cubin(&src, arch)
                .unwrap_or_else(|e| panic!("CUBIN for {arch} failed: {e}"))
        };
        assert_eq!(&bin[..4], b"\x7fELF", "{arch}: a CUBIN is an ELF image");
        for name in &names {
            assert!(
                has_symbol(&bin, name),
                "kernel {name} missing from the {arch} CUBIN"
            );
        }
    }
}

/// The image the backend would load on an H200 is a CUBIN; a device this NVRTC does not
/// know falls back to PTX for an architecture it does know, and says so.
#[test]
fn module_image_prefers_cubin_and_falls_back_to_ptx() {
    if !nvrtc_available() {
        return;
    }
    let archs = kernels::supported_archs();
    assert!(
        archs.contains(&75) && archs.contains(&90),
        "NVRTC archs {archs:?}"
    );
    let img = kernels::module_image((9, 0)).expect("sm_90 image");
    assert!(img.cubin, "{}", img.description);
    assert_eq!(img.description, "CUBIN sm_90");
    // A capability far beyond this NVRTC: no CUBIN, PTX for its newest architecture.
    let img = kernels::module_image((99, 9)).expect("fallback image");
    assert!(!img.cubin);
    let newest = archs.iter().max().unwrap();
    assert!(
        img.description
            .starts_with(&format!("PTX compute_{newest} (CUBIN for sm_999 failed")),
        "{}",
        img.description
    );
}

#[test]
fn cubin_needs_a_real_architecture() {
    if !nvrtc_available() {
        return;
    }
    let err = kernels::compile_cubin(kernels::COMMON, "compute_90").unwrap_err();
    assert!(err.to_string().contains("sm_XY"), "{err}");
    let src = format!(
        "{}\nextern \"C\" __global__ void broken() {{ undefined_name(); }}\n",
        kernels::COMMON
    );
    let err = kernels::compile_cubin(&src, "sm_90").expect_err("must not compile");
    assert!(err.to_string().contains("undefined_name"), "{err}");
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

/// The module is compiled without multiply-add contraction, so a kernel that computes in the
/// CPU's order rounds as the CPU does (`a·b + c` is two roundings there): the PTX of a plain
/// `a * b + c` must hold a separate multiply and add, no `fma`.
#[test]
fn no_multiply_add_contraction() {
    if !nvrtc_available() {
        return;
    }
    let src = "extern \"C\" __global__ void k(float *f, double *d) {\n\
               f[0] = f[1] * f[2] + f[3];\n\
               d[0] = d[1] * d[2] + d[3];\n}\n";
    for arch in ARCHS {
        let ptx = kernels::compile(src, arch)
            .expect("tiny kernel compiles")
            .to_src();
        assert!(!ptx.contains("fma."), "{arch}: contracted to fma:\n{ptx}");
        assert!(
            ptx.contains("mul.") && ptx.contains("add."),
            "{arch}: {ptx}"
        );
    }
}

/// The PTX body of kernel `name` (from its `.entry` to the next one).
fn entry_body<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("kernel {name} missing from the PTX"));
    let rest = &ptx[start + 1..];
    let end = rest.find(".entry ").map_or(rest.len(), |e| e);
    &rest[..end]
}

#[test]
fn spectrum_products_are_not_contracted_to_fma() {
    // The CPU backend rounds each real product of a complex product on its own; an FMA would
    // change the last bit of every matching score's spectrum. (NVRTC contracts by default.)
    if !nvrtc_available() {
        return;
    }
    let ptx = kernels::compile(&kernels::source(), "compute_90")
        .expect("compiles")
        .to_src();
    for t in ["f32", "f64"] {
        for k in ["spectrum_mul_conj", "c_mul_conj", "c_mul", "c_norm_sq"] {
            let name = format!("{k}_{t}");
            let body = entry_body(&ptx, &name);
            assert!(
                body.contains("mul.rn."),
                "{name}: no rounded multiply in\n{body}"
            );
            assert!(
                !body.contains("fma."),
                "{name} contracts a product into an FMA"
            );
            // A float multiply without `.rn` may still be fused by ptxas.
            assert!(
                !body.contains("mul.f32") && !body.contains("mul.f64"),
                "{name}: a float multiply ptxas may contract"
            );
        }
    }
}
