//! Argument rules shared by every backend (the CPU is the reference).

use crate::backend::*;
use crate::dtype::{Float, Index, Real};

/// The argument rules on which the CPU is the reference and every backend must agree: an
/// empty `affine_transform` source is an error (not zeros), `flip` rejects a repeated axis
/// (not a double flip), `affine_transform` takes 1 to 3 axes, `laplacian_dot` needs one
/// `active` flag per row (a short list is not "all active").
pub fn cpu_reference_argument_rules<B: Backend>(b: &B) {
    let d = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let mut same = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let e = b
        .flip(&d, &[1, 1], &mut same)
        .expect_err("repeated flip axis");
    assert!(e.to_string().contains("repeated"), "{e}");
    let empty = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    let id2 = [1.0, 0.0, 0.0, 1.0];
    let e = b
        .affine_transform(&empty, &id2, &[0.0; 2], Interpolation::Linear, &mut same)
        .expect_err("empty source");
    assert!(matches!(e, crate::Error::Empty(_)), "{e}");
    let mut nothing = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    b.affine_transform(&d, &id2, &[0.0; 2], Interpolation::Linear, &mut nothing)
        .expect("an empty destination has nothing to do");
    let mut id4 = [0.0; 16];
    for k in 0..4 {
        id4[k * 5] = 1.0;
    }
    let v4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    let mut w4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    assert!(
        b.affine_transform(&v4, &id4, &[0.0; 4], Interpolation::Linear, &mut w4)
            .is_err(),
        "4-D affine_transform"
    );
    let x = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    for active in [&[true][..], &[], &[true, false, true, true]] {
        assert!(
            b.laplacian_dot(&[3, 4], Boundary::DirichletZero, &x, &mut y, active)
                .is_err(),
            "laplacian_dot with {} flags for 3 rows",
            active.len()
        );
    }
    let dots = b
        .laplacian_dot(
            &[3, 4],
            Boundary::DirichletZero,
            &x,
            &mut y,
            &[true, false, true],
        )
        .expect("laplacian_dot");
    assert_eq!(dots.len(), 3);
}

// ---------------------------------------------------------------------------------------------
// The exact error of each argument mistake, op family by op family. The checks live beside each
// trait (`backend/ops/<family>.rs`) and every backend calls them, so the same mistake reads the
// same on every backend: these tests pin the text (argument, expectation, value).

/// Asserts that `r` failed with exactly the message `want`.
#[track_caller]
fn fails_with<T: std::fmt::Debug>(r: crate::Result<T>, want: &str) {
    match r {
        Ok(v) => panic!("expected the error `{want}`, got Ok({v:?})"),
        Err(e) => assert_eq!(e.to_string(), want),
    }
}

fn z<B: Backend>(b: &B, shape: &[usize]) -> Arr<B, FloatOf<B>> {
    b.zeros::<FloatOf<B>>(shape).expect("zeros")
}

/// Memory: `copy`, `cast` and `reshape`.
pub fn validation_memory<B: Backend>(b: &B) {
    let (a, mut t) = (z(b, &[2, 3]), z(b, &[3, 2]));
    fails_with(
        b.copy(&a, &mut t),
        "shape mismatch in copy: dst vs src: expected (2, 3), got (3, 2)",
    );
    let mut d = b.zeros::<f64>(&[6]).expect("zeros");
    fails_with(
        b.cast(&a, &mut d),
        "shape mismatch in cast: dst vs src: expected (2, 3), got (6,)",
    );
    fails_with(
        b.reshape(a, &[4, 2]).map(|_| ()),
        "shape mismatch in reshape: expected a shape with 6 elements, got (4, 2)",
    );
}

/// Elementwise: every op names itself and both arrays.
pub fn validation_elementwise<B: Backend>(b: &B) {
    let (a, t, r) = (z(b, &[2, 3]), z(b, &[3, 2]), z(b, &[6]));
    let mut out = z(b, &[2, 3]);
    fails_with(
        b.binary(BinaryOp::Add, &a, &t, &mut out),
        "shape mismatch in binary: b vs a: expected (2, 3), got (3, 2)",
    );
    let mut wrong = z(b, &[3, 2]);
    fails_with(
        b.binary(BinaryOp::Mul, &a, &a, &mut wrong),
        "shape mismatch in binary: out vs a: expected (2, 3), got (3, 2)",
    );
    fails_with(
        b.binary_assign(BinaryOp::Sub, &mut out, &r),
        "shape mismatch in binary_assign: b vs a: expected (2, 3), got (6,)",
    );
    fails_with(
        b.axpy(2.0, &a, &mut wrong),
        "shape mismatch in axpy: y vs x: expected (2, 3), got (3, 2)",
    );
    let c = b.zeros::<ComplexOf<B>>(&[2, 3]).expect("zeros");
    let mut cw = b.zeros::<ComplexOf<B>>(&[6]).expect("zeros");
    fails_with(
        b.complex_mul_conj(&c, &c, &mut cw),
        "shape mismatch in complex_mul_conj: out vs a: expected (2, 3), got (6,)",
    );
    let mut co = b.zeros::<ComplexOf<B>>(&[2, 3]).expect("zeros");
    fails_with(
        b.complex_mul(&c, &cw, &mut co),
        "shape mismatch in complex_mul: b vs a: expected (2, 3), got (6,)",
    );
    fails_with(
        b.complex_norm_sq(&c, &mut wrong),
        "shape mismatch in complex_norm_sq: dst vs src: expected (2, 3), got (3, 2)",
    );
}

/// Reduce: `dot`, the per-row reductions, empty and all-NaN arrays.
pub fn validation_reduce<B: Backend>(b: &B) {
    let (a, t) = (z(b, &[2, 3]), z(b, &[3, 2]));
    fails_with(
        b.dot(&a, &t),
        "shape mismatch in dot: b vs a: expected (2, 3), got (3, 2)",
    );
    fails_with(
        b.dot_rows(&a, &t),
        "shape mismatch in dot_rows: b vs a: expected (2, 3), got (3, 2)",
    );
    let cube = z(b, &[2, 3, 4]);
    fails_with(
        b.sum_rows(&cube),
        "shape mismatch in a of sum_rows: expected (batch, n), got (2, 3, 4)",
    );
    fails_with(
        b.sum_sq_rows(&cube),
        "shape mismatch in a of sum_sq_rows: expected (batch, n), got (2, 3, 4)",
    );
    fails_with(
        b.dot_rows(&cube, &cube),
        "shape mismatch in a of dot_rows: expected (batch, n), got (2, 3, 4)",
    );
    let empty = z(b, &[0]);
    for r in [b.min(&empty), b.max(&empty), b.argmax(&empty).map(|m| m.1)] {
        fails_with(r, "`a` is empty (zero-sized array)");
    }
    fails_with(b.mean_std(&empty), "`a` is empty (zero-sized array)");
    let nan = b
        .full::<FloatOf<B>>(&[3], FloatOf::<B>::from_f64(f64::NAN))
        .expect("full");
    let all_nan = "`a (all NaN)` contains 3 non-finite value(s) (NaN or infinity)";
    fails_with(b.argmax(&nan), all_nan);
    fails_with(b.min(&nan), all_nan);
}

/// Spectral: plan arguments, arrays that do not match the plan, pruning extents.
pub fn validation_spectral<B: Backend>(b: &B) {
    fails_with(
        b.fft_plan(&[8, 8], &[1, 0]).map(|_| ()),
        "invalid argument `axes`: axes must be unique and ascending, got [1, 0] (1 comes before 0)",
    );
    fails_with(
        b.fft_plan(&[8, 8], &[1, 1]).map(|_| ()),
        "invalid argument `axes`: axes must be unique and ascending, got [1, 1] (axis 1 is repeated)",
    );
    fails_with(
        b.fft_plan(&[8, 8], &[2]).map(|_| ()),
        "invalid argument `axes`: axis 2 is out of range for a 2-d array of shape (8, 8)",
    );
    fails_with(
        b.fft_plan(&[8, 8, 8, 8], &[0, 1, 2, 3]).map(|_| ()),
        "invalid argument `axes`: an FFT transforms 1 to 3 axes, got 4 ([0, 1, 2, 3])",
    );
    fails_with(
        b.fft_plan(&[0, 8], &[1]).map(|_| ()),
        "`shape (0, 8) of fft_plan` is empty (zero-sized array)",
    );
    let plan = b.fft_plan(&[8, 8], &[0, 1]).expect("plan");
    let x = z(b, &[8, 8]);
    let mut bad = b.zeros::<ComplexOf<B>>(&[8, 4]).expect("zeros");
    let mismatch =
        "FFT plan mismatch: plan is for real (8, 8) ↔ complex (8, 5) over axes [0, 1], got";
    fails_with(
        b.rfft(&plan, &x, &mut bad),
        &format!("{mismatch} rfft: real `input` (8, 8) and complex `out` (8, 4)"),
    );
    let mut out = z(b, &[8, 8]);
    fails_with(
        b.irfft(&plan, &mut bad, &mut out),
        &format!("{mismatch} irfft: real `out` (8, 8) and complex `input` (8, 4)"),
    );
    let mut spec = b.zeros::<ComplexOf<B>>(&[8, 5]).expect("zeros");
    fails_with(
        b.rfft_pruned(&plan, &x, &[4], &mut spec),
        "shape mismatch in `nonzero` of rfft_pruned: expected 2 extents (one per axis), got 1 ([4])",
    );
    fails_with(
        b.rfft_pruned(&plan, &x, &[9, 4], &mut spec),
        "invalid argument `nonzero`: extent 9 on axis 0 exceeds the array's 8 (shape (8, 8))",
    );
}

/// Resample: pad, crop, flip, roll and affine_transform.
pub fn validation_resample<B: Backend>(b: &B) {
    let src = z(b, &[2, 3]);
    let mut d1 = z(b, &[4]);
    fails_with(
        b.pad(&src, &[0, 0], PadMode::Zero, &mut d1),
        "shape mismatch in pad: dst: expected 2 axes like src (2, 3), got 1 axes (4,)",
    );
    let mut d = z(b, &[4, 4]);
    fails_with(
        b.pad(&src, &[0], PadMode::Zero, &mut d),
        "shape mismatch in pad: before: expected 2 entries (one per axis), got 1 entries",
    );
    let mut same = z(b, &[2, 3]);
    fails_with(
        b.pad(&src, &[1, 0], PadMode::Symmetric, &mut same),
        "shape mismatch in pad: dst axis 0: expected at least before[0] + src = 1 + 2, got 2 \
         (dst (2, 3))",
    );
    let empty = z(b, &[0, 3]);
    fails_with(
        b.pad(&empty, &[0, 0], PadMode::Symmetric, &mut same),
        "`pad: src (0, 3) (symmetric padding needs data on axis 0)` is empty (zero-sized array)",
    );
    let big = z(b, &[4, 4]);
    let mut small = z(b, &[2, 2]);
    fails_with(
        b.crop(&big, &[3, 0], &mut small),
        "shape mismatch in crop: window on axis 0: expected offset + dst <= src = 4 (src (4, 4)), \
         got 3 + 2 (dst (2, 2))",
    );
    fails_with(
        b.crop(&big, &[0, 0, 0], &mut small),
        "shape mismatch in crop: offset: expected 2 entries (one per axis), got 3 entries",
    );
    fails_with(
        b.crop(&big, &[0], &mut d1),
        "shape mismatch in crop: dst: expected 2 axes like src (4, 4), got 1 axes (4,)",
    );
    fails_with(
        b.flip(&big, &[0], &mut small),
        "shape mismatch in flip: dst: expected (4, 4), got (2, 2)",
    );
    fails_with(
        b.flip(&big, &[2], &mut d),
        "invalid argument `flip: axes`: axis 2 is out of range for 2 axes",
    );
    fails_with(
        b.flip(&big, &[1, 1], &mut d),
        "invalid argument `flip: axes`: axis 1 is repeated",
    );
    fails_with(
        b.roll(&big, &[1], &mut d),
        "shape mismatch in roll: shifts: expected 2 entries (one per axis), got 1 entries",
    );
    fails_with(
        b.roll(&big, &[1, 1], &mut small),
        "shape mismatch in roll: dst: expected (4, 4), got (2, 2)",
    );
    let id = [1.0, 0.0, 0.0, 1.0];
    let lin = Interpolation::Linear;
    fails_with(
        b.affine_transform(&big, &id[..3], &[0.0; 2], lin, &mut d),
        "shape mismatch in affine_transform: matrix: expected 2x2 = 4 entries (row-major), got 3 \
         entries",
    );
    fails_with(
        b.affine_transform(&big, &id, &[0.0], lin, &mut d),
        "shape mismatch in affine_transform: offset: expected 2 entries (one per axis), got 1 \
         entries",
    );
    fails_with(
        b.affine_transform(&big, &id, &[0.0, f64::NAN], lin, &mut d),
        "`affine_transform: offset` contains 1 non-finite value(s) (NaN or infinity)",
    );
    fails_with(
        b.affine_transform(&big, &id, &[0.0; 2], lin, &mut d1),
        "shape mismatch in affine_transform: dst: expected 2 axes like src (4, 4), got 1 axes (4,)",
    );
    let (v4, mut w4) = (z(b, &[2, 2, 2, 2]), z(b, &[2, 2, 2, 2]));
    fails_with(
        b.affine_transform(&v4, &[0.0; 16], &[0.0; 4], lin, &mut w4),
        "shape mismatch in affine_transform: src: expected 1, 2 or 3 axes, got 4 axes (2, 2, 2, 2)",
    );
    let empty4 = z(b, &[0, 4]);
    fails_with(
        b.affine_transform(&empty4, &id, &[0.0; 2], lin, &mut d),
        "`affine_transform: src (0, 4)` is empty (zero-sized array)",
    );
}

/// Filter: max filters, Laplace, peak candidates, gather, border modes.
pub fn validation_filter<B: Backend>(b: &B) {
    let src = z(b, &[4, 4]);
    let mut dst = z(b, &[4, 4]);
    let mut small = z(b, &[2, 2]);
    let m = BorderMode::Reflect;
    fails_with(
        b.max_filter(&src, &[3, 3], m, &mut small),
        "shape mismatch in max_filter: dst: expected (4, 4), got (2, 2)",
    );
    fails_with(
        b.max_filter(&src, &[3], m, &mut dst),
        "shape mismatch in max_filter: size: expected 2 entries (one per axis of (4, 4)), got 1 \
         entries",
    );
    fails_with(
        b.max_filter(&src, &[3, 0], m, &mut dst),
        "invalid argument `max_filter: size`: window size on axis 1 is 0; sizes must be >= 1",
    );
    let nan_mode = "invalid argument `mode`: BorderMode::Constant(cval) needs a number, got NaN";
    let nan = BorderMode::Constant(f64::NAN);
    fails_with(b.max_filter(&src, &[3, 3], nan, &mut dst), nan_mode);
    fails_with(b.laplace(&src, nan, &mut dst), nan_mode);
    let fp = [true; 9];
    fails_with(
        b.max_filter_footprint(&src, &fp, &[3, 3], nan, &mut dst),
        nan_mode,
    );
    fails_with(
        b.max_filter_footprint(&src, &fp, &[3, 3], m, &mut small),
        "shape mismatch in max_filter_footprint: dst: expected (4, 4), got (2, 2)",
    );
    fails_with(
        b.max_filter_footprint(&src, &fp[..3], &[3], m, &mut dst),
        "shape mismatch in max_filter_footprint: footprint_shape: expected 2 axes like src (4, 4), \
         got 1 axes (3,)",
    );
    fails_with(
        b.max_filter_footprint(&src, &fp[..8], &[3, 3], m, &mut dst),
        "shape mismatch in max_filter_footprint: footprint: expected 9 entries for shape (3, 3), \
         got 8 entries",
    );
    fails_with(
        b.max_filter_footprint(&src, &[false; 9], &[3, 3], m, &mut dst),
        "invalid argument `max_filter_footprint: footprint`: has no true entry (an empty \
         neighbourhood)",
    );
    fails_with(
        b.laplace(&src, m, &mut small),
        "shape mismatch in laplace: dst: expected (4, 4), got (2, 2)",
    );
    let zero = FloatOf::<B>::from_f64(0.0);
    fails_with(
        b.peak_candidates(&src, &small, zero, &[0, 0]),
        "shape mismatch in peak_candidates: filtered: expected (4, 4), got (2, 2)",
    );
    fails_with(
        b.peak_candidates(&src, &dst, zero, &[0, 0, 0]),
        "shape mismatch in peak_candidates: border: expected 2 entries (one per axis of (4, 4)), \
         got 3 entries",
    );
    fails_with(
        b.gather(&src, &[3, 16]),
        "invalid argument `indices`: flat index 16 is out of range for an array of 16 elements",
    );
}

/// Linalg: Laplacian grids and vectors, row ops, fused updates, masks, square matrices.
pub fn validation_linalg<B: Backend>(b: &B) {
    let one = FloatOf::<B>::from_f64(1.0);
    let dz = Boundary::DirichletZero;
    let (x, mut y) = (z(b, &[2, 12]), z(b, &[2, 12]));
    let mut short = z(b, &[2, 10]);
    fails_with(
        b.laplacian(&[2, 2, 2, 2], dz, &x, &mut y),
        "invalid argument `grid`: 1 to 3 non-zero axes expected, got (2, 2, 2, 2)",
    );
    fails_with(
        b.laplacian(&[3, 0], dz, &x, &mut y),
        "invalid argument `grid`: 1 to 3 non-zero axes expected, got (3, 0)",
    );
    fails_with(
        b.laplacian(&[3, 4], dz, &short, &mut y),
        "shape mismatch in x of laplacian: expected (batch, 12), got (2, 10)",
    );
    fails_with(
        b.laplacian_dot(&[3, 4], dz, &x, &mut short, &[true, true]),
        "shape mismatch in y of laplacian_dot: expected (2, 12), got (2, 10)",
    );
    let two_flags = "expected 2 per-row values, got 1 values";
    fails_with(
        b.laplacian_dot(&[3, 4], dz, &x, &mut y, &[true]),
        &format!("shape mismatch in active of laplacian_dot: {two_flags}"),
    );
    fails_with(
        b.scale_rows(&[one; 3], &mut y),
        "shape mismatch in alpha of scale_rows: expected 2 per-row values, got 3 values",
    );
    fails_with(
        b.axpy_rows(&[one; 2], &x, &mut short),
        "shape mismatch in axpy_rows: y vs x: expected (2, 12), got (2, 10)",
    );
    fails_with(
        b.xpay_rows(&x, &[one], &mut y),
        &format!("shape mismatch in beta of xpay_rows: {two_flags}"),
    );
    fails_with(
        b.xpay_rows_where(&x, &[one; 2], &mut y, &[true]),
        &format!("shape mismatch in active of xpay_rows_where: {two_flags}"),
    );
    fails_with(
        b.xpay_rows_dot(&x, &[one; 2], &mut y, &[true]),
        &format!("shape mismatch in active of xpay_rows_dot: {two_flags}"),
    );
    let (d, q) = (z(b, &[2, 12]), z(b, &[2, 12]));
    let mut r = z(b, &[2, 12]);
    fails_with(
        b.axpy_pair_rows(&[one; 2], &d, &q, &mut y, &mut short),
        "shape mismatch in axpy_pair_rows: r vs d: expected (2, 12), got (2, 10)",
    );
    fails_with(
        b.axpy_pair_rows_dots(&[one], &d, &q, &mut y, &mut r),
        &format!("shape mismatch in alpha of axpy_pair_rows_dots: {two_flags}"),
    );
    let a = z(b, &[12, 12]);
    fails_with(
        b.matvec_dense_dot(&a, &x, &mut y, &[true]),
        &format!("shape mismatch in active of matvec_dense_dot: {two_flags}"),
    );
    let wide = z(b, &[10, 12]);
    fails_with(
        b.matvec_dense_dot(&wide, &x, &mut short, &[true, true]),
        "shape mismatch in matvec_dense_dot: y vs x (square matrix): expected (2, 12), got (2, 10)",
    );
    let data = ndarray::ArrayD::<FloatOf<B>>::zeros(ndarray::IxDyn(&[2]));
    let csr = CsrMatrix::<B, FloatOf<B>>::from_parts(b, 2, 3, &[0, 1, 2], &[0, 2], data.view())
        .expect("csr");
    let (x3, mut y2) = (z(b, &[1, 3]), z(b, &[1, 2]));
    fails_with(
        b.matvec_csr_dot(&csr, &x3, &mut y2, &[true]),
        "shape mismatch in CSR matrix of matvec_csr_dot: expected a square matrix, got (2, 3)",
    );
}

/// Correlate: blocks, windows, the score passes' running maximum, normalisations and work
/// arrays, the fused products, MCC's inputs.
pub fn validation_correlate<B: Backend>(b: &B) {
    correlate_blocks_and_windows(b);
    correlate_normalisations(b);
    correlate_score_passes(b);
    correlate_fused_pair(b);
    correlate_masked(b);
}

/// The normalisations' scale, voxel count and epsilon the correlate checks pass.
fn scalars<B: Backend>() -> (FloatOf<B>, FloatOf<B>, FloatOf<B>) {
    (
        FloatOf::<B>::from_f64(1.0),
        FloatOf::<B>::from_f64(2.0),
        FloatOf::<B>::EPS,
    )
}

/// Blocks written into and gathered from arrays: corners, inserted blocks, windows.
fn correlate_blocks_and_windows<B: Backend>(b: &B) {
    let (s33, s44) = (z(b, &[3, 3]), z(b, &[4, 4]));
    let mut d24 = z(b, &[2, 4]);
    fails_with(
        b.write_corner(&s33, &mut d24),
        "shape mismatch in write_corner: expected a block inside (2, 4), got (3, 3) at the corner",
    );
    let mut d44 = z(b, &[4, 4]);
    fails_with(
        b.insert_block(&z(b, &[2, 2]), &[3, 0], &mut d44),
        "shape mismatch in insert_block: expected a block inside (4, 4), got (2, 2) at [3, 0]",
    );
    fails_with(
        b.insert_block(&z(b, &[2, 2]), &[0], &mut d44),
        "shape mismatch in insert_block: expected a block inside (4, 4), got (2, 2) at [0]",
    );
    let per = WindowExtension::Periodic(&[4, 4]);
    fails_with(
        b.gather_window(&s44, &[0], &[4, 4], per, &mut d44),
        "shape mismatch in gather_window: expected dst, start and len with 2 axes like src \
         (4, 4), got dst (4, 4), start [0], len [4, 4]",
    );
    fails_with(
        b.gather_window(
            &s44,
            &[0, 0],
            &[4, 4],
            WindowExtension::Periodic(&[2, 4]),
            &mut d44,
        ),
        "shape mismatch in gather_window: period: expected ≥ (4, 4), got (2, 4)",
    );
    // A symmetric extension of nothing (the host kernel divided by zero here).
    fails_with(
        b.gather_window(
            &z(b, &[0, 4]),
            &[0, 0],
            &[4, 4],
            WindowExtension::Symmetric,
            &mut d44,
        ),
        "`gather_window: src (0, 4)` is empty (zero-sized array)",
    );
}

/// The inverse denominator of the normalised scores.
fn correlate_normalisations<B: Backend>(b: &B) {
    let s44 = z(b, &[4, 4]);
    let mut d44 = z(b, &[4, 4]);
    let (scale, n, eps) = scalars::<B>();
    let w = CorrWindow { shift: &[0, 0] };
    fails_with(
        b.inverse_denominator(&s44, &z(b, &[4, 3]), w, scale, n, eps, &mut d44),
        "shape mismatch in inverse_denominator: c2 vs c1: expected (4, 4), got (4, 3)",
    );
    fails_with(
        b.inverse_denominator(
            &s44,
            &s44,
            CorrWindow { shift: &[0] },
            scale,
            n,
            eps,
            &mut d44,
        ),
        "shape mismatch in inverse_denominator: window: expected an output with the axes of the \
         grid (4, 4) (at least one), one shift per axis, got output (4, 4) and shift [0]",
    );
    fails_with(
        b.inverse_denominator(&z(b, &[4, 0]), &z(b, &[4, 0]), w, scale, n, eps, &mut d44),
        "`inverse_denominator: FFT grid (4, 0)` is empty (zero-sized array)",
    );
}

/// The score passes' running maximum: its maps, Σ score², each normalisation's inputs.
fn correlate_score_passes<B: Backend>(b: &B) {
    let (s33, s44) = (z(b, &[3, 3]), z(b, &[4, 4]));
    let (scale, n, eps) = scalars::<B>();
    let w = CorrWindow { shift: &[0, 0] };
    let mut best = z(b, &[3, 3]);
    let mut idx = b.zeros::<IntOf<B>>(&[3, 3]).expect("zeros");
    let mut idx_wrong = b.zeros::<IntOf<B>>(&[3, 2]).expect("zeros");
    let mut ssum = b.zeros::<f64>(&[1]).expect("zeros");
    let mut ssum_wrong = b.zeros::<f64>(&[2]).expect("zeros");
    let index = IntOf::<B>::from_usize(1).expect("index");
    let scaled = Normalization::Scaled { scale };
    let rm = RunningMax {
        best: &mut best,
        best_index: &mut idx_wrong,
        index,
        ssum: &mut ssum,
        moments: None,
    };
    fails_with(
        b.score_max_update(&s44, scaled, w, rm),
        "shape mismatch in score_max_update: best_index vs best: expected (3, 3), got (3, 2)",
    );
    let rm = RunningMax {
        best: &mut best,
        best_index: &mut idx,
        index,
        ssum: &mut ssum_wrong,
        moments: None,
    };
    fails_with(
        b.score_max_update(&s44, scaled, w, rm),
        "shape mismatch in score_max_update: ssum: expected (1,), got (2,)",
    );
    let mut rm = RunningMax {
        best: &mut best,
        best_index: &mut idx,
        index,
        ssum: &mut ssum,
        moments: None,
    };
    let den = Normalization::Denominator {
        scale,
        inv_den: &s44,
    };
    fails_with(
        b.score_max_update(&s44, den, w, rm.reborrow()),
        "shape mismatch in score_max_update: inv_den vs best: expected (3, 3), got (4, 4)",
    );
    let local = Normalization::Local {
        scale,
        c1: &s44,
        c2: &s33,
        n,
        eps,
    };
    fails_with(
        b.score_max_update(&s44, local, w, rm.reborrow()),
        "shape mismatch in score_max_update: c2 vs corr: expected (4, 4), got (3, 3)",
    );
}

/// The fused pair on a (4, 4) grid: the pruned forward FFT times conjugate factors, the
/// inverse FFT into the running maximum.
fn correlate_fused_pair<B: Backend>(b: &B) {
    let (s33, s44) = (z(b, &[3, 3]), z(b, &[4, 4]));
    let (scale, n, eps) = scalars::<B>();
    let w = CorrWindow { shift: &[0, 0] };
    let mut idx = b.zeros::<IntOf<B>>(&[3, 3]).expect("zeros");
    let mut ssum = b.zeros::<f64>(&[1]).expect("zeros");
    let index = IntOf::<B>::from_usize(1).expect("index");
    let plan = b.fft_plan(&[4, 4], &[0, 1]).expect("plan");
    let mut spec = b.zeros::<ComplexOf<B>>(&[4, 3]).expect("zeros");
    let f = b.zeros::<ComplexOf<B>>(&[4, 3]).expect("zeros");
    let f_wrong = b.zeros::<ComplexOf<B>>(&[4, 4]).expect("zeros");
    let mut y = b.corr_spectrum(&plan).expect("corr_spectrum");
    fails_with(
        b.rfft_pruned_mul_conj(&plan, &s44, &[2, 2], &mut spec, &[&f, &f], &mut [&mut y]),
        "shape mismatch in rfft_pruned_mul_conj: outs: expected 2 arrays (one per factor), got 1",
    );
    fails_with(
        b.rfft_pruned_mul_conj(&plan, &s44, &[2, 2], &mut spec, &[&f_wrong], &mut [&mut y]),
        "shape mismatch in rfft_pruned_mul_conj: factors[0] vs spec: expected (4, 3), got (4, 4)",
    );
    fails_with(
        b.rfft_pruned_mul_conj(&plan, &s33, &[2, 2], &mut spec, &[&f], &mut [&mut y]),
        "FFT plan mismatch: plan is for real (4, 4) ↔ complex (4, 3) over axes [0, 1], got \
         rfft_pruned_mul_conj: real `input` (3, 3) and complex `out` (4, 3)",
    );
    let mut work = vec![z(b, &[4, 4])];
    let mut big = z(b, &[5, 4]);
    let mut big_idx = b.zeros::<IntOf<B>>(&[5, 4]).expect("zeros");
    let too_big = RunningMax {
        best: &mut big,
        best_index: &mut big_idx,
        index,
        ssum: &mut ssum,
        moments: None,
    };
    fails_with(
        b.irfft_score_max_update(
            &plan,
            &mut y,
            Normalization::Scaled { scale },
            &mut work,
            w,
            too_big,
        ),
        "shape mismatch in irfft_score_max_update: best: expected at most the FFT grid (4, 4) \
         on every axis, got (5, 4) (axis 0)",
    );
    let (mut c1, mut c2) = (
        b.corr_spectrum(&plan).expect("corr_spectrum"),
        b.corr_spectrum(&plan).expect("corr_spectrum"),
    );
    let mut best = z(b, &[3, 3]);
    let rm = RunningMax {
        best: &mut best,
        best_index: &mut idx,
        index,
        ssum: &mut ssum,
        moments: None,
    };
    let local = Normalization::Local {
        scale,
        c1: &mut c1,
        c2: &mut c2,
        n,
        eps,
    };
    fails_with(
        b.irfft_score_max_update(&plan, &mut y, local, &mut work, w, rm),
        "shape mismatch in irfft_score_max_update: work: expected 3 arrays of the grid (4, 4), \
         got 1 arrays",
    );
}

/// MCC's combination of the masked correlations.
fn correlate_masked<B: Backend>(b: &B) {
    let (s33, s44) = (z(b, &[3, 3]), z(b, &[4, 4]));
    let (scale, _, eps) = scalars::<B>();
    let mut c_ft = z(b, &[4, 4]);
    fails_with(
        b.combine_masked_correlations(&mut c_ft, &s44, &s33, &s44, &s44, &s44, scale, eps, scale),
        "shape mismatch in combine_masked_correlations: c_tt vs c_ft: expected (4, 4), got (3, 3)",
    );
}
