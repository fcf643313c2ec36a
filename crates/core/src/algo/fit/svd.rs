//! A thin singular value decomposition of a small dense matrix by one-sided Jacobi rotations
//! (Hestenes): accurate to working precision, for the few parameters of a curve fit.

/// `A = U · diag(s) · Vᵀ` of the `rows × cols` row-major `a` (`rows ≥ cols`): `u` row-major
/// `rows × cols`, `s` descending, `v` row-major `cols × cols`. Columns of `u` for a zero
/// singular value are zero (they multiply nothing).
pub(crate) struct Svd {
    pub u: Vec<f64>,
    pub s: Vec<f64>,
    pub v: Vec<f64>,
}

/// The thin SVD of `a` (see [`Svd`]).
pub(crate) fn svd(a: &[f64], rows: usize, cols: usize) -> Svd {
    let mut w = a.to_vec();
    let mut v = vec![0.0; cols * cols];
    for j in 0..cols {
        v[j * cols + j] = 1.0;
    }
    for _sweep in 0..60 {
        let mut rotated = false;
        for p in 0..cols {
            for q in p + 1..cols {
                let (mut alpha, mut beta, mut gamma) = (0.0, 0.0, 0.0);
                for i in 0..rows {
                    let (x, y) = (w[i * cols + p], w[i * cols + q]);
                    alpha += x * x;
                    beta += y * y;
                    gamma += x * y;
                }
                if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let t = if zeta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for i in 0..rows {
                    let (x, y) = (w[i * cols + p], w[i * cols + q]);
                    w[i * cols + p] = c * x - s * y;
                    w[i * cols + q] = s * x + c * y;
                }
                for i in 0..cols {
                    let (x, y) = (v[i * cols + p], v[i * cols + q]);
                    v[i * cols + p] = c * x - s * y;
                    v[i * cols + q] = s * x + c * y;
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..cols)
        .map(|j| {
            (0..rows)
                .map(|i| w[i * cols + j].powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    let mut order: Vec<usize> = (0..cols).collect();
    order.sort_by(|&a, &b| norms[b].total_cmp(&norms[a]));
    let mut u = vec![0.0; rows * cols];
    let mut vs = vec![0.0; cols * cols];
    let mut s = vec![0.0; cols];
    for (k, &j) in order.iter().enumerate() {
        s[k] = norms[j];
        for i in 0..rows {
            u[i * cols + k] = if norms[j] > 0.0 {
                w[i * cols + j] / norms[j]
            } else {
                0.0
            };
        }
        for i in 0..cols {
            vs[i * cols + k] = v[i * cols + j];
        }
    }
    Svd { u, s, v: vs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconstructs_and_orders() {
        let a = [
            3.0, 1.0, 0.5, //
            -1.0, 2.0, 0.0, //
            0.0, 4.0, 1.0, //
            2.0, 0.0, 0.0, //
            1e-3, 1.0, -2.0,
        ];
        let d = svd(&a, 5, 3);
        assert!(d.s.windows(2).all(|w| w[0] >= w[1]));
        for i in 0..5 {
            for j in 0..3 {
                let r: f64 = (0..3)
                    .map(|k| d.u[i * 3 + k] * d.s[k] * d.v[j * 3 + k])
                    .sum();
                assert!((r - a[i * 3 + j]).abs() < 1e-13, "{i} {j}: {r}");
            }
        }
        for p in 0..3 {
            for q in 0..3 {
                let vv: f64 = (0..3).map(|i| d.v[i * 3 + p] * d.v[i * 3 + q]).sum();
                let uu: f64 = (0..5).map(|i| d.u[i * 3 + p] * d.u[i * 3 + q]).sum();
                let e = if p == q { 1.0 } else { 0.0 };
                assert!((vv - e).abs() < 1e-13 && (uu - e).abs() < 1e-13);
            }
        }
    }

    #[test]
    fn rank_deficient_has_a_zero_value() {
        let a = [1.0, 2.0, 2.0, 4.0, 3.0, 6.0];
        let d = svd(&a, 3, 2);
        assert!(d.s[1] < 1e-14 * d.s[0]);
        assert!((d.s[0] - (70.0f64).sqrt()).abs() < 1e-13);
    }
}
