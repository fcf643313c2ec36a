use monomorph_core::{BinaryOp, Elementwise, Float, Precision, Result, UnaryOp, check_binary};
use ndarray::ArrayD;
use num_complex::Complex;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::PAR_MIN;

/// `f(out_chunk, a_chunk)` over matching chunks, in parallel when large.
pub(crate) fn zip2<A: Sync, O: Send>(out: &mut [O], a: &[A], f: impl Fn(&mut [O], &[A]) + Sync) {
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(PAR_MIN)
            .zip(a.par_chunks(PAR_MIN))
            .for_each(|(o, a)| f(o, a));
    } else {
        f(out, a);
    }
}

/// `f(out_chunk, a_chunk, b_chunk)` over matching chunks, in parallel when large.
pub(crate) fn zip3<A: Sync, B: Sync, O: Send>(
    out: &mut [O],
    a: &[A],
    b: &[B],
    f: impl Fn(&mut [O], &[A], &[B]) + Sync,
) {
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(PAR_MIN)
            .zip(a.par_chunks(PAR_MIN).zip(b.par_chunks(PAR_MIN)))
            .for_each(|(o, (a, b))| f(o, a, b));
    } else {
        f(out, a, b);
    }
}

/// `f(chunk)` over one array, in parallel when large.
pub(crate) fn each<O: Send>(out: &mut [O], f: impl Fn(&mut [O]) + Sync) {
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(PAR_MIN).for_each(&f);
    } else {
        f(out);
    }
}

/// `out = f(a, b)` element by element (the complex binary ops), in parallel when large.
fn complex_binary<T: Float>(
    op: &str,
    a: &ArrayD<Complex<T>>,
    b: &ArrayD<Complex<T>>,
    out: &mut ArrayD<Complex<T>>,
    f: impl Fn(Complex<T>, Complex<T>) -> Complex<T> + Sync,
) -> Result<()> {
    check_binary(op, a.shape(), b.shape(), out.shape())?;
    let (a, b) = (data("a", a)?, data("b", b)?);
    zip3(data_mut("out", out)?, a, b, |o, a, b| {
        for i in 0..o.len() {
            o[i] = f(a[i], b[i]);
        }
    });
    Ok(())
}

impl<P: Precision> Elementwise for Cpu<P> {
    fn binary<T: Float>(
        &self,
        op: BinaryOp,
        a: &ArrayD<T>,
        b: &ArrayD<T>,
        out: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            check_binary("binary", a.shape(), b.shape(), out.shape())?;
            let (a, b) = (data("a", a)?, data("b", b)?);
            zip3(data_mut("out", out)?, a, b, |o, a, b| {
                for i in 0..o.len() {
                    o[i] = op.apply(a[i], b[i]);
                }
            });
            Ok(())
        })
    }

    fn binary_assign<T: Float>(
        &self,
        op: BinaryOp,
        a: &mut ArrayD<T>,
        b: &ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            monomorph_core::check_elementwise(
                "binary_assign",
                ("a", a.shape()),
                &[("b", b.shape())],
            )?;
            let b = data("b", b)?;
            zip2(data_mut("a", a)?, b, |a, b| {
                for i in 0..a.len() {
                    a[i] = op.apply(a[i], b[i]);
                }
            });
            Ok(())
        })
    }

    fn scalar_assign<T: Float>(&self, op: BinaryOp, a: &mut ArrayD<T>, s: f64) -> Result<()> {
        self.install(|| {
            let s = T::from_f64(s);
            each(data_mut("a", a)?, |a| {
                for v in a {
                    *v = op.apply(*v, s);
                }
            });
            Ok(())
        })
    }

    fn unary_assign<T: Float>(&self, op: UnaryOp, a: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            each(data_mut("a", a)?, |a| {
                for v in a {
                    *v = op.apply(*v);
                }
            });
            Ok(())
        })
    }

    fn axpy<T: Float>(&self, alpha: f64, x: &ArrayD<T>, y: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let alpha = T::from_f64(alpha);
            monomorph_core::check_elementwise("axpy", ("x", x.shape()), &[("y", y.shape())])?;
            let x = data("x", x)?;
            zip2(data_mut("y", y)?, x, |y, x| {
                for i in 0..y.len() {
                    y[i] += alpha * x[i];
                }
            });
            Ok(())
        })
    }

    fn complex_mul_conj<T: Float>(
        &self,
        a: &ArrayD<Complex<T>>,
        b: &ArrayD<Complex<T>>,
        out: &mut ArrayD<Complex<T>>,
    ) -> Result<()> {
        self.install(|| complex_binary("complex_mul_conj", a, b, out, |x, y| x * y.conj()))
    }

    fn complex_mul<T: Float>(
        &self,
        a: &ArrayD<Complex<T>>,
        b: &ArrayD<Complex<T>>,
        out: &mut ArrayD<Complex<T>>,
    ) -> Result<()> {
        self.install(|| complex_binary("complex_mul", a, b, out, |x, y| x * y))
    }

    fn complex_scale<T: Float>(&self, a: &mut ArrayD<Complex<T>>, s: f64) -> Result<()> {
        self.install(|| {
            let s = T::from_f64(s);
            each(data_mut("a", a)?, |a| {
                for v in a {
                    *v = *v * s;
                }
            });
            Ok(())
        })
    }

    fn complex_norm_sq<T: Float>(
        &self,
        src: &ArrayD<Complex<T>>,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            monomorph_core::check_elementwise(
                "complex_norm_sq",
                ("src", src.shape()),
                &[("dst", dst.shape())],
            )?;
            let s = data("src", src)?;
            zip2(data_mut("dst", dst)?, s, |d, s| {
                for i in 0..d.len() {
                    d[i] = s[i].norm_sqr();
                }
            });
            Ok(())
        })
    }
}
