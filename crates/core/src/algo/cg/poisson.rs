//! The pressure-Poisson operator as PhiFlow's fluid solve poses it: [`PoissonOperator`], and
//! the null space of a singular one ([`NullSpace`]).

use ndarray::{ArrayD, IxDyn};

use super::LinearOperator;
use crate::backend::{
    AccumOf, Arr, BackendTypes, CELL_ACTIVE, FloatOf, Linalg, Memory, PoissonStencil, Side,
    face_bit,
};
use crate::dtype::Real;
use crate::error::{Error, Result};

/// Label of a cell that is not an unknown (an obstacle): its value is 0 and its right-hand
/// side is ignored.
const PINNED: i32 = -1;
/// Label of a cell of a region that touches an open Dirichlet face (no null vector).
const GROUNDED: i32 = -2;

/// The null space of a singular (or masked) operator, known cell by cell: cells that are not
/// unknowns (pinned to 0), and regions of cells whose constant is in the null space (a connected
/// region of active cells with no open Dirichlet face: all-Neumann, periodic, or a fluid pocket
/// closed off by obstacles). Such a system has a solution only when the right-hand side sums to
/// zero over each region; the solver then returns the solution of zero mean over each region.
#[derive(Debug, Clone, PartialEq)]
pub struct NullSpace {
    /// Per cell: [`PINNED`], [`GROUNDED`], or the index of its floating region.
    labels: Vec<i32>,
    /// Cells per floating region.
    sizes: Vec<usize>,
    pinned: usize,
}

impl NullSpace {
    /// Cells that are not unknowns (their value is 0, their right-hand side ignored).
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// Number of floating regions: the dimension of the null space on the unknowns.
    pub fn dimension(&self) -> usize {
        self.sizes.len()
    }

    /// Cells of each floating region.
    pub fn region_sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Per row of `a` (`(batch, n)`): the sum of each floating region, in region order.
    fn region_sums<T: Real>(&self, row: &[T]) -> Vec<f64> {
        let mut s = vec![0.0f64; self.sizes.len()];
        for (&l, &v) in self.labels.iter().zip(row) {
            if l >= 0 {
                s[l as usize] += v.as_f64();
            }
        }
        s
    }

    /// Squared norm of the part of each row of `a` (`(batch, n)`) in the null space (the
    /// constants of the floating regions): `Σ_k (Σ_{i∈k} a_i)² / |k|`. Pinned cells do not
    /// count (their values are ignored, not inconsistent).
    pub fn null_sq<T: Real>(&self, a: &ArrayD<T>) -> Vec<f64> {
        let n = self.labels.len();
        let flat: Vec<T> = a.iter().copied().collect();
        flat.chunks(n.max(1))
            .map(|row| {
                self.region_sums(row)
                    .iter()
                    .zip(&self.sizes)
                    .map(|(&s, &k)| s * s / k as f64)
                    .sum()
            })
            .collect()
    }

    /// Sets the pinned cells of every row of `a` (`(batch, n)`) to 0.
    pub fn zero_pinned<T: Real>(&self, a: &mut ArrayD<T>) {
        let n = self.labels.len();
        for (i, v) in a.iter_mut().enumerate() {
            if self.labels[i % n] == PINNED {
                *v = T::from_f64(0.0);
            }
        }
    }

    /// Projects every row of `a` (`(batch, n)`) onto the range: pinned cells to 0, and each
    /// floating region minus its mean (in f64, rounded once).
    pub fn project<T: Real>(&self, a: &mut ArrayD<T>) {
        let n = self.labels.len();
        let flat: Vec<T> = a.iter().copied().collect();
        let means: Vec<Vec<f64>> = flat
            .chunks(n.max(1))
            .map(|row| {
                self.region_sums(row)
                    .iter()
                    .zip(&self.sizes)
                    .map(|(&s, &k)| s / k as f64)
                    .collect()
            })
            .collect();
        for (i, v) in a.iter_mut().enumerate() {
            let l = self.labels[i % n];
            if l == PINNED {
                *v = T::from_f64(0.0);
            } else if l >= 0 {
                let m = means[i / n][l as usize];
                if m != 0.0 {
                    *v = T::from_f64(v.as_f64() - m);
                }
            }
        }
    }
}

/// The null space of a stencil from its cell flags: labels the connected regions of active
/// cells (joined by open faces) and keeps as floating those without an open face on a
/// Dirichlet side. `None` when every cell is an unknown and no region floats.
fn null_space_of<B: BackendTypes>(st: &PoissonStencil<B>) -> Option<NullSpace> {
    let flags = st.cell_flags();
    let d = st.dims();
    let n = flags.len();
    let g = d.grid3;
    let strides = [g[1] * g[2], g[2], 1];
    let mut labels = vec![i32::MIN; n];
    let mut sizes = Vec::new();
    let mut pinned = 0usize;
    let mut stack = Vec::new();
    let mut next = 0i32;
    for start in 0..n {
        if labels[start] != i32::MIN {
            continue;
        }
        if flags[start] & CELL_ACTIVE == 0 {
            labels[start] = PINNED;
            pinned += 1;
            continue;
        }
        // Flood the region of `start` with the label `next`.
        let mut grounded = false;
        let mut members = Vec::new();
        labels[start] = next;
        stack.push(start);
        while let Some(i) = stack.pop() {
            members.push(i);
            let f = flags[i];
            let c = [i / strides[0], (i / strides[1]) % g[1], i % g[2]];
            for p in 0..3 {
                if d.coef[p] == 0.0 {
                    continue;
                }
                for upper in [false, true] {
                    if f & face_bit(p, upper) == 0 {
                        continue;
                    }
                    let at_edge = if upper { c[p] + 1 == g[p] } else { c[p] == 0 };
                    let j = match (at_edge, upper) {
                        (false, true) => i + strides[p],
                        (false, false) => i - strides[p],
                        (true, _) if !d.periodic[p] => {
                            grounded = true; // an open face on a Dirichlet side
                            continue;
                        }
                        (true, true) => i - (g[p] - 1) * strides[p],
                        (true, false) => i + (g[p] - 1) * strides[p],
                    };
                    if labels[j] == i32::MIN {
                        labels[j] = next;
                        stack.push(j);
                    }
                }
            }
        }
        if grounded {
            for &i in &members {
                labels[i] = GROUNDED;
            }
        } else {
            sizes.push(members.len());
            next += 1;
        }
    }
    (pinned > 0 || !sizes.is_empty()).then_some(NullSpace {
        labels,
        sizes,
        pinned,
    })
}

/// The matrix-free Laplacian of a pressure solve as PhiFlow builds it
/// (`phi.physics.fluid.make_incompressible` → `masked_laplace`): the unit stencil divided by
/// `dx²` per axis, with the sign of phiml's `math.laplace` (negative semi-definite), a boundary
/// per axis and side ([`Side`]: Dirichlet zero ghost, Neumann closed face, periodic), and
/// obstacle cells that are not unknowns with closed faces towards them (see
/// [`PoissonStencil`] for the exact definition). Shared by every batch entry.
///
/// Without an open Dirichlet face (all-Neumann or periodic, or a fluid pocket closed off by
/// obstacles) the operator is singular: [`LinearOperator::null_space`] says where, the solver
/// reports a right-hand side with a component in the null space as not converged, and returns
/// the zero-mean solution of a consistent one. A non-zero Dirichlet value
/// ([`PoissonOperator::with_dirichlet_values`]) makes the map affine, `L·x + b`;
/// [`PoissonOperator::dirichlet_term`] gives `b`, which the caller moves to the right-hand side
/// (solve `L·x = y − b`, as phiml's `sparse_matrix_and_bias`).
pub struct PoissonOperator<B: BackendTypes> {
    stencil: PoissonStencil<B>,
    null: Option<NullSpace>,
    values: Vec<[f64; 2]>,
}

impl<B: Memory> PoissonOperator<B> {
    /// The operator on `grid` (1 to 3 axes, row-major) with `sides` (`[lower, upper]` per
    /// axis), `spacing` (one, or one per axis) and an optional obstacle mask (`(n,)`, `true` =
    /// obstacle). Errors as [`PoissonStencil::new`].
    pub fn new(
        b: &B,
        grid: &[usize],
        sides: &[[Side; 2]],
        spacing: &[f64],
        obstacles: Option<&[bool]>,
    ) -> Result<Self> {
        let stencil = PoissonStencil::new(b, grid, sides, spacing, obstacles)?;
        let null = null_space_of(&stencil);
        Ok(PoissonOperator {
            stencil,
            null,
            values: vec![[0.0; 2]; grid.len()],
        })
    }
}

impl<B: BackendTypes> PoissonOperator<B> {
    /// The same operator with the ghost values of its Dirichlet sides (`[lower, upper]` per
    /// axis; finite; 0 on the other sides).
    pub fn with_dirichlet_values(mut self, values: &[[f64; 2]]) -> Result<Self> {
        let sides = self.stencil.sides();
        if values.len() != sides.len() {
            return Err(Error::invalid(
                "dirichlet values",
                format!("one [lower, upper] pair per axis ({})", sides.len()),
            ));
        }
        for (a, (v, s)) in values.iter().zip(sides).enumerate() {
            for k in 0..2 {
                if !v[k].is_finite() || (v[k] != 0.0 && s[k] != Side::Dirichlet) {
                    return Err(Error::invalid(
                        "dirichlet values",
                        format!(
                            "axis {a}: a finite value, and non-zero only on a Dirichlet side \
                             (this side is {}), got {}",
                            s[k].name(),
                            v[k]
                        ),
                    ));
                }
            }
        }
        self.values = values.to_vec();
        Ok(self)
    }

    /// The constant term `b` (`(n,)`) of the affine map `L·x + b` that non-zero Dirichlet
    /// values make: `c_a · g` for every open boundary face of an active cell on a Dirichlet side
    /// of value `g`. Zero when every Dirichlet value is 0.
    pub fn dirichlet_term(&self) -> Vec<f64> {
        let d = self.stencil.dims();
        let flags = self.stencil.cell_flags();
        let g = d.grid3;
        let pad = 3 - self.values.len();
        let mut out = vec![0.0; flags.len()];
        if self.values.iter().all(|v| v[0] == 0.0 && v[1] == 0.0) {
            return out;
        }
        let strides = [g[1] * g[2], g[2], 1];
        for (i, o) in out.iter_mut().enumerate() {
            let f = flags[i];
            if f & CELL_ACTIVE == 0 {
                continue;
            }
            let c = [i / strides[0], (i / strides[1]) % g[1], i % g[2]];
            for (a, v) in self.values.iter().enumerate() {
                let p = a + pad;
                if d.periodic[p] {
                    continue;
                }
                if c[p] == 0 && f & face_bit(p, false) != 0 {
                    *o += d.coef[p] * v[0];
                }
                if c[p] + 1 == g[p] && f & face_bit(p, true) != 0 {
                    *o += d.coef[p] * v[1];
                }
            }
        }
        out
    }

    /// The stencil (grid, sides, spacing, cell flags).
    pub fn stencil(&self) -> &PoissonStencil<B> {
        &self.stencil
    }

    /// `true` when the operator has a null space on its unknowns (a region without an open
    /// Dirichlet face).
    pub fn is_singular(&self) -> bool {
        self.null.as_ref().is_some_and(|s| s.dimension() > 0)
    }
}

impl<B: Memory + Linalg> LinearOperator<B> for PoissonOperator<B> {
    fn size(&self) -> usize {
        self.stencil.len()
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        b.stencil(&self.stencil, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        b.stencil_dot(&self.stencil, x, y, active)
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
        b.stencil_dot_into(&self.stencil, x, y, mask, s, slot)
    }
    /// The diagonal `−Σ_a c_a·k_a` per cell; cells that are not unknowns, and cells with every
    /// face closed, report 1 (their residual is always 0), so that Jacobi can divide by it.
    fn diagonal(&self, _b: &B) -> Result<Option<ArrayD<f64>>> {
        let d = self.stencil.dims();
        let diag: Vec<f64> = self
            .stencil
            .cell_flags()
            .iter()
            .map(|&f| {
                let v: f64 = (0..3)
                    .map(|p| {
                        let k = ((f >> (1 + 2 * p)) & 1) + ((f >> (2 + 2 * p)) & 1);
                        -d.coef[p] * k as f64
                    })
                    .sum();
                if f & CELL_ACTIVE == 0 || v == 0.0 {
                    1.0
                } else {
                    v
                }
            })
            .collect();
        let n = diag.len();
        ArrayD::from_shape_vec(IxDyn(&[n]), diag)
            .map(Some)
            .map_err(|e| Error::invalid("diagonal", e.to_string()))
    }
    fn null_space(&self) -> Option<&NullSpace> {
        self.null.as_ref()
    }
}
