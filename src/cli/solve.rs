//! `monomorph solve`: batched conjugate gradient.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use monomorph::algo::cg::{
    Boundary, CsrOperator, DenseOperator, LaplacianOperator, Method, Preconditioner, SolveParams,
    conjugate_gradient,
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
    /// unknowns in row-major order; Dirichlet zero unless --periodic.
    #[arg(long, value_name = "NxN")]
    pub laplacian: Option<String>,
    /// Periodic boundary for --laplacian.
    #[arg(long, requires = "laplacian")]
    pub periodic: bool,
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
}

struct SolveTask {
    op: Op,
    y: HostArray,
    x0: Option<HostArray>,
    params: SolveParams,
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
        let r = match &self.op {
            Op::Dense(a) => {
                let op = DenseOperator::new(b, a.to_float::<FloatOf<B>>().view())?;
                conjugate_gradient(b, &op, &y, x0.as_ref(), &self.params)?
            }
            Op::Csr {
                indptr,
                indices,
                data,
            } => {
                let n = indptr.len().saturating_sub(1);
                let op =
                    CsrOperator::new(b, n, indptr, indices, data.to_float::<FloatOf<B>>().view())?;
                conjugate_gradient(b, &op, &y, x0.as_ref(), &self.params)?
            }
            Op::Laplacian(grid, bc) => {
                let op = LaplacianOperator::new(grid, *bc)?;
                conjugate_gradient(b, &op, &y, x0.as_ref(), &self.params)?
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
        })
    }
}

fn parse_grid(s: &str) -> CliResult<Vec<usize>> {
    monomorph::io::args::parse_dims(s).map_err(|e| CliError::input(format!("--laplacian {e}")))
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
            Ok(match a {
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
        let bc = if a.periodic {
            Boundary::Periodic
        } else {
            Boundary::DirichletZero
        };
        Ok(Op::Laplacian(grid, bc))
    } else {
        Err(CliError::input(
            "no operator: expected one of --matrix, --csr, --laplacian",
        ))
    }
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
    if a.preconditioner == PreconditionerArg::Jacobi && a.method == MethodArg::CgAdaptive {
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
        MethodArg::CgAdaptive => Method::CgAdaptive,
    };
    let mut params = SolveParams::new(method).with_tolerances(a.rtol, a.atol, a.max_iter);
    params.preconditioner = match a.preconditioner {
        PreconditionerArg::None => Preconditioner::None,
        PreconditionerArg::Jacobi => Preconditioner::Jacobi,
    };
    let task = SolveTask { op, y, x0, params };
    let inputs: Vec<(&str, &Path)> = [
        ("--matrix", a.matrix.as_deref()),
        ("--rhs", Some(a.rhs.as_path())),
        ("--x0", a.x0.as_deref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p)))
    .collect();
    let outputs: Vec<(&str, PathBuf)> = ["x.npy", "residual.npy", "result.json"]
        .iter()
        .map(|n| ("--out", a.out.join(n)))
        .collect();
    check_distinct(&outputs, &inputs)?;
    let mut out = Outputs::in_dir("--out", &a.out)?;
    let s = timings
        .time("solve", || monomorph::dispatch(g.dispatch(None), task))
        .map_err(|e| input_sized(e, &a, &rhs))?;
    out.stage("x.npy", |p| write_npy(p, &s.x))?;
    out.stage("residual.npy", |p| write_npy(p, &s.residual))?;
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
        "timings": timings.to_json(),
        "peak_memory_bytes": peak_memory_bytes(),
    });
    if let (Some(obj), Some(r)) = (info.as_object_mut(), result.as_object()) {
        for (k, v) in r {
            obj.insert(k.clone(), v.clone());
        }
    }
    // result.json last: it marks the run complete.
    out.json("result.json", &info)?;
    out.commit()?;
    report(g, &s, &a.out)
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
