use cudarc::driver::PushKernelArg;
use monomorph_core::{ArrayMeta, BinaryOp, Elementwise, Float, Precision, Real, Result, UnaryOp};
use num_complex::Complex;

use crate::error::Ck;
use crate::{Cuda, CudaArray};

fn bop(op: BinaryOp) -> i32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Max => 4,
        BinaryOp::Min => 5,
    }
}

fn uop(op: UnaryOp) -> i32 {
    match op {
        UnaryOp::Neg => 0,
        UnaryOp::Abs => 1,
        UnaryOp::Sqrt => 2,
        UnaryOp::Square => 3,
        UnaryOp::Recip => 4,
        UnaryOp::Exp => 5,
        UnaryOp::Ln => 6,
    }
}

impl<P: Precision> Elementwise for Cuda<P> {
    fn binary<T: Float>(
        &self,
        op: BinaryOp,
        a: &CudaArray<T>,
        b: &CudaArray<T>,
        out: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_binary("binary", a.shape(), b.shape(), out.shape())?;
        let (n, code) = (a.len() as i64, bop(op));
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("ew_binary")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&code)
            .arg(&a.buf)
            .arg(&b.buf)
            .arg(&mut out.buf)
            .arg(&n);
        // SAFETY: all three buffers hold `n` elements of T.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }

    fn binary_assign<T: Float>(
        &self,
        op: BinaryOp,
        a: &mut CudaArray<T>,
        b: &CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_elementwise("binary_assign", ("a", a.shape()), &[("b", b.shape())])?;
        let (n, code) = (a.len() as i64, bop(op));
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("ew_binary_assign")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&code).arg(&mut a.buf).arg(&b.buf).arg(&n);
        // SAFETY: both buffers hold `n` elements of T.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }

    fn scalar_assign<T: Float>(&self, op: BinaryOp, a: &mut CudaArray<T>, s: f64) -> Result<()> {
        let s = T::from_f64(s);
        let (n, code) = (a.len() as i64, bop(op));
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("ew_scalar")?;
        let s = <T as Real>::as_f64(s);
        let (s32, s64) = (s as f32, s);
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&code).arg(&mut a.buf);
        if std::mem::size_of::<T>() == 4 {
            l.arg(&s32);
        } else {
            l.arg(&s64);
        }
        l.arg(&n);
        // SAFETY: the buffer holds `n` elements of T; the scalar has T's width.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }

    fn unary_assign<T: Float>(&self, op: UnaryOp, a: &mut CudaArray<T>) -> Result<()> {
        let (n, code) = (a.len() as i64, uop(op));
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("ew_unary")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&code).arg(&mut a.buf).arg(&n);
        // SAFETY: the buffer holds `n` elements of T.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }

    fn axpy<T: Float>(&self, alpha: f64, x: &CudaArray<T>, y: &mut CudaArray<T>) -> Result<()> {
        let alpha = T::from_f64(alpha);
        monomorph_core::check_elementwise("axpy", ("x", x.shape()), &[("y", y.shape())])?;
        let n = x.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("ew_axpy")?;
        let (a32, a64) = (
            <T as Real>::as_f64(alpha) as f32,
            <T as Real>::as_f64(alpha),
        );
        let mut l = self.inner.stream.launch_builder(&f);
        if std::mem::size_of::<T>() == 4 {
            l.arg(&a32);
        } else {
            l.arg(&a64);
        }
        l.arg(&x.buf).arg(&mut y.buf).arg(&n);
        // SAFETY: both buffers hold `n` elements of T; the scalar has T's width.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }

    fn complex_mul_conj<T: Float>(
        &self,
        a: &CudaArray<Complex<T>>,
        b: &CudaArray<Complex<T>>,
        out: &mut CudaArray<Complex<T>>,
    ) -> Result<()> {
        monomorph_core::check_binary("complex_mul_conj", a.shape(), b.shape(), out.shape())?;
        self.complex3("c_mul_conj", a, b, out)
    }

    fn complex_mul<T: Float>(
        &self,
        a: &CudaArray<Complex<T>>,
        b: &CudaArray<Complex<T>>,
        out: &mut CudaArray<Complex<T>>,
    ) -> Result<()> {
        monomorph_core::check_binary("complex_mul", a.shape(), b.shape(), out.shape())?;
        self.complex3("c_mul", a, b, out)
    }

    fn complex_scale<T: Float>(&self, a: &mut CudaArray<Complex<T>>, s: f64) -> Result<()> {
        let s = T::from_f64(s);
        let n = a.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("c_scale")?;
        let (s32, s64) = (<T as Real>::as_f64(s) as f32, <T as Real>::as_f64(s));
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&mut a.buf);
        if std::mem::size_of::<T>() == 4 {
            l.arg(&s32);
        } else {
            l.arg(&s64);
        }
        l.arg(&n);
        // SAFETY: the buffer holds `n` complex values (2n reals of T).
        unsafe { l.launch(self.grid(2 * n as usize)) }.ck()?;
        Ok(())
    }

    fn complex_norm_sq<T: Float>(
        &self,
        src: &CudaArray<Complex<T>>,
        dst: &mut CudaArray<T>,
    ) -> Result<()> {
        monomorph_core::check_elementwise(
            "complex_norm_sq",
            ("src", src.shape()),
            &[("dst", dst.shape())],
        )?;
        let n = src.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>("c_norm_sq")?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&src.buf).arg(&mut dst.buf).arg(&n);
        // SAFETY: `src` holds n complex values, `dst` n reals.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }
}

impl<P: Precision> Cuda<P> {
    fn complex3<T: Float>(
        &self,
        kernel: &str,
        a: &CudaArray<Complex<T>>,
        b: &CudaArray<Complex<T>>,
        out: &mut CudaArray<Complex<T>>,
    ) -> Result<()> {
        let n = a.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.kernel::<T>(kernel)?;
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&a.buf).arg(&b.buf).arg(&mut out.buf).arg(&n);
        // SAFETY: all three buffers hold `n` complex values.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }
}
