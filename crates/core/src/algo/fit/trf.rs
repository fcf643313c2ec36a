//! The Trust Region Reflective method with bounds as scipy's `least_squares(method="trf")`
//! runs it for `curve_fit(…, bounds=…)`: Coleman–Li scaling, the exact trust-region solver on
//! the SVD of the augmented Jacobian, reflective and gradient steps kept strictly feasible,
//! `ftol = xtol = gtol = 1e-8`, `x_scale = 1`, a linear loss and a 2-point forward-difference
//! Jacobian that steps away from a bound it would cross. Written from Branch, Coleman & Li
//! (1999) and scipy's published algorithm description.

use super::svd::svd;
use super::{Fit, FitError};

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `J · s` for the row-major `m × n` `j`.
fn matvec(j: &[f64], m: usize, n: usize, s: &[f64]) -> Vec<f64> {
    (0..m).map(|i| dot(&j[i * n..i * n + n], s)).collect()
}

fn in_bounds(x: &[f64], lb: &[f64], ub: &[f64]) -> bool {
    x.iter().zip(lb).zip(ub).all(|((x, l), u)| x >= l && x <= u)
}

/// The step length along `s` from `x` to the nearest bound, and which components hit it
/// (the sign of `s` there).
fn step_size_to_bound(x: &[f64], s: &[f64], lb: &[f64], ub: &[f64]) -> (f64, Vec<f64>) {
    let steps: Vec<f64> = (0..x.len())
        .map(|i| {
            if s[i] != 0.0 {
                ((lb[i] - x[i]) / s[i]).max((ub[i] - x[i]) / s[i])
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let min = steps.iter().copied().fold(f64::INFINITY, f64::min);
    let hits = (0..x.len())
        .map(|i| {
            if steps[i] == min {
                if s[i] > 0.0 {
                    1.0
                } else if s[i] < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            } else {
                0.0
            }
        })
        .collect();
    (min, hits)
}

/// Where the line `x + t s` crosses the sphere `|·| = delta` (both roots, ascending).
fn intersect_trust_region(x: &[f64], s: &[f64], delta: f64) -> (f64, f64) {
    let a = dot(s, s);
    let b = dot(x, s);
    let c = dot(x, x) - delta * delta;
    let d = (b * b - a * c).sqrt();
    let q = -(b + d.copysign(b));
    let (t1, t2) = (q / a, c / q);
    if t1 < t2 { (t1, t2) } else { (t2, t1) }
}

/// `0.5 sᵀ(JᵀJ + diag)s + gᵀs`.
fn evaluate_quadratic(j: &[f64], m: usize, n: usize, g: &[f64], s: &[f64], diag: &[f64]) -> f64 {
    let js = matvec(j, m, n, s);
    let mut q = dot(&js, &js);
    q += (0..n).map(|i| s[i] * diag[i] * s[i]).sum::<f64>();
    0.5 * q + dot(s, g)
}

/// Coefficients of the quadratic `a t² + b t + c` along `s` from `s0`.
#[allow(clippy::too_many_arguments)]
fn build_quadratic_1d(
    j: &[f64],
    m: usize,
    n: usize,
    g: &[f64],
    s: &[f64],
    diag: &[f64],
    s0: Option<&[f64]>,
) -> (f64, f64, f64) {
    let v = matvec(j, m, n, s);
    let mut a = dot(&v, &v);
    a += (0..n).map(|i| s[i] * diag[i] * s[i]).sum::<f64>();
    a *= 0.5;
    let mut b = dot(g, s);
    let mut c = 0.0;
    if let Some(s0) = s0 {
        let u = matvec(j, m, n, s0);
        b += dot(&u, &v);
        c = 0.5 * dot(&u, &u) + dot(g, s0);
        b += (0..n).map(|i| s0[i] * diag[i] * s[i]).sum::<f64>();
        c += 0.5 * (0..n).map(|i| s0[i] * diag[i] * s0[i]).sum::<f64>();
    }
    (a, b, c)
}

/// The minimum of `a t² + b t + c` on `[lb, ub]`: `(t, value)`.
fn minimize_quadratic_1d(a: f64, b: f64, lb: f64, ub: f64, c: f64) -> (f64, f64) {
    let mut t = vec![lb, ub];
    if a != 0.0 {
        let extremum = -0.5 * b / a;
        if lb < extremum && extremum < ub {
            t.push(extremum);
        }
    }
    let mut best = (t[0], t[0] * (a * t[0] + b) + c);
    for &ti in &t[1..] {
        let y = ti * (a * ti + b) + c;
        if y < best.1 {
            best = (ti, y);
        }
    }
    best
}

/// Components within `rtol` (relative, at least absolute) of a bound: −1 lower, 1 upper.
fn find_active(x: &[f64], lb: &[f64], ub: &[f64], rtol: f64) -> Vec<i8> {
    (0..x.len())
        .map(|i| {
            if rtol == 0.0 {
                if x[i] <= lb[i] {
                    -1
                } else if x[i] >= ub[i] {
                    1
                } else {
                    0
                }
            } else {
                let ld = x[i] - lb[i];
                let ud = ub[i] - x[i];
                let lt = rtol * lb[i].abs().max(1.0);
                let ut = rtol * ub[i].abs().max(1.0);
                let mut a = 0;
                if lb[i].is_finite() && ld <= ud.min(lt) {
                    a = -1;
                }
                if ub[i].is_finite() && ud <= ld.min(ut) {
                    a = 1;
                }
                a
            }
        })
        .collect()
}

/// Moves components on (or within `rstep` of) a bound strictly inside.
fn make_strictly_feasible(x: &[f64], lb: &[f64], ub: &[f64], rstep: f64) -> Vec<f64> {
    let active = find_active(x, lb, ub, rstep);
    let mut out = x.to_vec();
    for i in 0..x.len() {
        if active[i] == -1 {
            out[i] = if rstep == 0.0 {
                next_toward(lb[i], ub[i])
            } else {
                lb[i] + rstep * lb[i].abs().max(1.0)
            };
        } else if active[i] == 1 {
            out[i] = if rstep == 0.0 {
                next_toward(ub[i], lb[i])
            } else {
                ub[i] - rstep * ub[i].abs().max(1.0)
            };
        }
        if out[i] < lb[i] || out[i] > ub[i] {
            out[i] = 0.5 * (lb[i] + ub[i]);
        }
    }
    out
}

/// C's `nextafter(x, toward)`.
fn next_toward(x: f64, toward: f64) -> f64 {
    if x.is_nan() || toward.is_nan() {
        return f64::NAN;
    }
    if x == toward {
        return toward;
    }
    if x == 0.0 {
        let tiny = f64::from_bits(1);
        return if toward > 0.0 { tiny } else { -tiny };
    }
    let bits = x.to_bits();
    let up = (toward > x) == (x > 0.0);
    f64::from_bits(if up { bits + 1 } else { bits - 1 })
}

/// Coleman–Li scaling vector `v` and its derivative sign `dv`.
fn cl_scaling(x: &[f64], g: &[f64], lb: &[f64], ub: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = x.len();
    let mut v = vec![1.0; n];
    let mut dv = vec![0.0; n];
    for i in 0..n {
        if g[i] < 0.0 && ub[i].is_finite() {
            v[i] = ub[i] - x[i];
            dv[i] = -1.0;
        }
        if g[i] > 0.0 && lb[i].is_finite() {
            v[i] = x[i] - lb[i];
            dv[i] = 1.0;
        }
    }
    (v, dv)
}

/// The trust-region step from the SVD of the augmented Jacobian (Moré's iteration on α).
fn solve_lsq_trust_region(
    n: usize,
    m: usize,
    uf: &[f64],
    s: &[f64],
    v: &[f64],
    delta: f64,
    initial_alpha: f64,
) -> (Vec<f64>, f64) {
    let suf: Vec<f64> = (0..n).map(|i| s[i] * uf[i]).collect();
    let phi_and_derivative = |alpha: f64| {
        let denom: Vec<f64> = (0..n).map(|i| s[i] * s[i] + alpha).collect();
        let p: Vec<f64> = (0..n).map(|i| suf[i] / denom[i]).collect();
        let p_norm = norm(&p);
        let phi = p_norm - delta;
        let phi_prime = -(0..n)
            .map(|i| suf[i] * suf[i] / denom[i].powi(3))
            .sum::<f64>()
            / p_norm;
        (phi, phi_prime)
    };
    let vdot = |w: &[f64]| -> Vec<f64> { (0..n).map(|i| dot(&v[i * n..i * n + n], w)).collect() };
    let full_rank = m >= n && s[n - 1] > f64::EPSILON * m as f64 * s[0];
    if full_rank {
        let w: Vec<f64> = (0..n).map(|i| uf[i] / s[i]).collect();
        let p: Vec<f64> = vdot(&w).iter().map(|x| -x).collect();
        if norm(&p) <= delta {
            return (p, 0.0);
        }
    }
    let mut alpha_upper = norm(&suf) / delta;
    let mut alpha_lower = if full_rank {
        let (phi, phi_prime) = phi_and_derivative(0.0);
        -phi / phi_prime
    } else {
        0.0
    };
    let mut alpha = if !full_rank && initial_alpha == 0.0 {
        (0.001 * alpha_upper).max((alpha_lower * alpha_upper).sqrt())
    } else {
        initial_alpha
    };
    for _ in 0..10 {
        if alpha < alpha_lower || alpha > alpha_upper {
            alpha = (0.001 * alpha_upper).max((alpha_lower * alpha_upper).sqrt());
        }
        let (phi, phi_prime) = phi_and_derivative(alpha);
        if phi < 0.0 {
            alpha_upper = alpha;
        }
        let ratio = phi / phi_prime;
        alpha_lower = alpha_lower.max(alpha - ratio);
        alpha -= (phi + delta) * ratio / delta;
        if phi.abs() < 0.01 * delta {
            break;
        }
    }
    let w: Vec<f64> = (0..n).map(|i| suf[i] / (s[i] * s[i] + alpha)).collect();
    let mut p: Vec<f64> = vdot(&w).iter().map(|x| -x).collect();
    let scale = delta / norm(&p);
    for x in &mut p {
        *x *= scale;
    }
    (p, alpha)
}

/// The problem's fixed data for [`select_step`].
struct StepCtx<'a> {
    j_h: &'a [f64],
    m: usize,
    n: usize,
    diag_h: &'a [f64],
    g_h: &'a [f64],
    d: &'a [f64],
    lb: &'a [f64],
    ub: &'a [f64],
}

/// The best of the trust-region step (cut at the bound), its reflection and the scaled
/// gradient step: `(step, step in hat space, predicted reduction)`.
fn select_step(
    c: &StepCtx<'_>,
    x: &[f64],
    mut p: Vec<f64>,
    mut p_h: Vec<f64>,
    delta: f64,
    theta: f64,
) -> (Vec<f64>, Vec<f64>, f64) {
    let n = c.n;
    let xp: Vec<f64> = (0..n).map(|i| x[i] + p[i]).collect();
    if in_bounds(&xp, c.lb, c.ub) {
        let v = evaluate_quadratic(c.j_h, c.m, n, c.g_h, &p_h, c.diag_h);
        return (p, p_h, -v);
    }
    let (p_stride, hits) = step_size_to_bound(x, &p, c.lb, c.ub);
    let mut r_h = p_h.clone();
    for i in 0..n {
        if hits[i] != 0.0 {
            r_h[i] *= -1.0;
        }
    }
    let r: Vec<f64> = (0..n).map(|i| c.d[i] * r_h[i]).collect();
    for i in 0..n {
        p[i] *= p_stride;
        p_h[i] *= p_stride;
    }
    let x_on_bound: Vec<f64> = (0..n).map(|i| x[i] + p[i]).collect();
    let (_, to_tr) = intersect_trust_region(&p_h, &r_h, delta);
    let (to_bound, _) = step_size_to_bound(&x_on_bound, &r, c.lb, c.ub);
    let r_stride = to_bound.min(to_tr);
    let (r_stride_l, r_stride_u) = if r_stride > 0.0 {
        let l = (1.0 - theta) * p_stride / r_stride;
        let u = if r_stride == to_bound {
            theta * to_bound
        } else {
            to_tr
        };
        (l, u)
    } else {
        (0.0, -1.0)
    };
    let (r_h, r, r_value) = if r_stride_l <= r_stride_u {
        let (a, b, cc) = build_quadratic_1d(c.j_h, c.m, n, c.g_h, &r_h, c.diag_h, Some(&p_h));
        let (t, val) = minimize_quadratic_1d(a, b, r_stride_l, r_stride_u, cc);
        let rh: Vec<f64> = (0..n).map(|i| r_h[i] * t + p_h[i]).collect();
        let rr: Vec<f64> = (0..n).map(|i| rh[i] * c.d[i]).collect();
        (rh, rr, val)
    } else {
        (r_h, r, f64::INFINITY)
    };
    for i in 0..n {
        p[i] *= theta;
        p_h[i] *= theta;
    }
    let p_value = evaluate_quadratic(c.j_h, c.m, n, c.g_h, &p_h, c.diag_h);
    let ag_h: Vec<f64> = c.g_h.iter().map(|v| -v).collect();
    let ag: Vec<f64> = (0..n).map(|i| c.d[i] * ag_h[i]).collect();
    let to_tr = delta / norm(&ag_h);
    let (to_bound, _) = step_size_to_bound(x, &ag, c.lb, c.ub);
    let ag_stride = if to_bound < to_tr {
        theta * to_bound
    } else {
        to_tr
    };
    let (a, b, _) = build_quadratic_1d(c.j_h, c.m, n, c.g_h, &ag_h, c.diag_h, None);
    let (t, ag_value) = minimize_quadratic_1d(a, b, 0.0, ag_stride, 0.0);
    let ag_h: Vec<f64> = ag_h.iter().map(|v| v * t).collect();
    let ag: Vec<f64> = ag.iter().map(|v| v * t).collect();
    if p_value < r_value && p_value < ag_value {
        (p, p_h, -p_value)
    } else if r_value < p_value && r_value < ag_value {
        (r, r_h, -r_value)
    } else {
        (ag, ag_h, -ag_value)
    }
}

/// The 2-point forward-difference Jacobian (row-major `m × n`) at `x` with residuals `f0`,
/// the step `√ε · max(1, |xᵢ|)` (signed as `xᵢ`), reversed or shortened where it would leave
/// the bounds (scipy's `approx_derivative` for `'2-point'`).
fn jacobian<F: FnMut(&[f64], &mut [f64])>(
    fun: &mut F,
    x: &[f64],
    f0: &[f64],
    lb: &[f64],
    ub: &[f64],
) -> Vec<f64> {
    let (m, n) = (f0.len(), x.len());
    let rstep = f64::EPSILON.sqrt();
    let mut jac = vec![0.0; m * n];
    let mut f1 = vec![0.0; m];
    let mut x1 = x.to_vec();
    for i in 0..n {
        let sign = if x[i] >= 0.0 { 1.0 } else { -1.0 };
        let mut h = rstep * sign * x[i].abs().max(1.0);
        let lower = x[i] - lb[i];
        let upper = ub[i] - x[i];
        let xt = x[i] + h;
        let violated = xt < lb[i] || xt > ub[i];
        let fitting = h.abs() <= lower.max(upper);
        if violated && fitting {
            h = -h;
        } else if !fitting {
            h = if upper >= lower { upper } else { -lower };
        }
        x1[i] = x[i] + h;
        fun(&x1, &mut f1);
        let dx = x1[i] - x[i];
        x1[i] = x[i];
        for k in 0..m {
            jac[k * n + i] = (f1[k] - f0[k]) / dx;
        }
    }
    jac
}

/// Minimises `½ Σ f(x)ᵢ²` over the box `lb ≤ x ≤ ub` from `x0` as scipy's
/// `least_squares(method="trf")` with `curve_fit`'s settings (module docs), at most `max_nfev`
/// residual evaluations (default `100 n`, Jacobian evaluations not counted). Errors as scipy
/// raises them: a lower bound not below its upper bound, `x0` outside the box, non-finite
/// residuals at the start, no convergence within `max_nfev`.
pub fn least_squares_bounded<F>(
    mut fun: F,
    x0: &[f64],
    lb: &[f64],
    ub: &[f64],
    m: usize,
    max_nfev: Option<usize>,
) -> Result<Fit, FitError>
where
    F: FnMut(&[f64], &mut [f64]),
{
    let n = x0.len();
    if n == 0 || lb.len() != n || ub.len() != n {
        return Err(FitError::TooFewPoints { m, n });
    }
    if (0..n).any(|i| lb[i].is_nan() || ub[i].is_nan() || lb[i] >= ub[i]) {
        return Err(FitError::EmptyBounds);
    }
    if !in_bounds(x0, lb, ub) {
        return Err(FitError::Infeasible);
    }
    let (ftol, xtol, gtol) = (1e-8, 1e-8, 1e-8);
    let max_nfev = max_nfev.unwrap_or(100 * n);
    let mut x = make_strictly_feasible(x0, lb, ub, 1e-10);
    let mut f = vec![0.0; m];
    fun(&x, &mut f);
    if f.iter().any(|v| !v.is_finite()) {
        return Err(FitError::NonFinite);
    }
    let mut nfev = 1;
    let mut jac = jacobian(&mut fun, &x, &f, lb, ub);
    let mut cost = 0.5 * dot(&f, &f);
    let grad = |jac: &[f64], f: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|i| (0..m).map(|k| jac[k * n + i] * f[k]).sum())
            .collect()
    };
    let mut g = grad(&jac, &f);
    let (v, _) = cl_scaling(&x, &g, lb, ub);
    let mut delta = norm(&(0..n).map(|i| x[i] / v[i].sqrt()).collect::<Vec<_>>());
    if delta == 0.0 {
        delta = 1.0;
    }
    let mut alpha = 0.0;
    let mut status: Option<i32> = None;
    loop {
        let (v, dv) = cl_scaling(&x, &g, lb, ub);
        let g_norm = (0..n).map(|i| (g[i] * v[i]).abs()).fold(0.0, f64::max);
        if g_norm < gtol {
            status = Some(1);
        }
        if status.is_some() || nfev == max_nfev {
            break;
        }
        let d: Vec<f64> = v.iter().map(|v| v.sqrt()).collect();
        let diag_h: Vec<f64> = (0..n).map(|i| g[i] * dv[i]).collect();
        let g_h: Vec<f64> = (0..n).map(|i| d[i] * g[i]).collect();
        let mut j_aug = vec![0.0; (m + n) * n];
        for k in 0..m {
            for i in 0..n {
                j_aug[k * n + i] = jac[k * n + i] * d[i];
            }
        }
        for i in 0..n {
            j_aug[(m + i) * n + i] = diag_h[i].sqrt();
        }
        let dec = svd(&j_aug, m + n, n);
        let uf: Vec<f64> = (0..n)
            .map(|c| (0..m).map(|k| dec.u[k * n + c] * f[k]).sum())
            .collect();
        let j_h = j_aug[..m * n].to_vec();
        let theta = 0.995f64.max(1.0 - g_norm);
        let mut actual_reduction = -1.0;
        let mut x_new = x.clone();
        let mut f_new = vec![0.0; m];
        let mut cost_new = cost;
        while actual_reduction <= 0.0 && nfev < max_nfev {
            let (p_h, a) = solve_lsq_trust_region(n, m, &uf, &dec.s, &dec.v, delta, alpha);
            alpha = a;
            let p: Vec<f64> = (0..n).map(|i| d[i] * p_h[i]).collect();
            let ctx = StepCtx {
                j_h: &j_h,
                m,
                n,
                diag_h: &diag_h,
                g_h: &g_h,
                d: &d,
                lb,
                ub,
            };
            let (step, step_h, predicted) = select_step(&ctx, &x, p, p_h, delta, theta);
            let xs: Vec<f64> = (0..n).map(|i| x[i] + step[i]).collect();
            x_new = make_strictly_feasible(&xs, lb, ub, 0.0);
            fun(&x_new, &mut f_new);
            nfev += 1;
            let step_h_norm = norm(&step_h);
            if f_new.iter().any(|v| !v.is_finite()) {
                delta = 0.25 * step_h_norm;
                continue;
            }
            cost_new = 0.5 * dot(&f_new, &f_new);
            actual_reduction = cost - cost_new;
            let ratio = if predicted > 0.0 {
                actual_reduction / predicted
            } else if predicted == actual_reduction && predicted == 0.0 {
                1.0
            } else {
                0.0
            };
            let mut delta_new = delta;
            if ratio < 0.25 {
                delta_new = 0.25 * step_h_norm;
            } else if ratio > 0.75 && step_h_norm > 0.95 * delta {
                delta_new *= 2.0;
            }
            let step_norm = norm(&step);
            let ftol_ok = actual_reduction < ftol * cost && ratio > 0.25;
            let xtol_ok = step_norm < xtol * (xtol + norm(&x));
            status = match (ftol_ok, xtol_ok) {
                (true, true) => Some(4),
                (true, false) => Some(2),
                (false, true) => Some(3),
                _ => None,
            };
            if status.is_some() {
                break;
            }
            alpha *= delta / delta_new;
            delta = delta_new;
        }
        if actual_reduction > 0.0 {
            x = x_new;
            f = f_new;
            cost = cost_new;
            jac = jacobian(&mut fun, &x, &f, lb, ub);
            g = grad(&jac, &f);
        }
    }
    match status {
        Some(s) if s > 0 => Ok(Fit {
            x,
            nfev,
            status: s,
            cost,
        }),
        _ => Err(FitError::NotConverged { status: 0, nfev }),
    }
}
