use cudarc::driver::{LaunchConfig, PushKernelArg};
use monomorph_core::{
    ArrayMeta, Float, Precision, Real, Reduce, Result, all_nan_error, check_dot,
    check_reduce_nonempty, check_rows,
};

use super::{A, rows_acc, to_acc};
use crate::error::Ck;
use crate::{BLOCK, Cuda, CudaArray};

mod topk;

use topk::RadixSelect;

/// Kernel modes of `reduce_rows` (see `reduce.cu`).
const SUM: i32 = 0;
const SUM_SQ: i32 = 1;
const DOT: i32 = 2;
const NONFINITE: i32 = 3;
const CENTRED_SQ: i32 = 4;

impl<P: Precision> Cuda<P> {
    /// Blocks per row for a (rows × n) reduction: enough to fill the device, at least
    /// 4 elements per thread.
    pub(crate) fn blocks_per_row(&self, rows: usize, n: usize) -> usize {
        let want = n.div_ceil(BLOCK as usize * 4).max(1);
        let cap = (self.inner.sms.max(1) * 8).div_ceil(rows.max(1)).max(1);
        want.min(cap).min(1024)
    }

    /// Per-row f64 reductions in one launch per 65535 rows; the host adds the per-block
    /// partials in block order (deterministic).
    pub(crate) fn reduce_rows<T: Real>(
        &self,
        mode: i32,
        a: &CudaArray<T>,
        b: Option<&CudaArray<T>>,
        centre: f64,
        rows: usize,
        n: usize,
    ) -> Result<Vec<f64>> {
        if rows == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok(vec![0.0; rows]);
        }
        let bpr = self.blocks_per_row(rows, n);
        let partial = self.inner.stream.alloc_zeros::<u8>(rows * bpr * 8).ck()?;
        let mut partial = partial;
        let f = self.kernel::<T>("reduce_rows")?;
        let (n64, bpr64) = (n as i64, bpr as i64);
        let other = b.unwrap_or(a);
        let mut row0 = 0usize;
        while row0 < rows {
            let chunk = (rows - row0).min(65535);
            let r0 = row0 as i64;
            let cfg = LaunchConfig {
                grid_dim: (bpr as u32, chunk as u32, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&mode)
                .arg(&a.buf)
                .arg(&other.buf)
                .arg(&centre)
                .arg(&n64)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut partial);
            // SAFETY: `a`/`other` hold rows·n elements of T, `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            row0 += chunk;
        }
        let host: Vec<f64> = self.download_small(&partial, rows * bpr)?;
        Ok(host.chunks(bpr).map(|c| c.iter().sum()).collect())
    }

    fn whole<T: Real>(
        &self,
        mode: i32,
        a: &CudaArray<T>,
        b: Option<&CudaArray<T>>,
        c: f64,
    ) -> Result<f64> {
        Ok(self
            .reduce_rows(mode, a, b, c, 1, a.len())?
            .first()
            .copied()
            .unwrap_or(0.0))
    }

    /// (flat index, value) of the first maximum (or minimum) ignoring NaN; `None` when every
    /// element is NaN.
    fn extreme<T: Real>(&self, a: &CudaArray<T>, want_max: bool) -> Result<Option<(usize, T)>> {
        let n = a.len();
        check_reduce_nonempty(n)?;
        let blocks = n.div_ceil(BLOCK as usize).clamp(1, 1024);
        let mut oi = self.inner.stream.alloc_zeros::<u8>(blocks * 8).ck()?;
        let mut ov = self
            .inner
            .stream
            .alloc_zeros::<u8>(blocks * std::mem::size_of::<T>())
            .ck()?;
        let f = self.kernel::<T>("extreme")?;
        let (wm, n64) = (want_max as i32, n as i64);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&wm).arg(&a.buf).arg(&n64).arg(&mut oi).arg(&mut ov);
        // SAFETY: `a` holds n elements; the outputs hold one entry per block.
        unsafe { l.launch(cfg) }.ck()?;
        let idx: Vec<i64> = self.download_small(&oi, blocks)?;
        let val: Vec<T> = self.download_small(&ov, blocks)?;
        let mut best: Option<(usize, T)> = None;
        for (i, v) in idx.into_iter().zip(val) {
            if i < 0 {
                continue;
            }
            let i = i as usize;
            best = match best {
                None => Some((i, v)),
                Some((bi, bv)) => {
                    let better = if want_max { v > bv } else { v < bv };
                    if better || (v == bv && i < bi) {
                        Some((i, v))
                    } else {
                        Some((bi, bv))
                    }
                }
            };
        }
        Ok(best)
    }
}

/// The CPU's `top_k` order on (index, value) pairs: value descending (−0 equal to +0), then
/// index ascending; keeps the first `k`. Values must not be NaN.
pub(crate) fn sort_top<T: Real>(v: &mut Vec<(usize, T)>, k: usize) {
    v.sort_unstable_by(|x, y| {
        y.1.partial_cmp(&x.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(x.0.cmp(&y.0))
    });
    v.truncate(k);
}

impl<P: Precision> Cuda<P> {
    /// `top_k` for `k > 1` on the device (see `reduce/topk.rs`): histogram passes of a radix
    /// select, one compaction of at most `k + SLACK` candidates (or every non-NaN element when
    /// there are no more than `k`), a host sort. Only the histograms and the candidates cross.
    fn top_k_radix<T: Real>(&self, a: &CudaArray<T>, k: usize) -> Result<Vec<(usize, T)>> {
        let n = a.len();
        let vbits = 8 * std::mem::size_of::<T>() as u32;
        let mut rs = RadixSelect::new(k, n, vbits);
        let (vb, ib) = rs.widths();
        let (vb, ib) = (vb as i32, ib as i32);
        let n64 = n as i64;
        let cfg = self.grid(n);
        let fh = self.kernel::<T>("topk_hist")?;
        let mut hist = self.inner.stream.alloc_zeros::<u8>(256 * 8).ck()?;
        while !rs.done() {
            let p = rs.prefix();
            let known = p.known as i32;
            self.inner.stream.memset_zeros(&mut hist).ck()?;
            let mut l = self.inner.stream.launch_builder(&fh);
            l.arg(&a.buf)
                .arg(&n64)
                .arg(&vb)
                .arg(&ib)
                .arg(&known)
                .arg(&p.vpre)
                .arg(&p.ipre)
                .arg(&mut hist);
            // SAFETY: `a` holds n elements of T; `hist` 256 u64.
            unsafe { l.launch(cfg) }.ck()?;
            let h: Vec<u64> = self.download_small(&hist, 256)?;
            let mut bins = [0u64; 256];
            bins.copy_from_slice(&h);
            rs.feed(&bins);
        }
        let want = rs.candidates() as usize;
        if want == 0 {
            return Ok(Vec::new());
        }
        let p = rs.prefix();
        let known = p.known as i32;
        let fs = self.kernel::<T>("topk_select")?;
        let mut counter = self.inner.stream.alloc_zeros::<u8>(8).ck()?;
        let mut oidx = self.inner.stream.alloc_zeros::<u8>(want * 8).ck()?;
        let mut oval = self
            .inner
            .stream
            .alloc_zeros::<u8>(want * std::mem::size_of::<T>())
            .ck()?;
        let cap = want as i64;
        let mut l = self.inner.stream.launch_builder(&fs);
        l.arg(&a.buf)
            .arg(&n64)
            .arg(&vb)
            .arg(&ib)
            .arg(&known)
            .arg(&p.vpre)
            .arg(&p.ipre)
            .arg(&mut counter)
            .arg(&mut oidx)
            .arg(&mut oval)
            .arg(&cap);
        // SAFETY: writes go to slots below `cap`; the counter is one u64.
        unsafe { l.launch(cfg) }.ck()?;
        let count = self.download_small::<u64>(&counter, 1)?[0] as usize;
        if count != want {
            // The histograms counted `want` elements at or above the prefix: a different count
            // is a device fault, not an answer.
            return Err(monomorph_core::Error::Backend {
                backend: "cuda",
                message: format!(
                    "top_k: the selection took {count} elements where the histograms counted {want}"
                ),
            });
        }
        let idx: Vec<i64> = self.download_small(&oidx, count)?;
        let val: Vec<T> = self.download_small(&oval, count)?;
        let mut out: Vec<(usize, T)> = idx.into_iter().map(|i| i as usize).zip(val).collect();
        sort_top(&mut out, k);
        Ok(out)
    }
}

impl<P: Precision> Reduce for Cuda<P> {
    fn sum<T: Real>(&self, a: &CudaArray<T>) -> Result<A<P>> {
        self.whole(SUM, a, None, 0.0).map(to_acc::<P>)
    }

    fn sum_sq<T: Float>(&self, a: &CudaArray<T>) -> Result<A<P>> {
        self.whole(SUM_SQ, a, None, 0.0).map(to_acc::<P>)
    }

    fn dot<T: Float>(&self, a: &CudaArray<T>, b: &CudaArray<T>) -> Result<A<P>> {
        check_dot("dot", a.shape(), b.shape())?;
        self.whole(DOT, a, Some(b), 0.0).map(to_acc::<P>)
    }

    fn min<T: Real>(&self, a: &CudaArray<T>) -> Result<T> {
        self.extreme(a, false)?
            .map(|x| x.1)
            .ok_or_else(|| all_nan_error(a.len()))
    }

    fn max<T: Real>(&self, a: &CudaArray<T>) -> Result<T> {
        Ok(self.argmax(a)?.1)
    }

    fn argmax<T: Real>(&self, a: &CudaArray<T>) -> Result<(usize, T)> {
        self.extreme(a, true)?.ok_or_else(|| all_nan_error(a.len()))
    }

    fn top_k<T: Real>(&self, a: &CudaArray<T>, k: usize) -> Result<Vec<(usize, T)>> {
        if k == 0 || a.is_empty() {
            return Ok(Vec::new());
        }
        if k == 1 {
            return Ok(self.extreme(a, true)?.into_iter().collect());
        }
        self.top_k_radix(a, k)
    }

    fn count_nonfinite<T: Float>(&self, a: &CudaArray<T>) -> Result<usize> {
        Ok(self.whole(NONFINITE, a, None, 0.0)? as usize)
    }

    fn sum_rows<T: Float>(&self, a: &CudaArray<T>) -> Result<Vec<A<P>>> {
        let (rows, n) = check_rows("sum_rows", a.shape())?;
        self.reduce_rows(SUM, a, None, 0.0, rows, n)
            .map(rows_acc::<P>)
    }

    fn dot_rows<T: Float>(&self, a: &CudaArray<T>, b: &CudaArray<T>) -> Result<Vec<A<P>>> {
        check_dot("dot_rows", a.shape(), b.shape())?;
        let (rows, n) = check_rows("dot_rows", a.shape())?;
        self.reduce_rows(DOT, a, Some(b), 0.0, rows, n)
            .map(rows_acc::<P>)
    }

    fn sum_sq_rows<T: Float>(&self, a: &CudaArray<T>) -> Result<Vec<A<P>>> {
        let (rows, n) = check_rows("sum_sq_rows", a.shape())?;
        self.reduce_rows(SUM_SQ, a, None, 0.0, rows, n)
            .map(rows_acc::<P>)
    }

    fn mean_std<T: Float>(&self, a: &CudaArray<T>) -> Result<(A<P>, A<P>)> {
        let n = a.len();
        check_reduce_nonempty(n)?;
        // Two passes, as the CPU backend: the mean, then Σ (a − mean)².
        let mean = self.sum(a)?.as_f64() / n as f64;
        let var = self.whole(CENTRED_SQ, a, None, mean)? / n as f64;
        Ok((to_acc::<P>(mean), to_acc::<P>(var.sqrt())))
    }
}
