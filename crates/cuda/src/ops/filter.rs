use cudarc::driver::{LaunchConfig, PushKernelArg};
use monomorph_core::{
    ArrayMeta, BorderMode, Element, Filter, Float, Memory, Precision, Real, Result,
};

use super::{Geom, border_code};
use crate::error::Ck;
use crate::{BLOCK, Cuda, CudaArray};

mod plan;

use plan::MaxPass;

/// Pushes a scalar of T's width (f32/f64/i32/i64) converted from f64.
macro_rules! push_t {
    ($l:expr, $T:ty, $v:expr, $s32:ident, $s64:ident, $i32:ident, $i64:ident) => {
        match <$T as Element>::DTYPE {
            monomorph_core::DType::F32 => {
                $s32 = $v as f32;
                $l.arg(&$s32);
            }
            monomorph_core::DType::F64 => {
                $s64 = $v;
                $l.arg(&$s64);
            }
            monomorph_core::DType::I32 => {
                $i32 = <i32 as monomorph_core::Real>::from_f64($v);
                $l.arg(&$i32);
            }
            _ => {
                $i64 = <i64 as monomorph_core::Real>::from_f64($v);
                $l.arg(&$i64);
            }
        }
    };
}

impl<P: Precision> Filter for Cuda<P> {
    fn max_filter<T: Real>(
        &self,
        src: &CudaArray<T>,
        size: &[usize],
        mode: BorderMode,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_max_filter(src.shape(), size, mode, dst.shape())?;
        let total = src.len();
        if total == 0 {
            return Ok(());
        }
        let axes = plan::pass_order(size);
        if axes.is_empty() {
            return self.copy(src, dst);
        }
        let (code, cval) = border_code(mode);
        let mut tmp = if axes.len() > 1 {
            Some(self.zeros::<T>(src.shape())?)
        } else {
            None
        };
        let shape = src.shape().to_vec();
        let elem = std::mem::size_of::<T>();
        // Ping-pong so that the last pass writes into dst.
        for (i, &k) in axes.iter().enumerate() {
            let remaining = axes.len() - i;
            let stride: i64 = shape[k + 1..].iter().product::<usize>() as i64;
            let (len, sz) = (shape[k] as i64, size[k] as i64);
            let lines = total / shape[k];
            let kind = plan::max_pass_kind(shape[k], size[k], elem);
            let (func, cfg, items) = match kind {
                MaxPass::Direct => (self.kernel::<T>("maxf1d")?, self.grid(total), total),
                MaxPass::Lines => (self.kernel::<T>("maxf1d_vh")?, self.grid(lines), lines),
                MaxPass::Tiled { chunk } => {
                    let tiles = plan::tile_count(lines, shape[k], chunk);
                    let blocks = tiles.min(self.inner.sms.max(1) * 32).max(1);
                    let cfg = LaunchConfig {
                        grid_dim: (blocks as u32, 1, 1),
                        block_dim: (BLOCK, 1, 1),
                        shared_mem_bytes: plan::tile_shared_bytes(chunk, size[k], elem) as u32,
                    };
                    (self.kernel::<T>("maxf1d_tile")?, cfg, lines)
                }
            };
            let t64 = items as i64;
            let (mut s32, mut s64, mut i32v, mut i64v) = (0f32, 0f64, 0i32, 0i64);
            let _ = (s32, s64, i32v, i64v);
            let mut l = self.inner.stream.launch_builder(&func);
            match (i, tmp.as_mut()) {
                (0, Some(t)) if remaining.is_multiple_of(2) => l.arg(&src.buf).arg(&mut t.buf),
                (0, _) => l.arg(&src.buf).arg(&mut dst.buf),
                (_, Some(t)) if remaining.is_multiple_of(2) => l.arg(&dst.buf).arg(&mut t.buf),
                (_, Some(t)) => l.arg(&t.buf).arg(&mut dst.buf),
                (_, None) => l.arg(&src.buf).arg(&mut dst.buf),
            };
            l.arg(&t64).arg(&len).arg(&stride).arg(&sz).arg(&code);
            push_t!(l, T, cval, s32, s64, i32v, i64v);
            let chunk64 = match kind {
                MaxPass::Tiled { chunk } => chunk as i64,
                _ => 0,
            };
            if chunk64 > 0 {
                l.arg(&chunk64);
            }
            // SAFETY: both buffers hold `total` elements of T, `items` elements or lines of
            // `len`; a tiled launch has the dynamic shared memory its chunk needs (≤ 24 KiB).
            unsafe { l.launch(cfg) }.ck()?;
        }
        Ok(())
    }

    fn max_filter_footprint<T: Real>(
        &self,
        src: &CudaArray<T>,
        footprint: &[bool],
        footprint_shape: &[usize],
        mode: BorderMode,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_max_filter_footprint(
            src.shape(),
            footprint,
            footprint_shape,
            mode,
            dst.shape(),
        )?;
        let nd = src.ndim();
        let fstrides = monomorph_core::shape::strides(footprint_shape);
        let mut offs: Vec<i64> = Vec::new();
        for (flat, _) in footprint.iter().enumerate().filter(|(_, b)| **b) {
            for k in 0..nd {
                let c = (flat / fstrides[k]) % footprint_shape[k];
                offs.push(c as i64 - (footprint_shape[k] / 2) as i64);
            }
        }
        let total = src.len();
        if total == 0 {
            return Ok(());
        }
        let g = Geom::new("max_filter_footprint", src.shape(), src.shape())?;
        let noffs = (offs.len() / nd.max(1)) as i64;
        let dev_offs = self.upload_small(&offs)?;
        let (code, cval) = border_code(mode);
        let f = self.kernel::<T>("maxfp")?;
        let t64 = total as i64;
        let (mut s32, mut s64, mut i32v, mut i64v) = (0f32, 0f64, 0i32, 0i64);
        let _ = (s32, s64, i32v, i64v);
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf)
            .arg(&mut dst.buf)
            .arg(&g)
            .arg(&dev_offs)
            .arg(&noffs)
            .arg(&code);
        push_t!(l, T, cval, s32, s64, i32v, i64v);
        l.arg(&t64);
        // SAFETY: reads are mapped into src by the border rule or replaced by cval.
        unsafe { l.launch(self.grid(total)) }.ck()?;
        Ok(())
    }

    fn laplace<T: Float>(
        &self,
        src: &CudaArray<T>,
        mode: BorderMode,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_laplace(src.shape(), mode, dst.shape())?;
        let total = src.len();
        if total == 0 {
            return Ok(());
        }
        if src.ndim() == 0 {
            return self.copy(src, dst);
        }
        let g = Geom::new("laplace", src.shape(), src.shape())?;
        let (code, cval) = border_code(mode);
        let f = self.kernel::<T>("laplace")?;
        let t64 = total as i64;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf)
            .arg(&mut dst.buf)
            .arg(&g)
            .arg(&code)
            .arg(&cval)
            .arg(&t64);
        // SAFETY: reads are mapped into src by the border rule or replaced by cval.
        unsafe { l.launch(self.grid(total)) }.ck()?;
        Ok(())
    }

    fn gather<T: Element>(
        &self,
        src: &monomorph_core::Arr<Self, T>,
        indices: &[usize],
    ) -> Result<Vec<T>> {
        monomorph_core::check_gather(src.len(), indices)?;
        if indices.is_empty() {
            return Ok(Vec::new());
        }
        // Only the indices go up and the values come down; the map stays on the device.
        let idx: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let dev_idx = self.upload_small(&idx)?;
        let count = indices.len();
        let mut out = self
            .inner
            .stream
            .alloc_zeros::<u8>(count * std::mem::size_of::<T>())
            .ck()?;
        let f = self.kernel_sized::<T>("gather")?;
        let c64 = count as i64;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf).arg(&dev_idx).arg(&mut out).arg(&c64);
        // SAFETY: every index is below src.len() (checked); `out` holds `count` elements.
        unsafe { l.launch(self.grid(count)) }.ck()?;
        self.download_small(&out, count)
    }

    fn peak_candidates<T: Real>(
        &self,
        src: &CudaArray<T>,
        filtered: &CudaArray<T>,
        threshold: T,
        border: &[usize],
    ) -> Result<Vec<(usize, T)>> {
        monomorph_core::check_peak_candidates(src.shape(), filtered.shape(), border)?;
        let nd = src.ndim();
        let total = src.len();
        if total == 0 {
            return Ok(Vec::new());
        }
        let mut g = Geom::new("peak_candidates", src.shape(), src.shape())?;
        for k in 0..nd {
            g.p[k] = border[k] as i64;
        }
        let f = self.kernel::<T>("peaks")?;
        let t64 = total as i64;
        let tsize = std::mem::size_of::<T>();
        let mut cap = total.min(1 << 16);
        loop {
            let mut counter = self.inner.stream.alloc_zeros::<u8>(8).ck()?;
            let mut oidx = self.inner.stream.alloc_zeros::<u8>(cap * 8).ck()?;
            let mut oval = self.inner.stream.alloc_zeros::<u8>(cap * tsize).ck()?;
            let cap64 = cap as i64;
            let thr = <T as Real>::as_f64(threshold);
            let (mut s32, mut s64, mut i32v, mut i64v) = (0f32, 0f64, 0i32, 0i64);
            let _ = (s32, s64, i32v, i64v);
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&src.buf).arg(&filtered.buf);
            push_t!(l, T, thr, s32, s64, i32v, i64v);
            l.arg(&g)
                .arg(&t64)
                .arg(&mut counter)
                .arg(&mut oidx)
                .arg(&mut oval)
                .arg(&cap64);
            // SAFETY: writes go to slots below `cap`; the counter is one u64.
            unsafe { l.launch(self.grid(total)) }.ck()?;
            let count = self.download_small::<u64>(&counter, 1)?[0] as usize;
            if count > cap {
                cap = count;
                continue;
            }
            let idx: Vec<i64> = self.download_small(&oidx, count)?;
            let val: Vec<T> = self.download_small(&oval, count)?;
            let mut out: Vec<(usize, T)> = idx.into_iter().map(|i| i as usize).zip(val).collect();
            out.sort_by_key(|p| p.0);
            return Ok(out);
        }
    }
}
