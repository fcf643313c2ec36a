use cudarc::driver::{DeviceRepr, PushKernelArg};
use monomorph_core::error::fmt_shape;
use monomorph_core::{
    ArrayMeta, ComplexOf, CorrSpectrum, CorrWindow, Correlate, Element, Error, Float, FloatOf,
    Index, Normalization, Precision, Real, Result, RunningMax, ScoreNorm, Spectral, SpectralNorm,
    WindowExtension, check_combine_masked_correlations, check_gather_window, check_insert_block,
    check_inverse_denominator, check_irfft_score_max_update, check_rfft_pruned_mul_conj,
    check_score_max_update, check_standardize_masked, check_write_corner,
};

use super::{Geom, MAXD};
use crate::error::Ck;
use crate::fft::CudaFftPlan;
use crate::{Cuda, CudaArray};

/// `struct Win` of `correlate.cu`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Win {
    nd: i64,
    src: [i64; MAXD],
    dst: [i64; MAXD],
    start: [i64; MAXD],
    len: [i64; MAXD],
    per: [i64; MAXD],
}

// SAFETY: plain `repr(C)` integers, laid out as the C struct.
unsafe impl DeviceRepr for Win {}

/// The normalisation arguments of `mm_score_max` (`correlate.cu`): its `norm` code (0 scaled,
/// 1 denominator, 2 local), the arrays `c1`, `c2`, `inv_den` (one a variant does not use
/// points at `corr`), and the scalars.
struct ScoreArgs<'a, T: Element> {
    code: i32,
    c1: &'a CudaArray<T>,
    c2: &'a CudaArray<T>,
    inv_den: &'a CudaArray<T>,
    scale: T,
    n: f64,
    eps: f64,
}

impl<'a, T: Float> ScoreArgs<'a, T> {
    /// The kernel's arguments for `norm` (the kernel ABI is unchanged: the shared
    /// [`Normalization`] is mapped to it here, and only here).
    fn new(
        corr: &'a CudaArray<T>,
        norm: Normalization<T, &'a CudaArray<T>, &'a CudaArray<T>>,
    ) -> Self {
        let plain = |code, scale, inv_den| ScoreArgs {
            code,
            c1: corr,
            c2: corr,
            inv_den,
            scale,
            n: 1.0,
            eps: 0.0,
        };
        match norm {
            Normalization::Scaled { scale } => plain(0, scale, corr),
            Normalization::Denominator { scale, inv_den } => plain(1, scale, inv_den),
            Normalization::Local {
                scale,
                c1,
                c2,
                n,
                eps,
            } => ScoreArgs {
                code: 2,
                c1,
                c2,
                inv_den: corr,
                scale,
                n: <T as Real>::as_f64(n),
                eps: <T as Real>::as_f64(eps),
            },
        }
    }
}

/// The window geometry: src = FFT grid, dst = output shape, p = shift reduced into [0, fast).
fn window_geom(fast: &[usize], out: &[usize], shift: &[isize]) -> Result<Geom> {
    let mut g = Geom::new("correlation window", fast, out)?;
    if shift.len() != fast.len() {
        return Err(Error::shape(
            "correlation window shift",
            format!("{} values", fast.len()),
            format!("{} values", shift.len()),
        ));
    }
    for k in 0..fast.len() {
        if fast[k] == 0 {
            return Err(Error::Empty(format!("FFT grid {}", fmt_shape(fast))));
        }
        g.p[k] = (shift[k] as i64).rem_euclid(fast[k] as i64);
    }
    Ok(g)
}

impl<P: Precision> Cuda<P> {
    /// Runs `f` with the backend's kept partials buffer of at least `bytes` bytes (grown when
    /// smaller), holding its lock for the whole of `f` so that the launches that write and read
    /// it are queued together. Stream order makes the reuse across calls safe.
    fn with_partials<R>(
        &self,
        bytes: usize,
        f: impl FnOnce(&mut cudarc::driver::CudaSlice<u8>) -> Result<R>,
    ) -> Result<R> {
        let mut guard = self.inner.partials.lock().map_err(|_| Error::Backend {
            backend: "cuda",
            message: "partials buffer lock poisoned".into(),
        })?;
        if guard.as_ref().is_none_or(|b| b.len() < bytes) {
            *guard = Some(self.inner.stream.alloc_zeros::<u8>(bytes.max(4096)).ck()?);
        }
        match guard.as_mut() {
            Some(buf) => f(buf),
            None => unreachable!("allocated above"),
        }
    }

    /// `reduce_partials2` (one block): the `nb` per-block values of each of the two lists at
    /// the front of `partial` summed (`op` 0) or maxed (`op` 1) once, in a fixed order, into
    /// the two f64 after them, for a second pass to read.
    fn reduce_partials2(
        &self,
        f: &cudarc::driver::CudaFunction,
        partial: &mut cudarc::driver::CudaSlice<u8>,
        nb: i64,
        op: i32,
    ) -> Result<()> {
        let mut l = self.inner.stream.launch_builder(f);
        l.arg(&mut *partial).arg(&nb).arg(&op);
        let one = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (crate::BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `partial` holds 2·nb + 2 f64 (the callers size it so); the first pass that
        // wrote the 2·nb partials ran before on the same stream.
        unsafe { l.launch(one) }.ck()?;
        Ok(())
    }

    /// Pushes a float scalar of T's width.
    fn push_float<T: Float>(v: T) -> (f32, f64) {
        let f = <T as Real>::as_f64(v);
        (f as f32, f)
    }
}

impl<P: Precision> Correlate for Cuda<P> {
    fn write_corner<T: Float>(&self, src: &CudaArray<T>, dst: &mut CudaArray<T>) -> Result<()> {
        check_write_corner(src.shape(), dst.shape())?;
        // Only the corner is written: the rest of dst is zero by contract.
        let origin = vec![0usize; src.ndim()];
        self.insert_block(src, &origin, dst)
    }

    fn insert_block<T: Element>(
        &self,
        src: &CudaArray<T>,
        offset: &[usize],
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        check_insert_block(src.shape(), offset, dst.shape())?;
        let d = src.ndim();
        let n = src.len();
        if n == 0 {
            return Ok(());
        }
        let mut g = Geom::new("insert_block", src.shape(), dst.shape())?;
        for k in 0..d {
            g.p[k] = offset[k] as i64;
        }
        let f = self.kernel_sized::<T>("insert_block")?;
        let (t64, cfg) = (n as i64, self.grid(n));
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf).arg(&mut dst.buf).arg(&g).arg(&t64);
        // SAFETY: the block lies inside dst (checked above).
        unsafe { l.launch(cfg) }.ck()?;
        Ok(())
    }

    fn gather_window<T: Float>(
        &self,
        src: &CudaArray<T>,
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        check_gather_window(src.shape(), start, len, ext, dst.shape())?;
        let d = src.ndim();
        if d == 0 || d > MAXD {
            return Err(Error::invalid(
                "gather_window",
                format!(
                    "the CUDA backend handles 1 to {MAXD} axes; got {}",
                    fmt_shape(src.shape())
                ),
            ));
        }
        let mut w = Win {
            nd: d as i64,
            ..Default::default()
        };
        let code: i32 = match ext {
            WindowExtension::Periodic(p) => {
                for k in 0..d {
                    w.per[k] = p[k] as i64;
                }
                0
            }
            WindowExtension::Symmetric => 1,
        };
        for k in 0..d {
            w.src[k] = src.shape()[k] as i64;
            w.dst[k] = dst.shape()[k] as i64;
            w.start[k] = start[k] as i64;
            w.len[k] = len[k] as i64;
        }
        let n = dst.len();
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("gather_window")?;
        let (t64, cfg) = (n as i64, self.grid(n));
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf)
            .arg(&mut dst.buf)
            .arg(&w)
            .arg(&code)
            .arg(&t64);
        // SAFETY: every read index is reduced into src's shape (or replaced by zero).
        unsafe { l.launch(cfg) }.ck()?;
        Ok(())
    }

    fn inverse_denominator<T: Float>(
        &self,
        c1: &CudaArray<T>,
        c2: &CudaArray<T>,
        window: CorrWindow<'_>,
        scale: T,
        n: T,
        eps: T,
        out: &mut CudaArray<T>,
    ) -> Result<()> {
        check_inverse_denominator(c1.shape(), c2.shape(), window, out.shape())?;
        let g = window_geom(c1.shape(), out.shape(), window.shift)?;
        let total = out.len();
        if total == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("inverse_denominator")?;
        let (sc, nn, ep) = (
            <T as Real>::as_f64(scale),
            <T as Real>::as_f64(n),
            <T as Real>::as_f64(eps),
        );
        let (t64, cfg) = (total as i64, self.grid(total));
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&c1.buf)
            .arg(&c2.buf)
            .arg(&g)
            .arg(&sc)
            .arg(&nn)
            .arg(&ep)
            .arg(&mut out.buf)
            .arg(&t64);
        // SAFETY: window indices are reduced modulo the grid; out holds `total` values.
        unsafe { l.launch(cfg) }.ck()?;
        Ok(())
    }

    fn score_max_update<T: Float, I: Index>(
        &self,
        corr: &CudaArray<T>,
        norm: ScoreNorm<'_, Self, T>,
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, T, I>,
    ) -> Result<()> {
        check_score_max_update(corr, &norm, window, &rm)?;
        let RunningMax {
            best,
            best_index,
            index,
            ssum,
            moments,
        } = rm;
        let g = window_geom(corr.shape(), best.shape(), window.shift)?;
        let total = best.len();
        if total == 0 {
            return Ok(());
        }
        let a = ScoreArgs::new(corr, norm);
        let f = self.kernel2::<T, I>("score_max")?;
        let (s32, s64) = Self::push_float(a.scale);
        let ib = bytemuck::bytes_of(&index);
        // The rotation index at the kernel's width (I is i32 or i64).
        let (i32v, i64v): (i32, i64) = if ib.len() == 4 {
            (bytemuck::pod_read_unaligned(ib), 0)
        } else {
            (0, bytemuck::pod_read_unaligned(ib))
        };
        let (has_mom, [m1, m2]) = match &moments {
            Some(m) => (1i32, m.scale),
            None => (0i32, [1.0; 2]),
        };
        let mut mom_acc = moments.map(|m| m.acc);
        let (t64, cfg) = (total as i64, self.grid(total));
        let blocks = cfg.grid_dim.0 as usize;
        let add = self.func("ssum_add")?;
        // The kept partials buffer: one f64 per block, added in block order by `ssum_add`.
        self.with_partials(blocks * 8, |part| {
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&corr.buf)
                .arg(&a.c1.buf)
                .arg(&a.c2.buf)
                .arg(&a.inv_den.buf)
                .arg(&g)
                .arg(&a.code);
            if std::mem::size_of::<T>() == 4 {
                l.arg(&s32);
            } else {
                l.arg(&s64);
            }
            l.arg(&a.n)
                .arg(&a.eps)
                .arg(&mut best.buf)
                .arg(&mut best_index.buf);
            if ib.len() == 4 {
                l.arg(&i32v);
            } else {
                l.arg(&i64v);
            }
            l.arg(&t64).arg(&mut *part).arg(&has_mom);
            match mom_acc.as_mut() {
                Some(a) => {
                    l.arg(&mut a.buf);
                }
                // The kernel does not touch `mom` without `has_mom`: any device pointer will do.
                None => {
                    l.arg(&corr.buf);
                }
            }
            l.arg(&m1).arg(&m2);
            // SAFETY: grid reads are reduced modulo the grid; outputs hold `total` values (the
            // moments 4 per value, checked); `part` one f64 per block.
            unsafe { l.launch(cfg) }.ck()?;
            let nb = blocks as i64;
            let mut l = self.inner.stream.launch_builder(&add);
            l.arg(&*part).arg(&nb).arg(&mut ssum.buf);
            let one = cudarc::driver::LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (crate::BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: reads the `blocks` partials the score pass wrote (same stream, in order);
            // `ssum` holds one f64 (checked).
            unsafe { l.launch(one) }.ck()?;
            Ok(())
        })
    }

    fn combine_masked_correlations<T: Float>(
        &self,
        c_ft: &mut CudaArray<T>,
        c_fm: &CudaArray<T>,
        c_tt: &CudaArray<T>,
        c_f2m: &CudaArray<T>,
        c_tt2: &CudaArray<T>,
        c_tm: &CudaArray<T>,
        scale: T,
        eps: T,
        overlap_ratio: T,
    ) -> Result<()> {
        let rest = [c_fm, c_tt, c_f2m, c_tt2, c_tm];
        check_combine_masked_correlations(c_ft.shape(), rest.map(|a| a.shape()))?;
        let n = c_ft.len();
        if n == 0 {
            return Ok(());
        }
        let (sc, ep, ratio) = (
            <T as Real>::as_f64(scale),
            <T as Real>::as_f64(eps),
            <T as Real>::as_f64(overlap_ratio),
        );
        let cfg = self.grid(n);
        let blocks = cfg.grid_dim.0 as usize;
        let (f1, f2) = (
            self.kernel::<T>("mcc_pass1")?,
            self.kernel::<T>("mcc_pass2")?,
        );
        let reduce = self.func("reduce_partials2")?;
        // Pass 1 writes every block's two maxima, `reduce_partials2` reduces them once into the
        // two words after them, pass 2 reads those: the kept partials serve (no allocation per
        // call).
        self.with_partials((2 * blocks + 2) * 8, |pmax| {
            let (n64, nb64) = (n as i64, blocks as i64);
            let mut l = self.inner.stream.launch_builder(&f1);
            l.arg(&c_fm.buf)
                .arg(&c_tt.buf)
                .arg(&c_f2m.buf)
                .arg(&c_tt2.buf)
                .arg(&c_tm.buf)
                .arg(&sc)
                .arg(&ep)
                .arg(&n64)
                .arg(&mut *pmax);
            // SAFETY: the five grids hold n values; `pmax` two per block.
            unsafe { l.launch(cfg) }.ck()?;
            self.reduce_partials2(&reduce, pmax, nb64, 1)?;
            let mut l = self.inner.stream.launch_builder(&f2);
            l.arg(&mut c_ft.buf)
                .arg(&c_fm.buf)
                .arg(&c_tt.buf)
                .arg(&c_f2m.buf)
                .arg(&c_tt2.buf)
                .arg(&c_tm.buf)
                .arg(&sc)
                .arg(&ep)
                .arg(&ratio)
                .arg(&n64)
                .arg(&*pmax)
                .arg(&nb64);
            // SAFETY: as above; pass 2 reads the two maxima reduced from pass 1's (same
            // stream, in order).
            unsafe { l.launch(cfg) }.ck()?;
            Ok(())
        })
    }

    /// The pruned forward ([`Spectral::rfft_pruned`]: two cuFFT launches and a memset for a
    /// template box in a large grid), then one `spectrum_mul_conj` launch per two factors
    /// that reads the spectrum once and writes `outs[q] = factors[q] · conj(spec)`, rounded as
    /// the CPU backend (no FMA). The correlation layout is the plain half spectrum.
    fn rfft_pruned_mul_conj(
        &self,
        plan: &CudaFftPlan,
        input: &CudaArray<FloatOf<Self>>,
        nonzero: &[usize],
        spec: &mut CudaArray<ComplexOf<Self>>,
        factors: &[&CudaArray<ComplexOf<Self>>],
        outs: &mut [&mut CorrSpectrum<Self>],
    ) -> Result<()> {
        check_rfft_pruned_mul_conj::<Self>(
            plan,
            input.shape(),
            nonzero,
            spec.shape(),
            factors,
            outs,
        )?;
        self.rfft_pruned(plan, input, nonzero, spec)?;
        let len = spec.len();
        if len == 0 {
            return Ok(());
        }
        let f = self.kernel::<FloatOf<Self>>("spectrum_mul_conj")?;
        let (len64, cfg) = (len as i64, self.grid(len));
        for (fs, os) in factors.chunks(2).zip(outs.chunks_mut(2)) {
            let nf = fs.len() as i32;
            let mut l = self.inner.stream.launch_builder(&f);
            l.arg(&spec.buf).arg(&fs[0].buf);
            match os {
                [o0, o1] => {
                    l.arg(&mut o0.layout_mut().buf)
                        .arg(&fs[1].buf)
                        .arg(&mut o1.layout_mut().buf);
                }
                [o0] => {
                    // The kernel does not touch the second pair when nf = 1: any device
                    // pointers will do.
                    l.arg(&mut o0.layout_mut().buf)
                        .arg(&fs[0].buf)
                        .arg(&spec.buf);
                }
                _ => unreachable!("chunks of 1 or 2"),
            }
            l.arg(&nf).arg(&len64);
            // SAFETY: spec, factors and outs all hold `len` complex values of the plan's
            // complex shape (checked); outs are distinct from spec and the factors (borrows).
            unsafe { l.launch(cfg) }.ck()?;
        }
        Ok(())
    }

    /// The C2R of each product (cuFFT, stream-ordered), then the `score_max` kernel that
    /// scores, normalises (all three normalisations), updates the running max/argmax and
    /// accumulates Σ score² and the moments in one pass: no host synchronisation, no transfer
    /// and no allocation per call. For [`Normalization::Local`] the three inverse transforms
    /// stay three cuFFT launches: the products live in three separate buffers, and batching
    /// them would cost a copy of each.
    fn irfft_score_max_update<I: Index>(
        &self,
        plan: &CudaFftPlan,
        spec: &mut CorrSpectrum<Self>,
        norm: SpectralNorm<'_, Self>,
        work: &mut [CudaArray<FloatOf<Self>>],
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, FloatOf<Self>, I>,
    ) -> Result<()> {
        check_irfft_score_max_update(plan, spec, &norm, work, window, &rm)?;
        monomorph_core::irfft_then_score(self, plan, spec, norm, work, window, rm)
    }

    /// Three launches, no host round trip: `std_sums` writes per-block f64 partials of Σ t·m
    /// and Σ t·(t·m) into the kept partials buffer, `reduce_partials2` adds them once in a
    /// fixed order, `std_apply` standardises in place (zeros for a constant template), as the default does
    /// with host scalars. `scratch` is not needed.
    fn standardize_masked<T: Float>(
        &self,
        t: &mut CudaArray<T>,
        mask: Option<(&CudaArray<T>, P::Accum)>,
        scratch: &mut CudaArray<T>,
    ) -> Result<()> {
        check_standardize_masked(t.shape(), mask.map(|(m, _)| m.shape()), scratch.shape())?;
        let len = t.len();
        if len == 0 {
            return Ok(());
        }
        // The kernels accumulate in double (the accumulator type of every precision set).
        let (has_mask, n) = match mask {
            Some((_, n)) => (1i32, n.as_f64()),
            None => (0i32, len as f64),
        };
        // At most 1024 partials, reduced once by one block.
        let blocks = len.div_ceil(crate::BLOCK as usize).clamp(1, 1024);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (crate::BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let (f1, f2) = (
            self.kernel::<T>("std_sums")?,
            self.kernel::<T>("std_apply")?,
        );
        let reduce = self.func("reduce_partials2")?;
        let (len64, nb64) = (len as i64, blocks as i64);
        self.with_partials((2 * blocks + 2) * 8, |partial| {
            let mut l = self.inner.stream.launch_builder(&f1);
            l.arg(&t.buf);
            match mask {
                Some((m, _)) => l.arg(&m.buf),
                // Not read without a mask: any device pointer will do.
                None => l.arg(&scratch.buf),
            };
            l.arg(&has_mask).arg(&len64).arg(&mut *partial);
            // SAFETY: t (and m) hold `len` values; `partial` two f64 per block.
            unsafe { l.launch(cfg) }.ck()?;
            self.reduce_partials2(&reduce, partial, nb64, 0)?;
            let mut l = self.inner.stream.launch_builder(&f2);
            l.arg(&mut t.buf);
            match mask {
                Some((m, _)) => l.arg(&m.buf),
                None => l.arg(&scratch.buf),
            };
            l.arg(&has_mask)
                .arg(&len64)
                .arg(&n)
                .arg(&*partial)
                .arg(&nb64);
            // SAFETY: as above; pass 2 reads the two sums reduced from pass 1's partials (same
            // stream, in order).
            unsafe { l.launch(self.grid(len)) }.ck()?;
            Ok(())
        })
    }
}
