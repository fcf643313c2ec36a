//! The 1-D curve fitting pytme's whitening uses, from scipy: `make_smoothing_spline` (natural
//! cubic smoothing spline, lambda by GCV through a bounded Brent search) and
//! `PchipInterpolator` (Fritsch–Carlson slopes, three-point end rule, no extrapolation).

/// scipy `minimize_scalar(method="bounded")` (`_minimize_scalar_bounded`, Brent's method with
/// golden sections), line by line: the minimiser of `func` on `[x1, x2]`.
pub fn fminbound(func: impl Fn(f64) -> f64, x1: f64, x2: f64, xatol: f64, maxfun: usize) -> f64 {
    let sqrt_eps = 2.2e-16f64.sqrt();
    let golden_mean = 0.5 * (3.0 - 5f64.sqrt());
    let (mut a, mut b) = (x1, x2);
    let mut fulc = a + golden_mean * (b - a);
    let (mut nfc, mut xf) = (fulc, fulc);
    let (mut rat, mut e) = (0.0f64, 0.0f64);
    let mut x = xf;
    let mut fx = func(x);
    let mut num = 1;
    let (mut ffulc, mut fnfc) = (fx, fx);
    let mut xm = 0.5 * (a + b);
    let mut tol1 = sqrt_eps * xf.abs() + xatol / 3.0;
    let mut tol2 = 2.0 * tol1;
    let sign = |v: f64| {
        if v > 0.0 {
            1.0
        } else if v < 0.0 {
            -1.0
        } else {
            0.0
        }
    };
    while (xf - xm).abs() > (tol2 - 0.5 * (b - a)) {
        let mut golden = true;
        if e.abs() > tol1 {
            golden = false;
            let mut r = (xf - nfc) * (fx - ffulc);
            let mut q = (xf - fulc) * (fx - fnfc);
            let mut p = (xf - fulc) * q - (xf - nfc) * r;
            q = 2.0 * (q - r);
            if q > 0.0 {
                p = -p;
            }
            q = q.abs();
            r = e;
            e = rat;
            if p.abs() < (0.5 * q * r).abs() && p > q * (a - xf) && p < q * (b - xf) {
                rat = (p + 0.0) / q;
                x = xf + rat;
                if (x - a) < tol2 || (b - x) < tol2 {
                    let si = sign(xm - xf) + if xm - xf == 0.0 { 1.0 } else { 0.0 };
                    rat = tol1 * si;
                }
            } else {
                golden = true;
            }
        }
        if golden {
            e = if xf >= xm { a - xf } else { b - xf };
            rat = golden_mean * e;
        }
        let si = sign(rat) + if rat == 0.0 { 1.0 } else { 0.0 };
        x = xf + si * rat.abs().max(tol1);
        let fu = func(x);
        num += 1;
        if fu <= fx {
            if x >= xf {
                a = xf;
            } else {
                b = xf;
            }
            fulc = nfc;
            ffulc = fnfc;
            nfc = xf;
            fnfc = fx;
            xf = x;
            fx = fu;
        } else {
            if x < xf {
                a = x;
            } else {
                b = x;
            }
            if fu <= fnfc || nfc == xf {
                fulc = nfc;
                ffulc = fnfc;
                nfc = x;
                fnfc = fu;
            } else if fu <= ffulc || fulc == xf || fulc == nfc {
                fulc = x;
                ffulc = fu;
            }
        }
        xm = 0.5 * (a + b);
        tol1 = sqrt_eps * xf.abs() + xatol / 3.0;
        tol2 = 2.0 * tol1;
        if num >= maxfun {
            break;
        }
    }
    xf
}

/// Solves `a x = b` for square `a` (row-major, n×n) by Gaussian elimination with partial
/// pivoting; `b` has `m` columns (row-major n×m). Returns `x` (n×m).
fn solve(mut a: Vec<f64>, mut b: Vec<f64>, n: usize, m: usize) -> Vec<f64> {
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .expect("non-empty");
        if piv != col {
            for k in 0..n {
                a.swap(col * n + k, piv * n + k);
            }
            for k in 0..m {
                b.swap(col * m + k, piv * m + k);
            }
        }
        let d = a[col * n + col];
        for r in col + 1..n {
            let f = a[r * n + col] / d;
            if f == 0.0 {
                continue;
            }
            for k in col..n {
                a[r * n + k] -= f * a[col * n + k];
            }
            for k in 0..m {
                b[r * m + k] -= f * b[col * m + k];
            }
        }
    }
    for col in (0..n).rev() {
        let d = a[col * n + col];
        for k in 0..m {
            let mut v = b[col * m + k];
            for j in col + 1..n {
                v -= a[col * n + j] * b[j * m + k];
            }
            b[col * m + k] = v / d;
        }
    }
    b
}

/// scipy `make_smoothing_spline(x, y)` (weights 1, lambda by GCV) in Reinsch form: the fitted
/// values `f = (I + lam K)^-1 y`, `K = Q R^-1 Q^T`, lambda the bounded-Brent minimum over
/// `(0, n)` of `GCV = (|y - f|² / n) / (1 - tr((I + lam K)^-1) / n)²`. Returns (lambda, f,
/// second derivatives at x). Needs at least 4 points.
pub fn smoothing_spline_gcv(x: &[f64], y: &[f64]) -> (f64, Vec<f64>, Vec<f64>) {
    let n = x.len();
    let h: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    let m = n - 2;
    let mut q = vec![0f64; n * m];
    let mut r = vec![0f64; m * m];
    for j in 1..n - 1 {
        q[(j - 1) * m + (j - 1)] = 1.0 / h[j - 1];
        q[j * m + (j - 1)] = -1.0 / h[j - 1] - 1.0 / h[j];
        q[(j + 1) * m + (j - 1)] = 1.0 / h[j];
        r[(j - 1) * m + (j - 1)] = (h[j - 1] + h[j]) / 3.0;
        if j < n - 2 {
            r[(j - 1) * m + j] = h[j] / 6.0;
            r[j * m + (j - 1)] = h[j] / 6.0;
        }
    }
    // Q^T (m×n), R^-1 Q^T (m×n), K = Q (R^-1 Q^T) (n×n)
    let qt: Vec<f64> = (0..m * n).map(|idx| q[(idx % n) * m + idx / n]).collect();
    let rq = solve(r.clone(), qt.clone(), m, n);
    let mut k = vec![0f64; n * n];
    for i in 0..n {
        for l in 0..m {
            let qv = q[i * m + l];
            if qv == 0.0 {
                continue;
            }
            for j in 0..n {
                k[i * n + j] += qv * rq[l * n + j];
            }
        }
    }
    let system = |lam: f64| -> Vec<f64> {
        let mut a = k.iter().map(|v| lam * v).collect::<Vec<_>>();
        for i in 0..n {
            a[i * n + i] += 1.0;
        }
        a
    };
    let gcv = |lam: f64| {
        let mut rhs = vec![0f64; n * (n + 1)];
        for i in 0..n {
            rhs[i * (n + 1) + i] = 1.0;
            rhs[i * (n + 1) + n] = y[i];
        }
        let sol = solve(system(lam), rhs, n, n + 1);
        let tr: f64 = (0..n).map(|i| sol[i * (n + 1) + i]).sum();
        let res: f64 = (0..n).map(|i| (y[i] - sol[i * (n + 1) + n]).powi(2)).sum();
        (res / n as f64) / (1.0 - tr / n as f64).powi(2)
    };
    let lam = fminbound(gcv, 0.0, n as f64, 1e-5, 500);
    let f = solve(system(lam), y.to_vec(), n, 1);
    // gamma = R^-1 Q^T f
    let qtf: Vec<f64> = (0..m)
        .map(|l| (0..n).map(|i| q[i * m + l] * f[i]).sum())
        .collect();
    let g = solve(r, qtf, m, 1);
    let mut gamma = vec![0f64; n];
    gamma[1..n - 1].copy_from_slice(&g);
    (lam, f, gamma)
}

/// Evaluates the natural cubic spline with values `f` and second derivatives `gamma` at `x`,
/// at `xi` (the end pieces continue outside `[x0, x_end]`, as scipy's BSpline extrapolates).
pub fn natural_spline_eval(x: &[f64], f: &[f64], gamma: &[f64], xi: f64) -> f64 {
    let n = x.len();
    let j = x.partition_point(|&v| v <= xi).saturating_sub(1).min(n - 2);
    let h = x[j + 1] - x[j];
    let a = (x[j + 1] - xi) / h;
    let b = (xi - x[j]) / h;
    a * f[j]
        + b * f[j + 1]
        + ((a * a * a - a) * gamma[j] + (b * b * b - b) * gamma[j + 1]) * h * h / 6.0
}

/// scipy's `PchipInterpolator(x, y, extrapolate=False)`.
#[derive(Clone, Debug)]
pub struct Pchip {
    x: Vec<f64>,
    y: Vec<f64>,
    d: Vec<f64>,
}

impl Pchip {
    /// The interpolant through `(x, y)` (`x` strictly increasing, at least 2 points).
    pub fn new(x: &[f64], y: &[f64]) -> Self {
        let n = x.len();
        let h: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
        let m: Vec<f64> = (0..n - 1).map(|i| (y[i + 1] - y[i]) / h[i]).collect();
        let mut d = vec![0f64; n];
        if n == 2 {
            d = vec![m[0]; 2];
        } else {
            let sg = |v: f64| {
                if v > 0.0 {
                    1
                } else if v < 0.0 {
                    -1
                } else {
                    0
                }
            };
            for i in 1..n - 1 {
                let cond = sg(m[i]) != sg(m[i - 1]) || m[i] == 0.0 || m[i - 1] == 0.0;
                let w1 = 2.0 * h[i] + h[i - 1];
                let w2 = h[i] + 2.0 * h[i - 1];
                d[i] = if cond {
                    0.0
                } else {
                    let whmean = (w1 / m[i - 1] + w2 / m[i]) / (w1 + w2);
                    1.0 / whmean
                };
            }
            let edge = |h0: f64, h1: f64, m0: f64, m1: f64| {
                let dd = ((2.0 * h0 + h1) * m0 - h0 * m1) / (h0 + h1);
                if sg(dd) != sg(m0) {
                    0.0
                } else if sg(m0) != sg(m1) && dd.abs() > 3.0 * m0.abs() {
                    3.0 * m0
                } else {
                    dd
                }
            };
            d[0] = edge(h[0], h[1], m[0], m[1]);
            d[n - 1] = edge(h[n - 2], h[n - 3], m[n - 2], m[n - 3]);
        }
        Pchip {
            x: x.to_vec(),
            y: y.to_vec(),
            d,
        }
    }

    /// The value at `xi`; NaN outside `[x0, x_end]`.
    pub fn eval(&self, xi: f64) -> f64 {
        let (x, y, d) = (&self.x, &self.y, &self.d);
        let n = x.len();
        if xi.is_nan() || xi < x[0] || xi > x[n - 1] {
            return f64::NAN;
        }
        let j = x.partition_point(|&v| v <= xi).saturating_sub(1).min(n - 2);
        let hj = x[j + 1] - x[j];
        let mj = (y[j + 1] - y[j]) / hj;
        let s = xi - x[j];
        let c2 = (3.0 * mj - 2.0 * d[j] - d[j + 1]) / hj;
        let c3 = (d[j] + d[j + 1] - 2.0 * mj) / (hj * hj);
        y[j] + s * (d[j] + s * (c2 + s * c3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fminbound_finds_a_parabola_minimum() {
        let x = fminbound(|x| (x - 1.3).powi(2), 0.0, 5.0, 1e-5, 500);
        assert!((x - 1.3).abs() < 1e-4, "{x}");
    }

    #[test]
    fn pchip_interpolates_its_nodes_and_is_nan_outside() {
        let p = Pchip::new(&[0.0, 0.5, 1.0], &[1.0, 0.2, 0.1]);
        assert!((p.eval(0.5) - 0.2).abs() < 1e-15);
        assert!(p.eval(1.5).is_nan());
    }

    #[test]
    fn smoothing_spline_of_a_line_is_the_line() {
        let x: Vec<f64> = (0..10).map(|i| i as f64 / 9.0).collect();
        let y: Vec<f64> = x.iter().map(|v| 2.0 * v - 1.0).collect();
        let (_, f, _) = smoothing_spline_gcv(&x, &y);
        for (a, b) in f.iter().zip(&y) {
            assert!((a - b).abs() < 1e-9);
        }
    }
}
