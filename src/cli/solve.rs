//! `monomorph solve`: batched conjugate gradient.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use monomorph::algo::cg::{
    Boundary, CsrOperator, DenseOperator, LaplacianOperator, LinearOperator, Method, NullSpace,
    PoissonOperator, Preconditioner, Side, SolveParams, SolveResult, conjugate_gradient_controlled,
};
use monomorph::io::{HostArray, write_npy};
use monomorph::{Backend, BackendTask, FloatOf};
use ndarray::ArrayD;
use serde_json::json;
use tracing::info_span;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::output::{
    Outputs, Timings, check_distinct, check_out_dir, peak_memory_bytes, read_npy_input, run_info,
};

/// Exit status of `monomorph solve` when it ran and wrote its outputs but at least one system
/// did not converge or diverged (0: all converged; 1: a failure while running; 2: bad input).
pub const EXIT_NOT_CONVERGED: u8 = 3;

/// Options of `monomorph solve`.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("operator").required(true).args(["matrix", "csr", "laplacian"])))]
#[command(
    after_help = "A system has converged when its true residual ‖y − A·x‖ (computed once \
at the end, written to residual.npy and as residual_norm in result.json) meets max(rtol·‖y‖, atol). \
A right-hand side of zeros has the answer x = 0.\n\n\
Exit status: 0 every system converged; 3 the solve ran and wrote its outputs, but at least one \
system did not converge or diverged (they are listed on stderr, and result.json says why for \
each); 2 bad input (nothing is written); 1 a failure while running."
)]
pub struct SolveArgs {
    /// Dense matrix `(n, n)` shared by all systems, or `(batch, n, n)` one per system.
    #[arg(long, value_name = "A.npy")]
    pub matrix: Option<PathBuf>,
    /// CSR matrix: a folder holding `indptr.npy`, `indices.npy` and `data.npy`.
    #[arg(long, value_name = "DIR")]
    pub csr: Option<PathBuf>,
    /// Matrix-free Laplacian Δ (h = 1, centre −2·ndim, neighbours +1) on a grid `N[xN[xN]]`,
    /// unknowns in row-major order (axis 0 slowest; PhiFlow's (x, y[, z]) grids: index =
    /// ix·ny + iy); Dirichlet zero unless --periodic or --boundary. With --boundary, --spacing
    /// or --obstacles it is the pressure Laplacian of PhiFlow's fluid solve (the unit stencil
    /// divided by dx² per axis, the sign of phiml's math.laplace).
    #[arg(long, value_name = "NxN")]
    pub laplacian: Option<String>,
    /// Periodic boundary for --laplacian (the same as --boundary periodic).
    #[arg(long, requires = "laplacian", conflicts_with = "boundary")]
    pub periodic: bool,
    /// Boundary of the solved field for --laplacian (for a pressure solve a closed wall is
    /// `neumann`, an open side `dirichlet`): one word for every side (`dirichlet`, `neumann`,
    /// `periodic`, or phiml's `zero`, `zero-gradient`), or a comma list with one item per axis,
    /// each one word or `LOWER:UPPER` (`neumann,neumann:dirichlet`). A Dirichlet side holds 0 in
    /// the ghost cell one spacing outside the grid; periodic only on both sides of an axis.
    #[arg(
        long,
        value_name = "SPEC",
        requires = "laplacian",
        allow_hyphen_values = true
    )]
    pub boundary: Option<String>,
    /// Grid spacing for --laplacian: one value, or one per axis comma-separated (`0.5,0.25`);
    /// finite and > 0 (default 1).
    #[arg(
        long,
        value_name = "DX",
        requires = "laplacian",
        allow_hyphen_values = true
    )]
    pub spacing: Option<String>,
    /// Obstacle mask for --laplacian, grid-shaped, 1 in obstacle cells (0/1, any numeric or
    /// bool dtype): those cells are not unknowns (y and x0 there are ignored, x is 0 there) and
    /// the faces towards them carry no flux.
    #[arg(long, value_name = "MASK.npy", requires = "laplacian")]
    pub obstacles: Option<PathBuf>,
    /// Also write trajectory.npy: x after every iteration, `(steps + 1, batch, n)` (step 0 is
    /// x0; the state at step k is what a solve with --max-iter k returns).
    #[arg(long)]
    pub trajectory: bool,
    /// Right-hand sides `(batch, n)` (or `(n,)` for one system).
    #[arg(long, value_name = "Y.npy")]
    pub rhs: PathBuf,
    /// Initial guesses, same shape as --rhs (default zeros).
    #[arg(long, value_name = "X0.npy")]
    pub x0: Option<PathBuf>,
    /// CG variant.
    #[arg(long, value_enum, default_value_t = MethodArg::Cg)]
    pub method: MethodArg,
    /// Preconditioner (--method cg only): Jacobi divides by the operator's diagonal, which
    /// must have no zero.
    #[arg(long, value_enum, default_value_t = PreconditionerArg::None)]
    pub preconditioner: PreconditionerArg,
    /// Relative tolerance on ‖y − A·x‖ (to ‖y‖), finite and ≥ 0.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 1e-5,
        allow_negative_numbers = true
    )]
    pub rtol: f64,
    /// Absolute tolerance on ‖y − A·x‖, finite and ≥ 0.
    #[arg(
        long,
        value_name = "A",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub atol: f64,
    /// Iteration limit per system (at least 1).
    #[arg(long, value_name = "K", default_value_t = 1000)]
    pub max_iter: usize,
    /// Output folder: x.npy, residual.npy, result.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `--method`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodArg {
    /// Standard conjugate gradient.
    Cg,
    /// PhiFlow's CG-adaptive.
    CgAdaptive,
    /// PhiFlow's default (`Solve('auto')`): CG-adaptive.
    Auto,
}

/// `--preconditioner`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreconditionerArg {
    /// Plain CG.
    None,
    /// Jacobi: M = diag(A).
    Jacobi,
}

enum Op {
    Dense(HostArray),
    Csr {
        indptr: Vec<i64>,
        indices: Vec<i64>,
        data: HostArray,
    },
    Laplacian(Vec<usize>, Boundary),
    /// The pressure Laplacian: grid, sides, spacing per axis, obstacle mask (row-major).
    Poisson {
        grid: Vec<usize>,
        sides: Vec<[Side; 2]>,
        spacing: Vec<f64>,
        obstacles: Option<Vec<bool>>,
    },
}

struct SolveTask {
    op: Op,
    y: HostArray,
    x0: Option<HostArray>,
    params: SolveParams,
    trajectory: bool,
    /// The embedding program's stop flag (Python's Ctrl-C), read after every iteration.
    hooks: super::session::Hooks,
}

/// Solves with `op`, recording x after every step when `trajectory` (projected as the solver
/// projects its answer: zero-mean over the floating regions of a singular operator).
fn solve_with<B: Backend, O: LinearOperator<B>>(
    b: &B,
    op: &O,
    y: &monomorph::Arr<B, FloatOf<B>>,
    x0: Option<&monomorph::Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    trajectory: bool,
    hooks: &super::session::Hooks,
) -> monomorph::Result<(SolveResult<B>, Option<Vec<ArrayD<f64>>>)> {
    let mut params = params.clone();
    params.observe_vectors = trajectory;
    let null: Option<&NullSpace> = op.null_space();
    let mut steps = Vec::new();
    let r = conjugate_gradient_controlled(b, op, y, x0, &params, |st| {
        if let Some(x) = st.x {
            let mut h = x.mapv(super::output::f64_of);
            if let Some(ns) = null {
                ns.project(&mut h);
            }
            steps.push(h);
        }
        if hooks.stopped() {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })?;
    Ok((r, trajectory.then_some(steps)))
}

/// Host copy of the result.
struct Solved {
    x: ArrayD<f64>,
    residual: ArrayD<f64>,
    iterations: Vec<usize>,
    function_evaluations: Vec<usize>,
    converged: Vec<bool>,
    diverged: Vec<bool>,
    message: Vec<String>,
    residual_norm: Vec<f64>,
    recurrence_residual_norm: Vec<f64>,
    backend: String,
    device: String,
    trajectory: Option<Vec<ArrayD<f64>>>,
    /// Floating regions of a singular operator (0 otherwise).
    null_space_dimension: usize,
}

impl BackendTask for SolveTask {
    type Output = Solved;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Solved> {
        let _span = info_span!("solve", backend = b.name()).entered();
        let y = b.upload_owned(self.y.into_float::<FloatOf<B>>())?;
        let x0 = match self.x0 {
            Some(x) => Some(b.upload_owned(x.into_float::<FloatOf<B>>())?),
            None => None,
        };
        let (p, trj) = (&self.params, self.trajectory);
        let mut null_dim = 0;
        let (r, trajectory) = match &self.op {
            Op::Dense(a) => {
                let op = DenseOperator::new(b, a.to_float::<FloatOf<B>>().view())?;
                solve_with(b, &op, &y, x0.as_ref(), p, trj, &self.hooks)?
            }
            Op::Csr {
                indptr,
                indices,
                data,
            } => {
                let n = indptr.len().saturating_sub(1);
                let op =
                    CsrOperator::new(b, n, indptr, indices, data.to_float::<FloatOf<B>>().view())?;
                solve_with(b, &op, &y, x0.as_ref(), p, trj, &self.hooks)?
            }
            Op::Laplacian(grid, bc) => {
                let op = LaplacianOperator::new(grid, *bc)?;
                solve_with(b, &op, &y, x0.as_ref(), p, trj, &self.hooks)?
            }
            Op::Poisson {
                grid,
                sides,
                spacing,
                obstacles,
            } => {
                let op = PoissonOperator::new(b, grid, sides, spacing, obstacles.as_deref())?;
                null_dim = op.null_space().map_or(0, |n| n.dimension());
                solve_with(b, &op, &y, x0.as_ref(), p, trj, &self.hooks)?
            }
        };
        b.synchronize()?;
        let to64 = |a: ArrayD<FloatOf<B>>| a.mapv(super::output::f64_of);
        Ok(Solved {
            x: to64(b.download(&r.x)?),
            residual: to64(b.download(&r.residual)?),
            iterations: r.iterations,
            function_evaluations: r.function_evaluations,
            converged: r.converged,
            diverged: r.diverged,
            message: r.message,
            residual_norm: r.residual_norm,
            recurrence_residual_norm: r.recurrence_residual_norm,
            backend: b.name().to_string(),
            device: b.device().name,
            trajectory,
            null_space_dimension: null_dim,
        })
    }
}

fn parse_grid(s: &str) -> CliResult<Vec<usize>> {
    super::args::parse_dims(s).map_err(|e| CliError::input(format!("--laplacian {e}")))
}

fn csr_file(dir: &Path, name: &str) -> PathBuf {
    let plain = dir.join(format!("{name}.npy"));
    let alt = dir.join(format!("A_csr_{name}.npy"));
    if !plain.exists() && alt.exists() {
        alt
    } else {
        plain
    }
}

fn as_2d(flag: &str, path: &Path, a: HostArray) -> CliResult<HostArray> {
    match a.shape().len() {
        2 => Ok(a),
        1 => {
            let n = a.shape()[0];
            let r =
                |e: ndarray::ShapeError| CliError::input(format!("{flag} {}: {e}", path.display()));
            Ok(match a.into_owned() {
                HostArray::F32(v) => {
                    HostArray::F32(v.into_shape_with_order(vec![1, n]).map_err(r)?)
                }
                HostArray::F64(v) => {
                    HostArray::F64(v.into_shape_with_order(vec![1, n]).map_err(r)?)
                }
                HostArray::I32(v) => HostArray::F64(
                    v.mapv(f64::from)
                        .into_shape_with_order(vec![1, n])
                        .map_err(r)?,
                ),
                HostArray::I64(v) => HostArray::F64(
                    v.mapv(|x| x as f64)
                        .into_shape_with_order(vec![1, n])
                        .map_err(r)?,
                ),
                HostArray::Borrowed(_) => unreachable!("into_owned gives an owned array"),
            })
        }
        d => Err(CliError::input(format!(
            "{flag} {}: a {d}-D array of shape {:?}, expected (batch, n) or (n,)",
            path.display(),
            a.shape()
        ))),
    }
}

fn finite(flag: &str, path: &Path, a: &HostArray) -> CliResult<()> {
    let bad = a.count_nonfinite();
    if bad > 0 {
        return Err(CliError::input(format!(
            "{flag} {}: {bad} NaN or infinite value(s), expected finite values",
            path.display()
        )));
    }
    Ok(())
}

/// Reads the CSR folder of `--csr` and validates it against `n` unknowns and `batch` systems,
/// naming the file at fault.
fn read_csr(dir: &Path, n: usize, batch: usize, rhs: &str) -> CliResult<Op> {
    let ip = csr_file(dir, "indptr");
    let ix = csr_file(dir, "indices");
    let dp = csr_file(dir, "data");
    let flag = |p: &Path| format!("--csr {}", p.display());
    let ints = |p: &Path| -> CliResult<Vec<i64>> {
        let a = read_npy_input(&flag(p), p)?;
        if a.shape().len() != 1 {
            return Err(CliError::input(format!(
                "{}: shape {:?}, expected a 1-D array",
                flag(p),
                a.shape()
            )));
        }
        let v = a
            .to_i64()
            .map_err(|m| CliError::input(format!("{}: {m}", flag(p))))?;
        Ok(v.iter().copied().collect())
    };
    let indptr = ints(&ip)?;
    let indices = ints(&ix)?;
    let data = read_npy_input(&flag(&dp), &dp)?;
    if indptr.len() != n + 1 {
        return Err(CliError::input(format!(
            "{}: {} row pointers, expected n + 1 = {} for --rhs {rhs}",
            flag(&ip),
            indptr.len(),
            n + 1
        )));
    }
    if let Err(e) = monomorph::check_csr_structure(n, n, &indptr, &indices) {
        let at = match &e {
            monomorph::Error::InvalidArgument { name, .. } if name == "indices" => &ix,
            _ => &ip,
        };
        return Err(CliError::from(e).about(flag(at)));
    }
    let nnz = indices.len();
    let ok = match data.shape() {
        [k] => *k == nnz,
        [k, m] => *k == batch && *m == nnz,
        _ => false,
    };
    if !ok {
        return Err(CliError::input(format!(
            "{}: shape {:?}, expected ({nnz},) (one matrix) or ({batch}, {nnz}) (one per system \
             of --rhs {rhs}), with nnz = {nnz} entries of {}",
            flag(&dp),
            data.shape(),
            ix.display()
        )));
    }
    finite(&flag(&dp), &dp, &data)?;
    Ok(Op::Csr {
        indptr,
        indices,
        data,
    })
}

/// Reads and validates the operator flag against `n` unknowns and `batch` systems.
fn read_operator(a: &SolveArgs, n: usize, batch: usize, rhs: &str) -> CliResult<Op> {
    if let Some(p) = &a.matrix {
        let m = read_npy_input("--matrix", p)?;
        let s = m.shape().to_vec();
        let ok =
            (s.len() == 2 && s == [n, n]) || (s.len() == 3 && s[1..] == [n, n] && s[0] == batch);
        if !ok {
            return Err(CliError::input(format!(
                "--matrix {}: shape {s:?}, expected ({n}, {n}) or ({batch}, {n}, {n}) to match --rhs {rhs}",
                p.display(),
            )));
        }
        finite("--matrix", p, &m)?;
        Ok(Op::Dense(m))
    } else if let Some(dir) = &a.csr {
        read_csr(dir, n, batch, rhs)
    } else if let Some(spec) = &a.laplacian {
        let grid = parse_grid(spec)?;
        let cells: usize = grid.iter().product();
        if cells != n {
            return Err(CliError::input(format!(
                "--laplacian {spec}: {cells} unknowns, but --rhs has n = {n} (shape {rhs})"
            )));
        }
        if a.boundary.is_none() && a.spacing.is_none() && a.obstacles.is_none() && !a.periodic {
            return Ok(Op::Laplacian(grid, Boundary::DirichletZero));
        }
        let sides = match (&a.boundary, a.periodic) {
            (Some(b), _) => parse_boundary(b, &grid, spec)?,
            (None, true) => vec![[Side::Periodic; 2]; grid.len()],
            (None, false) => vec![[Side::Dirichlet; 2]; grid.len()],
        };
        let spacing = match &a.spacing {
            Some(d) => parse_spacing(d, grid.len(), spec)?,
            None => vec![1.0; grid.len()],
        };
        let obstacles = match &a.obstacles {
            Some(p) => Some(read_obstacles(p, &grid, spec)?),
            None => None,
        };
        Ok(Op::Poisson {
            grid,
            sides,
            spacing,
            obstacles,
        })
    } else {
        Err(CliError::input(
            "no operator: expected one of --matrix, --csr, --laplacian",
        ))
    }
}

/// One boundary word: the solved field's own names, or phiml's extrapolation names.
fn parse_side(word: &str) -> Option<Side> {
    match word.trim().to_ascii_lowercase().as_str() {
        "dirichlet" | "zero" => Some(Side::Dirichlet),
        "neumann" | "zero-gradient" | "zero_gradient" => Some(Side::Neumann),
        "periodic" => Some(Side::Periodic),
        _ => None,
    }
}

/// `--boundary SPEC` for a grid: one word for every side, or one item per axis, each one word
/// or `LOWER:UPPER`; periodic only on both sides of an axis.
fn parse_boundary(spec: &str, grid: &[usize], lap: &str) -> CliResult<Vec<[Side; 2]>> {
    let nd = grid.len();
    let bad = |why: String| {
        CliError::input(format!(
            "--boundary {spec}: {why} (expected one of dirichlet, neumann, periodic — or zero, \
             zero-gradient — for every side, or a comma list with one item per axis of \
             --laplacian {lap}, each one word or LOWER:UPPER)"
        ))
    };
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    let word = |w: &str| parse_side(w).ok_or_else(|| bad(format!("unknown boundary '{w}'")));
    let sides: Vec<[Side; 2]> = if items.len() == 1 && !items[0].contains(':') {
        vec![[word(items[0])?; 2]; nd]
    } else {
        if items.len() != nd {
            return Err(bad(format!(
                "{} items for a grid of {nd} ax{} (axis {} does not exist{})",
                items.len(),
                if nd == 1 { "is" } else { "es" },
                nd.min(items.len()),
                if items.len() < nd {
                    " in the spec: every axis needs one"
                } else {
                    ""
                }
            )));
        }
        items
            .iter()
            .map(|it| match it.split(':').collect::<Vec<_>>()[..] {
                [w] => word(w).map(|s| [s; 2]),
                [lo, hi] => Ok([word(lo)?, word(hi)?]),
                _ => Err(bad(format!("'{it}' has more than one ':'"))),
            })
            .collect::<CliResult<_>>()?
    };
    for (a, s) in sides.iter().enumerate() {
        if (s[0] == Side::Periodic) != (s[1] == Side::Periodic) {
            return Err(bad(format!(
                "axis {a} is periodic on one side only ({}:{}); periodic needs both sides",
                s[0].name(),
                s[1].name()
            )));
        }
    }
    Ok(sides)
}

/// `--spacing DX`: one value or one per axis, each finite and > 0.
fn parse_spacing(spec: &str, nd: usize, lap: &str) -> CliResult<Vec<f64>> {
    let bad = |why: String| CliError::input(format!("--spacing {spec}: {why}"));
    let vals: Vec<f64> = spec
        .split(',')
        .map(|v| {
            let v = v.trim();
            v.parse::<f64>()
                .map_err(|_| bad(format!("'{v}' is not a number")))
        })
        .collect::<CliResult<_>>()?;
    if vals.len() != 1 && vals.len() != nd {
        return Err(bad(format!(
            "{} values for a grid of {nd} axes (--laplacian {lap}): give one value or one per axis",
            vals.len()
        )));
    }
    for &v in &vals {
        if !(v.is_finite() && v > 0.0 && (1.0 / (v * v)).is_finite()) {
            return Err(bad(format!("{v}: every spacing must be finite and > 0")));
        }
    }
    Ok(if vals.len() == 1 {
        vec![vals[0]; nd]
    } else {
        vals
    })
}

/// `--obstacles MASK.npy`: grid-shaped, values 0/1, not every cell an obstacle; row-major flags.
fn read_obstacles(p: &Path, grid: &[usize], lap: &str) -> CliResult<Vec<bool>> {
    let m = read_npy_input("--obstacles", p)?;
    if m.shape() != grid {
        return Err(CliError::input(format!(
            "--obstacles {}: shape {:?}, expected the grid shape {grid:?} of --laplacian {lap}",
            p.display(),
            m.shape()
        )));
    }
    let vals: Vec<f64> = m.to_float::<f64>().iter().copied().collect();
    if let Some((i, v)) = vals
        .iter()
        .enumerate()
        .find(|(_, v)| **v != 0.0 && **v != 1.0)
    {
        return Err(CliError::input(format!(
            "--obstacles {}: value {v} at flat index {i}, expected 0 (fluid) or 1 (obstacle)",
            p.display()
        )));
    }
    let mask: Vec<bool> = vals.iter().map(|&v| v == 1.0).collect();
    if mask.iter().all(|&o| o) {
        return Err(CliError::input(format!(
            "--obstacles {}: every cell is an obstacle, so the system has no unknowns",
            p.display()
        )));
    }
    Ok(mask)
}

/// Checks the scalar flags before any file is read.
fn check_flags(a: &SolveArgs) -> CliResult<()> {
    for (flag, v) in [("--rtol", a.rtol), ("--atol", a.atol)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(CliError::input(format!(
                "{flag} {v}: expected a finite value >= 0"
            )));
        }
    }
    if a.max_iter == 0 {
        return Err(CliError::input(
            "--max-iter 0: expected at least 1 iteration",
        ));
    }
    if a.preconditioner == PreconditionerArg::Jacobi && a.method != MethodArg::Cg {
        return Err(CliError::input(
            "--preconditioner jacobi: only with --method cg (--method cg-adaptive has no preconditioned form)",
        ));
    }
    Ok(())
}

/// Runs `monomorph solve`.
pub fn run(g: &Global, a: SolveArgs) -> CliResult<()> {
    check_flags(&a)?;
    check_out_dir("--out", &a.out)?;
    let mut timings = Timings::default();
    let y = as_2d("--rhs", &a.rhs, read_npy_input("--rhs", &a.rhs)?)?;
    let (batch, n) = (y.shape()[0], y.shape()[1]);
    let rhs = format!("{:?}", y.shape());
    if batch == 0 || n == 0 {
        return Err(CliError::input(format!(
            "--rhs {}: empty array of shape {rhs}, expected (batch, n) or (n,) with at least \
             one system of at least one unknown",
            a.rhs.display()
        )));
    }
    finite("--rhs", &a.rhs, &y)?;
    let x0 = match &a.x0 {
        Some(p) => {
            let x = as_2d("--x0", p, read_npy_input("--x0", p)?)?;
            if x.shape() != y.shape() {
                return Err(CliError::input(format!(
                    "--x0 {}: shape {:?}, expected the shape of --rhs {rhs}",
                    p.display(),
                    x.shape(),
                )));
            }
            finite("--x0", p, &x)?;
            Some(x)
        }
        None => None,
    };
    let op = read_operator(&a, n, batch, &rhs)?;
    // `--precision auto` follows the widest float input: one float64 operand (rhs, x0, matrix,
    // CSR values) makes the whole solve float64, so no input is narrowed silently.
    let mut inputs = vec![("--rhs", a.rhs.as_path(), &y)];
    if let (Some(x), Some(p)) = (x0.as_ref(), a.x0.as_deref()) {
        inputs.push(("--x0", p, x));
    }
    match (&op, a.matrix.as_deref(), a.csr.as_deref()) {
        (Op::Dense(m), Some(p), _) => inputs.push(("--matrix", p, m)),
        (Op::Csr { data, .. }, _, Some(p)) => inputs.push(("--csr", p, data)),
        _ => {}
    }
    let g = &g.for_inputs(&inputs)?;
    let method = match a.method {
        MethodArg::Cg => Method::Cg,
        MethodArg::CgAdaptive | MethodArg::Auto => Method::CgAdaptive,
    };
    let mut params = SolveParams::new(method).with_tolerances(a.rtol, a.atol, a.max_iter);
    params.preconditioner = match a.preconditioner {
        PreconditionerArg::None => Preconditioner::None,
        PreconditionerArg::Jacobi => Preconditioner::Jacobi,
    };
    let boundary_info = laplacian_info(&op);
    let task = SolveTask {
        op,
        y,
        x0,
        params,
        trajectory: a.trajectory,
        hooks: super::session::Hooks::current(),
    };
    let inputs: Vec<(&str, &Path)> = [
        ("--matrix", a.matrix.as_deref()),
        ("--rhs", Some(a.rhs.as_path())),
        ("--x0", a.x0.as_deref()),
        ("--obstacles", a.obstacles.as_deref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p)))
    .collect();
    let mut names = vec!["x.npy", "residual.npy", "result.json"];
    if a.trajectory {
        names.push("trajectory.npy");
    }
    let outputs: Vec<(&str, PathBuf)> = names.iter().map(|n| ("--out", a.out.join(n))).collect();
    check_distinct(&outputs, &inputs)?;
    let mut out = Outputs::in_dir("--out", &a.out)?;
    let mut s = timings
        .time("solve", || monomorph::dispatch(g.dispatch(None), task))
        .map_err(|e| input_sized(e, &a, &rhs))?;
    out.stage("x.npy", |p| write_npy(p, &s.x))?;
    out.stage("residual.npy", |p| write_npy(p, &s.residual))?;
    let mut steps = None;
    if let Some(t) = &s.trajectory {
        let views: Vec<_> = t.iter().map(|a| a.view()).collect();
        let stack = ndarray::stack(ndarray::Axis(0), &views)
            .map_err(|e| CliError::failure(format!("trajectory: {e}")))?;
        steps = Some(t.len().saturating_sub(1));
        out.stage("trajectory.npy", |p| write_npy(p, &stack))?;
        super::session::hand_over("trajectory", || HostArray::F64(stack));
    }
    let mut info = run_info(g, &s.backend, &s.device);
    let result = json!({
        "iterations": s.iterations,
        "function_evaluations": s.function_evaluations,
        "converged": s.converged,
        "diverged": s.diverged,
        "message": s.message,
        "residual_norm": s.residual_norm,
        "recurrence_residual_norm": s.recurrence_residual_norm,
        "method": format!("{:?}", a.method).to_lowercase(),
        "preconditioner": format!("{:?}", a.preconditioner).to_lowercase(),
        "rtol": a.rtol,
        "atol": a.atol,
        "max_iter": a.max_iter,
        "batch": batch,
        "n": n,
        "trajectory_steps": steps,
        "timings": timings.to_json(),
        "peak_memory_bytes": peak_memory_bytes(),
    });
    if let (Some(obj), Some(r)) = (info.as_object_mut(), result.as_object()) {
        for (k, v) in r {
            obj.insert(k.clone(), v.clone());
        }
        if let Some(serde_json::Value::Object(l)) = boundary_info {
            for (k, v) in l {
                obj.insert(k, v);
            }
            obj.insert("null_space_dimension".into(), json!(s.null_space_dimension));
        }
        if !a.trajectory {
            obj.remove("trajectory_steps");
        }
    }
    // result.json last: it marks the run complete.
    out.json("result.json", &info)?;
    out.commit()?;
    // Embedded (the Python package): the arrays the .npy files hold, moved to it.
    super::session::hand_over("x", || HostArray::F64(std::mem::take(&mut s.x)));
    super::session::hand_over("residual", || {
        HostArray::F64(std::mem::take(&mut s.residual))
    });
    report(g, &s, &a.out)
}

/// What `result.json` records of a `--laplacian` operator: boundary per axis (`[lower,
/// upper]`), spacing per axis and obstacle count; `None` for matrices.
fn laplacian_info(op: &Op) -> Option<serde_json::Value> {
    match op {
        Op::Laplacian(grid, bc) => {
            let side = match bc {
                Boundary::Periodic => "periodic",
                Boundary::DirichletZero => "dirichlet",
            };
            Some(json!({
                "grid": grid,
                "boundary": vec![[side, side]; grid.len()],
                "spacing": vec![1.0; grid.len()],
                "obstacle_count": 0,
            }))
        }
        Op::Poisson {
            grid,
            sides,
            spacing,
            obstacles,
        } => Some(json!({
            "grid": grid,
            "boundary": sides.iter().map(|s| [s[0].name(), s[1].name()]).collect::<Vec<_>>(),
            "spacing": spacing,
            "obstacle_count": obstacles.as_ref().map_or(0, |m| m.iter().filter(|&&o| o).count()),
        })),
        _ => None,
    }
}

/// The solve's errors in the user's terms: a memory shortfall is a consequence of the input's
/// size (exit 2, naming --rhs and the operator); a Jacobi preconditioner refused for a zero on
/// the diagonal names --preconditioner and the operator.
fn input_sized(e: monomorph::Error, a: &SolveArgs, rhs: &str) -> CliError {
    let op = match (&a.matrix, &a.csr, &a.laplacian) {
        (Some(p), _, _) => format!("--matrix {}", p.display()),
        (_, Some(p), _) => format!("--csr {}", p.display()),
        (_, _, Some(s)) => format!("--laplacian {s}"),
        _ => String::new(),
    };
    match &e {
        monomorph::Error::OutOfMemory { .. } => CliError::input(format!(
            "--rhs {} (shape {rhs}) with {op}: too large for this machine: {e}",
            a.rhs.display(),
        )),
        monomorph::Error::InvalidArgument { name, reason } if name == "preconditioner" => {
            CliError::input(format!(
                "--preconditioner jacobi with {op}: {reason}; use --preconditioner none"
            ))
        }
        _ => e.into(),
    }
}

/// Prints one line per system and fails with [`EXIT_NOT_CONVERGED`] when any did not converge.
fn report(g: &Global, s: &Solved, out: &Path) -> CliResult<()> {
    let status = |i: usize| {
        if s.converged[i] {
            "converged"
        } else if s.diverged[i] {
            "diverged"
        } else {
            "not converged"
        }
    };
    let batch = s.converged.len();
    if !g.quiet {
        for i in 0..batch {
            say!(
                "system {i}: {} after {} iterations ({} operator applications), |y - A x| = {:.3e}",
                status(i),
                s.iterations[i],
                s.function_evaluations[i],
                s.residual_norm[i]
            )?;
            if !s.converged[i] {
                say!("  {}", s.message[i])?;
            }
        }
    }
    let failed: Vec<usize> = (0..batch).filter(|&i| !s.converged[i]).collect();
    if failed.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 10;
    let mut list: Vec<String> = failed
        .iter()
        .take(SHOWN)
        .map(|&i| format!("system {i} ({})", status(i)))
        .collect();
    if failed.len() > SHOWN {
        list.push(format!("and {} more", failed.len() - SHOWN));
    }
    Err(CliError {
        code: EXIT_NOT_CONVERGED,
        message: format!(
            "{} of {batch} system(s) did not converge: {}; outputs written to {} (result.json \
             says why for each: \"message\")",
            failed.len(),
            list.join(", "),
            out.display()
        ),
    })
}
