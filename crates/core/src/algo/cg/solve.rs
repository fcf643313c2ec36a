//! The batched CG loop.

use ndarray::ArrayD;

use super::book::{Book, Setup};
use super::{IterationState, LinearOperator, Method, Preconditioner, SolveParams, SolveResult};
use crate::backend::{
    AccumOf, Arr, ArrayMeta, BinaryOp, Elementwise, FloatOf, Linalg, Memory, Precond, Ratio,
};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};
use num_traits::Float as _;
use num_traits::Zero as _;
use std::ops::ControlFlow;

/// Solves `A_b·x_b = y_b` for every row `b` of `y` (`(batch, n)`), starting from `x0`
/// (`(batch, n)`, or zeros when `None`). See the [module docs](super) for the rules.
///
/// Errors (before any work): `y` not 2-D or empty, `x0` or the operator of another size, an
/// operator holding another number of per-entry matrices, `rtol`/`atol`/`max_iter` lists of
/// a length other than 1 or `batch`, negative or NaN tolerances, Jacobi with CG-adaptive or
/// with an operator whose diagonal is unknown or has a zero.
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::{Array2, Ix2};
///
/// let b = Cpu::<Double>::new();
/// // Two Poisson problems on a 16×16 grid at once: Δx = y, zero on the boundary.
/// let op = LaplacianOperator::new(&[16, 16], Boundary::DirichletZero)?;
/// let rhs = Array2::from_shape_fn((2, 256), |(k, i)| if i % 17 == k { 1.0 } else { 0.0 });
/// let y = b.upload_array(&rhs)?;
/// let params = SolveParams::default().with_tolerances(1e-10, 0.0, 1000);
/// let res = conjugate_gradient(&b, &op, &y, None, &params)?;
/// assert!(res.converged.iter().all(|&c| c), "{res:?}");
///
/// // Check: A·x reproduces y.
/// let mut ax = b.zeros::<f64>(&[2, 256])?;
/// op.apply(&b, &res.x, &mut ax)?;
/// let err = (&b.download_as::<f64, Ix2>(&ax)? - &rhs).mapv(f64::abs).fold(0.0, |m: f64, &v| m.max(v));
/// assert!(err < 1e-8, "{err:e}");
/// # Ok::<(), monomorph::Error>(())
/// ```
pub fn conjugate_gradient<B: Memory + Elementwise + Linalg, O: LinearOperator<B> + ?Sized>(
    b: &B,
    op: &O,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
) -> Result<SolveResult<B>> {
    solve_impl(b, &Dyn(op), y, x0, params, &mut |_| {
        ControlFlow::Continue(())
    })
}

/// [`conjugate_gradient`] with an observer called with the state after the initial residual
/// (step 0) and after every iteration: iteration counts, `Σr²`, flags, and (only with
/// [`SolveParams::observe_vectors`]) `x` and `r` downloaded to the host. This is the seed's
/// trajectory: the state at step `k` equals a solve with `max_iter = k`.
pub fn conjugate_gradient_observed<B, O, F>(
    b: &B,
    op: &O,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    mut observer: F,
) -> Result<SolveResult<B>>
where
    B: Memory + Elementwise + Linalg,
    O: LinearOperator<B> + ?Sized,
    F: FnMut(&IterationState<'_, FloatOf<B>>),
{
    solve_impl(b, &Dyn(op), y, x0, params, &mut |st| {
        observer(st);
        ControlFlow::Continue(())
    })
}

/// [`conjugate_gradient_observed`] whose observer may stop the solve: returning
/// [`ControlFlow::Break`] after step 0 or any iteration ends it with
/// [`Error::Cancelled`](crate::Error::Cancelled) (`done` = the steps taken, `total` = the
/// largest `max_iter`), so a caller can honour Ctrl-C or a deadline within one iteration.
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use std::ops::ControlFlow;
/// use monomorph::prelude::*;
/// use monomorph::algo::cg::conjugate_gradient_controlled;
/// use monomorph::ndarray::Array2;
///
/// let b = Cpu::<Double>::new();
/// let op = LaplacianOperator::new(&[64, 64], Boundary::DirichletZero)?;
/// let y = b.upload_array(&Array2::from_elem((1, 64 * 64), 1.0))?;
/// let params = SolveParams::default().with_tolerances(1e-12, 0.0, 10_000);
/// // Stop after 5 iterations (a caller would test a Ctrl-C flag or a clock here).
/// let r = conjugate_gradient_controlled(&b, &op, &y, None, &params, |st| {
///     if st.step >= 5 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
/// });
/// assert!(matches!(r, Err(monomorph::Error::Cancelled { done: 5, total: 10_000 })));
/// # Ok::<(), monomorph::Error>(())
/// ```
pub fn conjugate_gradient_controlled<B, O, F>(
    b: &B,
    op: &O,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    mut observer: F,
) -> Result<SolveResult<B>>
where
    B: Memory + Elementwise + Linalg,
    O: LinearOperator<B> + ?Sized,
    F: FnMut(&IterationState<'_, FloatOf<B>>) -> ControlFlow<()>,
{
    solve_impl(b, &Dyn(op), y, x0, params, &mut observer)
}

/// Forwards to a `&dyn` operator so the loop is compiled once per backend, not per operator.
struct Dyn<'a, O: ?Sized>(&'a O);

impl<B: Memory + Elementwise + Linalg, O: LinearOperator<B> + ?Sized> LinearOperator<B>
    for Dyn<'_, O>
{
    fn size(&self) -> usize {
        self.0.size()
    }
    fn batch(&self) -> Option<usize> {
        self.0.batch()
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        self.0.apply(b, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        self.0.apply_dot(b, x, y, active)
    }
    fn apply_dot_into(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        mask: &Arr<B, i32>,
        s: &mut Arr<B, AccumOf<B>>,
        slot: usize,
    ) -> Result<()> {
        self.0.apply_dot_into(b, x, y, mask, s, slot)
    }
    fn diagonal(&self, b: &B) -> Result<Option<ArrayD<f64>>> {
        self.0.diagonal(b)
    }
    fn null_space(&self) -> Option<&super::NullSpace> {
        self.0.null_space()
    }
}

/// One value per entry from a list of 1 or `batch` values.
fn per_entry<T: Copy>(name: &str, v: &[T], batch: usize) -> Result<Vec<T>> {
    match v.len() {
        1 => Ok(vec![v[0]; batch]),
        k if k == batch => Ok(v.to_vec()),
        k => Err(Error::shape(
            format!("`{name}` of SolveParams"),
            format!("1 value or {batch} (one per batch entry)"),
            format!("{k} values"),
        )),
    }
}

fn check_tolerance(name: &str, v: &[f64]) -> Result<()> {
    for (e, &t) in v.iter().enumerate() {
        if t.is_nan() || t < 0.0 || t.is_infinite() {
            return Err(Error::invalid(
                name,
                format!("must be finite and ≥ 0, got {t} for batch entry {e}"),
            ));
        }
    }
    Ok(())
}

/// Most residual replacements per entry (see [`Cg::restart`]).
const MAX_RESTARTS: usize = 8;
/// A true residual at most this many times the tolerance (when the recurrence met it) is
/// rounding drift worth a restart (see [`Cg::restart`]).
const RESTART_WITHIN: f64 = 100.0;

/// Validated sizes and per-entry parameters of a solve.
struct Checked {
    batch: usize,
    n: usize,
    rtol: Vec<f64>,
    atol: Vec<f64>,
    max_iter: Vec<usize>,
}

fn validate<B: Memory + Elementwise + Linalg>(
    op: &dyn LinearOperator<B>,
    shape: &[usize],
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
) -> Result<Checked> {
    let (batch, n) = match shape {
        [k, n] => (*k, *n),
        s => {
            return Err(Error::shape(
                "`y` of conjugate_gradient",
                "(batch, n)",
                fmt_shape(s),
            ));
        }
    };
    if batch == 0 || n == 0 {
        return Err(Error::Empty("`y` of conjugate_gradient".into()));
    }
    if op.size() != n {
        return Err(Error::shape(
            "operator of conjugate_gradient (its size vs the length of each row of `y`)",
            format!(
                "an operator of size {n} for y of shape {}",
                fmt_shape(shape)
            ),
            format!("size {}", op.size()),
        ));
    }
    if let Some(k) = op.batch()
        && k != batch
    {
        return Err(Error::shape(
            "operator of conjugate_gradient (one matrix per batch entry)",
            format!("{batch} matrices for y of shape {}", fmt_shape(shape)),
            format!("{k} matrices"),
        ));
    }
    if let Some(x0) = x0
        && x0.shape() != shape
    {
        return Err(Error::shape(
            "`x0` of conjugate_gradient (must match y)",
            fmt_shape(shape),
            fmt_shape(x0.shape()),
        ));
    }
    let rtol = per_entry("rtol", &params.rtol, batch)?;
    let atol = per_entry("atol", &params.atol, batch)?;
    let max_iter = per_entry("max_iter", &params.max_iter, batch)?;
    check_tolerance("rtol", &rtol)?;
    check_tolerance("atol", &atol)?;
    if params.preconditioner == Preconditioner::Jacobi && params.method == Method::CgAdaptive {
        return Err(Error::invalid(
            "preconditioner",
            "CG-adaptive has no preconditioned form; use Method::Cg with Jacobi",
        ));
    }
    Ok(Checked {
        batch,
        n,
        rtol,
        atol,
        max_iter,
    })
}

/// Slots of the per-row scalars CG keeps on the device (`Cg::s`, `(SLOTS, batch)` f64):
/// `d·Ad`, `r·r` (Jacobi; plain CG's `r·r` is its `r·z`), and two for `r·z`, the current one
/// and the next (their roles swap at every direction update, see `Cg::rz_slots`).
const DQ: usize = 0;
const RR: usize = 1;
const RZ_A: usize = 2;
const RZ_B: usize = 3;
const SLOTS: usize = 4;
/// CG-adaptive's `d·r` and `r·q` (it has no `r·z`).
const DR: usize = RZ_A;
const RQ: usize = RZ_B;

/// The state of a running solve.
struct Cg<'a, B: Memory + Elementwise + Linalg> {
    b: &'a B,
    op: &'a dyn LinearOperator<B>,
    y: &'a Arr<B, FloatOf<B>>,
    params: &'a SolveParams,
    batch: usize,
    x: Arr<B, FloatOf<B>>,
    r: Arr<B, FloatOf<B>>,
    d: Arr<B, FloatOf<B>>,
    q: Arr<B, FloatOf<B>>,
    /// `M⁻¹ r` and `M⁻¹` (Jacobi only).
    z: Option<Arr<B, FloatOf<B>>>,
    inv_diag: Option<Arr<B, FloatOf<B>>>,
    /// Per-row scalars on the device, `(SLOTS, batch)`, in the accumulator type: the loop
    /// downloads them once per iteration.
    s: Arr<B, AccumOf<B>>,
    /// (current, next) slot of `r·z` in `s`.
    rz_slots: (usize, usize),
    /// The active flags as the device has them (1/0), and their host copy: uploaded only when
    /// they change.
    mask: Arr<B, i32>,
    mask_host: Vec<bool>,
    /// `r·z` (set by `start_directions`) and `d·Ad` (CG-adaptive, from the last download)
    /// per entry.
    rz: Vec<AccumOf<B>>,
    dq: Vec<AccumOf<B>>,
    /// `Σr²` of the recurrence per entry, as the dots give it (the [`Book`] judges and
    /// reports its `f64` value, [`report`]).
    rsq: Vec<AccumOf<B>>,
    book: Book,
    step: usize,
    /// The operator's null space when it has floating regions (the residual the loop
    /// iterates on is projected onto the range).
    null: Option<&'a super::NullSpace>,
    /// The unprojected true residual `y − A·x` of the last [`Cg::true_residual`], on the host
    /// (only with `null`): the residual the result reports.
    r_true: Option<ArrayD<FloatOf<B>>>,
}

/// Per-entry values in the accumulator type as the `f64` of the bookkeeping and the reports
/// ([`SolveResult`], [`IterationState`], the tolerances): exact while the accumulator is no
/// wider than `f64` (it is `f64` today).
fn report<A: Real>(v: &[A]) -> Vec<f64> {
    v.iter().map(|x| x.as_f64()).collect()
}

impl<B: Memory + Elementwise + Linalg> Cg<'_, B> {
    /// Records the recurrence's `Σr²` of entry `e` (from the device scalars) and judges it.
    fn set_rsq(&mut self, e: usize, v: AccumOf<B>) {
        self.rsq[e] = v;
        self.book.rsq[e] = v.as_f64();
        self.book.judge(e);
    }

    /// Makes the device mask equal `want` (an upload only when it changed).
    fn sync_mask(&mut self, want: &[bool]) -> Result<()> {
        if self.mask_host != want {
            let flags: Vec<i32> = want.iter().map(|&a| a as i32).collect();
            self.mask = self
                .b
                .upload(ndarray::ArrayView1::from(&flags[..]).into_dyn())?;
            self.mask_host = want.to_vec();
        }
        Ok(())
    }

    /// Starts the search directions from the current `r` for the entries in `rows`:
    /// `d = M⁻¹r`, and for CG-adaptive `q = A·d` with its dots.
    fn start_directions(&mut self, rows: &[bool]) -> Result<()> {
        let b = self.b;
        self.rz = match (&self.inv_diag, &mut self.z) {
            (Some(w), Some(z)) => {
                b.binary(BinaryOp::Mul, w, &self.r, z)?;
                b.copy(z, &mut self.d)?;
                b.dot_rows(&self.r, z)?
            }
            _ => {
                b.copy(&self.r, &mut self.d)?;
                self.rsq.clone()
            }
        };
        // The loop reads its step sizes from the device: a fresh `s` with r·z in the current
        // slot (CG), or d·Ad and d·r (CG-adaptive).
        let mut h = ndarray::Array2::<AccumOf<B>>::zeros((SLOTS, self.batch));
        if self.params.method == Method::CgAdaptive {
            self.dq = self.op.apply_dot(b, &self.d, &mut self.q, rows)?;
            h.row_mut(DQ)
                .assign(&ndarray::ArrayView1::from(&self.dq[..]));
            h.row_mut(DR)
                .assign(&ndarray::ArrayView1::from(&self.rsq[..]));
        } else {
            h.row_mut(RZ_A)
                .assign(&ndarray::ArrayView1::from(&self.rz[..]));
            self.rz_slots = (RZ_A, RZ_B);
        }
        self.s = b.upload(h.into_dyn().view())?;
        Ok(())
    }

    fn observe(
        &self,
        observer: &mut dyn FnMut(&IterationState<'_, FloatOf<B>>) -> ControlFlow<()>,
    ) -> Result<()> {
        let (xh, rh) = if self.params.observe_vectors {
            (
                Some(self.b.download(&self.x)?),
                Some(self.b.download(&self.r)?),
            )
        } else {
            (None, None)
        };
        let book = &self.book;
        let flow = observer(&IterationState {
            step: self.step,
            iterations: &book.it,
            function_evaluations: &book.fe,
            residual_sq: &book.rsq,
            tolerance_sq: &book.tol_sq,
            converged: &book.converged,
            diverged: &book.diverged,
            x: xh.as_ref(),
            residual: rh.as_ref(),
        });
        match flow {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(Error::Cancelled {
                done: self.step,
                total: book.max_iter.iter().copied().max().unwrap_or(0),
            }),
        }
    }

    /// Iterates while any entry is active.
    fn iterate(
        &mut self,
        observer: &mut dyn FnMut(&IterationState<'_, FloatOf<B>>) -> ControlFlow<()>,
    ) -> Result<()> {
        let batch = self.batch;
        while self.book.any_active() {
            self.step += 1;
            let running = self.book.active.clone();
            for e in 0..batch {
                if running[e] {
                    self.book.it[e] += 1;
                }
            }
            match self.params.method {
                Method::Cg => self.cg_step(&running)?,
                Method::CgAdaptive => self.adaptive_step(&running)?,
            }
            self.observe(observer)?;
        }
        Ok(())
    }

    /// One iteration of [`Method::Cg`] for the entries in `running`, with its per-row scalars
    /// on the device and one host round trip: `q = A·d` with `d·q` into `s`; `α = r·z / d·q`,
    /// `x += αd`, `r −= αq` (Jacobi: `z = w ⊙ r`) with `r·r` and `r·z` into `s`, all on the
    /// device; one download of `s` for the curvature and stopping tests; then
    /// `d = z + βd` with `β = r·z_new / r·z` on the device for the entries still active.
    /// The curvature `d·q` does not change `α` (only the flags judged after the update), so
    /// it is recorded from the same download, with the same result as before the update.
    fn cg_step(&mut self, running: &[bool]) -> Result<()> {
        let b = self.b;
        self.sync_mask(running)?;
        self.op
            .apply_dot_into(b, &self.d, &mut self.q, &self.mask, &mut self.s, DQ)?;
        let (cur, next) = self.rz_slots;
        let precond = match (&self.inv_diag, &mut self.z) {
            (Some(w), Some(z)) => Some(Precond { w, z, slot: next }),
            _ => None,
        };
        let rr = if precond.is_some() { RR } else { next };
        b.axpy_pair_rows_ratio(
            &mut self.s,
            Ratio::new(cur, DQ),
            &self.mask,
            &self.d,
            &self.q,
            &mut self.x,
            &mut self.r,
            rr,
            precond,
            None,
        )?;
        // The iteration's one host round trip: d·q, r·r, r·z of every entry.
        let sh = b.download(&self.s)?;
        for (e, &on) in running.iter().enumerate() {
            if on {
                self.book.fe[e] += 1;
                self.book.curvature(e, sh[[DQ, e]].as_f64());
                self.set_rsq(e, sh[[rr, e]]);
            }
        }
        if self.book.any_active() {
            let active = self.book.active.clone();
            self.sync_mask(&active)?;
            let src = self.z.as_ref().unwrap_or(&self.r);
            b.xpay_rows_ratio(
                src,
                &mut self.s,
                Ratio::new(next, cur),
                &self.mask,
                &mut self.d,
                None,
            )?;
            self.rz_slots = (next, cur);
        }
        Ok(())
    }

    /// One iteration of [`Method::CgAdaptive`] for the entries in `running`, with its per-row
    /// scalars on the device and one host round trip: `α = d·r / d·Ad`, `x += αd`, `r −= αq`
    /// with `r·r` and `r·q`; `d = r − γd` with `γ = r·q / d·Ad` and the new `d·r`; `q = A·d`
    /// with `d·q` (the seed applies the operator for the next step before testing, and that
    /// application is counted); then one download of `s` for the stopping test and the next
    /// step's curvature (recorded at its start, from this download, as before).
    fn adaptive_step(&mut self, running: &[bool]) -> Result<()> {
        let b = self.b;
        for (e, &on) in running.iter().enumerate() {
            if on {
                self.book.curvature(e, self.dq[e].as_f64());
            }
        }
        self.sync_mask(running)?;
        b.axpy_pair_rows_ratio(
            &mut self.s,
            Ratio::new(DR, DQ),
            &self.mask,
            &self.d,
            &self.q,
            &mut self.x,
            &mut self.r,
            RR,
            None,
            Some(RQ),
        )?;
        b.xpay_rows_ratio(
            &self.r,
            &mut self.s,
            Ratio::negated(RQ, DQ),
            &self.mask,
            &mut self.d,
            Some(DR),
        )?;
        self.op
            .apply_dot_into(b, &self.d, &mut self.q, &self.mask, &mut self.s, DQ)?;
        // The iteration's one host round trip: r·r and the next step's d·Ad.
        let sh = b.download(&self.s)?;
        for (e, &on) in running.iter().enumerate() {
            if on {
                self.dq[e] = sh[[DQ, e]];
                self.book.fe[e] += 1;
                self.set_rsq(e, sh[[RR, e]]);
            }
        }
        Ok(())
    }

    /// `r = y − A·x` for every entry (one operator application): returns its `Σr²` (the
    /// true residual, judged at exit) and the `Σr²` the loop iterates on. They are the same
    /// except for an operator with floating regions ([`Cg::null`]), whose `r` is then
    /// projected onto the range (each region's mean removed; the unprojected `r` is kept in
    /// [`Cg::r_true`]).
    fn true_residual(&mut self) -> Result<(Vec<AccumOf<B>>, Vec<AccumOf<B>>)> {
        self.op.apply(self.b, &self.x, &mut self.q)?;
        self.b.binary(BinaryOp::Sub, self.y, &self.q, &mut self.r)?;
        let sq = self.b.sum_sq_rows(&self.r)?;
        let Some(ns) = self.null else {
            return Ok((sq.clone(), sq));
        };
        let host = self.b.download(&self.r)?;
        let mut p = host.clone();
        ns.project(&mut p);
        self.r = self.b.upload(p.view())?;
        self.r_true = Some(host);
        Ok((sq, self.b.sum_sq_rows(&self.r)?))
    }

    /// With floating regions: `x` minus its mean over each region (the zero-mean solution;
    /// `A·x` is unchanged).
    fn project_x(&mut self) -> Result<()> {
        if let Some(ns) = self.null {
            let mut h = self.b.download(&self.x)?;
            ns.project(&mut h);
            self.x = self.b.upload(h.view())?;
        }
        Ok(())
    }

    /// Residual replacement: the entries whose recurrence met the tolerance but whose true
    /// residual (now in `r`, `Σr²` in `true_sq`) is above it, by rounding drift (at most
    /// [`RESTART_WITHIN`] × the tolerance), restart from `r`, while they have iterations left
    /// and each restart at least halves the true residual. A true residual far above the
    /// tolerance is no drift but a system without a solution (or one too ill-conditioned for
    /// the precision): restarting would only push `x` further. Returns whether any entry
    /// restarted.
    fn restart(
        &mut self,
        true_sq: &[AccumOf<B>],
        last: &mut [f64],
        restarts: &mut [usize],
    ) -> Result<bool> {
        let book = &mut self.book;
        let rows: Vec<bool> = (0..self.batch)
            .map(|e| {
                let t = true_sq[e].as_f64();
                book.converged[e]
                    && t.is_finite()
                    && t > book.tol_sq[e]
                    && t <= RESTART_WITHIN * RESTART_WITHIN * book.tol_sq[e]
                    && book.it[e] < book.max_iter[e]
                    && restarts[e] < MAX_RESTARTS
                    && (restarts[e] == 0 || t < 0.25 * last[e])
            })
            .collect();
        if !rows.iter().any(|&r| r) {
            return Ok(false);
        }
        for e in 0..self.batch {
            if rows[e] {
                restarts[e] += 1;
                last[e] = true_sq[e].as_f64();
                self.rsq[e] = true_sq[e];
                book.rsq[e] = true_sq[e].as_f64();
                book.judge(e);
            }
        }
        self.start_directions(&rows)?;
        Ok(true)
    }
}

/// The solve: validation, the starting point, the loop, and the check of the true residual
/// at exit (with residual replacement), in that order.
fn solve_impl<B: Memory + Elementwise + Linalg>(
    b: &B,
    op: &dyn LinearOperator<B>,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    observer: &mut dyn FnMut(&IterationState<'_, FloatOf<B>>) -> ControlFlow<()>,
) -> Result<SolveResult<B>> {
    let shape = y.shape().to_vec();
    let c = validate(op, &shape, x0, params)?;
    let jacobi = params.preconditioner == Preconditioner::Jacobi;
    // Everything the solve allocates, checked at once before anything is: x, r, d, A·d, and
    // for Jacobi z and 1/diag(A).
    let vectors = if jacobi { 6 } else { 4 };
    let bytes = crate::backend::array_bytes::<FloatOf<B>>(&shape)?.saturating_mul(vectors);
    b.check_allocation("conjugate_gradient's working vectors", bytes)?;
    // Inverse diagonal, (batch, n), for Jacobi.
    let inv_diag = if jacobi {
        Some(inverse_diagonal(b, op, c.batch, c.n)?)
    } else {
        None
    };
    let start = Start::new(b, op, y, x0, &shape)?;
    let y = start.y_owned.as_ref().unwrap_or(y);
    let mut cg = Cg::new(b, op, y, params, c, start.x, start.book, inv_diag)?;
    cg.begin()?;
    cg.observe(observer)?;
    cg.iterate(observer)?;
    cg.check_true_residual(observer)?;
    cg.into_result()
}

/// The starting point of a solve: `y` with the operator's pinned cells zeroed (when it has
/// any), `x` from `x0`, and the bookkeeping's view of both.
struct Start<B: Memory> {
    /// `y` with its pinned cells zeroed, when the operator has pinned cells.
    y_owned: Option<Arr<B, FloatOf<B>>>,
    x: Arr<B, FloatOf<B>>,
    /// Per entry `Σy²`, zero right-hand sides, non-finite `x0`, the null-space part of `y`.
    book: StartBook,
}

/// The per-entry facts of [`Start`] the [`Book`] begins with.
struct StartBook {
    ysq: Vec<f64>,
    zero_rhs: Vec<bool>,
    x_bad: Vec<bool>,
    null_sq: Vec<f64>,
}

impl<B: Memory + Elementwise + Linalg> Start<B> {
    fn new(
        b: &B,
        op: &dyn LinearOperator<B>,
        y: &Arr<B, FloatOf<B>>,
        x0: Option<&Arr<B, FloatOf<B>>>,
        shape: &[usize],
    ) -> Result<Self> {
        type T<B> = FloatOf<B>;
        let batch = shape[0];
        // An operator with cells that are not unknowns ignores y (and x0) there: both are
        // zeroed.
        let ns = op.null_space();
        let y_owned = match ns {
            Some(ns) if ns.pinned() > 0 => {
                let mut h = b.download(y)?;
                ns.zero_pinned(&mut h);
                Some(b.upload(h.view())?)
            }
            _ => None,
        };
        let y = y_owned.as_ref().unwrap_or(y);
        let null_sq = match ns {
            Some(ns) if ns.dimension() > 0 => ns.null_sq(&b.download(y)?),
            _ => vec![0.0; batch],
        };
        // x, r = y − A·x. A row with y = 0 has the answer x = 0 whatever x0 is (as scipy's
        // cg): it starts from 0 and converges at once, even with atol = 0.
        let ysq = report(&b.sum_sq_rows(y)?);
        let zero_rhs: Vec<bool> = ysq.iter().map(|&s| s == 0.0).collect();
        let x = match x0 {
            Some(x0) if zero_rhs.iter().any(|&z| z) => {
                let keep: Vec<T<B>> = zero_rhs
                    .iter()
                    .map(|&z| T::<B>::from_f64(if z { 0.0 } else { 1.0 }))
                    .collect();
                let mut x = b.zeros::<T<B>>(shape)?;
                b.axpy_rows(&keep, x0, &mut x)?; // rows with a zero factor stay exactly 0
                x
            }
            Some(x0) => b.duplicate(x0)?,
            None => b.zeros::<T<B>>(shape)?,
        };
        let x = match (ns, x0) {
            (Some(ns), Some(_)) if ns.pinned() > 0 => {
                let mut h = b.download(&x)?;
                ns.zero_pinned(&mut h);
                b.upload(h.view())?
            }
            _ => x,
        };
        let x_bad: Vec<bool> = match x0 {
            Some(_) => b.sum_rows(&x)?.iter().map(|s| !s.is_finite()).collect(),
            None => vec![false; batch],
        };
        Ok(Start {
            y_owned,
            x,
            book: StartBook {
                ysq,
                zero_rhs,
                x_bad,
                null_sq,
            },
        })
    }
}

impl<'a, B: Memory + Elementwise + Linalg> Cg<'a, B> {
    /// The state of a solve from its validated parameters `c` and starting point, with the
    /// working vectors allocated (zeros) and the tolerances set; nothing is computed yet
    /// ([`Cg::begin`]).
    #[allow(clippy::too_many_arguments)]
    fn new(
        b: &'a B,
        op: &'a dyn LinearOperator<B>,
        y: &'a Arr<B, FloatOf<B>>,
        params: &'a SolveParams,
        c: Checked,
        x: Arr<B, FloatOf<B>>,
        start: StartBook,
        inv_diag: Option<Arr<B, FloatOf<B>>>,
    ) -> Result<Self> {
        type T<B> = FloatOf<B>;
        let (batch, shape) = (c.batch, [c.batch, c.n]);
        let tol_sq: Vec<f64> = (0..batch)
            .map(|e| (c.rtol[e] * c.rtol[e] * start.ysq[e]).max(c.atol[e] * c.atol[e]))
            .collect();
        Ok(Cg {
            b,
            op,
            y,
            params,
            batch,
            x,
            r: b.zeros::<T<B>>(&shape)?,
            d: b.zeros::<T<B>>(&shape)?,
            q: b.zeros::<T<B>>(&shape)?,
            z: if inv_diag.is_some() {
                Some(b.zeros::<T<B>>(&shape)?)
            } else {
                None
            },
            inv_diag,
            s: b.zeros::<AccumOf<B>>(&[SLOTS, batch])?,
            rz_slots: (RZ_A, RZ_B),
            mask: b.zeros::<i32>(&[batch])?,
            mask_host: vec![false; batch],
            rz: Vec::new(),
            dq: vec![AccumOf::<B>::zero(); batch],
            rsq: Vec::new(),
            book: Book {
                it: vec![0; batch],
                fe: vec![1; batch],
                rsq0: Vec::new(),
                rsq: Vec::new(),
                ysq: start.ysq,
                tol_sq,
                max_iter: c.max_iter,
                converged: vec![false; batch],
                diverged: start.x_bad,
                active: vec![false; batch],
                curv_sign: vec![0.0; batch],
                sign_change: vec![None; batch],
                zero_curv: vec![None; batch],
                zero_rhs: start.zero_rhs,
                true_sq: Vec::new(),
                loop_converged: Vec::new(),
                null_sq: start.null_sq,
            },
            step: 0,
            null: op.null_space().filter(|n| n.dimension() > 0),
            r_true: None,
        })
    }

    /// The initial residual `r = y − A·x`, its judgement, and the first search directions
    /// (CG-adaptive applies the operator to `d` before the first iteration, counted).
    fn begin(&mut self) -> Result<()> {
        let (_, rsq) = self.true_residual()?;
        self.book.rsq0 = report(&rsq);
        self.book.rsq = report(&rsq);
        self.rsq = rsq;
        for e in 0..self.batch {
            self.book.judge(e);
        }
        self.start_directions(&vec![true; self.batch])?;
        if self.params.method == Method::CgAdaptive {
            for fe in &mut self.book.fe {
                *fe += 1;
            }
        }
        Ok(())
    }

    /// The true residual `y − A·x` after the loop: the recurrence drifts from it in floating
    /// point, and on a singular system without a solution it can fall below the tolerance
    /// while `y − A·x` stays large. An entry whose recurrence converged but whose true residual
    /// did not restarts from the true residual (residual replacement, [`Cg::restart`]) while
    /// that keeps paying off. When no entry iterated, `r` is already exact (except on an
    /// operator with floating regions, whose `x` is made zero-mean and whose true residual is
    /// the unprojected one). Leaves the true `Σr²` in the book ([`Book::finish`]).
    fn check_true_residual(
        &mut self,
        observer: &mut dyn FnMut(&IterationState<'_, FloatOf<B>>) -> ControlFlow<()>,
    ) -> Result<()> {
        let batch = self.batch;
        let mut true_sq = self.rsq.clone();
        let (mut last, mut restarts) = (vec![0.0; batch], vec![0usize; batch]);
        while self.book.it.iter().any(|&k| k > 0) || self.null.is_some() {
            self.project_x()?;
            let (t, p) = self.true_residual()?;
            true_sq = t;
            if !self.restart(&p, &mut last, &mut restarts)? {
                break;
            }
            self.iterate(observer)?;
        }
        if let Some(r) = self.r_true.take() {
            self.r = self.b.upload(r.view())?;
        }
        self.book.finish(report(&true_sq));
        Ok(())
    }

    /// The result, with a sentence per entry.
    fn into_result(self) -> Result<SolveResult<B>> {
        type T<B> = FloatOf<B>;
        let params = self.params;
        let book = self.book;
        let setup = Setup {
            method: params.method,
            preconditioner: params.preconditioner,
            eps: <T<B> as crate::dtype::Float>::EPS.as_f64(),
            precision: if std::mem::size_of::<T<B>>() == 4 {
                "single"
            } else {
                "double"
            },
        };
        let message = (0..self.batch).map(|e| book.message(e, &setup)).collect();
        Ok(SolveResult {
            x: self.x,
            residual: self.r,
            residual_norm: book.true_sq.iter().map(|v| v.sqrt()).collect(),
            recurrence_residual_norm: book.rsq.iter().map(|v| v.sqrt()).collect(),
            iterations: book.it,
            function_evaluations: book.fe,
            converged: book.converged,
            diverged: book.diverged,
            message,
        })
    }
}

/// `1/diag(A)` as a `(batch, n)` device array; errors when the operator has no diagonal or a
/// zero (or non-finite) on it.
fn inverse_diagonal<B: Memory + Elementwise + Linalg>(
    b: &B,
    op: &dyn LinearOperator<B>,
    batch: usize,
    n: usize,
) -> Result<Arr<B, FloatOf<B>>> {
    let diag = op.diagonal(b)?.ok_or_else(|| {
        Error::invalid(
            "preconditioner",
            "Jacobi needs the operator's diagonal, and this operator does not provide one \
             (implement LinearOperator::diagonal)",
        )
    })?;
    let per_entry = match diag.shape() {
        [k] if *k == n => false,
        [k, m] if *k == batch && *m == n => true,
        s => {
            return Err(Error::shape(
                "diagonal of the operator",
                format!("({n},) or ({batch}, {n})"),
                fmt_shape(s),
            ));
        }
    };
    let flat: Vec<f64> = diag.iter().copied().collect();
    let mut inv = Vec::with_capacity(batch * n);
    for e in 0..batch {
        for i in 0..n {
            let v = if per_entry { flat[e * n + i] } else { flat[i] };
            if v == 0.0 || !v.is_finite() {
                return Err(Error::invalid(
                    "preconditioner",
                    format!("Jacobi needs a finite non-zero diagonal; entry {e}, row {i} has {v}"),
                ));
            }
            inv.push(FloatOf::<B>::from_f64(1.0 / v));
        }
    }
    let host = ArrayD::from_shape_vec(ndarray::IxDyn(&[batch, n]), inv)
        .map_err(|e| Error::invalid("diagonal", e.to_string()))?;
    b.upload(host.view())
}
