//! `monomorph solve`: batched conjugate gradient.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use monomorph::algo::cg::{
    Boundary, CsrOperator, DenseOperator, LaplacianOperator, Method, SolveParams,
    conjugate_gradient,
};
use monomorph::io::{HostArray, write_npy};
use monomorph::{Backend, BackendTask, FloatOf};
use ndarray::ArrayD;
use serde_json::json;
use tracing::info_span;

use super::output::{
    Timings, peak_memory_bytes, prepare_out_dir, read_npy_input, run_info, write_json,
};
use super::{CliError, CliResult, Global};

/// Options of `monomorph solve`.
#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("operator").required(true).args(["matrix", "csr", "laplacian"])))]
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
    /// Relative tolerance on ‖r‖ (to ‖y‖).
    #[arg(long, value_name = "R", default_value_t = 1e-5)]
    pub rtol: f64,
    /// Absolute tolerance on ‖r‖.
    #[arg(long, value_name = "A", default_value_t = 0.0)]
    pub atol: f64,
    /// Iteration limit per system.
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
    backend: String,
    device: String,
}

impl BackendTask for SolveTask {
    type Output = Solved;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Solved> {
        let _span = info_span!("solve", backend = b.name()).entered();
        let y = b.upload(self.y.to_float::<FloatOf<B>>().view())?;
        let x0 = match &self.x0 {
            Some(x) => Some(b.upload(x.to_float::<FloatOf<B>>().view())?),
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

/// Runs `monomorph solve`.
pub fn run(g: &Global, a: SolveArgs) -> CliResult<()> {
    for (flag, v) in [("--rtol", a.rtol), ("--atol", a.atol)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(CliError::input(format!(
                "{flag} {v}: expected a finite value >= 0"
            )));
        }
    }
    let out = prepare_out_dir(&a.out)?;
    let mut timings = Timings::default();
    let y = as_2d("--rhs", &a.rhs, read_npy_input("--rhs", &a.rhs)?)?;
    let g = &g.for_input("--rhs", &a.rhs, &y)?;
    let (batch, n) = (y.shape()[0], y.shape()[1]);
    let x0 = match &a.x0 {
        Some(p) => {
            let x = as_2d("--x0", p, read_npy_input("--x0", p)?)?;
            if x.shape() != y.shape() {
                return Err(CliError::input(format!(
                    "--x0 {}: shape {:?}, expected the shape of --rhs {:?}",
                    p.display(),
                    x.shape(),
                    y.shape()
                )));
            }
            finite("--x0", p, &x)?;
            Some(x)
        }
        None => None,
    };
    let op = if let Some(p) = &a.matrix {
        let m = read_npy_input("--matrix", p)?;
        let s = m.shape().to_vec();
        let ok =
            (s.len() == 2 && s == [n, n]) || (s.len() == 3 && s[1..] == [n, n] && s[0] == batch);
        if !ok {
            return Err(CliError::input(format!(
                "--matrix {}: shape {s:?}, expected ({n}, {n}) or ({batch}, {n}, {n}) to match --rhs {:?}",
                p.display(),
                y.shape()
            )));
        }
        finite("--matrix", p, &m)?;
        Op::Dense(m)
    } else if let Some(dir) = &a.csr {
        let ip = csr_file(dir, "indptr");
        let ix = csr_file(dir, "indices");
        let dp = csr_file(dir, "data");
        let indptr = read_npy_input("--csr indptr", &ip)?
            .to_i64()
            .map_err(|m| CliError::input(format!("--csr {}: {m}", ip.display())))?;
        let indices = read_npy_input("--csr indices", &ix)?
            .to_i64()
            .map_err(|m| CliError::input(format!("--csr {}: {m}", ix.display())))?;
        let data = read_npy_input("--csr data", &dp)?;
        finite("--csr data", &dp, &data)?;
        if indptr.len() != n + 1 {
            return Err(CliError::input(format!(
                "--csr {}: {} row pointers, expected n + 1 = {} for --rhs {:?}",
                ip.display(),
                indptr.len(),
                n + 1,
                y.shape()
            )));
        }
        Op::Csr {
            indptr: indptr.iter().copied().collect(),
            indices: indices.iter().copied().collect(),
            data,
        }
    } else if let Some(spec) = &a.laplacian {
        let grid = parse_grid(spec)?;
        let cells: usize = grid.iter().product();
        if cells != n {
            return Err(CliError::input(format!(
                "--laplacian {spec}: {cells} unknowns, but --rhs has n = {n} (shape {:?})",
                y.shape()
            )));
        }
        Op::Laplacian(
            grid,
            if a.periodic {
                Boundary::Periodic
            } else {
                Boundary::DirichletZero
            },
        )
    } else {
        return Err(CliError::input(
            "no operator: expected one of --matrix, --csr, --laplacian",
        ));
    };
    finite("--rhs", &a.rhs, &y)?;
    let method = match a.method {
        MethodArg::Cg => Method::Cg,
        MethodArg::CgAdaptive => Method::CgAdaptive,
    };
    let params = SolveParams::new(method).with_tolerances(a.rtol, a.atol, a.max_iter);
    let task = SolveTask { op, y, x0, params };
    let s = timings.time("solve", || monomorph::dispatch(g.dispatch(None), task))?;
    write_npy(out.join("x.npy"), &s.x)?;
    write_npy(out.join("residual.npy"), &s.residual)?;
    let mut info = run_info(g, &s.backend, &s.device);
    let result = json!({
        "iterations": s.iterations,
        "function_evaluations": s.function_evaluations,
        "converged": s.converged,
        "diverged": s.diverged,
        "message": s.message,
        "residual_norm": s.residual_norm,
        "method": format!("{:?}", a.method).to_lowercase(),
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
    write_json(&out.join("result.json"), &info)?;
    if !g.quiet {
        for i in 0..batch {
            println!(
                "system {i}: {} after {} iterations ({} operator applications), |r| = {:.3e}",
                if s.converged[i] {
                    "converged"
                } else if s.diverged[i] {
                    "diverged"
                } else {
                    "not converged"
                },
                s.iterations[i],
                s.function_evaluations[i],
                s.residual_norm[i]
            );
        }
    }
    Ok(())
}
