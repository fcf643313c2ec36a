use std::marker::PhantomData;

use cudarc::driver::PushKernelArg;
use monomorph_core::backend::array_bytes;
use monomorph_core::{ArrayMeta, Element, Error, Memory, Precision, Real, Result};
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::error::Ck;
use crate::{Cuda, CudaArray};

impl<P: Precision> Memory for Cuda<P> {
    fn zeros<T: Element>(&self, shape: &[usize]) -> Result<CudaArray<T>> {
        let bytes = array_bytes::<T>(shape)?;
        self.check_allocation("array", bytes)?;
        // One byte minimum: the driver rejects empty allocations.
        let buf = self
            .inner
            .stream
            .alloc_zeros::<u8>((bytes as usize).max(1))
            .ck()?;
        Ok(CudaArray {
            buf,
            shape: shape.to_vec(),
            _t: PhantomData,
        })
    }

    fn upload<T: Element>(&self, host: ArrayViewD<'_, T>) -> Result<CudaArray<T>> {
        self.check_allocation("upload", array_bytes::<T>(host.shape())?)?;
        let std = host.as_standard_layout();
        let data = std
            .as_slice()
            .ok_or_else(|| Error::invalid("host", "array could not be made contiguous"))?;
        if data.is_empty() {
            return self.zeros(host.shape());
        }
        let buf = self
            .inner
            .stream
            .clone_htod(bytemuck::cast_slice::<T, u8>(data))
            .ck()?;
        Ok(CudaArray {
            buf,
            shape: host.shape().to_vec(),
            _t: PhantomData,
        })
    }

    fn download<T: Element>(&self, a: &CudaArray<T>) -> Result<ArrayD<T>> {
        let v: Vec<T> = self.download_small(&a.buf, a.len())?;
        ArrayD::from_shape_vec(IxDyn(&a.shape), v)
            .map_err(|e| Error::invalid("download", e.to_string()))
    }

    fn copy<T: Element>(&self, src: &CudaArray<T>, dst: &mut CudaArray<T>) -> Result<()> {
        monomorph_core::check_copy("copy", src.shape(), dst.shape())?;
        let nb = src.num_bytes();
        if nb == 0 {
            return Ok(());
        }
        self.inner
            .stream
            .memcpy_dtod(&src.buf.slice(0..nb), &mut dst.buf.slice_mut(0..nb))
            .ck()
    }

    fn fill<T: Element>(&self, a: &mut CudaArray<T>, value: T) -> Result<()> {
        let n = a.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel_sized::<T>("fill")?;
        let bytes = bytemuck::bytes_of(&value);
        let cfg = self.grid(a.len());
        let s = &self.inner.stream;
        let mut b = s.launch_builder(&f);
        b.arg(&mut a.buf);
        let (v1, v4, v8, lo, hi);
        match bytes.len() {
            1 => {
                v1 = bytes[0];
                b.arg(&v1);
            }
            4 => {
                v4 = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                b.arg(&v4);
            }
            8 => {
                v8 = u64::from_ne_bytes(bytemuck::pod_read_unaligned(bytes));
                b.arg(&v8);
            }
            _ => {
                lo = u64::from_ne_bytes(bytemuck::pod_read_unaligned(&bytes[..8]));
                hi = u64::from_ne_bytes(bytemuck::pod_read_unaligned(&bytes[8..16]));
                b.arg(&lo).arg(&hi);
            }
        }
        b.arg(&n);
        // SAFETY: the kernel writes `n` elements of the array's own size into its buffer.
        unsafe { b.launch(cfg) }.ck()?;
        Ok(())
    }

    fn reshape<T: Element>(&self, mut a: CudaArray<T>, shape: &[usize]) -> Result<CudaArray<T>> {
        monomorph_core::check_reshape(a.len(), shape)?;
        a.shape = shape.to_vec();
        Ok(a)
    }

    fn cast<S: Real, D: Real>(&self, src: &CudaArray<S>, dst: &mut CudaArray<D>) -> Result<()> {
        monomorph_core::check_copy("cast", src.shape(), dst.shape())?;
        let n = src.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel2::<S, D>("cast")?;
        let cfg = self.grid(src.len());
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&src.buf).arg(&mut dst.buf).arg(&n);
        // SAFETY: both buffers hold `n` elements of the kernel's types.
        unsafe { b.launch(cfg) }.ck()?;
        Ok(())
    }

    /// The driver's free memory plus what the stream-ordered pool holds without using: freed
    /// arrays stay reserved (the release threshold is raised), and the next allocation takes
    /// them first, so they are as available as free memory.
    fn available_memory(&self) -> u64 {
        let Ok((free, total)) = self.inner.ctx.mem_get_info() else {
            return 0;
        };
        let (reserved, used) = self.pool_usage().unwrap_or((0, 0));
        available(free as u64, reserved, used, total as u64)
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.stream.synchronize().ck()?;
        self.inner.ctx.check_err().ck()
    }
}

/// Free memory plus the pool's reserved-but-unused bytes, never above the device's total.
pub(crate) fn available(free: u64, reserved: u64, used: u64, total: u64) -> u64 {
    free.saturating_add(reserved.saturating_sub(used))
        .min(total)
}

impl<P: Precision> Cuda<P> {
    /// (reserved, used) bytes of the device's default memory pool, or `None` without one.
    pub(crate) fn pool_usage(&self) -> Option<(u64, u64)> {
        use cudarc::driver::result::{device, mem_pool};
        use cudarc::driver::sys::CUmemPool_attribute as A;
        if !self.inner.ctx.has_async_alloc() {
            return None;
        }
        let (mut reserved, mut used) = (0u64, 0u64);
        // SAFETY: the device handle comes from a live context; both attributes are u64.
        unsafe {
            let pool = device::get_default_mem_pool(self.inner.ctx.cu_device()).ok()?;
            mem_pool::get_attribute(
                pool,
                A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                &mut reserved as *mut u64 as *mut std::ffi::c_void,
            )
            .ok()?;
            mem_pool::get_attribute(
                pool,
                A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                &mut used as *mut u64 as *mut std::ffi::c_void,
            )
            .ok()?;
        }
        Some((reserved, used))
    }
}

#[cfg(test)]
mod tests {
    use super::available;

    #[test]
    fn pool_bytes_kept_after_frees_count_as_available() {
        const G: u64 = 1 << 30;
        // 10 GiB free, the pool holds 8 GiB of which 3 are in use: 15 GiB available.
        assert_eq!(available(10 * G, 8 * G, 3 * G, 141 * G), 15 * G);
        // Nothing reserved, or everything in use: the driver's figure.
        assert_eq!(available(10 * G, 0, 0, 141 * G), 10 * G);
        assert_eq!(available(10 * G, 4 * G, 4 * G, 141 * G), 10 * G);
        // Never above the device's total, never underflowing.
        assert_eq!(available(140 * G, 8 * G, 0, 141 * G), 141 * G);
        assert_eq!(available(0, 1, 5, 141 * G), 0);
    }
}
