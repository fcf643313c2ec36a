//! # monomorph
//!
//! Scientific array algorithms written once, generic over a compile-time [`Backend`], and
//! monomorphized into CPU and CUDA code: FFT template matching over a rotation search, max-filter
//! peak calling, and batched conjugate gradient.
//!
//! ```
//! use monomorph::prelude::*;
//! use monomorph::ndarray::Array2;
//!
//! // Any algorithm is a generic function over the backend…
//! // (sums come in the backend's accumulator type, `AccumOf<B>`: f64 for both precisions)
//! fn total<B: Backend>(b: &B, host: &Array2<f32>) -> monomorph::Result<AccumOf<B>> {
//!     let a = b.upload_array(host)?;
//!     b.sum(&a)
//! }
//! // …instantiated for the backend you pick once, at the top.
//! let cpu = Cpu::<Single>::new();
//! let v = Array2::from_elem((8, 8), 1.0f32);
//! assert_eq!(total(&cpu, &v)?, 64.0);
//! # Ok::<(), monomorph::Error>(())
//! ```
//!
//! Picking the backend at run time (from a flag, or from the machine) happens once, at the top:
//! write the work as a [`BackendTask`] and hand it to [`dispatch`](dispatch::dispatch), which
//! instantiates it for the chosen backend and precision.
//!
//! ```
//! use monomorph::prelude::*;
//! use monomorph::{BackendChoice, BackendTask, DispatchOptions, PrecisionChoice, dispatch};
//!
//! struct Total(Vec<f64>);
//!
//! impl BackendTask for Total {
//!     type Output = f64;
//!     fn run<B: Backend>(self, b: &B) -> monomorph::Result<f64> {
//!         let a = b.upload_array(&monomorph::ndarray::Array1::from_vec(self.0))?;
//!         Ok(b.sum(&a)?.as_f64())
//!     }
//! }
//!
//! let opts = DispatchOptions {
//!     backend: BackendChoice::Cpu,
//!     precision: PrecisionChoice::Double,
//!     ..DispatchOptions::default()
//! };
//! assert_eq!(dispatch(opts, Total(vec![1.0, 2.5]))?, 3.5);
//! if cfg!(not(feature = "cuda")) {
//!     // A build without the `cuda` feature answers a CUDA request with one clear error.
//!     let cuda = DispatchOptions { backend: BackendChoice::Cuda, ..opts };
//!     let err = dispatch(cuda, Total(vec![1.0])).unwrap_err();
//!     assert!(matches!(err, monomorph::Error::NotCompiled("cuda")), "{err}");
//! }
//! # Ok::<(), monomorph::Error>(())
//! ```
//!
//! ## Start here
//! * [`prelude`]: one `use monomorph::prelude::*;` brings the backend traits, the type aliases
//!   ([`Arr`]`<B, T>`, [`FloatOf`]`<B>`, [`ComplexOf`]`<B>`, [`IntOf`]`<B>`), the op enums, the
//!   typed transfers ([`Transfer`]: `upload_array`, `download_as`) and every algorithm entry
//!   point with its parameters and result, plus [`Cpu`] / `Cuda` as compiled in.
//! * [`match_template`](algo::matching::match_template) and
//!   [`MatchResult::peaks`](algo::matching::MatchResult::peaks) /
//!   [`find_peaks`](algo::peaks::find_peaks): template matching and peak calling.
//! * [`conjugate_gradient`](algo::cg::conjugate_gradient) with a built-in operator or your own
//!   [`LinearOperator`](algo::cg::LinearOperator): batched CG.
//! * [`Backend`] and its op families ([`Memory`], [`Elementwise`], [`Reduce`], [`Spectral`],
//!   [`Resample`], [`Filter`], [`Linalg`]): write your own algorithm on the ops.
//! * [`dispatch`](dispatch::dispatch) / [`DefaultBackend`]: pick the backend at run time, once.
//! * [`work`]: owned jobs ([`work::MatchJob`]) run by interchangeable executors (serial, device
//!   threads, MPI ranks with `dist` under the `mpi` feature), their parts merged exactly: see
//!   [Running on several devices and ranks](work#running-on-several-devices-and-ranks).
//! * [`ndarray`] and [`num_complex`]: the exact versions this API uses, re-exported.
//!
//! ## Features
//! `cpu` (the CPU backend), `cuda` (the CUDA backend; builds anywhere, errors without a GPU),
//! `io` (`.npy`/MRC/PNG files) and `cli` (the `monomorph` command). All but `cuda` are on by
//! default; a library needing only the algorithms depends on
//! `monomorph = { version = "0.1", default-features = false, features = ["cpu"] }`.
//!
//! ## Threads
//! `Cpu::with_threads(n)` gives the CPU backend a thread pool of its own, on which every op
//! runs (`cpu.install(|| …)` enters it once for a whole algorithm). `Cpu::new()` runs its ops
//! on rayon's *current* pool: set `RAYON_NUM_THREADS`, or run the work inside a pool of yours.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// No `unsafe` in the facade but three audited places: `io::stream`'s `madvise` (huge-page advice
// for large reads; libc's call has no safe wrapper), `host_array::Borrowed` (a host buffer
// another program owns, read in place: the Python package's numpy inputs) and, with the `mpi`
// feature, `dist`'s MPI reduction operator (a C callback over raw buffers, the only exact merge
// rsmpi offers).
// `forbid` would not let them opt out, so `deny` here and `#[allow(unsafe_code)]` on each.
#![deny(unsafe_code)]

// The command's code names the library `monomorph::…`, as a dependent would.
extern crate self as monomorph;

#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod cli;
pub mod dispatch;
// Reads and writes DLPack's C structs: its `unsafe` blocks each say why they are sound.
#[cfg(feature = "mpi")]
// The folder is not named `dist`: tools (and readers) take a `dist/` folder for build output.
#[cfg_attr(docsrs, doc(cfg(feature = "mpi")))]
#[allow(unsafe_code)]
#[path = "distributed/mod.rs"]
pub mod dist;
#[allow(unsafe_code)]
pub mod dlpack;
mod host_array;
#[cfg(feature = "io")]
pub mod io;
pub mod work;

pub use dispatch::{
    BackendChoice, BackendTask, DefaultBackend, DispatchOptions, PrecisionChoice, dispatch,
};
pub use host_array::{Borrowed, HostArray};

// The core crate, re-exported without inlining: its pages are generated from the source, so
// they show the aliases (`Arr<B, FloatOf<B>>`) instead of the projections an inlined copy
// would show.
#[doc(no_inline)]
pub use monomorph_core::{
    Arr, ArrayMeta, Backend, BackendTypes, BinaryOp, BorderMode, Boundary, ComplexOf, Correlate,
    CsrMatrix, DType, DeviceInfo, DeviceKind, Double, Element, Elementwise, Error, FftPlan, Filter,
    Float, FloatOf, Foreign, Index, IntOf, Interpolation, Linalg, Memory, PadMode, Precision, Real,
    Reduce, Resample, Result, Single, Spectral, Transfer, UnaryOp, algo, backend, device, dtype,
    error, fast_shape, is_fast_len, next_fast_len, shape,
};
// Everything else of the core root (implementer-only items), reachable but off this page.
#[doc(hidden)]
pub use monomorph_core::*;

#[doc(no_inline)]
pub use monomorph_core::{ndarray, num_complex};

#[cfg(feature = "cpu")]
#[doc(no_inline)]
pub use monomorph_cpu::Cpu;
#[cfg(feature = "cuda")]
#[doc(no_inline)]
pub use monomorph_cuda::Cuda;

/// What a user's generic function needs, in one `use monomorph::prelude::*;`: the core
/// prelude (traits, aliases, op enums, transfers, the algorithms' entry points, parameters and
/// results) and the backends compiled in.
pub mod prelude {
    #[doc(no_inline)]
    pub use monomorph_core::prelude::*;
    #[cfg(feature = "cpu")]
    #[doc(no_inline)]
    pub use monomorph_cpu::Cpu;
    #[cfg(feature = "cuda")]
    #[doc(no_inline)]
    pub use monomorph_cuda::Cuda;
}
