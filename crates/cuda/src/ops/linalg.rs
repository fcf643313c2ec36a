use cudarc::driver::{LaunchConfig, PushKernelArg};
use monomorph_core::{
    ArrayMeta, Boundary, CsrMatrix, DenseDims, Float, LaplacianDims, Linalg, Memory, Precision,
    Result, check_active, check_axpy_pair_rows, check_axpy_rows, check_laplacian, check_matvec_csr,
    check_matvec_dense, check_scale_rows, check_xpay_rows,
};

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

impl<P: Precision> Cuda<P> {
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
    ) -> Result<Vec<f64>> {
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
            return Ok(vec![0.0; rows]);
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
        Ok(host.chunks(bpr).map(|c| c.iter().sum()).collect())
    }

    fn axpy_pair_rows_dots<T: Float>(
        &self,
        alpha: &[T],
        d: &CudaArray<T>,
        q: &CudaArray<T>,
        x: &mut CudaArray<T>,
        r: &mut CudaArray<T>,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
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
            return Ok((vec![0.0; rows], vec![0.0; rows]));
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
            rr.chunks(bpr).map(|c| c.iter().sum()).collect(),
            rq.chunks(bpr).map(|c| c.iter().sum()).collect(),
        ))
    }

    fn laplacian_dot<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        active: &[bool],
    ) -> Result<Vec<f64>> {
        let LaplacianDims { rows, n, grid3: g } =
            check_laplacian("laplacian_dot", grid, x.shape(), y.shape())?;
        check_active("laplacian_dot", active, rows)?;
        if rows == 0 {
            return Ok(Vec::new());
        }
        let flags: Vec<i32> = active.iter().map(|&a| a as i32).collect();
        let dev_flags = self.upload_small(&flags)?;
        let [nz, ny, nx] = g.map(|v| v as i64);
        let (nd, per) = (grid.len() as i32, (boundary == Boundary::Periodic) as i32);
        let bpr = self.blocks_per_row(rows, n);
        let mut partial = self.inner.stream.alloc_zeros::<u8>(rows * bpr * 8).ck()?;
        let f = self.kernel::<T>("laplacian_dot")?;
        let bpr64 = bpr as i64;
        let mut row0 = 0usize;
        while row0 < rows {
            let chunk = (rows - row0).min(65535);
            let r0 = row0 as i64;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&x.buf)
                .arg(&mut y.buf)
                .arg(&nz)
                .arg(&ny)
                .arg(&nx)
                .arg(&nd)
                .arg(&per)
                .arg(&dev_flags)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut partial);
            // SAFETY: x and y hold rows·n elements; `partial` rows·bpr f64.
            unsafe { l.launch(row_grid(bpr, chunk)) }.ck()?;
            row0 += chunk;
        }
        let host: Vec<f64> = self.download_small(&partial, rows * bpr)?;
        Ok(host.chunks(bpr).map(|c| c.iter().sum()).collect())
    }
}
