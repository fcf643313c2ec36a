//! N-d real FFTs on realfft/rustfft: plans, the plan cache, and the dispatch from the backend's
//! float type to the typed kernels in [`exec`].
//!
//! # Layout of a transform
//!
//! A plan for a real array of `shape` over `axes` (ascending, 1–3 of them; the others are batch
//! axes) runs a real-to-complex transform along the last axis of `axes` (call it `L`, length
//! `n`, giving `n/2 + 1` complex values) and complex transforms along the other axes of `axes`,
//! in descending order. The inverse runs them in the reverse order. See [`exec`] for how each
//! pass walks memory.
//!
//! # Plans
//!
//! [`PlanCache`] keys plans by (shape, axes, float type). A [`CpuFftPlan`] is cheap to clone: it
//! holds an `Arc` of the geometry and an `Arc` of the typed kernels (realfft and rustfft plans),
//! so `rfft`/`irfft` never plan.

mod exec;
mod kernels;
mod real;
#[cfg(test)]
mod tests;

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use monomorph_core::error::fmt_shape;
use monomorph_core::{Error, FftPlan, MAX_GROUP, Result};
use num_complex::Complex;
use realfft::RealFftPlanner;
use rustfft::FftPlanner;

use crate::util::SharedMut;
pub(crate) use kernels::Kernels;

/// A cached r2c/c2r plan for one real shape, one set of axes and one float type.
///
/// Cheap to clone (two `Arc`s). Made by `Spectral::fft_plan` of a [`Cpu`](crate::Cpu) backend;
/// using it with arrays of other shapes, or with a backend of the other precision, is an
/// [`Error::FftPlan`].
#[derive(Clone)]
pub struct CpuFftPlan {
    geom: Arc<Geometry>,
    kernels: TypedKernels,
}

impl fmt::Debug for CpuFftPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuFftPlan")
            .field("real_shape", &self.geom.real_shape)
            .field("complex_shape", &self.geom.complex_shape)
            .field("axes", &self.geom.axes)
            .field("float", &self.kernels.float_name())
            .finish()
    }
}

impl FftPlan for CpuFftPlan {
    fn real_shape(&self) -> &[usize] {
        &self.geom.real_shape
    }
    fn complex_shape(&self) -> &[usize] {
        &self.geom.complex_shape
    }
    fn axes(&self) -> &[usize] {
        &self.geom.axes
    }
}

/// The typed realfft/rustfft plans of a [`CpuFftPlan`].
#[derive(Clone)]
enum TypedKernels {
    F32(Arc<Kernels<f32>>),
    F64(Arc<Kernels<f64>>),
}

impl TypedKernels {
    fn float_name(&self) -> &'static str {
        match self {
            TypedKernels::F32(_) => "f32",
            TypedKernels::F64(_) => "f64",
        }
    }
}

/// One pass of complex transforms along `axis`, viewing the complex array as
/// `(outer, len, inner)` (row-major).
#[derive(Debug, Clone)]
pub(crate) struct CPass {
    /// The transformed axis.
    pub axis: usize,
    /// Product of the complex shape before `axis`.
    pub outer: usize,
    /// Length of `axis`.
    pub len: usize,
    /// Product of the complex shape after `axis` (the stride of `axis`).
    pub inner: usize,
    /// Pruning: the coordinates of the transform axes before `axis`, read from the outer index.
    pub checks: Vec<Check>,
}

/// Reads one coordinate from a flat outer index: `(o / div) % modulus` is the coordinate along
/// `axis`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check {
    pub div: usize,
    pub modulus: usize,
    pub axis: usize,
}

impl Check {
    /// `true` when the line at outer index `o` lies inside the nonzero box on every checked axis.
    #[inline]
    pub fn all_inside(checks: &[Check], o: usize, nonzero: &[usize]) -> bool {
        checks
            .iter()
            .all(|c| (o / c.div) % c.modulus < nonzero[c.axis])
    }
}

/// Shapes and the per-pass views of one (shape, axes): everything but the typed kernels.
#[derive(Debug)]
pub(crate) struct Geometry {
    pub real_shape: Vec<usize>,
    pub complex_shape: Vec<usize>,
    pub axes: Vec<usize>,
    /// Real length along `last`.
    pub n: usize,
    /// Complex length along `last`: `n / 2 + 1`.
    pub m: usize,
    /// Product of the shape before `last`.
    pub r_outer: usize,
    /// Product of the shape after `last` (the stride of `last`).
    pub r_inner: usize,
    /// Pruning checks of the r2c pass (transform axes before `last`, from `r_outer`'s index).
    pub r_checks: Vec<Check>,
    /// Complex passes, in descending axis order (forward order).
    pub cpasses: Vec<CPass>,
    /// Real elements.
    pub real_len: usize,
    /// Complex elements.
    pub complex_len: usize,
}

impl Geometry {
    fn new(shape: &[usize], axes: &[usize]) -> Self {
        let last = axes[axes.len() - 1];
        let n = shape[last];
        let m = n / 2 + 1;
        let mut complex_shape = shape.to_vec();
        complex_shape[last] = m;
        let prod = |s: &[usize]| s.iter().product::<usize>();
        let checks_before = |axis: usize| -> Vec<Check> {
            axes.iter()
                .filter(|&&b| b < axis)
                .map(|&b| Check {
                    div: prod(&shape[b + 1..axis]),
                    modulus: shape[b],
                    axis: b,
                })
                .collect()
        };
        let cpasses = axes[..axes.len() - 1]
            .iter()
            .rev()
            .map(|&a| CPass {
                axis: a,
                outer: prod(&complex_shape[..a]),
                len: complex_shape[a],
                inner: prod(&complex_shape[a + 1..]),
                checks: checks_before(a),
            })
            .collect();
        Geometry {
            real_shape: shape.to_vec(),
            complex_len: prod(&complex_shape),
            complex_shape,
            axes: axes.to_vec(),
            n,
            m,
            r_outer: prod(&shape[..last]),
            r_inner: prod(&shape[last + 1..]),
            r_checks: checks_before(last),
            cpasses,
            real_len: prod(shape),
        }
    }

    fn describe(&self) -> String {
        format!(
            "real {} ↔ complex {} over axes {:?}",
            fmt_shape(&self.real_shape),
            fmt_shape(&self.complex_shape),
            self.axes
        )
    }
}

/// The planners of one float type (kept so that repeated lengths share twiddles).
struct Planners<T: rustfft::FftNum> {
    real: RealFftPlanner<T>,
    complex: FftPlanner<T>,
}

impl<T: rustfft::FftNum> Planners<T> {
    fn new() -> Self {
        Planners {
            real: RealFftPlanner::new(),
            complex: FftPlanner::new(),
        }
    }

    fn kernels(&mut self, g: &Geometry) -> Kernels<T> {
        let r2c = self.real.plan_fft_forward(g.n);
        let c2r = self.real.plan_fft_inverse(g.n);
        let cfwd: Vec<_> = g
            .cpasses
            .iter()
            .map(|p| self.complex.plan_fft_forward(p.len))
            .collect();
        let cinv: Vec<_> = g
            .cpasses
            .iter()
            .map(|p| self.complex.plan_fft_inverse(p.len))
            .collect();
        let half =
            g.n.is_multiple_of(2)
                .then(|| real::HalfPlans::new(g.n, &mut self.complex));
        Kernels::new(g, r2c, c2r, cfwd, cinv, half)
    }
}

type PlanKey = (Vec<usize>, Vec<usize>, bool);

#[derive(Default)]
struct CacheState {
    plans: HashMap<PlanKey, CpuFftPlan>,
    f32: Option<Planners<f32>>,
    f64: Option<Planners<f64>>,
}

/// Plans by (shape, axes, float type), shared by every clone of a [`Cpu`](crate::Cpu) backend
/// (and by backends made with `Cpu::sharing`).
#[derive(Default)]
pub(crate) struct PlanCache {
    state: Mutex<CacheState>,
}

impl fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.state.lock().map(|s| s.plans.len()).unwrap_or(0);
        f.debug_struct("PlanCache").field("plans", &n).finish()
    }
}

impl PlanCache {
    /// The plan for `shape`/`axes` in float type `F` (`f32` or `f64`), built on first use.
    pub(crate) fn get<F: 'static>(&self, shape: &[usize], axes: &[usize]) -> Result<CpuFftPlan> {
        monomorph_core::check_fft_plan(shape, axes)?;
        let is_f64 = if TypeId::of::<F>() == TypeId::of::<f32>() {
            false
        } else if TypeId::of::<F>() == TypeId::of::<f64>() {
            true
        } else {
            return Err(unsupported_float::<F>());
        };
        let key = (shape.to_vec(), axes.to_vec(), is_f64);
        // A poisoned lock only means another thread panicked while planning; the map itself is
        // always left consistent (plans are inserted whole), so keep using it.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = st.plans.get(&key) {
            return Ok(p.clone());
        }
        let geom = Arc::new(Geometry::new(shape, axes));
        let kernels = if is_f64 {
            TypedKernels::F64(Arc::new(
                st.f64.get_or_insert_with(Planners::new).kernels(&geom),
            ))
        } else {
            TypedKernels::F32(Arc::new(
                st.f32.get_or_insert_with(Planners::new).kernels(&geom),
            ))
        };
        let plan = CpuFftPlan { geom, kernels };
        st.plans.insert(key, plan.clone());
        Ok(plan)
    }
}

fn unsupported_float<F>() -> Error {
    Error::Backend {
        backend: "cpu",
        message: format!(
            "FFT element type {} is not supported (f32 or f64 only)",
            std::any::type_name::<F>()
        ),
    }
}

/// Which direction a call runs, for messages.
#[derive(Clone, Copy)]
enum Dir {
    Forward,
    Inverse,
    Pruned,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Forward => "rfft",
            Dir::Inverse => "irfft",
            Dir::Pruned => "rfft_pruned",
        }
    }
}

impl CpuFftPlan {
    /// Errors unless the real and complex arrays have this plan's shapes (the check every
    /// backend shares).
    fn check(&self, dir: Dir, real: &[usize], complex: &[usize]) -> Result<()> {
        monomorph_core::check_fft_arrays(self, dir.name(), real, complex)
    }

    fn wrong_float<F>(&self, dir: Dir) -> Error {
        Error::FftPlan {
            plan: format!("{} in {}", self.geom.describe(), self.kernels.float_name()),
            got: format!(
                "{}: arrays of {} (a plan made by a backend of the other precision)",
                dir.name(),
                std::any::type_name::<F>()
            ),
        }
    }
}

/// Spectrum products a forward transform writes instead of its spectrum (see
/// [`forward`]): `outs[q] = factors[q] · conj(rfft(input))`.
pub(crate) struct ProductArgs<'a, 'b, F> {
    pub factors: &'a [&'a [Complex<F>]],
    pub outs: &'a mut [&'b mut [Complex<F>]],
}

/// Forward transform `out = rfft(input)` (or the pruned one when `nonzero` is given), for the
/// backend float type `F`; shapes are the arrays' shapes. With `products` (each array of the
/// complex shape), the results are the products, and `out` is scratch left unspecified.
pub(crate) fn forward<F: bytemuck::Pod>(
    plan: &CpuFftPlan,
    in_shape: &[usize],
    input: &[F],
    out_shape: &[usize],
    out: &mut [Complex<F>],
    nonzero: Option<&[usize]>,
    products: Option<ProductArgs<'_, '_, F>>,
) -> Result<()> {
    let dir = if nonzero.is_some() {
        Dir::Pruned
    } else {
        Dir::Forward
    };
    plan.check(dir, in_shape, out_shape)?;
    if let Some(nz) = nonzero {
        monomorph_core::check_rfft_pruned_nonzero(&plan.geom.real_shape, nz)?;
    }
    let g = &plan.geom;
    if let Some(pa) = &products {
        let n = g.complex_len;
        if pa.factors.len() != pa.outs.len()
            || pa.factors.iter().any(|f| f.len() != n)
            || pa.outs.iter().any(|o| o.len() != n)
        {
            return Err(Error::FftPlan {
                plan: g.describe(),
                got: format!(
                    "{}: spectrum products need as many factors as outputs, each of the \
                     complex shape",
                    dir.name()
                ),
            });
        }
    }
    fn run<T: kernels::FftFloat, F: bytemuck::Pod>(
        g: &Geometry,
        k: &Kernels<T>,
        input: &[F],
        out: &mut [Complex<F>],
        nonzero: Option<&[usize]>,
        products: Option<ProductArgs<'_, '_, F>>,
    ) -> Result<()> {
        let (i, o): (&[T], &mut [Complex<T>]) =
            (bytemuck::cast_slice(input), bytemuck::cast_slice_mut(out));
        match products {
            None => exec::forward(g, k, i, o, nonzero, None),
            Some(pa) => {
                let factors: Vec<&[Complex<T>]> =
                    pa.factors.iter().map(|f| bytemuck::cast_slice(f)).collect();
                let outs = pa
                    .outs
                    .iter_mut()
                    .map(|o| SharedMut(bytemuck::cast_slice_mut::<_, Complex<T>>(o).as_mut_ptr()))
                    .collect();
                let pr = exec::Products {
                    factors: &factors,
                    outs,
                };
                exec::forward(g, k, i, o, nonzero, Some(&pr))
            }
        }
    }
    match &plan.kernels {
        TypedKernels::F32(k) if TypeId::of::<F>() == TypeId::of::<f32>() => {
            run(g, k, input, out, nonzero, products)
        }
        TypedKernels::F64(k) if TypeId::of::<F>() == TypeId::of::<f64>() => {
            run(g, k, input, out, nonzero, products)
        }
        _ => Err(plan.wrong_float::<F>(dir)),
    }
}

/// Inverse transform `out = irfft(input)` (unnormalised; `input` is clobbered).
pub(crate) fn inverse<F: bytemuck::Pod>(
    plan: &CpuFftPlan,
    in_shape: &[usize],
    input: &mut [Complex<F>],
    out_shape: &[usize],
    out: &mut [F],
) -> Result<()> {
    plan.check(Dir::Inverse, out_shape, in_shape)?;
    let g = &plan.geom;
    match &plan.kernels {
        TypedKernels::F32(k) if TypeId::of::<F>() == TypeId::of::<f32>() => {
            let (i, o): (&mut [Complex<f32>], &mut [f32]) = (
                bytemuck::cast_slice_mut(input),
                bytemuck::cast_slice_mut(out),
            );
            exec::inverse(g, k, i, o)
        }
        TypedKernels::F64(k) if TypeId::of::<F>() == TypeId::of::<f64>() => {
            let (i, o): (&mut [Complex<f64>], &mut [f64]) = (
                bytemuck::cast_slice_mut(input),
                bytemuck::cast_slice_mut(out),
            );
            exec::inverse(g, k, i, o)
        }
        _ => Err(plan.wrong_float::<F>(Dir::Inverse)),
    }
}

/// `true` when [`inverse_consume`] can run this plan (its r2c axis is the array's last).
pub(crate) fn consumable(plan: &CpuFftPlan) -> bool {
    plan.geom.r_inner == 1
}

/// Inverse transforms of 1 to 3 spectra of `plan` (or up to [`MAX_GROUP`] groups of `group`
/// spectra: a group of rotations), each handed to `consume` a group of real rows at a time
/// while in cache instead of being written out (see `exec::inverse_consume`). Returns the
/// partial sums of `consume` added in a fixed order, one per group (0 for the groups not
/// given). The inputs are clobbered.
pub(crate) fn inverse_consume<F: bytemuck::Pod>(
    plan: &CpuFftPlan,
    group: usize,
    in_shapes: &[&[usize]],
    inputs: &mut [&mut [Complex<F>]],
    consume: &(dyn Fn(usize, &[&[F]]) -> Result<[f64; MAX_GROUP]> + Sync),
) -> Result<[f64; MAX_GROUP]> {
    let g = &plan.geom;
    for s in in_shapes {
        plan.check(Dir::Inverse, &g.real_shape, s)?;
    }
    let n = inputs.len();
    let groups = n.checked_div(group).unwrap_or(0);
    if !consumable(plan)
        || !(1..=3).contains(&group)
        || n != groups * group
        || !(1..=MAX_GROUP).contains(&groups)
    {
        return Err(Error::invalid(
            "fused inverse",
            format!(
                "1 to {MAX_GROUP} groups of 1 to 3 spectra with the r2c axis last, got {n} in groups of {group} over {}",
                g.describe()
            ),
        ));
    }
    fn run<T: kernels::FftFloat, F: bytemuck::Pod>(
        g: &Geometry,
        k: &Kernels<T>,
        group: usize,
        inputs: &mut [&mut [Complex<F>]],
        consume: &(dyn Fn(usize, &[&[F]]) -> Result<[f64; MAX_GROUP]> + Sync),
    ) -> Result<[f64; MAX_GROUP]> {
        let mut xs: Vec<&mut [Complex<T>]> = inputs
            .iter_mut()
            .map(|x| bytemuck::cast_slice_mut(x))
            .collect();
        let back = |r0: usize, outs: &[&[T]]| {
            let mut o: [&[F]; 3 * MAX_GROUP] = [&[]; 3 * MAX_GROUP];
            for (d, s) in o.iter_mut().zip(outs) {
                *d = bytemuck::cast_slice(s);
            }
            consume(r0, &o[..outs.len()])
        };
        exec::inverse_consume(g, k, group, &mut xs, &back)
    }
    match &plan.kernels {
        TypedKernels::F32(k) if TypeId::of::<F>() == TypeId::of::<f32>() => {
            run(g, k, group, inputs, consume)
        }
        TypedKernels::F64(k) if TypeId::of::<F>() == TypeId::of::<f64>() => {
            run(g, k, group, inputs, consume)
        }
        _ => Err(plan.wrong_float::<F>(Dir::Inverse)),
    }
}
