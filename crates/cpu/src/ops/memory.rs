use monomorph_core::backend::{array_bytes, check_copy};
use monomorph_core::{Element, Error, Memory, Precision, Real, Result};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::{PAR_MIN, advise_huge_pages, host_memory};

impl<P: Precision> Memory for Cpu<P> {
    fn zeros<T: Element>(&self, shape: &[usize]) -> Result<ArrayD<T>> {
        self.install(|| {
            let bytes = array_bytes::<T>(shape)?;
            self.check_allocation("array", bytes)?;
            let n: usize = shape.iter().product();
            // A zeroed allocation (calloc): a large one comes straight from the kernel, already
            // zero and not yet touched, so nothing is written here. The pages are faulted in by
            // whichever threads first use them (in parallel, in the passes that fill the array),
            // and an array a backend never touches costs no memory.
            let mut v: Vec<T> =
                bytemuck::allocation::try_zeroed_vec(n).map_err(|()| Error::OutOfMemory {
                    what: format!("zeros of shape {shape:?}"),
                    requested: bytes,
                    available: self.available_memory(),
                })?;
            // Before the first touch, so that the pages are faulted in huge where possible.
            advise_huge_pages(v.as_mut_ptr().cast(), bytes as usize);
            ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| Error::Backend {
                backend: "cpu",
                message: format!("zeros of shape {shape:?}: {e}"),
            })
        })
    }

    fn upload<T: Element>(&self, host: ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
        self.install(|| {
            self.check_allocation("upload", array_bytes::<T>(host.shape())?)?;
            match host.as_slice() {
                // A large array in standard layout: copied into fresh pages (advised huge, as
                // `zeros` does) by all threads at once, which fault them in in parallel; a
                // plain `to_owned` faults and copies on one thread (4–7× slower at 256³).
                Some(src) if src.len() >= PAR_MIN => {
                    let mut a = self.zeros::<T>(host.shape())?;
                    data_mut("upload", &mut a)?
                        .par_chunks_mut(PAR_MIN)
                        .zip(src.par_chunks(PAR_MIN))
                        .for_each(|(d, s)| d.copy_from_slice(s));
                    Ok(a)
                }
                _ => Ok(host.as_standard_layout().into_owned()),
            }
        })
    }

    fn upload_owned<T: Element>(&self, host: ArrayD<T>) -> Result<ArrayD<T>> {
        if host.is_standard_layout() {
            // Already allocated and in the layout the backend keeps: no copy, no new pages.
            return Ok(host);
        }
        self.upload(host.view())
    }

    fn download<T: Element>(&self, a: &ArrayD<T>) -> Result<ArrayD<T>> {
        Ok(a.as_standard_layout().into_owned())
    }

    fn download_owned<T: Element>(&self, a: ArrayD<T>) -> Result<ArrayD<T>> {
        if a.is_standard_layout() {
            // The host array already: no copy, no new pages.
            return Ok(a);
        }
        self.download(&a)
    }

    fn copy<T: Element>(&self, src: &ArrayD<T>, dst: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            check_copy("copy", src.shape(), dst.shape())?;
            let s = data("src", src)?;
            let d = data_mut("dst", dst)?;
            if s.len() >= PAR_MIN {
                d.par_chunks_mut(PAR_MIN)
                    .zip(s.par_chunks(PAR_MIN))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            } else {
                d.copy_from_slice(s);
            }
            Ok(())
        })
    }

    fn fill<T: Element>(&self, a: &mut ArrayD<T>, value: T) -> Result<()> {
        self.install(|| {
            let d = data_mut("a", a)?;
            if d.len() >= PAR_MIN {
                d.par_chunks_mut(PAR_MIN).for_each(|c| c.fill(value));
            } else {
                d.fill(value);
            }
            Ok(())
        })
    }

    fn reshape<T: Element>(&self, a: ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>> {
        monomorph_core::check_reshape(a.len(), shape)?;
        let a = if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned()
        };
        a.into_shape_with_order(IxDyn(shape))
            .map_err(|e| Error::invalid("reshape", e.to_string()))
    }

    fn cast<S: Real, D: Real>(&self, src: &ArrayD<S>, dst: &mut ArrayD<D>) -> Result<()> {
        self.install(|| {
            check_copy("cast", src.shape(), dst.shape())?;
            let s = data("src", src)?;
            let d = data_mut("dst", dst)?;
            let conv = |d: &mut [D], s: &[S]| {
                for (o, &i) in d.iter_mut().zip(s) {
                    *o = D::from_f64(i.as_f64());
                }
            };
            if s.len() >= PAR_MIN {
                d.par_chunks_mut(PAR_MIN)
                    .zip(s.par_chunks(PAR_MIN))
                    .for_each(|(d, s)| conv(d, s));
            } else {
                conv(d, s);
            }
            Ok(())
        })
    }

    fn available_memory(&self) -> u64 {
        let free = host_memory().1;
        self.memory_limit().map_or(free, |l| l.min(free))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monomorph_core::Single;

    #[test]
    fn allocation_over_limit_is_an_error_with_both_numbers() {
        let cpu = Cpu::<Single>::with_memory_limit(1000);
        let err = cpu.zeros::<f32>(&[100, 100]).unwrap_err().to_string();
        assert!(err.contains("40000") && err.contains("1000"), "{err}");
    }

    #[test]
    fn upload_copies_large_and_strided_arrays_exactly() {
        let cpu = Cpu::<Single>::new();
        // Above the parallel threshold, in standard layout and transposed.
        let host = ndarray::ArrayD::from_shape_fn(vec![3, 150, 101], |i| {
            (i[0] * 100_000 + i[1] * 1000 + i[2]) as i64 * 7
        });
        let up = cpu.upload(host.view()).unwrap();
        assert_eq!(up, host);
        assert!(up.is_standard_layout());
        let t = host.view().reversed_axes();
        let up = cpu.upload(t.clone()).unwrap();
        assert_eq!(up, t);
        assert!(up.is_standard_layout());
    }

    #[test]
    fn download_as_the_same_type_keeps_every_value() {
        use monomorph_core::Transfer;
        let cpu = Cpu::<Single>::new();
        // 2^53 + 1 has no f64: through f64 it came back as 2^53.
        let big = (1i64 << 53) + 1;
        let host = ndarray::arr1(&[big, -big, 3, i64::MAX]).into_dyn();
        let a = cpu.upload(host.view()).unwrap();
        let back = cpu.download_as::<i64, ndarray::Ix1>(&a).unwrap();
        assert_eq!(back.to_vec(), vec![big, -big, 3, i64::MAX]);
        // Another type is still converted as `as` does.
        let wide = cpu.download_as::<f64, ndarray::IxDyn>(&a).unwrap();
        assert_eq!(wide[[2]], 3.0);
    }

    #[test]
    fn reshape_keeps_data() {
        let cpu = Cpu::<Single>::new();
        let a = cpu
            .upload(ndarray::ArrayD::from_shape_fn(vec![2, 3], |i| (i[0] * 3 + i[1]) as f32).view())
            .unwrap();
        let b = cpu.reshape(a, &[3, 2]).unwrap();
        assert_eq!(b.shape(), &[3, 2]);
        assert_eq!(b.as_slice().unwrap(), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(cpu.reshape(b, &[4, 2]).is_err());
    }
}
