//! The compile-time [`Backend`] trait and its op families.
//!
//! # Design
//!
//! An algorithm in monomorph is written once as `fn algo<B: Backend>(b: &B, …)`; the compiler
//! stamps out one copy per backend and precision (`Cpu<Single>`, `Cuda<Double>`), with no
//! dynamic dispatch in the hot loops. The backend is a *value* (`&self` everywhere): it owns its
//! device state (thread pool, CUDA context and stream, FFT plan cache).
//!
//! The contract is split into small op families, one trait and one file each
//! ([`Memory`], [`Elementwise`], [`Reduce`], [`Spectral`], [`Resample`], [`Filter`], [`Linalg`],
//! [`Correlate`]). [`Backend`] is their union. An algorithm can ask only for what it uses
//! (`fn cg<B: Linalg + Reduce>`), and a new backend can be written family by family.
//!
//! ## Conventions
//! * Arrays are row-major, last axis fastest; [`BackendTypes::Array`] lives on the device and
//!   knows its shape ([`ArrayMeta`]). [`Memory::upload`] and [`Memory::download`] are the only
//!   host↔device crossings; every op takes and returns device arrays.
//! * Ops write into outputs passed in (`out: &mut Arr<Self, T>`) so loops allocate nothing;
//!   their shapes are checked and a mismatch is an [`Error::Shape`](crate::Error::Shape).
//! * FFTs are unnormalised in both directions; the inverse destroys its input (cuFFT's and
//!   realfft's contract). The half spectrum of a real transform over `axes` halves the largest
//!   axis in `axes`: shape `(…, n/2 + 1)`.
//! * Sums and dot products accumulate in `f64` and return `f64`.
//! * Ops are asynchronous on a device backend; [`Memory::synchronize`] waits, and every op that
//!   returns host values (reductions, downloads) synchronises.
//! * Fused kernels (one pass over memory for what an inner loop needs) have default bodies made
//!   of primitives; a backend overrides them where one pass is faster.
//! * Argument checks live beside each trait, as `check_*` functions in the family's file (e.g.
//!   [`check_pad`], [`check_max_filter`], [`check_laplacian`]); every backend calls them before
//!   touching data, so the same mistake gives the same error, word for word, on every backend.
//!
//! # Adding a backend
//!
//! A backend is a crate (`crates/<name>`) with a type implementing [`BackendTypes`], every op
//! family and [`Backend`]. It is brought up family by family, each proven by its slice of the
//! conformance suite before the next is started:
//!
//! | family | the contract (core) | the backend implements | conformance tests |
//! |---|---|---|---|
//! | memory | `crates/core/src/backend/ops/memory.rs` (+ `foreign.rs`: other programs' buffers in, arrays out) | `src/ops/memory.rs`, `src/ops/foreign.rs` | `testing/ops/memory.rs` |
//! | elementwise | `backend/ops/elementwise.rs` | `src/ops/elementwise.rs` | `testing/ops/elementwise.rs` |
//! | reduce | `backend/ops/reduce.rs` | `src/ops/reduce.rs` | `testing/ops/reduce.rs` |
//! | spectral | `backend/ops/spectral.rs` | `src/ops/spectral.rs` (+ its FFT plans) | `testing/ops/spectral.rs` |
//! | resample | `backend/ops/resample.rs` | `src/ops/resample.rs` | `testing/ops/resample.rs` |
//! | filter | `backend/ops/filter.rs` | `src/ops/filter.rs` | `testing/ops/filter.rs` |
//! | linalg | `backend/ops/linalg.rs` | `src/ops/linalg.rs` | `testing/ops/linalg.rs` |
//! | correlate | `backend/ops/correlate/` (`mod.rs` the trait, `norm.rs` its argument types, `check.rs`, `host.rs` the reference kernels) | `src/ops/correlate.rs` | `testing/ops/correlate.rs` |
//! | (all) | the `check_*` functions of each file above | calls them first | `testing/ops/validation.rs` |
//!
//! (Core paths are under `crates/core/src/`; the backend's under `crates/<name>/`. The CPU
//! backend, `crates/cpu`, and the CUDA backend, `crates/cuda` with its kernels in
//! `crates/cuda/kernels/<family>.cu`, follow this layout file for file.)
//!
//! The score passes of [`Correlate`] take one [`Normalization`] type (its data as device
//! arrays, [`CorrSpectrum`] products or host slices) and a [`RunningMax`]; a backend's fused
//! kernels map it to their own form in one `match` (the CPU backend through
//! [`host::score_line`], which takes it as it is; the CUDA backend in `ScoreArgs::new`, to
//! its kernels' `norm` code), so a new normalisation shows up as a compile error at each.
//!
//! 1. `crates/<name>/src/lib.rs`: the backend type, its [`BackendTypes`] (precision, array
//!    type implementing [`ArrayMeta`], FFT plan type implementing [`FftPlan`]) and
//!    [`Backend`] (`name`, `device`).
//! 2. One `crates/<name>/src/ops/<family>.rs` per family, in the order of the table (memory
//!    first: every test uploads and downloads). Start each op with the family's `check_*`
//!    function; keep the default bodies of fused ops (they are the specification) until a
//!    faster override is proven equal to them by the family's tests.
//! 3. `crates/<name>/tests/conformance.rs` stamps the suite, one family at a time while the
//!    backend grows:
//!    ```ignore
//!    fn make() -> Option<MyBackend<Single>> { MyBackend::new().ok() }
//!    monomorph_core::backend_test_suite!(make; memory, elementwise); // the families so far
//!    // or one family: monomorph_core::conformance_family!(reduce, make);
//!    // when all are done: monomorph_core::backend_test_suite!(make);
//!    ```
//!    `make` returns `None` where the device is missing (the tests then skip); stamp it for
//!    every precision the backend serves. The `validation` family checks the exact text of
//!    each argument error, so it passes once every op calls the shared checks.
//! 4. The facade: a cargo feature and dependency in the root `Cargo.toml`, the re-export in
//!    `src/lib.rs`, and a `BackendChoice`
//!    arm in `src/dispatch.rs` so that the command can pick it.

pub mod ops;
pub mod transfer;

pub use ops::*;
pub use transfer::Transfer;

use crate::device::DeviceInfo;
use crate::dtype::{Element, Precision};

/// Shape information every backend array carries.
pub trait ArrayMeta {
    /// The shape, row-major.
    fn shape(&self) -> &[usize];
    /// Number of elements.
    fn len(&self) -> usize {
        self.shape().iter().product()
    }
    /// `true` when some axis is zero.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of axes.
    fn ndim(&self) -> usize {
        self.shape().len()
    }
}

impl<T> ArrayMeta for ndarray::ArrayD<T> {
    fn shape(&self) -> &[usize] {
        ndarray::ArrayBase::shape(self)
    }
}

/// A cached real-to-complex / complex-to-real transform plan.
pub trait FftPlan {
    /// Shape of the real array the plan transforms.
    fn real_shape(&self) -> &[usize];
    /// Shape of the half spectrum (largest transformed axis is n/2 + 1).
    fn complex_shape(&self) -> &[usize];
    /// The transformed axes, ascending.
    fn axes(&self) -> &[usize];
}

/// The types of a backend, in one place.
pub trait BackendTypes: Sized + Clone + Send + Sync + 'static {
    /// The dtype set (`Single` or `Double`).
    type Precision: Precision;
    /// A device array of `T`, which knows its shape.
    type Array<T: Element>: ArrayMeta + Send + Sync;
    /// A real FFT plan for one shape and set of axes (in the backend's float type).
    type Fft: FftPlan + Send + Sync;
}

/// A device array of the backend `B`.
pub type Arr<B, T> = <B as BackendTypes>::Array<T>;
/// The float type of backend `B` (`f32` for `Single`).
pub type FloatOf<B> = <<B as BackendTypes>::Precision as Precision>::Float;
/// The complex type of backend `B` (`Complex<f32>` for `Single`).
pub type ComplexOf<B> = num_complex::Complex<FloatOf<B>>;
/// The index type of backend `B` (`i32` for `Single`).
pub type IntOf<B> = <<B as BackendTypes>::Precision as Precision>::Int;
/// The overflow-safe accumulator type of backend `B` ([`Precision::Accum`], `f64` for
/// `Single` and `Double`): what its sums and dot products ([`Reduce`]) return.
pub type AccumOf<B> = <<B as BackendTypes>::Precision as Precision>::Accum;

/// The whole contract: every op family plus device information.
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::{Array1, Ix1};
///
/// /// Any algorithm is a generic function over the backend: here, `a·x + y` and its sum (in
/// /// the backend's accumulator type, `f64` for both precisions).
/// fn axpy_sum<B: Backend>(b: &B, a: f64, x: &Array1<f64>, y: &Array1<f64>) -> Result<(Array1<f64>, AccumOf<B>)> {
///     let x = b.upload_array(x)?;
///     let mut y = b.upload_array(y)?;
///     b.axpy(a, &x, &mut y)?;
///     Ok((b.download_as::<f64, Ix1>(&y)?, b.sum(&y)?))
/// }
///
/// let (x, y) = (Array1::from_vec(vec![1.0, 2.0, 3.0]), Array1::from_vec(vec![10.0, 20.0, 30.0]));
/// let cpu = Cpu::<Single>::new(); // instantiated once per backend and precision
/// assert_eq!(axpy_sum(&cpu, 2.0, &x, &y)?, (Array1::from_vec(vec![12.0, 24.0, 36.0]), 72.0));
/// assert_eq!(cpu.label(), "cpu (single)");
/// assert_eq!(cpu.device().kind, DeviceKind::Cpu);
/// # use monomorph::DeviceKind;
/// # Ok::<(), monomorph::Error>(())
/// ```
pub trait Backend:
    BackendTypes
    + Memory
    + Foreign
    + Elementwise
    + Reduce
    + Spectral
    + Resample
    + Filter
    + Linalg
    + Correlate
{
    /// Short backend name: `"cpu"` or `"cuda"` (what errors and the command's outputs record);
    /// [`Backend::label`] adds the precision.
    fn name(&self) -> &'static str;
    /// The name with the precision, for messages and logs: `"cpu (single)"`, `"cuda (double)"`.
    fn label(&self) -> String {
        format!("{} ({})", self.name(), <Self::Precision as Precision>::NAME)
    }
    /// The device this backend runs on.
    fn device(&self) -> DeviceInfo;
}
