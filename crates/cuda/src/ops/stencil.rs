//! The pressure-Poisson stencil (`Linalg::stencil`, `stencil_dot`, `stencil_dot_into`) on CUDA:
//! the kernels `stencil_*` and `stencil_dot_*` of `kernels/linalg.cu`, which compute
//! `monomorph_core::PoissonStencil`'s definition in the CPU backend's order and rounding.

use cudarc::driver::{CudaSlice, PushKernelArg};
use monomorph_core::{Float, PoissonStencil, Precision, Result, StencilDims};

use super::A;
use super::linalg::{Dots, row_chunks};
use crate::error::Ck;
use crate::{Cuda, CudaArray};

/// The scalar kernel arguments of a stencil: `(nz, ny, nx)`, `(cz, cy, cx)`, periodic bits,
/// open-boundary bits, and the first real padded axis.
struct Args {
    n: [i64; 3],
    c: [f64; 3],
    per: i32,
    open: i32,
    first: i32,
}

fn args(d: &StencilDims) -> Args {
    let mut per = 0i32;
    let mut open = 0i32;
    for p in 0..3 {
        per |= (d.periodic[p] as i32) << p;
        open |= (d.open[p][0] as i32) << (2 * p);
        open |= (d.open[p][1] as i32) << (2 * p + 1);
    }
    Args {
        n: d.grid3.map(|v| v as i64),
        c: d.coef,
        per,
        open,
        first: d.coef.iter().position(|&v| v != 0.0).unwrap_or(2) as i32,
    }
}

impl<P: Precision> Cuda<P> {
    /// `y = L·x` for every row (`rows` × `n`, checked by the caller).
    pub(super) fn stencil_dev<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        rows: usize,
        n: usize,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
    ) -> Result<()> {
        let a = args(&st.dims());
        let has = st.cells().is_some() as i32;
        let cells = st.cells().map_or(&self.inner.unused, |c| &c.buf);
        let b64 = rows as i64;
        let f = self.kernel::<T>("stencil")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&x.buf)
            .arg(&mut y.buf)
            .arg(&b64)
            .arg(&a.n[0])
            .arg(&a.n[1])
            .arg(&a.n[2])
            .arg(&a.c[0])
            .arg(&a.c[1])
            .arg(&a.c[2])
            .arg(&a.per)
            .arg(&a.open)
            .arg(&a.first)
            .arg(cells)
            .arg(&has);
        // SAFETY: x and y hold rows·n elements (checked); `cells` holds n flags when `has`.
        unsafe { l.launch(self.grid(rows * n)) }.ck()?;
        Ok(())
    }

    /// The stencil of the rows where `flags` fused with `x·y`: per-block partials summed into
    /// `dest` (see `finish_dots`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stencil_dot_dev<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        rows: usize,
        n: usize,
        x: &CudaArray<T>,
        y: &mut CudaArray<T>,
        flags: &CudaSlice<u8>,
        dest: (&[Dots], Option<&mut CudaArray<A<P>>>),
    ) -> Result<Vec<Vec<f64>>> {
        let a = args(&st.dims());
        let has = st.cells().is_some() as i32;
        let cells = st.cells().map_or(&self.inner.unused, |c| &c.buf);
        let bpr = self.blocks_per_row(rows, n);
        let mut kept = self.partials(1, rows, bpr)?;
        let Some(partial) = kept.as_mut() else {
            unreachable!("allocated by partials")
        };
        let f = self.kernel::<T>("stencil_dot")?;
        let bpr64 = bpr as i64;
        row_chunks(rows, bpr, |cfg, r0| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&x.buf)
                .arg(&mut y.buf)
                .arg(&a.n[0])
                .arg(&a.n[1])
                .arg(&a.n[2])
                .arg(&a.c[0])
                .arg(&a.c[1])
                .arg(&a.c[2])
                .arg(&a.per)
                .arg(&a.open)
                .arg(&a.first)
                .arg(cells)
                .arg(&has)
                .arg(flags)
                .arg(&bpr64)
                .arg(&r0)
                .arg(&mut *partial);
            // SAFETY: x and y hold rows·n elements; `cells` n flags when `has`; `flags` rows
            // ints; `partial` rows·bpr f64.
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })?;
        self.finish_dots(partial, rows, bpr, dest.0, dest.1)
    }
}
