use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use monomorph_core::{
    ArrayMeta, Boundary, CsrMatrix, DenseDims, Float, LaplacianDims, Linalg, Memory,
    PoissonStencil, Precision, Precond, Ratio, Result, check_active, check_axpy_pair_rows,
    check_axpy_rows, check_laplacian, check_matvec_csr, check_matvec_csr_dot, check_matvec_dense,
    check_matvec_dense_dot, check_row_scalars, check_scale_rows, check_stencil, check_xpay_rows,
};

use super::{A, rows_acc, to_acc};
use crate::error::Ck;
use crate::{BLOCK, Cuda, CudaArray};

/// A (blocks per row, rows) grid of 256-thread blocks.
fn row_grid(bpr: usize, rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (bpr as u32, rows as u32, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Where a fused kernel's per-row dots go: back to the host, or into a slot of the per-row
/// scalars on the device.
#[derive(Clone, Copy)]
pub(super) enum Dots {
    Host,
    /// Slot of the per-row scalars passed beside.
    Slot(usize),
}

/// Runs `f(config, row0)` for every chunk of at most 65535 rows of a (bpr, rows) grid (the
/// grid's y dimension is limited to 65535).
pub(super) fn row_chunks(
    rows: usize,
    bpr: usize,
    mut f: impl FnMut(LaunchConfig, i64) -> Result<()>,
) -> Result<()> {
    let mut row0 = 0usize;
    while row0 < rows {
        let chunk = (rows - row0).min(65535);
        f(row_grid(bpr, chunk), row0 as i64)?;
        row0 += chunk;
    }
    Ok(())
}

impl<P: Precision> Cuda<P> {
    /// Room for `k·rows·bpr` f64 partials (at least one), not initialised: the fused kernels
    /// write every (row, block) entry of each group they compute, inactive rows included, before
    /// the sums read them (no memset on the stream per call).
    pub(super) fn partials(
        &self,
        k: usize,
        rows: usize,
        bpr: usize,
    ) -> Result<std::sync::MutexGuard<'_, Option<CudaSlice<u8>>>> {
        // The backend's kept partials buffer (grown when smaller), not one allocation per
        // CG iteration; the guard holds its lock until the dots are read (stream order makes
        // the reuse across calls safe).
        let bytes = (k * rows * bpr).max(1) * 8;
        let mut guard = self
            .inner
            .partials
            .lock()
            .map_err(|_| monomorph_core::Error::Backend {
                backend: "cuda",
                message: "partials buffer lock poisoned".into(),
            })?;
        if guard.as_ref().is_none_or(|b| b.len() < bytes) {
            *guard = Some(self.inner.stream.alloc_zeros::<u8>(bytes.max(4096)).ck()?);
        }
        Ok(guard)
    }

    /// The `active` flags as device ints.
    pub(super) fn flags(&self, active: &[bool]) -> Result<CudaSlice<u8>> {
        let flags: Vec<i32> = active.iter().map(|&a| a as i32).collect();
        self.upload_small(&flags)
    }

    /// Sums each group `g` of the per-block partials (`rows·bpr` f64 each, group `g` going to
    /// `dest[g]`) per row: on the host in block order ([`Dots::Host`], returned in group
    /// order), or on the device in a fixed order into a slot of `s` ([`Dots::Slot`], nothing
    /// returned and no synchronisation).
    pub(super) fn finish_dots(
        &self,
        partial: &CudaSlice<u8>,
        rows: usize,
        bpr: usize,
        dest: &[Dots],
        mut s: Option<&mut CudaArray<A<P>>>,
    ) -> Result<Vec<Vec<f64>>> {
        let () = Self::DOUBLE_SLOTS;
        let groups = dest.len();
        let mut out = Vec::new();
        if dest.iter().any(|d| matches!(d, Dots::Host)) {
            let host: Vec<f64> = self.download_small(partial, groups * rows * bpr)?;
            for (g, d) in dest.iter().enumerate() {
                if matches!(d, Dots::Host) {
                    let part = &host[g * rows * bpr..(g + 1) * rows * bpr];
                    out.push(part.chunks(bpr).map(|c| c.iter().sum()).collect());
                }
            }
        }
        let f = self.func("row_partials_into")?;
        for (g, d) in dest.iter().enumerate() {
            if let (Dots::Slot(slot), Some(s)) = (d, s.as_deref_mut()) {
                let (off, r64, b64, sl) = (
                    (g * rows * bpr) as i64,
                    rows as i64,
                    bpr as i64,
                    *slot as i64,
                );
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(partial)
                    .arg(&off)
                    .arg(&r64)
                    .arg(&b64)
                    .arg(&mut s.buf)
                    .arg(&sl);
                // SAFETY: `partial` holds groups·rows·bpr f64, `s` (slots, rows) f64 with
                // `slot` < slots (checked by the caller).
                unsafe { l.launch(self.grid(rows * 32)) }.ck()?;
            }
        }
        Ok(out)
    }

    /// The Laplacian of the rows where `flags` fused with `x·y`: per-block partials.
    #[allow(clippy::too_many_arguments)]
    fn laplacian_dot_dev<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        dims: LaplacianDims,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        flags: &CudaSlice<u8>,
        dest: (&[Dots], Option<&mut CudaArray<A<P>>>),
    ) -> Result<Vec<Vec<f64>>> {
        let LaplacianDims { rows, n, grid3: g } = dims;
        let [nz, ny, nx] = g.map(|v| v as i64);
        let (nd, per) = (grid.len() as i32, (boundary == Boundary::Periodic) as i32);
        let bpr = self.blocks_per_row(rows, n);
        let mut kept = self.partials(1, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let f = self.kernel::<T>("laplacian_dot")?;
        let bpr64 = bpr as i64;
        row_chunks(rows, bpr, |cfg, r0| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&x.buf)
                .arg(&mut y.buf)
                .arg(&nz)
                .arg(&ny)
                .arg(&nx)
                .arg(&nd)
                .arg(&per)
                .arg(flags)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut *partial);
            // SAFETY: x and y hold rows·n elements; `flags` rows ints; `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })?;
        self.finish_dots(partial, rows, bpr, dest.0, dest.1)
    }

    /// Square dense products of the rows where `flags` fused with `x·y`.
    fn matvec_dense_dot_dev<T: Float>(
        &self,
        a: &CudaArray<T>,
        dims: DenseDims,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        flags: &CudaSlice<u8>,
        dest: (&[Dots], Option<&mut CudaArray<A<P>>>),
    ) -> Result<Vec<Vec<f64>>> {
        let DenseDims {
            batch: rows,
            n,
            per_entry,
            ..
        } = dims;
        // One warp per output, 8 per block.
        let bpr = self.blocks_per_row(rows, n.saturating_mul(BLOCK as usize / 8));
        let mut kept = self.partials(1, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let f = self.kernel::<T>("matvec_dense_dot")?;
        let (n64, pe, bpr64) = (n as i64, per_entry as i32, bpr as i64);
        row_chunks(rows, bpr, |cfg, r0| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&a.buf)
                .arg(&x.buf)
                .arg(&mut y.buf)
                .arg(&n64)
                .arg(&pe)
                .arg(flags)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut *partial);
            // SAFETY: shapes checked by the caller (square, `a` (n, n) or (rows, n, n));
            // `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })?;
        self.finish_dots(partial, rows, bpr, dest.0, dest.1)
    }

    /// Square CSR products of the rows where `flags` fused with `x·y`.
    fn matvec_csr_dot_dev<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        rows: usize,
        per_entry: bool,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        flags: &CudaSlice<u8>,
        dest: (&[Dots], Option<&mut CudaArray<A<P>>>),
    ) -> Result<Vec<Vec<f64>>> {
        let n = a.nrows;
        let bpr = self.blocks_per_row(rows, n);
        let mut kept = self.partials(1, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let f = self.kernel::<T>("matvec_csr_dot")?;
        let (n64, z64, pe, bpr64) = (n as i64, a.nnz() as i64, per_entry as i32, bpr as i64);
        row_chunks(rows, bpr, |cfg, r0| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&a.indptr.buf)
                .arg(&a.indices.buf)
                .arg(&a.data.buf)
                .arg(&x.buf)
                .arg(&mut y.buf)
                .arg(&n64)
                .arg(&z64)
                .arg(&pe)
                .arg(flags)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut *partial);
            // SAFETY: shapes checked by the caller; the CSR structure was validated when it
            // was built; `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })?;
        self.finish_dots(partial, rows, bpr, dest.0, dest.1)
    }

    /// `y = x + βy` on the rows where `flags`, `β` from `beta` (host) or from `ratio` of the
    /// per-row scalars `s`, with `y·x` per row when `dest` is not empty (into `dest`).
    #[allow(clippy::too_many_arguments)]
    fn xpay_masked<T: Float>(
        &self,
        x: &CudaArray<T>,
        beta: Option<&[T]>,
        ratio: Option<Ratio>,
        s: Option<&mut CudaArray<A<P>>>,
        y: &mut CudaArray<T>,
        rows: usize,
        n: usize,
        flags: &CudaSlice<u8>,
        dest: &[Dots],
    ) -> Result<Vec<Vec<f64>>> {
        let () = Self::DOUBLE_SLOTS;
        let dot = !dest.is_empty();
        let bpr = self.blocks_per_row(rows, n);
        let mut kept = self.partials(dot as usize, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let beta_dev = match beta {
            Some(b) => Some(self.upload_small(b)?),
            None => None,
        };
        let none = &self.inner.unused;
        let beta_dev = beta_dev.as_ref().unwrap_or(none);
        // Kernel code: 0 host factors, 1 the ratio, 2 its negation.
        let (num, den, from_s) = match ratio {
            Some(r) => (r.num as i64, r.den as i64, 1 + r.negate as i32),
            None => (0, 0, 0),
        };
        let f = self.kernel::<T>("xpay_rows_masked")?;
        let (n64, r64, d32, bpr64) = (n as i64, rows as i64, dot as i32, bpr as i64);
        {
            let s_buf = match (&s, from_s) {
                (Some(s), 1..) => &s.buf,
                _ => none,
            };
            row_chunks(rows, bpr, |cfg, r0| {
                let mut l = self.inner.stream.launch_builder(&f);
                l.arg(&x.buf)
                    .arg(beta_dev)
                    .arg(s_buf)
                    .arg(&num)
                    .arg(&den)
                    .arg(&from_s)
                    .arg(&mut y.buf)
                    .arg(&n64)
                    .arg(&r64)
                    .arg(flags)
                    .arg(&d32)
                    .arg(&bpr64)
                    .arg(&r0)
                    .arg(&mut *partial);
                // SAFETY: x and y hold rows·n elements; `beta_dev` rows scalars unless
                // `from_s`, then `s` is (slots, rows) with both slots checked by the caller;
                // `partial` rows·bpr f64 when `dot`.
                unsafe { l.launch(cfg) }.ck()?;
                Ok(())
            })?;
        }
        if dot {
            self.finish_dots(partial, rows, bpr, dest, s)
        } else {
            Ok(Vec::new())
        }
    }

    /// `rows_k(alpha, x, y, rows, n)`-style launch of a per-row kernel with host scalars.
    fn row_kernel<T: Float>(
        &self,
        name: &str,
        scalars: &[T],
        first: Option<&CudaArray<T>>,
        y: &mut CudaArray<T>,
        scalars_second: bool,
        rows: usize,
        n: usize,
    ) -> Result<()> {
        if rows * n == 0 {
            return Ok(());
        }
        let s = self.upload_small(scalars)?;
        let f = self.kernel::<T>(name)?;
        let (r64, n64) = (rows as i64, n as i64);
        let mut l = self.inner.stream.launch_builder(&f);
        match (first, scalars_second) {
            (Some(x), true) => l.arg(&x.buf).arg(&s),
            (Some(x), false) => l.arg(&s).arg(&x.buf),
            (None, _) => l.arg(&s),
        };
        l.arg(&mut y.buf).arg(&r64).arg(&n64);
        // SAFETY: arrays hold rows·n elements of T, `s` holds `rows` scalars.
        unsafe { l.launch(self.grid(rows * n)) }.ck()?;
        Ok(())
    }
}

impl<P: Precision> Linalg for Cuda<P> {
    fn matvec_dense<T: Float>(
        &self,
        a: &CudaArray<T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let DenseDims {
            batch,
            m,
            n,
            per_entry,
        } = check_matvec_dense(a.shape(), x.shape(), y.shape())?;
        if batch * m == 0 {
            return Ok(());
        }
        if n == 0 {
            return self.fill(y, T::zero());
        }
        let f = self.kernel::<T>("matvec_dense")?;
        let (b64, m64, n64, pe) = (batch as i64, m as i64, n as i64, per_entry as i32);
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&a.buf)
            .arg(&x.buf)
            .arg(&mut y.buf)
            .arg(&b64)
            .arg(&m64)
            .arg(&n64)
            .arg(&pe);
        // SAFETY: shapes checked above; one warp per output element.
        unsafe { l.launch(self.grid(batch * m * 32)) }.ck()?;
        Ok(())
    }

    fn matvec_csr<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let nnz = a.nnz();
        let (batch, per_entry) = check_matvec_csr(a, x.shape(), y.shape())?;
        let n = a.ncols;
        if batch * a.nrows == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("matvec_csr")?;
        let (b64, m64, n64, z64, pe) = (
            batch as i64,
            a.nrows as i64,
            n as i64,
            nnz as i64,
            per_entry as i32,
        );
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&a.indptr.buf)
            .arg(&a.indices.buf)
            .arg(&a.data.buf)
            .arg(&x.buf)
            .arg(&mut y.buf)
            .arg(&b64)
            .arg(&m64)
            .arg(&n64)
            .arg(&z64)
            .arg(&pe);
        // SAFETY: shapes checked above; the CSR structure was validated when it was built.
        unsafe { l.launch(self.grid(batch * a.nrows)) }.ck()?;
        Ok(())
    }

    fn laplacian<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let LaplacianDims {
            rows: batch,
            n,
            grid3: g,
        } = check_laplacian("laplacian", grid, x.shape(), y.shape())?;
        if batch == 0 {
            return Ok(());
        }
        let [nz, ny, nx] = g.map(|v| v as i64);
        let (b64, nd, per) = (
            batch as i64,
            grid.len() as i32,
            (boundary == Boundary::Periodic) as i32,
        );
        let f = self.kernel::<T>("laplacian")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&x.buf)
            .arg(&mut y.buf)
            .arg(&b64)
            .arg(&nz)
            .arg(&ny)
            .arg(&nx)
            .arg(&nd)
            .arg(&per);
        // SAFETY: x and y hold batch·n elements.
        unsafe { l.launch(self.grid(batch * n)) }.ck()?;
        Ok(())
    }

    fn stencil<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let (rows, n) = check_stencil("stencil", st, x.shape(), y.shape())?;
        if rows == 0 {
            return Ok(());
        }
        self.stencil_dev(st, rows, n, x, y)
    }

    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut CudaArray<T>) -> Result<()> {
        let (rows, n) = check_scale_rows(alpha, x.shape())?;
        self.row_kernel("scale_rows", alpha, None, x, false, rows, n)
    }

    fn axpy_rows<T: Float>(
        &self,
        alpha: &[T],
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let (rows, n) = check_axpy_rows(alpha, x.shape(), y.shape())?;
        self.row_kernel("axpy_rows", alpha, Some(x), y, false, rows, n)
    }

    fn xpay_rows<T: Float>(
        &self,
        x: &CudaArray<T>,
        beta: &[T],
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let (rows, n) = check_xpay_rows("xpay_rows", x.shape(), beta, y.shape(), None)?;
        self.row_kernel("xpay_rows", beta, Some(x), y, true, rows, n)
    }

    fn axpy_pair_rows<T: Float>(
        &self,
        alpha: &[T],
        d: &CudaArray<T>,
        q: &CudaArray<T>,
        x: &mut CudaArray<T>,
        r: &mut CudaArray<T>,
    ) -> Result<Vec<A<P>>> {
        let (rows, n) = check_axpy_pair_rows(
            "axpy_pair_rows",
            alpha,
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok(vec![to_acc::<P>(0.0); rows]);
        }
        let a = self.upload_small(alpha)?;
        let bpr = self.blocks_per_row(rows, n);
        let mut partial = self.inner.stream.alloc_zeros::<u8>(rows * bpr * 8).ck()?;
        let f = self.kernel::<T>("axpy_pair_rows")?;
        let (n64, bpr64) = (n as i64, bpr as i64);
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
            l.arg(&a)
                .arg(&d.buf)
                .arg(&q.buf)
                .arg(&mut x.buf)
                .arg(&mut r.buf)
                .arg(&n64)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut partial);
            // SAFETY: the four vectors hold rows·n elements; `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            row0 += chunk;
        }
        let host: Vec<f64> = self.download_small(&partial, rows * bpr)?;
        Ok(rows_acc::<P>(
            host.chunks(bpr).map(|c| c.iter().sum()).collect(),
        ))
    }

    fn axpy_pair_rows_dots<T: Float>(
        &self,
        alpha: &[T],
        d: &CudaArray<T>,
        q: &CudaArray<T>,
        x: &mut CudaArray<T>,
        r: &mut CudaArray<T>,
    ) -> Result<(Vec<A<P>>, Vec<A<P>>)> {
        let (rows, n) = check_axpy_pair_rows(
            "axpy_pair_rows_dots",
            alpha,
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        if rows == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        if n == 0 {
            return Ok((vec![to_acc::<P>(0.0); rows], vec![to_acc::<P>(0.0); rows]));
        }
        let a = self.upload_small(alpha)?;
        let bpr = self.blocks_per_row(rows, n);
        let mut partial = self
            .inner
            .stream
            .alloc_zeros::<u8>(2 * rows * bpr * 8)
            .ck()?;
        let f = self.kernel::<T>("axpy_pair_rows_dots")?;
        let (n64, rows64, bpr64) = (n as i64, rows as i64, bpr as i64);
        let mut row0 = 0usize;
        while row0 < rows {
            let chunk = (rows - row0).min(65535);
            let r0 = row0 as i64;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&a)
                .arg(&d.buf)
                .arg(&q.buf)
                .arg(&mut x.buf)
                .arg(&mut r.buf)
                .arg(&n64)
                .arg(&rows64)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut partial);
            // SAFETY: the four vectors hold rows·n elements; `partial` 2·rows·bpr f64.
            unsafe { l.launch(row_grid(bpr, chunk)) }.ck()?;
            row0 += chunk;
        }
        let host: Vec<f64> = self.download_small(&partial, 2 * rows * bpr)?;
        let (rr, rq) = host.split_at(rows * bpr);
        Ok((
            rows_acc::<P>(rr.chunks(bpr).map(|c| c.iter().sum()).collect()),
            rows_acc::<P>(rq.chunks(bpr).map(|c| c.iter().sum()).collect()),
        ))
    }

    fn laplacian_dot<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        let dims = check_laplacian("laplacian_dot", grid, x.shape(), y.shape())?;
        check_active("laplacian_dot", active, dims.rows)?;
        if dims.rows == 0 {
            return Ok(Vec::new());
        }
        let flags = self.flags(active)?;
        let mut v =
            self.laplacian_dot_dev(grid, boundary, dims, x, y, &flags, (&[Dots::Host], None))?;
        Ok(rows_acc::<P>(v.pop().unwrap_or_default()))
    }

    fn stencil_dot<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        let (rows, n) = check_stencil("stencil_dot", st, x.shape(), y.shape())?;
        check_active("stencil_dot", active, rows)?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        let flags = self.flags(active)?;
        let mut v = self.stencil_dot_dev(st, rows, n, x, y, &flags, (&[Dots::Host], None))?;
        Ok(rows_acc::<P>(v.pop().unwrap_or_default()))
    }

    fn stencil_dot_into<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        mask: &CudaArray<i32>,
        s: &mut CudaArray<A<P>>,
        slot: usize,
    ) -> Result<()> {
        let (rows, n) = check_stencil("stencil_dot_into", st, x.shape(), y.shape())?;
        check_row_scalars("stencil_dot_into", s.shape(), mask.shape(), rows, &[slot])?;
        if rows == 0 {
            return Ok(());
        }
        let dest = (&[Dots::Slot(slot)][..], Some(s));
        self.stencil_dot_dev(st, rows, n, x, y, &mask.buf, dest)?;
        Ok(())
    }

    fn matvec_dense_dot<T: Float>(
        &self,
        a: &CudaArray<T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        let dims = check_matvec_dense_dot(a.shape(), x.shape(), y.shape(), active)?;
        if dims.batch == 0 {
            return Ok(Vec::new());
        }
        let flags = self.flags(active)?;
        let mut v = self.matvec_dense_dot_dev(a, dims, x, y, &flags, (&[Dots::Host], None))?;
        Ok(rows_acc::<P>(v.pop().unwrap_or_default()))
    }

    fn matvec_csr_dot<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        let (rows, per_entry) = check_matvec_csr_dot(a, x.shape(), y.shape(), active)?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        let flags = self.flags(active)?;
        let mut v =
            self.matvec_csr_dot_dev(a, rows, per_entry, x, y, &flags, (&[Dots::Host], None))?;
        Ok(rows_acc::<P>(v.pop().unwrap_or_default()))
    }

    fn xpay_rows_where<T: Float>(
        &self,
        x: &CudaArray<T>,
        beta: &[T],
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<()> {
        let (rows, n) =
            check_xpay_rows("xpay_rows_where", x.shape(), beta, y.shape(), Some(active))?;
        if rows * n == 0 {
            return Ok(());
        }
        let flags = self.flags(active)?;
        self.xpay_masked(x, Some(beta), None, None, y, rows, n, &flags, &[])?;
        Ok(())
    }

    fn xpay_rows_dot<T: Float>(
        &self,
        x: &CudaArray<T>,
        beta: &[T],
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        let (rows, n) = check_xpay_rows("xpay_rows_dot", x.shape(), beta, y.shape(), Some(active))?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        let flags = self.flags(active)?;
        let host = [Dots::Host];
        let mut v = self.xpay_masked(x, Some(beta), None, None, y, rows, n, &flags, &host)?;
        Ok(rows_acc::<P>(v.pop().unwrap_or_default()))
    }

    fn laplacian_dot_into<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        mask: &CudaArray<i32>,
        s: &mut CudaArray<A<P>>,
        slot: usize,
    ) -> Result<()> {
        let dims = check_laplacian("laplacian_dot_into", grid, x.shape(), y.shape())?;
        check_row_scalars(
            "laplacian_dot_into",
            s.shape(),
            mask.shape(),
            dims.rows,
            &[slot],
        )?;
        if dims.rows == 0 {
            return Ok(());
        }
        let dest = (&[Dots::Slot(slot)][..], Some(s));
        self.laplacian_dot_dev(grid, boundary, dims, x, y, &mask.buf, dest)?;
        Ok(())
    }

    fn matvec_dense_dot_into<T: Float>(
        &self,
        a: &CudaArray<T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        mask: &CudaArray<i32>,
        s: &mut CudaArray<A<P>>,
        slot: usize,
    ) -> Result<()> {
        // The checks in the default body's order, so that both fail alike.
        let (rows, _) = monomorph_core::shape::rows_of("x of matvec_dense_dot_into", x.shape())?;
        check_row_scalars(
            "matvec_dense_dot_into",
            s.shape(),
            mask.shape(),
            rows,
            &[slot],
        )?;
        let dims = check_matvec_dense_dot(a.shape(), x.shape(), y.shape(), &vec![true; rows])?;
        if rows == 0 {
            return Ok(());
        }
        let dest = (&[Dots::Slot(slot)][..], Some(s));
        self.matvec_dense_dot_dev(a, dims, x, y, &mask.buf, dest)?;
        Ok(())
    }

    fn matvec_csr_dot_into<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        mask: &CudaArray<i32>,
        s: &mut CudaArray<A<P>>,
        slot: usize,
    ) -> Result<()> {
        let (rows, _) = monomorph_core::shape::rows_of("x of matvec_csr_dot_into", x.shape())?;
        check_row_scalars(
            "matvec_csr_dot_into",
            s.shape(),
            mask.shape(),
            rows,
            &[slot],
        )?;
        let (rows, per_entry) = check_matvec_csr_dot(a, x.shape(), y.shape(), &vec![true; rows])?;
        if rows == 0 {
            return Ok(());
        }
        let dest = (&[Dots::Slot(slot)][..], Some(s));
        self.matvec_csr_dot_dev(a, rows, per_entry, x, y, &mask.buf, dest)?;
        Ok(())
    }

    fn axpy_pair_rows_ratio<T: Float>(
        &self,
        s: &mut CudaArray<A<P>>,
        ratio: Ratio,
        mask: &CudaArray<i32>,
        d: &CudaArray<T>,
        q: &CudaArray<T>,
        x: &mut CudaArray<T>,
        r: &mut CudaArray<T>,
        rr: usize,
        precond: Option<Precond<'_, Self, T>>,
        rq: Option<usize>,
    ) -> Result<()> {
        let () = Self::DOUBLE_SLOTS;
        let op = "axpy_pair_rows_ratio";
        let rows = d.shape().first().copied().unwrap_or(0);
        let (rows, n) = check_axpy_pair_rows(
            op,
            &vec![(); rows],
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        let mut used = vec![ratio.num, ratio.den, rr];
        used.extend(rq);
        if let Some(p) = &precond {
            used.push(p.slot);
            monomorph_core::shape::same_shape(
                "axpy_pair_rows_ratio: w vs d",
                d.shape(),
                p.w.shape(),
            )?;
            monomorph_core::shape::same_shape(
                "axpy_pair_rows_ratio: z vs d",
                d.shape(),
                p.z.shape(),
            )?;
        }
        check_row_scalars(op, s.shape(), mask.shape(), rows, &used)?;
        if rows == 0 {
            return Ok(());
        }
        let groups = 1 + precond.is_some() as usize + rq.is_some() as usize;
        let bpr = self.blocks_per_row(rows, n);
        let mut kept = self.partials(groups, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let unused = &self.inner.unused;
        let f = self.kernel::<T>("axpy_pair_rows_ratio")?;
        let (num, den) = (ratio.num as i64, ratio.den as i64);
        let (n64, r64, bpr64) = (n as i64, rows as i64, bpr as i64);
        let (mut precond, rz_slot) = match precond {
            Some(p) => (Some((p.w, p.z)), Some(p.slot)),
            None => (None, None),
        };
        let (pre, want_rq) = (precond.is_some() as i32, rq.is_some() as i32);
        row_chunks(rows, bpr, |cfg, r0| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&s.buf)
                .arg(&num)
                .arg(&den)
                .arg(&mask.buf)
                .arg(&d.buf)
                .arg(&q.buf)
                .arg(&mut x.buf)
                .arg(&mut r.buf);
            match &mut precond {
                Some((w, z)) => l.arg(&w.buf).arg(&mut z.buf),
                None => l.arg(unused).arg(unused),
            };
            l.arg(&pre)
                .arg(&want_rq)
                .arg(&n64)
                .arg(&r64)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut *partial);
            // SAFETY: the vectors (and w, z with `pre`) hold rows·n elements; `s` is
            // (slots, rows) with every slot checked above; `partial` groups·rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })?;
        let mut dest = vec![Dots::Slot(rr)];
        dest.extend(rz_slot.map(Dots::Slot));
        dest.extend(rq.map(Dots::Slot));
        self.finish_dots(partial, rows, bpr, &dest, Some(s))?;
        Ok(())
    }

    fn xpay_rows_ratio<T: Float>(
        &self,
        x: &CudaArray<T>,
        s: &mut CudaArray<A<P>>,
        ratio: Ratio,
        mask: &CudaArray<i32>,
        y: &mut CudaArray<T>,
        dot: Option<usize>,
    ) -> Result<()> {
        let op = "xpay_rows_ratio";
        monomorph_core::shape::same_shape("xpay_rows_ratio: y vs x", x.shape(), y.shape())?;
        let (rows, n) = monomorph_core::shape::rows_of("x of xpay_rows_ratio", x.shape())?;
        let mut used = vec![ratio.num, ratio.den];
        used.extend(dot);
        check_row_scalars(op, s.shape(), mask.shape(), rows, &used)?;
        if rows == 0 {
            return Ok(());
        }
        let dest: Vec<Dots> = dot.map(Dots::Slot).into_iter().collect();
        self.xpay_masked(x, None, Some(ratio), Some(s), y, rows, n, &mask.buf, &dest)?;
        Ok(())
    }
}
