use cudarc::driver::{DeviceRepr, PushKernelArg};
use monomorph_core::{
    ArrayMeta, AxisOrder, Element, Float, Interpolation, Memory, PadMode, Precision, Resample,
    Result,
};

use super::{Geom, MAXD};
use crate::error::Ck;
use crate::{Cuda, CudaArray};

/// `struct Affine` of `resample.cu`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Affine {
    nd: i64,
    src: [i64; MAXD],
    dst: [i64; MAXD],
    m: [f64; MAXD * MAXD],
    off: [f64; MAXD],
    rev: i64,
}

// SAFETY: plain `repr(C)` numbers, laid out as the C struct.
unsafe impl DeviceRepr for Affine {}

/// `Affine::rev` bit: pytme's reversed template (the mirrored output index's coordinate).
const REVERSED: i64 = 1;
/// `Affine::rev` bit: the coordinate summed from the last axis (pytme holds the transpose).
const BACKWARD: i64 = 2;

const CROP: i32 = 0;
const FLIP: i32 = 1;
const ROLL: i32 = 2;
const PAD_ZERO: i32 = 3;
const PAD_SYMMETRIC: i32 = 4;

impl<P: Precision> Cuda<P> {
    fn rearrange<T: Element>(
        &self,
        mode: i32,
        src: &CudaArray<T>,
        g: Geom,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        let n = dst.len();
        let total = n as i64;
        if total == 0 {
            return Ok(());
        }
        let f = self.kernel_sized::<T>("rearrange")?;
        let cfg = self.grid(n);
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&mode)
            .arg(&src.buf)
            .arg(&mut dst.buf)
            .arg(&g)
            .arg(&total);
        // SAFETY: the geometry was checked against both shapes; every read is in bounds.
        unsafe { l.launch(cfg) }.ck()?;
        Ok(())
    }
}

impl<P: Precision> Resample for Cuda<P> {
    fn pad<T: Float>(
        &self,
        src: &CudaArray<T>,
        before: &[usize],
        mode: PadMode,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_pad(src.shape(), before, mode, dst.shape())?;
        let mut g = Geom::new("pad", src.shape(), dst.shape())?;
        for k in 0..src.ndim() {
            g.p[k] = before[k] as i64;
        }
        if src.is_empty() {
            // Zero padding of nothing (a symmetric pad of nothing into a non-empty `dst` was
            // refused above; into an empty one there is nothing to write).
            return self.fill(dst, T::zero());
        }
        let code = if mode == PadMode::Zero {
            PAD_ZERO
        } else {
            PAD_SYMMETRIC
        };
        self.rearrange(code, src, g, dst)
    }

    fn crop<T: Element>(
        &self,
        src: &CudaArray<T>,
        offset: &[usize],
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_crop(src.shape(), offset, dst.shape())?;
        let mut g = Geom::new("crop", src.shape(), dst.shape())?;
        for k in 0..src.ndim() {
            g.p[k] = offset[k] as i64;
        }
        self.rearrange(CROP, src, g, dst)
    }

    fn flip<T: Element>(
        &self,
        src: &CudaArray<T>,
        axes: &[usize],
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        let flipped = monomorph_core::check_flip(src.shape(), axes, dst.shape())?;
        let mut g = Geom::new("flip", src.shape(), dst.shape())?;
        for (k, _) in flipped.iter().enumerate().filter(|(_, f)| **f) {
            g.p[k] = 1;
        }
        self.rearrange(FLIP, src, g, dst)
    }

    fn roll<T: Element>(
        &self,
        src: &CudaArray<T>,
        shifts: &[isize],
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_roll(src.shape(), shifts, dst.shape())?;
        let mut g = Geom::new("roll", src.shape(), dst.shape())?;
        for k in 0..src.ndim() {
            let n = src.shape()[k] as i64;
            if n > 0 {
                g.p[k] = (shifts[k] as i64).rem_euclid(n);
            }
        }
        self.rearrange(ROLL, src, g, dst)
    }

    fn spline_prefilter<T: Float>(&self, a: &mut CudaArray<T>) -> Result<()> {
        if a.is_empty() {
            return Ok(());
        }
        // Filtered in f64 as scipy does, then cast back.
        let is_f64 = T::DTYPE == monomorph_core::DType::F64;
        let mut tmp: Option<CudaArray<f64>> = None;
        if !is_f64 {
            let mut t = self.zeros::<f64>(a.shape())?;
            self.cast(a, &mut t)?;
            tmp = Some(t);
        }
        let shape = a.shape().to_vec();
        let f = self.func("spline_axis_f64")?;
        let total = a.len();
        for (k, &len) in shape.iter().enumerate() {
            if len < 2 {
                continue;
            }
            let stride: usize = shape[k + 1..].iter().product();
            let (nl, l64, s64) = ((total / len) as i64, len as i64, stride as i64);
            let buf = match tmp.as_mut() {
                Some(t) => &mut t.buf,
                None => &mut a.buf,
            };
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(buf).arg(&nl).arg(&l64).arg(&s64);
            // SAFETY: each of the nl lines of `len` samples lies inside the f64 buffer.
            unsafe { l.launch(self.grid(total / len)) }.ck()?;
        }
        if let Some(t) = tmp {
            self.cast(&t, a)?;
        }
        Ok(())
    }

    fn affine_transform<T: Float>(
        &self,
        src: &CudaArray<T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        self.affine(src, matrix, offset, interp, dst, 0)
    }

    fn affine_transform_reversed_in<T: Float>(
        &self,
        src: &CudaArray<T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        frame: AxisOrder,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        let mode = match frame {
            AxisOrder::Pytme => REVERSED,
            AxisOrder::Reversed => REVERSED | BACKWARD,
        };
        self.affine(src, matrix, offset, interp, dst, mode)
    }
}

impl<P: Precision> Cuda<P> {
    /// `affine_transform`, or its reversed forms (`rev`: [`REVERSED`], with [`BACKWARD`]), as
    /// one kernel launch.
    fn affine<T: Float>(
        &self,
        src: &CudaArray<T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut CudaArray<T>,
        rev: i64,
    ) -> Result<()> {
        if !monomorph_core::check_affine_transform(src.shape(), dst.shape(), matrix, offset)? {
            return Ok(());
        }
        let nd = src.ndim();
        let mut g = Affine {
            nd: nd as i64,
            src: [0; MAXD],
            dst: [0; MAXD],
            m: [0.0; MAXD * MAXD],
            off: [0.0; MAXD],
            rev,
        };
        for k in 0..nd {
            g.src[k] = src.shape()[k] as i64;
            g.dst[k] = dst.shape()[k] as i64;
            g.off[k] = offset[k];
        }
        g.m[..nd * nd].copy_from_slice(matrix);
        let order: i32 = match interp {
            Interpolation::Linear => 1,
            Interpolation::Cubic => 3,
        };
        let total = dst.len() as i64;
        let cfg = self.grid(dst.len());
        let f = self.kernel::<T>("affine")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf)
            .arg(&mut dst.buf)
            .arg(&g)
            .arg(&order)
            .arg(&total);
        // SAFETY: reads are clamped into src by the mirror mapping; writes cover dst.
        unsafe { l.launch(cfg) }.ck()?;
        Ok(())
    }
}
