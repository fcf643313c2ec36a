//! One file per op family, mirroring `monomorph_core::backend::ops`.

mod correlate;
mod elementwise;
mod filter;
mod foreign;
mod linalg;
mod memory;
mod reduce;
mod resample;
mod spectral;
mod stencil;

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr};
use monomorph_core::error::fmt_shape;
use monomorph_core::{DType, Element, Error, Precision, Result};

use crate::Cuda;
use crate::error::Ck;

/// The accumulator type of `Cuda<P>` ([`Precision::Accum`]): what the reductions and the
/// fused CG ops return, and what the CG's per-row device scalars hold.
pub(crate) type A<P> = <P as Precision>::Accum;

/// A sum of the kernels (which accumulate in `double`) in the accumulator type: exact for
/// `f64`, the only accumulator the precision sets have today; a set with another one would
/// need its own kernels.
pub(crate) fn to_acc<P: Precision>(v: f64) -> A<P> {
    monomorph_core::Real::from_f64(v)
}

/// [`to_acc`] of every row.
pub(crate) fn rows_acc<P: Precision>(v: Vec<f64>) -> Vec<A<P>> {
    v.into_iter().map(to_acc::<P>).collect()
}

impl<P: Precision> Cuda<P> {
    /// Evaluated (at compile time, for each precision set the backend is built for) by every
    /// op whose kernels read or write the per-row scalars `Arr<Self, AccumOf<Self>>` as
    /// `double`: a precision set whose accumulator is not `f64` fails to compile there
    /// instead of having its slots read with the wrong width.
    pub(crate) const DOUBLE_SLOTS: () = assert!(
        matches!(<A<P> as Element>::DTYPE, DType::F64),
        "the CUDA kernels keep the per-row scalars in `double`: Precision::Accum must be f64"
    );
}

/// Kernel-name suffix of a real dtype.
pub(crate) fn tn<T: Element>() -> Result<&'static str> {
    match T::DTYPE {
        DType::F32 => Ok("f32"),
        DType::F64 => Ok("f64"),
        DType::I32 => Ok("i32"),
        DType::I64 => Ok("i64"),
        other => Err(Error::invalid(
            "dtype",
            format!(
                "the CUDA kernels serve float32/float64/int32/int64, not {}",
                other.name()
            ),
        )),
    }
}

/// Kernel-name suffix by element size, for dtype-agnostic kernels (fill, rearrange).
pub(crate) fn bn<T: Element>() -> Result<&'static str> {
    match std::mem::size_of::<T>() {
        1 => Ok("b1"),
        4 => Ok("b4"),
        8 => Ok("b8"),
        16 => Ok("b16"),
        s => Err(Error::invalid(
            "dtype",
            format!("element size {s} is not supported"),
        )),
    }
}

/// Shapes and per-axis parameters of an n-d index mapping (`struct Geom` in `common.cuh`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Geom {
    pub nd: i64,
    pub src: [i64; MAXD],
    pub dst: [i64; MAXD],
    pub p: [i64; MAXD],
}

/// Most axes a geometry kernel handles (`MM_MAXD`).
pub(crate) const MAXD: usize = 8;

// SAFETY: plain `repr(C)` integers, laid out as the C struct.
unsafe impl DeviceRepr for Geom {}

impl Geom {
    pub(crate) fn new(what: &str, src: &[usize], dst: &[usize]) -> Result<Geom> {
        if src.len() > MAXD || dst.len() != src.len() {
            return Err(Error::invalid(
                what,
                format!(
                    "the CUDA backend handles 1 to {MAXD} axes with equal ndim; got {} and {}",
                    fmt_shape(src),
                    fmt_shape(dst)
                ),
            ));
        }
        let mut g = Geom {
            nd: src.len() as i64,
            ..Default::default()
        };
        for k in 0..src.len() {
            g.src[k] = src[k] as i64;
            g.dst[k] = dst[k] as i64;
        }
        Ok(g)
    }
}

/// Border mode code of the kernels (`mm_border`): 0 nearest, 1 reflect, 2 mirror, 3 wrap,
/// 4 constant; and the constant.
pub(crate) fn border_code(mode: monomorph_core::BorderMode) -> (i32, f64) {
    use monomorph_core::BorderMode as M;
    match mode {
        M::Nearest => (0, 0.0),
        M::Reflect => (1, 0.0),
        M::Mirror => (2, 0.0),
        M::Wrap => (3, 0.0),
        M::Constant(c) => (4, c),
    }
}

impl<P: Precision> Cuda<P> {
    /// The kernel `{base}_{t}` instantiated for the real or integer type `T` (`t` from
    /// [`tn`]: `f32`, `f64`, `i32`, `i64`): every typed kernel of the module is named so.
    pub(crate) fn kernel<T: Element>(&self, base: &str) -> Result<CudaFunction> {
        self.func(&format!("{base}_{}", tn::<T>()?))
    }

    /// The kernel `{base}_{s}_{t}` instantiated for two types (a conversion `S → T`, or a
    /// score type and an index type).
    pub(crate) fn kernel2<S: Element, T: Element>(&self, base: &str) -> Result<CudaFunction> {
        self.func(&format!("{base}_{}_{}", tn::<S>()?, tn::<T>()?))
    }

    /// The kernel `{base}_b{size}` that only moves elements of `T`'s size (suffix from [`bn`]).
    pub(crate) fn kernel_sized<T: Element>(&self, base: &str) -> Result<CudaFunction> {
        self.func(&format!("{base}_{}", bn::<T>()?))
    }

    /// Uploads a small host slice (per-row scalars, offsets) as raw bytes.
    pub(crate) fn upload_small<T: bytemuck::Pod>(&self, v: &[T]) -> Result<CudaSlice<u8>> {
        let bytes: &[u8] = bytemuck::cast_slice(v);
        if bytes.is_empty() {
            return self.inner.stream.alloc_zeros::<u8>(16).ck();
        }
        self.inner.stream.clone_htod(bytes).ck()
    }

    /// Downloads `n` elements of `T` from the front of a byte buffer, then waits.
    pub(crate) fn download_small<T: bytemuck::Pod>(
        &self,
        buf: &CudaSlice<u8>,
        n: usize,
    ) -> Result<Vec<T>> {
        let nb = n * std::mem::size_of::<T>();
        if nb == 0 {
            return Ok(Vec::new());
        }
        let bytes = self.inner.stream.clone_dtoh(&buf.slice(0..nb)).ck()?;
        self.inner.stream.synchronize().ck()?;
        let mut out: Vec<T> = vec![<T as bytemuck::Zeroable>::zeroed(); n];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }
}
