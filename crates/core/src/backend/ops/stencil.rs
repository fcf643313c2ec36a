//! The pressure-Poisson stencil of the [`Linalg`](super::Linalg) family: the Laplacian with a
//! boundary per axis and side, a grid spacing per axis, and closed faces (obstacles), as
//! PhiFlow's pressure solve (`phi.physics.fluid.masked_laplace`) poses it.
//!
//! One definition, every backend: for a cell `i` of a row-major grid of 1 to 3 axes,
//!
//! ```text
//! inactive cell:  y_i = 0
//! active cell:    y_i = Σ_axes c_a · ( Σ_{open faces f of i on axis a} nb_f − k_a · x_i )
//! ```
//!
//! with `c_a = 1/dx_a²`, `k_a` the number of open faces of `i` on axis `a` (0, 1 or 2) and `nb_f`
//! the value across face `f`: the neighbour's `x` inside the grid (wrapped on a periodic axis),
//! 0 in the ghost cell outside a Dirichlet side. A face is closed (no flux, not counted) when it
//! lies on a Neumann side or when the cell across it is inactive (an obstacle). The axis sums run
//! slowest axis first and each is `(nb_lower + nb_upper) − k_a·x_i`; the products are rounded
//! on their own (no fused multiply-add), so every backend rounds alike.
//!
//! The operator is symmetric and negative semi-definite; it is definite on the active cells
//! exactly when every connected region of active cells has an open Dirichlet face.

use crate::backend::{Arr, ArrayMeta, BackendTypes, Memory};
use crate::error::{Error, Result, fmt_shape};

/// The boundary of one side of one axis of a [`PoissonStencil`], as the *solved* field sees it.
/// For a pressure solve a closed wall is [`Side::Neumann`] and an open side [`Side::Dirichlet`]
/// (the reverse of the velocity names a PhiFlow user sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The ghost cell one spacing outside the grid holds zero (phiml's `ZERO` extrapolation;
    /// the value sits at the ghost cell's centre, not on the face). The face is open.
    Dirichlet,
    /// Zero gradient (phiml's `ZERO_GRADIENT`): the face is closed and carries no flux.
    Neumann,
    /// Wrap-around (phiml's `PERIODIC`): only on both sides of an axis.
    Periodic,
}

impl Side {
    /// The word the command and `result.json` use: `dirichlet`, `neumann` or `periodic`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Dirichlet => "dirichlet",
            Side::Neumann => "neumann",
            Side::Periodic => "periodic",
        }
    }
}

/// Bit of a cell's flags byte: the cell is active (an unknown).
pub const CELL_ACTIVE: u8 = 1;

/// Bit of a cell's flags byte: its lower (`upper = false`) or upper face on padded axis `p`
/// (0 = z, 1 = y, 2 = x of the grid padded to three axes) is open.
pub const fn face_bit(p: usize, upper: bool) -> u8 {
    1 << (1 + 2 * p + upper as usize)
}

/// The sizes and coefficients of a [`PoissonStencil`], as kernels read them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StencilDims {
    /// The grid padded to three axes `(nz, ny, nx)` with leading 1s.
    pub grid3: [usize; 3],
    /// `1/dx²` per padded axis (0 on padding axes).
    pub coef: [f64; 3],
    /// Per padded axis: periodic (both sides).
    pub periodic: [bool; 3],
    /// Per padded axis and side (lower, upper): the face on the grid's boundary is open
    /// (Dirichlet or periodic). Padding axes are closed.
    pub open: [[bool; 2]; 3],
}

/// The matrix-free pressure-Poisson operator's description on a backend (see the [module
/// docs](self) for its definition): grid, per-axis spacing, per-axis-and-side boundaries and,
/// with obstacles, one flags byte per cell on the device ([`CELL_ACTIVE`], [`face_bit`]).
pub struct PoissonStencil<B: BackendTypes> {
    grid: Vec<usize>,
    sides: Vec<[Side; 2]>,
    spacing: Vec<f64>,
    dims: StencilDims,
    /// Per-cell flags, `(n,)`; `None` when every cell is active (faces from the sides alone).
    cells: Option<Arr<B, u8>>,
    /// The same flags on the host (always present).
    host: Vec<u8>,
    obstacles: usize,
    /// The flags cut into runs per line, made on first use ([`PoissonStencil::line_runs`]).
    runs: std::sync::OnceLock<LineRuns>,
}

/// A [`PoissonStencil`]'s cells, line by line (lines of the last axis), cut into runs of equal
/// flags: what a host kernel needs to run one branch-free loop per run without reading a
/// flags byte per cell. They depend only on the flags, so they are made once per stencil.
///
/// Every line's first and last cell are runs of their own (their neighbours along the line
/// lie outside it: a wrapped cell or a ghost), and every other run lies strictly inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRuns {
    /// Per line `l`, its runs are `runs[start[l]..start[l + 1]]`.
    start: Vec<usize>,
    /// One run: `len << 8 | flags` (the flags byte of each of its `len` cells).
    runs: Vec<u32>,
}

/// The longest run a [`LineRuns`] entry holds (longer runs of equal flags are split).
const MAX_RUN: usize = (1 << 24) - 1;

impl LineRuns {
    /// The runs of every line of `nx` cells of `flags`.
    pub fn new(flags: &[u8], nx: usize) -> Self {
        let lines = flags.len().checked_div(nx).unwrap_or(0);
        let mut start = Vec::with_capacity(lines + 1);
        let mut runs = Vec::with_capacity(lines * 3);
        start.push(0);
        for fl in flags.chunks_exact(nx.max(1)).take(lines) {
            let mut s = 0;
            while s < nx {
                let f = fl[s];
                // The first and last cell alone; inner runs stop before the last cell.
                let stop = if s == 0 { 1 } else { nx - 1 };
                let mut e = s + 1;
                while e < stop.max(s + 1) && fl[e] == f && e - s < MAX_RUN {
                    e += 1;
                }
                runs.push(((e - s) as u32) << 8 | f as u32);
                s = e;
            }
            start.push(runs.len());
        }
        LineRuns { start, runs }
    }

    /// The runs of line `l`: `(len, flags)` in order, covering the line.
    #[inline]
    pub fn line(&self, l: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
        self.runs[self.start[l]..self.start[l + 1]]
            .iter()
            .map(|&r| ((r >> 8) as usize, r as u8))
    }

    /// Bytes the table occupies (what a kernel reading it moves per pass).
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.start[..]) + std::mem::size_of_val(&self.runs[..])
    }
}

/// Validates a grid of 1 to 3 non-zero axes; returns its point count.
fn check_grid(grid: &[usize]) -> Result<usize> {
    if grid.is_empty() || grid.len() > 3 || grid.contains(&0) {
        return Err(Error::invalid(
            "grid",
            format!("1 to 3 non-zero axes expected, got {}", fmt_shape(grid)),
        ));
    }
    crate::shape::checked_len(grid)
        .ok_or_else(|| Error::invalid("grid", "number of points overflows usize"))
}

/// Validates boundaries (one `[lower, upper]` per axis, periodic on both sides or neither) and
/// spacings (one, or one per axis; finite and > 0) for a grid of `nd` axes; returns the spacing
/// per axis.
pub fn check_stencil_spec(nd: usize, sides: &[[Side; 2]], spacing: &[f64]) -> Result<Vec<f64>> {
    if sides.len() != nd {
        return Err(Error::invalid(
            "boundary",
            format!(
                "one [lower, upper] pair per axis expected: {nd} axes, got {}",
                sides.len()
            ),
        ));
    }
    for (a, s) in sides.iter().enumerate() {
        if (s[0] == Side::Periodic) != (s[1] == Side::Periodic) {
            return Err(Error::invalid(
                "boundary",
                format!(
                    "axis {a}: periodic only on both sides of an axis, got {}:{}",
                    s[0].name(),
                    s[1].name()
                ),
            ));
        }
    }
    let spacing = match spacing.len() {
        1 => vec![spacing[0]; nd],
        k if k == nd => spacing.to_vec(),
        k => {
            return Err(Error::invalid(
                "spacing",
                format!("one value or one per axis ({nd}) expected, got {k}"),
            ));
        }
    };
    for (a, &d) in spacing.iter().enumerate() {
        if !(d.is_finite() && d > 0.0) {
            return Err(Error::invalid(
                "spacing",
                format!("axis {a}: a finite spacing > 0 expected, got {d}"),
            ));
        }
        let c = 1.0 / (d * d);
        if !c.is_finite() || c == 0.0 {
            return Err(Error::invalid(
                "spacing",
                format!("axis {a}: spacing {d} makes 1/dx² = {c}, outside the float range"),
            ));
        }
    }
    Ok(spacing)
}

/// The flags byte of every cell (see [`CELL_ACTIVE`], [`face_bit`]) of `grid` from its sides and
/// an obstacle mask (`true` = obstacle, `(n,)` row-major; `None` = none).
pub fn stencil_cell_flags(
    grid: &[usize],
    sides: &[[Side; 2]],
    obstacles: Option<&[bool]>,
) -> Result<Vec<u8>> {
    let n = check_grid(grid)?;
    if sides.len() != grid.len() {
        return Err(Error::invalid(
            "boundary",
            format!("{} axes, {} boundary pairs", grid.len(), sides.len()),
        ));
    }
    if let Some(m) = obstacles
        && m.len() != n
    {
        return Err(Error::shape(
            "obstacles",
            format!("{n} cells (grid {})", fmt_shape(grid)),
            format!("{} cells", m.len()),
        ));
    }
    let nd = grid.len();
    let pad = 3 - nd;
    let mut g3 = [1usize; 3];
    g3[pad..].copy_from_slice(grid);
    let strides = [g3[1] * g3[2], g3[2], 1];
    let solid = |i: usize| obstacles.is_some_and(|m| m[i]);
    let mut flags = vec![0u8; n];
    for (i, f) in flags.iter_mut().enumerate() {
        if solid(i) {
            continue;
        }
        let mut v = CELL_ACTIVE;
        let c = [i / strides[0], (i / strides[1]) % g3[1], i % g3[2]];
        for a in 0..nd {
            let p = a + pad;
            let len = g3[p];
            for upper in [false, true] {
                let at_edge = if upper { c[p] + 1 == len } else { c[p] == 0 };
                let side = sides[a][upper as usize];
                let open = if !at_edge {
                    let j = if upper {
                        i + strides[p]
                    } else {
                        i - strides[p]
                    };
                    !solid(j)
                } else {
                    match side {
                        Side::Dirichlet => true,
                        Side::Neumann => false,
                        Side::Periodic => {
                            let j = if upper {
                                i - (len - 1) * strides[p]
                            } else {
                                i + (len - 1) * strides[p]
                            };
                            !solid(j)
                        }
                    }
                };
                if open {
                    v |= face_bit(p, upper);
                }
            }
        }
        *f = v;
    }
    Ok(flags)
}

impl<B: Memory> PoissonStencil<B> {
    /// The stencil on `grid` (1 to 3 axes, row-major, last fastest) with `sides` (one
    /// `[lower, upper]` per axis), `spacing` (one value or one per axis, finite and > 0) and an
    /// optional obstacle mask (`true` = obstacle, `(n,)` row-major). Errors: a grid that is not
    /// 1 to 3 non-zero axes, a boundary list of another length, periodic on one side only, a
    /// bad spacing, a mask of another size, or a mask with every cell an obstacle.
    pub fn new(
        b: &B,
        grid: &[usize],
        sides: &[[Side; 2]],
        spacing: &[f64],
        obstacles: Option<&[bool]>,
    ) -> Result<Self> {
        let n = check_grid(grid)?;
        let spacing = check_stencil_spec(grid.len(), sides, spacing)?;
        let host = stencil_cell_flags(grid, sides, obstacles)?;
        let count = obstacles.map_or(0, |m| m.iter().filter(|&&o| o).count());
        if count == n {
            return Err(Error::invalid(
                "obstacles",
                "every cell is an obstacle: the system has no unknowns",
            ));
        }
        let nd = grid.len();
        let pad = 3 - nd;
        let mut dims = StencilDims {
            grid3: [1; 3],
            coef: [0.0; 3],
            periodic: [false; 3],
            open: [[false; 2]; 3],
        };
        dims.grid3[pad..].copy_from_slice(grid);
        for a in 0..nd {
            let p = a + pad;
            dims.coef[p] = 1.0 / (spacing[a] * spacing[a]);
            dims.periodic[p] = sides[a][0] == Side::Periodic;
            for s in 0..2 {
                dims.open[p][s] = sides[a][s] != Side::Neumann;
            }
        }
        let cells = if count > 0 {
            let a = ndarray::ArrayView1::from(&host[..]).into_dyn();
            Some(b.upload(a)?)
        } else {
            None
        };
        Ok(PoissonStencil {
            grid: grid.to_vec(),
            sides: sides.to_vec(),
            spacing,
            dims,
            cells,
            host,
            obstacles: count,
            runs: std::sync::OnceLock::new(),
        })
    }
}

impl<B: BackendTypes> PoissonStencil<B> {
    /// The grid shape.
    pub fn grid(&self) -> &[usize] {
        &self.grid
    }
    /// Number of cells.
    pub fn len(&self) -> usize {
        self.host.len()
    }
    /// `true` for a grid without cells (never: grids have non-zero axes).
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
    /// `[lower, upper]` per axis.
    pub fn sides(&self) -> &[[Side; 2]] {
        &self.sides
    }
    /// Spacing per axis.
    pub fn spacing(&self) -> &[f64] {
        &self.spacing
    }
    /// Sizes and coefficients as the kernels read them.
    pub fn dims(&self) -> StencilDims {
        self.dims
    }
    /// The per-cell flags on the device, when there are obstacles.
    pub fn cells(&self) -> Option<&Arr<B, u8>> {
        self.cells.as_ref()
    }
    /// The per-cell flags on the host.
    pub fn cell_flags(&self) -> &[u8] {
        &self.host
    }
    /// Number of obstacle (inactive) cells.
    pub fn obstacle_count(&self) -> usize {
        self.obstacles
    }
    /// The host flags cut into runs per line ([`LineRuns`]), made on the first call.
    pub fn line_runs(&self) -> &LineRuns {
        self.runs
            .get_or_init(|| LineRuns::new(&self.host, self.dims.grid3[2]))
    }
}

/// The argument checks of the stencil ops (`op` names which), shared by the backends: `x` of
/// shape `(batch, n)` for the stencil's `n` cells, `y` of `x`'s shape, and the device flags (if
/// any) of `(n,)`. Returns `(rows, n)`.
pub fn check_stencil<B: BackendTypes>(
    op: &str,
    st: &PoissonStencil<B>,
    x: &[usize],
    y: &[usize],
) -> Result<(usize, usize)> {
    let n = st.len();
    let (rows, xn) = super::rows_of_named(|| format!("x of {op}"), x)?;
    if xn != n {
        return Err(Error::shape(
            format!("x of {op}"),
            format!("(batch, {n})"),
            fmt_shape(x),
        ));
    }
    super::same_shape_named(|| format!("y of {op}"), x, y)?;
    if let Some(c) = &st.cells {
        super::same_shape_named(|| format!("cell flags of {op}"), &[n], c.shape())?;
    }
    Ok((rows, n))
}

/// The stencil's default flags for cell `c` (padded coordinates) when there are no obstacles:
/// active, and every face open except those on a Neumann side.
#[inline]
pub fn default_cell_flags(d: &StencilDims, c: [usize; 3]) -> u8 {
    let mut v = CELL_ACTIVE;
    for p in 0..3 {
        if d.coef[p] == 0.0 {
            continue;
        }
        if c[p] > 0 || d.open[p][0] {
            v |= face_bit(p, false);
        }
        if c[p] + 1 < d.grid3[p] || d.open[p][1] {
            v |= face_bit(p, true);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs cover each line in order with the flags of their cells; a line's first and last
    /// cells are runs of their own; runs longer than [`MAX_RUN`] are split.
    #[test]
    fn line_runs_cover_every_line_with_its_flags() {
        let flags: Vec<u8> = (0..7 * 40).map(|i| ((i % 40) / 9 % 2) as u8 * 3).collect();
        for nx in [1, 2, 3, 40] {
            let runs = LineRuns::new(&flags[..flags.len() / nx * nx], nx);
            for (l, fl) in flags.chunks_exact(nx).enumerate() {
                let mut cells = Vec::new();
                let rs: Vec<(usize, u8)> = runs.line(l).collect();
                for &(len, f) in &rs {
                    assert!(len > 0, "nx {nx} line {l}");
                    cells.extend(std::iter::repeat_n(f, len));
                }
                assert_eq!(cells, fl, "nx {nx} line {l}");
                assert_eq!(rs[0].0, 1, "first cell alone");
                assert_eq!(rs[rs.len() - 1].0, 1, "last cell alone");
                // Inner runs are maximal.
                let inner = if rs.len() > 2 {
                    &rs[1..rs.len() - 1]
                } else {
                    &[][..]
                };
                for w in inner.windows(2) {
                    assert_ne!(w[0].1, w[1].1, "nx {nx} line {l}: {rs:?}");
                }
            }
        }
        let long = vec![CELL_ACTIVE; MAX_RUN + 7];
        let rs: Vec<(usize, u8)> = LineRuns::new(&long, long.len()).line(0).collect();
        assert_eq!(rs, [(1, 1), (MAX_RUN, 1), (5, 1), (1, 1)]);
    }
}
