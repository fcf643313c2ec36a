//! Levenberg–Marquardt without bounds as MINPACK's `lmdif` does it (what scipy's `leastsq`,
//! and so `curve_fit` without bounds, runs): forward-difference Jacobian (`fdjac2`), QR with
//! column pivoting (`qrfac`), the Levenberg–Marquardt parameter by Moré's iteration (`lmpar`,
//! `qrsolv`), automatic variable scaling (`mode = 1`), step bound `factor = 100`. Written from
//! the published algorithm (Moré, Garbow & Hillstrom, ANL-80-74); column-major matrices with
//! leading dimension `m`, as the Fortran.

use super::{Fit, FitError};

/// MINPACK's `enorm`: the Euclidean norm, summed in three ranges so that it neither overflows
/// nor underflows.
pub(crate) fn enorm(x: &[f64]) -> f64 {
    const RDWARF: f64 = 3.834e-20;
    const RGIANT: f64 = 1.304e19;
    let (mut s1, mut s2, mut s3) = (0.0f64, 0.0f64, 0.0f64);
    let (mut x1max, mut x3max) = (0.0f64, 0.0f64);
    let agiant = RGIANT / x.len().max(1) as f64;
    for &v in x {
        let xabs = v.abs();
        if xabs > RDWARF && xabs < agiant {
            s2 += xabs * xabs;
        } else if xabs <= RDWARF {
            if xabs > x3max {
                s3 = 1.0 + s3 * (x3max / xabs) * (x3max / xabs);
                x3max = xabs;
            } else if xabs != 0.0 {
                s3 += (xabs / x3max) * (xabs / x3max);
            }
        } else if xabs > x1max {
            s1 = 1.0 + s1 * (x1max / xabs) * (x1max / xabs);
            x1max = xabs;
        } else {
            s1 += (xabs / x1max) * (xabs / x1max);
        }
    }
    if s1 != 0.0 {
        x1max * (s1 + (s2 / x1max) / x1max).sqrt()
    } else if s2 != 0.0 {
        if s2 >= x3max {
            (s2 * (1.0 + (x3max / s2) * (x3max * s3))).sqrt()
        } else {
            (x3max * ((s2 / x3max) + (x3max * s3))).sqrt()
        }
    } else {
        x3max * s3.sqrt()
    }
}

/// Householder QR with column pivoting of the `m × n` column-major `a` (`qrfac`, pivot on):
/// on return the strict upper triangle of `a` holds R's, the lower trapezoid the Householder
/// vectors, `rdiag` R's diagonal, `acnorm` the column norms of the input, `ipvt` the
/// permutation.
fn qrfac(
    m: usize,
    n: usize,
    a: &mut [f64],
    ipvt: &mut [usize],
    rdiag: &mut [f64],
    acnorm: &mut [f64],
) {
    let eps = f64::EPSILON;
    let mut wa = vec![0.0; n];
    for j in 0..n {
        acnorm[j] = enorm(&a[j * m..j * m + m]);
        rdiag[j] = acnorm[j];
        wa[j] = rdiag[j];
        ipvt[j] = j;
    }
    for j in 0..m.min(n) {
        let mut kmax = j;
        for k in j..n {
            if rdiag[k] > rdiag[kmax] {
                kmax = k;
            }
        }
        if kmax != j {
            for i in 0..m {
                a.swap(i + j * m, i + kmax * m);
            }
            rdiag[kmax] = rdiag[j];
            wa[kmax] = wa[j];
            ipvt.swap(j, kmax);
        }
        let mut ajnorm = enorm(&a[j + j * m..j * m + m]);
        if ajnorm != 0.0 {
            if a[j + j * m] < 0.0 {
                ajnorm = -ajnorm;
            }
            for i in j..m {
                a[i + j * m] /= ajnorm;
            }
            a[j + j * m] += 1.0;
            for k in j + 1..n {
                let mut sum = 0.0;
                for i in j..m {
                    sum += a[i + j * m] * a[i + k * m];
                }
                let temp = sum / a[j + j * m];
                for i in j..m {
                    a[i + k * m] -= temp * a[i + j * m];
                }
                if rdiag[k] != 0.0 {
                    let temp = a[j + k * m] / rdiag[k];
                    rdiag[k] *= (1.0 - temp * temp).max(0.0).sqrt();
                    if 0.05 * (rdiag[k] / wa[k]) * (rdiag[k] / wa[k]) <= eps {
                        rdiag[k] = enorm(&a[j + 1 + k * m..k * m + m]);
                        wa[k] = rdiag[k];
                    }
                }
            }
        }
        rdiag[j] = -ajnorm;
    }
}

/// `qrsolv`: solves `A x = b, D x = 0` in the least-squares sense given the QR factors of A
/// (R in the upper triangle of `r`, leading dimension `ldr`), the permutation, `D = diag`
/// and `qtb = Qᵀb`. Leaves the diagonal of the triangular S with `Pᵀ(AᵀA + DD)P = SᵀS` in
/// `sdiag` and S's strict upper triangle, transposed, in `r`'s strict lower triangle.
#[allow(clippy::too_many_arguments)]
fn qrsolv(
    n: usize,
    r: &mut [f64],
    ldr: usize,
    ipvt: &[usize],
    diag: &[f64],
    qtb: &[f64],
    x: &mut [f64],
    sdiag: &mut [f64],
) {
    let mut wa = vec![0.0; n];
    for j in 0..n {
        for i in j..n {
            r[i + j * ldr] = r[j + i * ldr];
        }
        x[j] = r[j + j * ldr];
        wa[j] = qtb[j];
    }
    for j in 0..n {
        let l = ipvt[j];
        if diag[l] != 0.0 {
            for s in sdiag[j..n].iter_mut() {
                *s = 0.0;
            }
            sdiag[j] = diag[l];
            let mut qtbpj = 0.0;
            for k in j..n {
                if sdiag[k] == 0.0 {
                    continue;
                }
                let rkk = r[k + k * ldr];
                let (sin, cos) = if rkk.abs() < sdiag[k].abs() {
                    let cotan = rkk / sdiag[k];
                    let sin = 0.5 / (0.25 + 0.25 * cotan * cotan).sqrt();
                    (sin, sin * cotan)
                } else {
                    let tan = sdiag[k] / rkk;
                    let cos = 0.5 / (0.25 + 0.25 * tan * tan).sqrt();
                    (cos * tan, cos)
                };
                r[k + k * ldr] = cos * rkk + sin * sdiag[k];
                let temp = cos * wa[k] + sin * qtbpj;
                qtbpj = -sin * wa[k] + cos * qtbpj;
                wa[k] = temp;
                for i in k + 1..n {
                    let temp = cos * r[i + k * ldr] + sin * sdiag[i];
                    sdiag[i] = -sin * r[i + k * ldr] + cos * sdiag[i];
                    r[i + k * ldr] = temp;
                }
            }
        }
        sdiag[j] = r[j + j * ldr];
        r[j + j * ldr] = x[j];
    }
    let mut nsing = n;
    for j in 0..n {
        if sdiag[j] == 0.0 && nsing == n {
            nsing = j;
        }
        if nsing < n {
            wa[j] = 0.0;
        }
    }
    for j in (0..nsing).rev() {
        let mut sum = 0.0;
        for i in j + 1..nsing {
            sum += r[i + j * ldr] * wa[i];
        }
        wa[j] = (wa[j] - sum) / sdiag[j];
    }
    for j in 0..n {
        x[ipvt[j]] = wa[j];
    }
}

/// `lmpar`: the Levenberg–Marquardt parameter `par` for which the step `x` solving
/// `A x = b, sqrt(par) D x = 0` has `|D x|` within 10 % of `delta` (or `par = 0` when the
/// Gauss–Newton step is inside); returns the new `par`.
#[allow(clippy::too_many_arguments)]
fn lmpar(
    n: usize,
    r: &mut [f64],
    ldr: usize,
    ipvt: &[usize],
    diag: &[f64],
    qtb: &[f64],
    delta: f64,
    mut par: f64,
    x: &mut [f64],
    sdiag: &mut [f64],
) -> f64 {
    let dwarf = f64::MIN_POSITIVE;
    let mut wa1 = vec![0.0; n];
    let mut wa2 = vec![0.0; n];
    let mut nsing = n;
    for j in 0..n {
        wa1[j] = qtb[j];
        if r[j + j * ldr] == 0.0 && nsing == n {
            nsing = j;
        }
        if nsing < n {
            wa1[j] = 0.0;
        }
    }
    for j in (0..nsing).rev() {
        wa1[j] /= r[j + j * ldr];
        let temp = wa1[j];
        for i in 0..j {
            wa1[i] -= r[i + j * ldr] * temp;
        }
    }
    for j in 0..n {
        x[ipvt[j]] = wa1[j];
    }
    for j in 0..n {
        wa2[j] = diag[j] * x[j];
    }
    let mut dxnorm = enorm(&wa2);
    let mut fp = dxnorm - delta;
    if fp <= 0.1 * delta {
        return 0.0;
    }
    let mut parl = 0.0;
    if nsing >= n {
        for j in 0..n {
            let l = ipvt[j];
            wa1[j] = diag[l] * (wa2[l] / dxnorm);
        }
        for j in 0..n {
            let mut sum = 0.0;
            for i in 0..j {
                sum += r[i + j * ldr] * wa1[i];
            }
            wa1[j] = (wa1[j] - sum) / r[j + j * ldr];
        }
        let temp = enorm(&wa1);
        parl = ((fp / delta) / temp) / temp;
    }
    for j in 0..n {
        let mut sum = 0.0;
        for i in 0..=j {
            sum += r[i + j * ldr] * qtb[i];
        }
        wa1[j] = sum / diag[ipvt[j]];
    }
    let gnorm = enorm(&wa1);
    let mut paru = gnorm / delta;
    if paru == 0.0 {
        paru = dwarf / delta.min(0.1);
    }
    par = par.max(parl).min(paru);
    if par == 0.0 {
        par = gnorm / dxnorm;
    }
    let mut iter = 0;
    loop {
        iter += 1;
        if par == 0.0 {
            par = dwarf.max(0.001 * paru);
        }
        let temp = par.sqrt();
        for j in 0..n {
            wa1[j] = temp * diag[j];
        }
        qrsolv(n, r, ldr, ipvt, &wa1, qtb, x, sdiag);
        for j in 0..n {
            wa2[j] = diag[j] * x[j];
        }
        dxnorm = enorm(&wa2);
        let temp = fp;
        fp = dxnorm - delta;
        if fp.abs() <= 0.1 * delta || (parl == 0.0 && fp <= temp && temp < 0.0) || iter == 10 {
            break;
        }
        for j in 0..n {
            let l = ipvt[j];
            wa1[j] = diag[l] * (wa2[l] / dxnorm);
        }
        for j in 0..n {
            wa1[j] /= sdiag[j];
            let temp = wa1[j];
            for i in j + 1..n {
                wa1[i] -= r[i + j * ldr] * temp;
            }
        }
        let temp = enorm(&wa1);
        let parc = ((fp / delta) / temp) / temp;
        if fp > 0.0 {
            parl = parl.max(par);
        }
        if fp < 0.0 {
            paru = paru.min(par);
        }
        par = parl.max(par + parc);
    }
    par
}

/// MINPACK's `fdjac2`: the forward-difference Jacobian of `f` at `x` (column-major `m × n` into
/// `fjac`), step `eps · |xⱼ|` (`eps` at 0); `x` is restored, `wa` is scratch of length `m`.
fn fdjac2<F>(f: &mut F, x: &mut [f64], fvec: &[f64], fjac: &mut [f64], wa: &mut [f64], eps: f64)
where
    F: FnMut(&[f64], &mut [f64]),
{
    let m = fvec.len();
    for j in 0..x.len() {
        let temp = x[j];
        let mut h = eps * temp.abs();
        if h == 0.0 {
            h = eps;
        }
        x[j] = temp + h;
        f(x, wa);
        x[j] = temp;
        for i in 0..m {
            fjac[i + j * m] = (wa[i] - fvec[i]) / h;
        }
    }
}

/// `lmdif`'s step after `qrfac`: applies the Householder reflections held below the diagonal of
/// `fjac` to `wf` (a copy of f), stores the first `n` components of `Qᵀf` in `qtf`, and puts R's
/// diagonal (`rdiag`) back on `fjac`'s diagonal.
fn qt_times_f(
    m: usize,
    n: usize,
    fjac: &mut [f64],
    rdiag: &[f64],
    wf: &mut [f64],
    qtf: &mut [f64],
) {
    for j in 0..n {
        let fjj = fjac[j + j * m];
        if fjj != 0.0 {
            let mut sum = 0.0;
            for i in j..m {
                sum += fjac[i + j * m] * wf[i];
            }
            let temp = -sum / fjj;
            for i in j..m {
                wf[i] += fjac[i + j * m] * temp;
            }
        }
        fjac[j + j * m] = rdiag[j];
        qtf[j] = wf[j];
    }
}

/// `lmdif`'s `gnorm`: the largest scaled cosine between f and the Jacobian's columns (0 when
/// `fnorm` is 0), with the column norms `acnorm` and the pivots `ipvt` of `qrfac`.
fn scaled_gradient_norm(
    m: usize,
    n: usize,
    fjac: &[f64],
    ipvt: &[usize],
    acnorm: &[f64],
    qtf: &[f64],
    fnorm: f64,
) -> f64 {
    let mut gnorm: f64 = 0.0;
    if fnorm != 0.0 {
        for j in 0..n {
            let l = ipvt[j];
            if acnorm[l] != 0.0 {
                let mut sum = 0.0;
                for i in 0..=j {
                    sum += fjac[i + j * m] * (qtf[i] / fnorm);
                }
                gnorm = gnorm.max((sum / acnorm[l]).abs());
            }
        }
    }
    gnorm
}

/// What one `lmdif` trial step leaves for its convergence tests.
struct Step {
    actred: f64,
    prered: f64,
    ratio: f64,
    delta: f64,
    xnorm: f64,
    gnorm: f64,
}

impl Step {
    /// MINPACK's `info` after a trial step: 1–3 converged (f, x, both), 5 evaluations exhausted,
    /// 6–8 tolerances below machine precision; `None` to go on. The success codes are tested
    /// first and win, as in `lmdif`.
    fn termination(&self, ftol: f64, xtol: f64, exhausted: bool) -> Option<i32> {
        let epsmch = f64::EPSILON;
        let small = self.actred.abs() <= ftol && self.prered <= ftol && 0.5 * self.ratio <= 1.0;
        let mut code = 0;
        if small {
            code = 1;
        }
        if self.delta <= xtol * self.xnorm {
            code = if small { 3 } else { 2 };
        }
        if code != 0 {
            return Some(code);
        }
        if exhausted {
            code = 5;
        }
        if self.actred.abs() <= epsmch && self.prered <= epsmch && 0.5 * self.ratio <= 1.0 {
            code = 6;
        }
        if self.delta <= epsmch * self.xnorm {
            code = 7;
        }
        if self.gnorm <= epsmch {
            code = 8;
        }
        (code != 0).then_some(code)
    }
}

/// Minimises `Σ f(x)ᵢ²` over the `m` residuals `f` writes, from `x0`, by MINPACK's `lmdif`
/// with scipy `leastsq`'s defaults: `ftol = xtol = 1.49012e-8`, `gtol = 0`, at most
/// `200 (n + 1)` evaluations, `epsfcn` = machine ε (difference step `√ε · |xⱼ|`, `√ε` at 0).
/// MINPACK's `info` 1–4 is success (scipy's `ier`); 5–8 and a residual count below the
/// parameter count are [`FitError`]s, as `curve_fit` raises them.
pub fn leastsq<F>(mut f: F, x0: &[f64], m: usize) -> Result<Fit, FitError>
where
    F: FnMut(&[f64], &mut [f64]),
{
    let n = x0.len();
    if n == 0 || m < n {
        return Err(FitError::TooFewPoints { m, n });
    }
    let (ftol, xtol, gtol) = (1.49012e-8, 1.49012e-8, 0.0);
    let maxfev = 200 * (n + 1);
    let factor = 100.0;
    let eps = f64::EPSILON.sqrt();
    let mut x = x0.to_vec();
    let mut fvec = vec![0.0; m];
    f(&x, &mut fvec);
    let mut nfev = 1;
    if fvec.iter().any(|v| !v.is_finite()) {
        return Err(FitError::NonFinite);
    }
    let mut fnorm = enorm(&fvec);
    let mut fjac = vec![0.0; m * n];
    let mut diag = vec![0.0; n];
    let mut ipvt = vec![0usize; n];
    let mut qtf = vec![0.0; n];
    let (mut wa1, mut wa2, mut wa3) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let mut wa4 = vec![0.0; m];
    let mut par = 0.0;
    let mut iter = 1;
    let mut delta = 0.0;
    let mut xnorm = 0.0;
    let info;
    'outer: loop {
        fdjac2(&mut f, &mut x, &fvec, &mut fjac, &mut wa4, eps);
        nfev += n;
        qrfac(m, n, &mut fjac, &mut ipvt, &mut wa1, &mut wa2);
        if iter == 1 {
            for j in 0..n {
                diag[j] = if wa2[j] == 0.0 { 1.0 } else { wa2[j] };
                wa3[j] = diag[j] * x[j];
            }
            xnorm = enorm(&wa3);
            delta = factor * xnorm;
            if delta == 0.0 {
                delta = factor;
            }
        }
        wa4.copy_from_slice(&fvec);
        qt_times_f(m, n, &mut fjac, &wa1, &mut wa4, &mut qtf);
        let gnorm = scaled_gradient_norm(m, n, &fjac, &ipvt, &wa2, &qtf, fnorm);
        if gnorm <= gtol {
            info = 4;
            break;
        }
        for j in 0..n {
            diag[j] = diag[j].max(wa2[j]);
        }
        loop {
            par = lmpar(
                n, &mut fjac, m, &ipvt, &diag, &qtf, delta, par, &mut wa1, &mut wa2,
            );
            for j in 0..n {
                wa1[j] = -wa1[j];
                wa2[j] = x[j] + wa1[j];
                wa3[j] = diag[j] * wa1[j];
            }
            let pnorm = enorm(&wa3);
            if iter == 1 {
                delta = delta.min(pnorm);
            }
            f(&wa2, &mut wa4);
            nfev += 1;
            let fnorm1 = enorm(&wa4);
            let mut actred = -1.0;
            if 0.1 * fnorm1 < fnorm {
                actred = 1.0 - (fnorm1 / fnorm) * (fnorm1 / fnorm);
            }
            for j in 0..n {
                wa3[j] = 0.0;
                let temp = wa1[ipvt[j]];
                for i in 0..=j {
                    wa3[i] += fjac[i + j * m] * temp;
                }
            }
            let temp1 = enorm(&wa3) / fnorm;
            let temp2 = par.sqrt() * pnorm / fnorm;
            let prered = temp1 * temp1 + temp2 * temp2 / 0.5;
            let dirder = -(temp1 * temp1 + temp2 * temp2);
            let ratio = if prered != 0.0 { actred / prered } else { 0.0 };
            if ratio <= 0.25 {
                let mut temp = if actred >= 0.0 {
                    0.5
                } else {
                    0.5 * dirder / (dirder + 0.5 * actred)
                };
                if 0.1 * fnorm1 >= fnorm || temp < 0.1 {
                    temp = 0.1;
                }
                delta = temp * delta.min(pnorm / 0.1);
                par /= temp;
            } else if par == 0.0 || ratio >= 0.75 {
                delta = pnorm / 0.5;
                par *= 0.5;
            }
            if ratio >= 1e-4 {
                for j in 0..n {
                    x[j] = wa2[j];
                    wa2[j] = diag[j] * x[j];
                }
                fvec.copy_from_slice(&wa4);
                xnorm = enorm(&wa2);
                fnorm = fnorm1;
                iter += 1;
            }
            let step = Step {
                actred,
                prered,
                ratio,
                delta,
                xnorm,
                gnorm,
            };
            if let Some(code) = step.termination(ftol, xtol, nfev >= maxfev) {
                info = code;
                break 'outer;
            }
            if ratio >= 1e-4 {
                break;
            }
        }
    }
    if (1..=4).contains(&info) {
        Ok(Fit {
            x,
            nfev,
            status: info,
            cost: 0.5 * fnorm * fnorm,
        })
    } else {
        Err(FitError::NotConverged { status: info, nfev })
    }
}
