use monomorph_core::{
    Float, Precision, Real, Reduce, Result, all_nan_error, check_dot, check_reduce_nonempty,
    check_rows,
};
use ndarray::ArrayD;
use num_traits::{Float as _, Zero};
use rayon::prelude::*;

use super::data;
use crate::Cpu;
use crate::util::PAR_MIN;

/// Deterministic chunked reduction: partial results per fixed-size chunk (in parallel), then
/// combined in chunk order, so results do not depend on the thread count.
fn chunked<T: Sync, R: Send>(
    a: &[T],
    part: impl Fn(usize, &[T]) -> R + Sync,
    combine: impl Fn(R, R) -> R,
) -> Option<R> {
    if a.len() < PAR_MIN {
        return if a.is_empty() { None } else { Some(part(0, a)) };
    }
    let parts: Vec<R> = a
        .par_chunks(PAR_MIN)
        .enumerate()
        .map(|(i, c)| part(i * PAR_MIN, c))
        .collect();
    parts.into_iter().reduce(combine)
}

/// The data of `a`, which must have some ([`check_reduce_nonempty`]).
fn nonempty<T>(a: &ArrayD<T>) -> Result<&[T]> {
    let d = data("a", a)?;
    check_reduce_nonempty(d.len())?;
    Ok(d)
}

/// The accumulator type of `Cpu<P>` ([`Precision::Accum`]).
type A<P> = <P as Precision>::Accum;

/// `v` in the accumulator type `A` (exact for `f32`/`f64` into `f64`).
#[inline(always)]
fn acc<T: Real, A: Float>(v: T) -> A {
    A::from_f64(v.as_f64())
}

/// Σ over a slice in the accumulator type `A`, with 4 independent accumulators (faster, still
/// deterministic).
#[inline]
fn sum_acc<T: Real, A: Float>(c: &[T], f: impl Fn(T) -> A) -> A {
    let mut acc = [A::zero(); 4];
    let mut it = c.chunks_exact(4);
    for q in &mut it {
        acc[0] += f(q[0]);
        acc[1] += f(q[1]);
        acc[2] += f(q[2]);
        acc[3] += f(q[3]);
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &v in it.remainder() {
        s += f(v);
    }
    s
}

/// Σ a·b over two slices in the accumulator type `A` (products formed in `A`).
#[inline]
fn dot_acc<T: Float, A: Float>(a: &[T], b: &[T]) -> A {
    let mut s4 = [A::zero(); 4];
    let n4 = a.len() / 4 * 4;
    let mut i = 0;
    while i < n4 {
        s4[0] += acc::<T, A>(a[i]) * acc(b[i]);
        s4[1] += acc::<T, A>(a[i + 1]) * acc(b[i + 1]);
        s4[2] += acc::<T, A>(a[i + 2]) * acc(b[i + 2]);
        s4[3] += acc::<T, A>(a[i + 3]) * acc(b[i + 3]);
        i += 4;
    }
    let mut s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    for j in n4..a.len() {
        s += acc::<T, A>(a[j]) * acc(b[j]);
    }
    s
}

/// (index, value) of the first maximum ignoring NaN (`v == v`), or None.
fn argmax_slice<T: Real>(offset: usize, c: &[T]) -> Option<(usize, T)> {
    let mut best: Option<(usize, T)> = None;
    for (i, &v) in c.iter().enumerate() {
        #[allow(clippy::eq_op)]
        let is_nan = v != v;
        if is_nan {
            continue;
        }
        match best {
            Some((_, b)) if !(v > b) => {}
            _ => best = Some((offset + i, v)),
        }
    }
    best
}

fn pick_first_max<T: Real>(a: Option<(usize, T)>, b: Option<(usize, T)>) -> Option<(usize, T)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.1 > x.1 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

fn per_row<T: Sync, A: Float>(
    op: &str,
    a: &ArrayD<T>,
    f: impl Fn(usize, &[T]) -> A + Sync,
) -> Result<Vec<A>> {
    let (rows, n) = check_rows(op, a.shape())?;
    let d = data("a", a)?;
    if n == 0 {
        return Ok(vec![A::zero(); rows]);
    }
    if rows * n >= PAR_MIN && rows > 1 {
        Ok(d.par_chunks(n).enumerate().map(|(r, c)| f(r, c)).collect())
    } else if rows * n >= PAR_MIN {
        // one long row: parallel chunks inside it
        Ok(vec![
            chunked(d, |_, c| f(0, c), |x, y| x + y).unwrap_or(A::zero()),
        ])
    } else {
        Ok(d.chunks(n).enumerate().map(|(r, c)| f(r, c)).collect())
    }
}

impl<P: Precision> Reduce for Cpu<P> {
    fn sum<T: Real>(&self, a: &ArrayD<T>) -> Result<A<P>> {
        self.install(|| {
            let d = data("a", a)?;
            Ok(chunked(d, |_, c| sum_acc(c, acc::<T, A<P>>), |x, y| x + y)
                .unwrap_or(A::<P>::zero()))
        })
    }

    fn sum_sq<T: Float>(&self, a: &ArrayD<T>) -> Result<A<P>> {
        self.install(|| {
            let d = data("a", a)?;
            Ok(chunked(
                d,
                |_, c| {
                    sum_acc(c, |v| {
                        let v = acc::<T, A<P>>(v);
                        v * v
                    })
                },
                |x, y| x + y,
            )
            .unwrap_or(A::<P>::zero()))
        })
    }

    fn dot<T: Float>(&self, a: &ArrayD<T>, b: &ArrayD<T>) -> Result<A<P>> {
        self.install(|| {
            check_dot("dot", a.shape(), b.shape())?;
            let (da, db) = (data("a", a)?, data("b", b)?);
            Ok(chunked(
                da,
                |off, c| dot_acc(c, &db[off..off + c.len()]),
                |x, y| x + y,
            )
            .unwrap_or(A::<P>::zero()))
        })
    }

    fn min<T: Real>(&self, a: &ArrayD<T>) -> Result<T> {
        self.install(|| {
            let d = nonempty(a)?;
            let m = chunked(
                d,
                |_, c| {
                    c.iter().fold(None, |m: Option<T>, &v| {
                        #[allow(clippy::eq_op)]
                        if v != v {
                            m
                        } else {
                            Some(match m {
                                Some(m) if m <= v => m,
                                _ => v,
                            })
                        }
                    })
                },
                |x, y| match (x, y) {
                    (Some(x), Some(y)) => Some(if y < x { y } else { x }),
                    (x, None) => x,
                    (None, y) => y,
                },
            )
            .flatten();
            m.ok_or_else(|| all_nan_error(d.len()))
        })
    }

    fn max<T: Real>(&self, a: &ArrayD<T>) -> Result<T> {
        self.install(|| Ok(self.argmax(a)?.1))
    }

    fn argmax<T: Real>(&self, a: &ArrayD<T>) -> Result<(usize, T)> {
        self.install(|| {
            let d = nonempty(a)?;
            chunked(d, argmax_slice, pick_first_max)
                .flatten()
                .ok_or_else(|| all_nan_error(d.len()))
        })
    }

    fn top_k<T: Real>(&self, a: &ArrayD<T>, k: usize) -> Result<Vec<(usize, T)>> {
        self.install(|| {
            let d = data("a", a)?;
            if k == 0 || d.is_empty() {
                return Ok(Vec::new());
            }
            // Order: value descending, then index ascending; NaN excluded.
            let cmp = |x: &(usize, T), y: &(usize, T)| {
                y.1.partial_cmp(&x.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(x.0.cmp(&y.0))
            };
            let select = |off: usize, c: &[T]| -> Vec<(usize, T)> {
                #[allow(clippy::eq_op)]
                let mut v: Vec<(usize, T)> = c
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x == **x)
                    .map(|(i, &x)| (off + i, x))
                    .collect();
                if v.len() > k {
                    v.select_nth_unstable_by(k - 1, cmp);
                    v.truncate(k);
                }
                v
            };
            let mut all = chunked(d, select, |mut x, y| {
                x.extend(y);
                if x.len() > k {
                    x.select_nth_unstable_by(k - 1, cmp);
                    x.truncate(k);
                }
                x
            })
            .unwrap_or_default();
            all.sort_by(cmp);
            Ok(all)
        })
    }

    fn count_nonfinite<T: Float>(&self, a: &ArrayD<T>) -> Result<usize> {
        self.install(|| {
            let d = data("a", a)?;
            Ok(chunked(
                d,
                |_, c| c.iter().filter(|v| !v.is_finite()).count(),
                |x, y| x + y,
            )
            .unwrap_or(0))
        })
    }

    fn sum_rows<T: Float>(&self, a: &ArrayD<T>) -> Result<Vec<A<P>>> {
        self.install(|| per_row("sum_rows", a, |_, c| sum_acc(c, acc::<T, A<P>>)))
    }

    fn dot_rows<T: Float>(&self, a: &ArrayD<T>, b: &ArrayD<T>) -> Result<Vec<A<P>>> {
        self.install(|| {
            check_dot("dot_rows", a.shape(), b.shape())?;
            let (rows, n) = check_rows("dot_rows", a.shape())?;
            let (da, db) = (data("a", a)?, data("b", b)?);
            if n == 0 {
                return Ok(vec![A::<P>::zero(); rows]);
            }
            if rows == 1 {
                return Ok(vec![self.dot(a, b)?]);
            }
            let f = |r: usize, c: &[T]| -> A<P> { dot_acc(c, &db[r * n..(r + 1) * n]) };
            if rows * n >= PAR_MIN {
                Ok(da
                    .par_chunks(n.max(1))
                    .enumerate()
                    .map(|(r, c)| f(r, c))
                    .collect())
            } else {
                Ok(da
                    .chunks(n.max(1))
                    .enumerate()
                    .map(|(r, c)| f(r, c))
                    .collect())
            }
        })
    }

    fn sum_sq_rows<T: Float>(&self, a: &ArrayD<T>) -> Result<Vec<A<P>>> {
        self.install(|| {
            per_row("sum_sq_rows", a, |_, c| {
                sum_acc(c, |v| {
                    let v = acc::<T, A<P>>(v);
                    v * v
                })
            })
        })
    }

    fn mean_std<T: Float>(&self, a: &ArrayD<T>) -> Result<(A<P>, A<P>)> {
        self.install(|| {
            let d = nonempty(a)?;
            let n = A::<P>::from_f64(d.len() as f64);
            let mean = self.sum(a)? / n;
            let var = chunked(
                d,
                |_, c| {
                    sum_acc(c, |v| {
                        let e = acc::<T, A<P>>(v) - mean;
                        e * e
                    })
                },
                |x, y| x + y,
            )
            .unwrap_or(A::<P>::zero())
                / n;
            Ok((mean, var.sqrt()))
        })
    }
}
