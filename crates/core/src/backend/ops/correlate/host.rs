//! Reference (host) implementations of the [`Correlate`](super::Correlate) kernels over
//! row-major slices.
//!
//! Kernels that write an output-shaped array take a range of axis-0 indices (`rows`) and the
//! matching sub-slices of the outputs, so a backend can split the work across threads.

use std::ops::Range;

use super::{Normalization, WindowExtension};
use crate::dtype::{Element, Float, Index};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::strides;

#[inline(always)]
fn f64_of<T: Float>(x: T) -> f64 {
    <T as crate::dtype::Real>::as_f64(x)
}

/// [`Normalization`] on host slices: for [`score_max_update`] the whole output-shaped
/// denominator and the whole FFT-grid mask correlations; for [`score_line`] the same restricted
/// to one line (the denominator's output line, indexed like `best`; the mask correlations'
/// FFT-grid line, indexed like `corr`).
pub type Norm<'a, T> = Normalization<T, &'a [T], &'a [T]>;

/// Per-axis source index maps `(x + shift) mod fast` for `x < out[k]`.
pub fn index_maps(fast: &[usize], shift: &[isize], out: &[usize]) -> Result<Vec<Vec<usize>>> {
    if fast.len() != out.len() || shift.len() != out.len() {
        return Err(Error::shape(
            "correlation window",
            format!("{} axes", out.len()),
            format!("grid {} shift {:?}", fmt_shape(fast), shift),
        ));
    }
    Ok((0..out.len())
        .map(|k| {
            let f = fast[k] as isize;
            (0..out[k])
                .map(|x| (x as isize + shift[k]).rem_euclid(f) as usize)
                .collect()
        })
        .collect())
}

/// Flat source offsets of the lines (all axes but the last) of output rows `rows`, and the
/// last-axis map.
fn line_offsets(
    fast: &[usize],
    shift: &[isize],
    out: &[usize],
    rows: Range<usize>,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let maps = index_maps(fast, shift, out)?;
    let st = strides(fast);
    let d = out.len();
    let mut offs = vec![0usize];
    for k in 0..d - 1 {
        let idx: Vec<usize> = if k == 0 {
            maps[0][rows.clone()].to_vec()
        } else {
            maps[k].clone()
        };
        let mut next = Vec::with_capacity(offs.len() * idx.len());
        for &o in &offs {
            for &i in &idx {
                next.push(o + i * st[k]);
            }
        }
        offs = next;
    }
    let last = if d == 1 {
        maps[0][rows].to_vec()
    } else {
        maps[d - 1].clone()
    };
    Ok((offs, last))
}

/// Host kernel of [`super::Correlate::score_max_update`] for output rows `rows` (axis 0);
/// `best`/`best_index` are the slices of those rows, `moments` theirs in the working form of
/// [`moments_open`] with units of [`moment_unit`]`(out)` voxels (the rows themselves; a 1-D
/// output: all its rows at once).
/// Returns Σ score² over them.
///
/// Always inlined so a backend can instantiate it inside a `#[target_feature]` wrapper
/// (wider vectors for the f64 normalisation).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn score_max_update<T: Float, I: Index>(
    corr: &[T],
    fast: &[usize],
    norm: &Norm<'_, T>,
    shift: &[isize],
    out: &[usize],
    rows: Range<usize>,
    best: &mut [T],
    best_index: &mut [I],
    index: I,
    mut moments: Option<(&mut [i64], [f64; 2])>,
) -> Result<f64> {
    let total: usize = fast.iter().product();
    if corr.len() != total {
        return Err(Error::shape(
            "correlation",
            fmt_shape(fast),
            format!("{} values", corr.len()),
        ));
    }
    let row_len: usize = out[1..].iter().product();
    let nrows = rows.len();
    if best.len() != nrows * row_len || best_index.len() != best.len() {
        return Err(Error::shape(
            "best",
            format!("{} values", nrows * row_len),
            best.len(),
        ));
    }
    if let Some((m, _)) = &moments
        && m.len() != 4 * best.len()
    {
        return Err(Error::shape(
            "moments",
            format!("{} values", 4 * best.len()),
            m.len(),
        ));
    }
    if moments.is_some() && out.len() == 1 && rows != (0..out[0]) {
        // The working form's unit is the whole output ([`moment_unit`]).
        return Err(Error::invalid(
            "moments",
            "a 1-D output's moments are updated by one pass over the whole line",
        ));
    }
    match *norm {
        Normalization::Local { c1, c2, .. } if c1.len() != total || c2.len() != total => {
            return Err(Error::shape(
                "FLC mask correlations",
                fmt_shape(fast),
                c1.len(),
            ));
        }
        Normalization::Denominator { inv_den, .. }
            if inv_den.len() != out.iter().product::<usize>() =>
        {
            return Err(Error::shape(
                "inverse denominator",
                fmt_shape(out),
                inv_den.len(),
            ));
        }
        _ => {}
    }
    let first = rows.start * row_len;
    let (offs, last) = line_offsets(fast, shift, out, rows)?;
    let nl = last.len();
    let segs = line_runs(&last);
    // The line of the denominator (output) and of the mask correlations (FFT grid).
    let line_norm = |base: usize, o: usize| norm.map(|den| &den[o..o + nl], |c| &c[base..]);
    // `rows` are whole units of the moments' working form (one per row, or the 1-D output).
    let unit = moment_unit(out);
    let mut acc = [0.0f64; LANES];
    for (li, &base) in offs.iter().enumerate() {
        let o0 = li * nl;
        let u0 = o0 - o0 % unit;
        score_line(
            &corr[base..],
            &line_norm(base, first + o0),
            &segs,
            &mut best[o0..o0 + nl],
            &mut best_index[o0..o0 + nl],
            index,
            &mut acc,
            moments.as_mut().map(|(m, sc)| {
                (
                    WorkLine::of_unit(&mut m[4 * u0..4 * (u0 + unit)], o0 - u0, nl),
                    *sc,
                )
            }),
        );
    }
    Ok(fold_lanes(&acc))
}

/// Partial sums of score² the score kernels keep (one 512-bit vector of `f64`): wide
/// enough that the accumulation vectorises instead of adding lane by lane.
pub const LANES: usize = 8;

/// The partial sums of score² added pairwise (a fixed order).
pub fn fold_lanes(acc: &[f64; LANES]) -> f64 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Scores one output line from one FFT-grid line and folds them into `best`/`best_index`
/// (the output line) and the [`LANES`] partial sums `acc` of score². `segs` are the
/// [`line_runs`] of the last-axis map: output `j0..j0 + len` reads `c[src0..src0 + len]`.
///
/// Always inlined, like [`score_max_update`], for `#[target_feature]` wrappers.
/// `moments`: the line's [`Moments`](super::Moments) accumulators in the working form of
/// [`moments_open`] ([`WorkLine`]) and the scales, updated with the same scores
/// ([`moments_add_work`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn score_line<T: Float, I: Index>(
    c: &[T],
    norm: &Norm<'_, T>,
    segs: &[(usize, usize, usize)],
    best: &mut [T],
    best_index: &mut [I],
    index: I,
    acc: &mut [f64; LANES],
    mut moments: Option<(WorkLine<'_>, [f64; 2])>,
) {
    for &(j0, src0, len) in segs {
        let c = &c[src0..src0 + len];
        let b = &mut best[j0..j0 + len];
        let bi = &mut best_index[j0..j0 + len];
        let mom = moments.as_mut().map(|(m, sc)| (&mut *m, j0, *sc));
        match *norm {
            Normalization::Scaled { scale } => {
                update_run(b, bi, index, acc, mom, |k, s| {
                    for (o, &v) in s.iter_mut().zip(&c[k..]) {
                        *o = v * scale;
                    }
                });
            }
            Normalization::Denominator { scale, inv_den } => {
                let dd = &inv_den[j0..j0 + len];
                update_run(b, bi, index, acc, mom, |k, s| {
                    for ((o, &v), &d) in s.iter_mut().zip(&c[k..]).zip(&dd[k..]) {
                        *o = v * scale * d;
                    }
                });
            }
            Normalization::Local {
                scale,
                c1,
                c2,
                n,
                eps,
            } => {
                // e = c·scale/n for all three FLC correlations; only the variance needs f64.
                let k = f64_of(scale) / f64_of(n);
                let kt = T::from_f64(k);
                let (a1, a2) = (&c1[src0..src0 + len], &c2[src0..src0 + len]);
                update_run(b, bi, index, acc, mom, |j, s| {
                    for (((o, &v), &u1), &u2) in
                        s.iter_mut().zip(&c[j..]).zip(&a1[j..]).zip(&a2[j..])
                    {
                        *o = local_score_mixed(v, u1, u2, k, kt, eps);
                    }
                });
            }
        }
    }
}

/// The scores of one rotation over a run of output voxels, for [`update_run_group`]: each
/// normalisation's formula as in [`score_line`], in a method that is always inlined, so that
/// a group's scoring is compiled at the vector width of the kernel that calls it (a closure
/// holding several rotations' formulas was left out of line, at the baseline width).
trait FillScores<T: Float> {
    /// Writes the scores of voxels `k..k + out.len()` of the run into `out`.
    fn fill(&self, k: usize, out: &mut [T]);
}

/// [`Normalization::Scaled`] over a run: `c · scale`.
#[derive(Clone, Copy)]
struct ScaledRun<'a, T> {
    c: &'a [T],
    scale: T,
}

impl<T: Float> Default for ScaledRun<'_, T> {
    fn default() -> Self {
        ScaledRun {
            c: &[],
            scale: T::from_f64(0.0),
        }
    }
}

impl<T: Float> FillScores<T> for ScaledRun<'_, T> {
    #[inline(always)]
    fn fill(&self, k: usize, out: &mut [T]) {
        for (o, &v) in out.iter_mut().zip(&self.c[k..]) {
            *o = v * self.scale;
        }
    }
}

/// [`Normalization::Denominator`] over a run: `c · scale · d`.
#[derive(Clone, Copy)]
struct DenominatorRun<'a, T> {
    c: &'a [T],
    d: &'a [T],
    scale: T,
}

impl<T: Float> Default for DenominatorRun<'_, T> {
    fn default() -> Self {
        DenominatorRun {
            c: &[],
            d: &[],
            scale: T::from_f64(0.0),
        }
    }
}

impl<T: Float> FillScores<T> for DenominatorRun<'_, T> {
    #[inline(always)]
    fn fill(&self, k: usize, out: &mut [T]) {
        for ((o, &v), &d) in out.iter_mut().zip(&self.c[k..]).zip(&self.d[k..]) {
            *o = v * self.scale * d;
        }
    }
}

/// [`Normalization::Local`] over a run ([`local_score_mixed`]).
#[derive(Clone, Copy)]
struct LocalRun<'a, T> {
    c: &'a [T],
    u1: &'a [T],
    u2: &'a [T],
    k: f64,
    kt: T,
    eps: T,
}

impl<T: Float> Default for LocalRun<'_, T> {
    fn default() -> Self {
        LocalRun {
            c: &[],
            u1: &[],
            u2: &[],
            k: 0.0,
            kt: T::from_f64(0.0),
            eps: T::from_f64(0.0),
        }
    }
}

impl<T: Float> FillScores<T> for LocalRun<'_, T> {
    #[inline(always)]
    fn fill(&self, j: usize, out: &mut [T]) {
        for (((o, &v), &u1), &u2) in out
            .iter_mut()
            .zip(&self.c[j..])
            .zip(&self.u1[j..])
            .zip(&self.u2[j..])
        {
            *o = local_score_mixed(v, u1, u2, self.k, self.kt, self.eps);
        }
    }
}

/// `[f(0), …, f(K − 1)]` when every `f(q)` is `Some`.
#[inline(always)]
fn all_some<X: Copy + Default, const K: usize>(
    mut f: impl FnMut(usize) -> Option<X>,
) -> Option<[X; K]> {
    let mut xs = [X::default(); K];
    for (q, x) in xs.iter_mut().enumerate() {
        *x = f(q)?;
    }
    Some(xs)
}

/// [`score_line`] for `K` rotations at once (a *group*, `K` of 2 to 4): `c[q]`, `norm[q]` and
/// `index[q]` are rotation `q`'s, `acc[q]` its partial sums of score². Each chunk of voxels is
/// scored for every rotation, then folded into `best`/`best_index` for the first, the second,
/// … in order (the result of `K` [`score_line`] calls in that order, ties included) and into
/// the moments once for all of them ([`moments_add_work_group`]): the line's moment words are
/// read and written once per group instead of once per rotation (`moments` as for
/// [`score_line`]). All normalisations are the
/// same variant (one score); a mismatched group scores nothing and returns `false`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn score_line_group<T: Float, I: Index, const K: usize>(
    c: [&[T]; K],
    norm: [&Norm<'_, T>; K],
    segs: &[(usize, usize, usize)],
    best: &mut [T],
    best_index: &mut [I],
    index: [I; K],
    acc: &mut [[f64; LANES]; K],
    mut moments: Option<(WorkLine<'_>, [f64; 2])>,
) -> bool {
    for &(j0, src0, len) in segs {
        let b = &mut best[j0..j0 + len];
        let bi = &mut best_index[j0..j0 + len];
        let mom = moments.as_mut().map(|(m, sc)| (&mut *m, j0, *sc));
        let run = |q: usize| &c[q][src0..src0 + len];
        match *norm[0] {
            Normalization::Scaled { .. } => {
                let Some(f) = all_some::<_, K>(|q| match *norm[q] {
                    Normalization::Scaled { scale } => Some(ScaledRun { c: run(q), scale }),
                    _ => None,
                }) else {
                    return false;
                };
                update_run_group(b, bi, index, acc, mom, &f);
            }
            Normalization::Denominator { .. } => {
                let Some(f) = all_some::<_, K>(|q| match *norm[q] {
                    Normalization::Denominator { scale, inv_den } => Some(DenominatorRun {
                        c: run(q),
                        d: &inv_den[j0..j0 + len],
                        scale,
                    }),
                    _ => None,
                }) else {
                    return false;
                };
                update_run_group(b, bi, index, acc, mom, &f);
            }
            Normalization::Local { .. } => {
                let Some(f) = all_some::<_, K>(|q| match *norm[q] {
                    Normalization::Local {
                        scale,
                        c1,
                        c2,
                        n,
                        eps,
                    } => {
                        // As in `score_line`: e = c·scale/n, the variance in f64.
                        let k = f64_of(scale) / f64_of(n);
                        Some(LocalRun {
                            c: run(q),
                            u1: &c1[src0..src0 + len],
                            u2: &c2[src0..src0 + len],
                            k,
                            kt: T::from_f64(k),
                            eps,
                        })
                    }
                    _ => None,
                }) else {
                    return false;
                };
                update_run_group(b, bi, index, acc, mom, &f);
            }
        }
    }
    true
}

/// Maximal runs `(j0, src0, len)` of consecutive source indices in a last-axis map, so the
/// kernels read contiguous slices instead of gathering element by element.
pub fn line_runs(last: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut v: Vec<(usize, usize, usize)> = Vec::new();
    for (j, &i) in last.iter().enumerate() {
        match v.last_mut() {
            Some((_, s0, len)) if *s0 + *len == i => *len += 1,
            _ => v.push((j, i, 1)),
        }
    }
    v
}

/// Scores of one contiguous run, produced `CH` at a time by `fill(k, scores)` (offset `k`
/// into the run), folded into `best`/`best_index` and into the [`LANES`] partial sums of `s²`.
#[inline(always)]
fn update_run<T: Float, I: Index>(
    best: &mut [T],
    best_index: &mut [I],
    index: I,
    acc: &mut [f64; LANES],
    mut moments: Option<(&mut WorkLine<'_>, usize, [f64; 2])>,
    mut fill: impl FnMut(usize, &mut [T]),
) {
    const CH: usize = 64;
    let mut buf = [T::from_f64(0.0); CH];
    let n = best.len();
    let mut k = 0;
    while k < n {
        let m = CH.min(n - k);
        let s = &mut buf[..m];
        fill(k, s);
        let mut ch = s.chunks_exact(LANES);
        for q in &mut ch {
            for l in 0..LANES {
                acc[l] += f64_of(q[l] * q[l]);
            }
        }
        for &v in ch.remainder() {
            acc[0] += f64_of(v * v);
        }
        if let Some((w, j, sc)) = moments.as_mut() {
            moments_add_work(w, *j + k, s, *sc);
        }
        for ((b, bi), &v) in best[k..k + m]
            .iter_mut()
            .zip(&mut best_index[k..k + m])
            .zip(s.iter())
        {
            let up = v > *b;
            *b = if up { v } else { *b };
            *bi = if up { index } else { *bi };
        }
        k += m;
    }
}

/// [`update_run`] for a group of `K` rotations: `fills[q]` writes rotation `q`'s scores of
/// each chunk; each rotation's are folded into its own partial sums, all of them into the
/// moments at once ([`moments_add_work_group`]), and into `best`/`best_index` rotation after
/// rotation, as `K` [`update_run`] calls would.
#[inline(always)]
fn update_run_group<T: Float, I: Index, F: FillScores<T>, const K: usize>(
    best: &mut [T],
    best_index: &mut [I],
    index: [I; K],
    acc: &mut [[f64; LANES]; K],
    mut moments: Option<(&mut WorkLine<'_>, usize, [f64; 2])>,
    fills: &[F; K],
) {
    const CH: usize = 64;
    let mut bufs = [[T::from_f64(0.0); CH]; K];
    let n = best.len();
    let mut k = 0;
    while k < n {
        let m = CH.min(n - k);
        for ((buf, f), a) in bufs.iter_mut().zip(fills).zip(acc.iter_mut()) {
            let s = &mut buf[..m];
            f.fill(k, s);
            let mut ch = s.chunks_exact(LANES);
            for q in &mut ch {
                for l in 0..LANES {
                    a[l] += f64_of(q[l] * q[l]);
                }
            }
            for &x in ch.remainder() {
                a[0] += f64_of(x * x);
            }
        }
        if let Some((w, j, sc)) = moments.as_mut() {
            moments_add_work_group(w, *j + k, &bufs, m, *sc);
        }
        // Rotation after rotation: a voxel's updates keep their order (the first best wins).
        for (buf, &ix) in bufs.iter().zip(&index) {
            for ((b, bi), &v) in best[k..k + m]
                .iter_mut()
                .zip(&mut best_index[k..k + m])
                .zip(&buf[..m])
            {
                let up = v > *b;
                *b = if up { v } else { *b };
                *bi = if up { ix } else { *bi };
            }
        }
        k += m;
    }
}

/// The largest magnitude a scaled score (or square) may have to be added as itself: `2⁶²`.
pub const MOMENT_LIMIT: f64 = 4_611_686_018_427_387_904.0;
/// What a scaled value beyond [`MOMENT_LIMIT`] (or NaN) adds instead: `2¹⁰⁰`. A sum of up to
/// 2²⁴ in-range values stays below `2⁸⁶`, so a sum at or above `2⁹⁹` in magnitude holds a
/// flag ([`moments_flagged`]) and never wraps (at most 2²⁴ flags).
pub const MOMENT_FLAG: i128 = 1 << 100;

/// `round(v)` (half to even) when `|v| ≤ 2⁶²`, else [`MOMENT_FLAG`] (also for NaN).
#[inline(always)]
pub fn moment_quantize(v: f64) -> i128 {
    if v.abs() <= MOMENT_LIMIT {
        v.round_ties_even() as i64 as i128
    } else {
        MOMENT_FLAG
    }
}

/// The 128-bit value stored as `[low, high]` words.
#[inline(always)]
pub fn moment_word(w: &[i64]) -> i128 {
    ((w[1] as i128) << 64) | (w[0] as u64 as i128)
}

/// Stores `v` as `[low, high]` words.
#[inline(always)]
pub fn set_moment_word(w: &mut [i64], v: i128) {
    w[0] = v as u64 as i64;
    w[1] = (v >> 64) as i64;
}

/// Adds one score `s` to a voxel's [`Moments`](super::Moments) accumulators `a` (4 words):
/// `Σq₁ += round(s · scale[0])`, `Σq₂ += round(s² · scale[1])` ([`moment_quantize`]). Integer
/// sums: exact, hence the same in any order.
#[inline(always)]
pub fn moments_add(a: &mut [i64], s: f64, scale: [f64; 2]) {
    let q1 = moment_quantize(s * scale[0]);
    let q2 = moment_quantize(s * s * scale[1]);
    let s1 = moment_word(&a[0..2]).wrapping_add(q1);
    let s2 = moment_word(&a[2..4]).wrapping_add(q2);
    set_moment_word(&mut a[0..2], s1);
    set_moment_word(&mut a[2..4], s2);
}

/// Bits of the working form's low part: a voxel's sum is `H·2⁶² + P` ([`moments_open`]).
const WORK_BITS: u32 = 62;
/// `2⁶² − 1`: the low part `P` of a normalised working form.
const WORK_MASK: i128 = (1 << WORK_BITS) - 1;
/// The largest magnitude a scaled value may have to be added by the working form's fast path
/// as a plain 64-bit term: `2⁵¹`, where `x + 1.5·2⁵²` rounds `x` to an integer half to even
/// and holds it exactly in its mantissa ([`small_term`]).
pub const MOMENT_SMALL: f64 = 2_251_799_813_685_248.0;
/// Score passes the working form takes between [`moments_open`] and [`moments_close`]: each
/// adds at most `2⁵¹` in magnitude to a low part `P ∈ [0, 2⁶²)` (or leaves it normalised), so
/// after 1024 of them `P ∈ (−2⁶¹, 2⁶² + 2⁶¹)`, inside `i64`.
pub const MOMENT_PASSES: usize = 1024;

/// `round(x)` (half to even) for `|x| ≤ 2⁵¹` ([`MOMENT_SMALL`]), without a conversion
/// instruction (so that a run vectorises): `x + 1.5·2⁵²` lies in `[2⁵², 2⁵³]`, where the
/// doubles are the integers, so the addition rounds `x` half to even (`1.5·2⁵²` is even) and
/// the bit patterns, consecutive there, count the integer.
#[inline(always)]
fn small_term(x: f64) -> i64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
    ((x + MAGIC).to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64)
}

/// Adds `q` to a working-form sum `H·2⁶² + P`, leaving `P` normalised (`[0, 2⁶²)`).
#[inline]
fn work_add(h: &mut i64, p: &mut i64, q: i128) {
    let w = ((*h as i128) << WORK_BITS) + *p as i128 + q;
    *h = (w >> WORK_BITS) as i64;
    *p = (w & WORK_MASK) as i64;
}

/// Voxels of a unit of the moments' working form ([`moments_open`]) for an output of shape
/// `out`: a row of the first axis (all the output lines of one index, so that a pass over
/// consecutive lines reads the low parts as one stream), or the whole of a 1-D output.
pub fn moment_unit(out: &[usize]) -> usize {
    match out {
        [] => 1,
        [n] => (*n).max(1),
        [_, rest @ ..] => rest.iter().product::<usize>().max(1),
    }
}

/// Offsets in moment accumulators in the working form ([`moments_open`], units of `unit`
/// voxels) of the words `[P₁, P₂, H₁, H₂]` of voxel `o`; the voxels `o..o + n` of one line
/// (inside one unit) follow each of them.
pub fn work_offsets(o: usize, unit: usize) -> [usize; 4] {
    let (u0, at) = (o - o % unit, o % unit);
    std::array::from_fn(|k| 4 * u0 + k * unit + at)
}

/// Puts the moment accumulators `acc` (4 words per voxel, canonical `[Σq₁ low, Σq₁ high,
/// Σq₂ low, Σq₂ high]`) into the CPU score pass's *working form*, one unit of `u` voxels at a
/// time ([`moment_unit`]): per unit `[P₁ × u, P₂ × u, H₁ × u, H₂ × u]` with each sum equal to
/// `H·2⁶² + P` and `P ∈ [0, 2⁶²)`. A score pass then adds its small terms to the `P` words
/// only (half the bytes, no carry: [`moments_add_work`]), which for the lines of a unit are
/// two contiguous streams; [`moments_close`] restores the canonical words, with the same sums
/// exactly. `acc.len()` is a multiple of `4·u`.
pub fn moments_open(acc: &mut [i64], u: usize) {
    let mut tmp = vec![0i64; 4 * u];
    for unit in acc.chunks_exact_mut(4 * u.max(1)) {
        tmp.copy_from_slice(unit);
        let (p, h) = unit.split_at_mut(2 * u);
        for (i, w) in tmp.chunks_exact(4).enumerate() {
            for k in 0..2 {
                let (mut hk, mut pk) = (0i64, 0i64);
                work_add(&mut hk, &mut pk, moment_word(&w[2 * k..2 * k + 2]));
                p[k * u + i] = pk;
                h[k * u + i] = hk;
            }
        }
    }
}

/// The canonical words of accumulators in the working form ([`moments_open`], units of `u`).
pub fn moments_close(acc: &mut [i64], u: usize) {
    let mut tmp = vec![0i64; 4 * u];
    for unit in acc.chunks_exact_mut(4 * u.max(1)) {
        tmp.copy_from_slice(unit);
        for (i, w) in unit.chunks_exact_mut(4).enumerate() {
            for k in 0..2 {
                let (p, h) = (tmp[k * u + i], tmp[(2 + k) * u + i]);
                set_moment_word(
                    &mut w[2 * k..2 * k + 2],
                    ((h as i128) << WORK_BITS) + p as i128,
                );
            }
        }
    }
}

/// One output line's moment accumulators in the working form ([`moments_open`]): the low
/// parts `P₁`, `P₂` and the high parts `H₁`, `H₂` of its voxels, each a slice of its unit.
pub struct WorkLine<'a> {
    /// `[P₁, P₂]` of the line's voxels.
    pub p: [&'a mut [i64]; 2],
    /// `[H₁, H₂]` of the line's voxels.
    pub h: [&'a mut [i64]; 2],
}

impl<'a> WorkLine<'a> {
    /// Voxels `at..at + n` of a unit in the working form (`unit`: `4·u` words).
    pub fn of_unit(unit: &'a mut [i64], at: usize, n: usize) -> Self {
        let u = unit.len() / 4;
        let (p, h) = unit.split_at_mut(2 * u);
        let (p1, p2) = p.split_at_mut(u);
        let (h1, h2) = h.split_at_mut(u);
        let line = |x: &'a mut [i64]| &mut x[at..at + n];
        WorkLine {
            p: [line(p1), line(p2)],
            h: [line(h1), line(h2)],
        }
    }
}

/// [`moments_add`] of every score of `s` to voxels `j..j + s.len()` of one line's
/// accumulators in the working form ([`WorkLine`], [`moments_open`]): the same sums,
/// bit for bit. The terms of scaled values within `±2⁵¹` ([`MOMENT_SMALL`]: every score of
/// the normalised scores below 0.5, and all their squares) are formed branch-free
/// ([`small_term`]) and added to the low parts without a carry, which vectorises; the others
/// (larger, out of range, NaN) are added exactly to the whole sum, one voxel at a time.
#[inline(always)]
pub fn moments_add_work<T: Float>(w: &mut WorkLine<'_>, j: usize, s: &[T], scale: [f64; 2]) {
    if squares_follow(scale) {
        add_work::<T, false>(w, j, s, scale)
    } else {
        add_work::<T, true>(w, j, s, scale)
    }
}

/// `true` when a scaled score within `±2⁵¹` ([`MOMENT_SMALL`]) implies a scaled square within
/// it too, so that the fast path need not test the square: `scale[1] ≤ scale[0]²·2⁻⁵²` (then
/// `|x₂| ≤ x₁²·2⁻⁵² ≤ 2⁵⁰` up to four roundings), with `scale[0] ∈ [2⁻⁴⁰⁰, 2⁵⁰⁰]` so that
/// `scale[0]²` is a normal double and every such score's square is finite. The run's scales
/// (the matching algorithm's `moment_scales`) have `scale[1] = scale[0]²·2⁻⁶²`.
#[inline(always)]
fn squares_follow(scale: [f64; 2]) -> bool {
    let [s0, s1] = scale;
    (2f64.powi(-400)..=2f64.powi(500)).contains(&s0)
        && (0.0..=s0 * s0 * 2f64.powi(-52)).contains(&s1)
}

/// `|x₁| ≤ 2⁵¹` and, when `CHECK2`, `|x₂| ≤ 2⁵¹` ([`squares_follow`]).
#[inline(always)]
fn is_small<const CHECK2: bool>(x1: f64, x2: f64) -> bool {
    x1.abs() <= MOMENT_SMALL && (!CHECK2 || x2.abs() <= MOMENT_SMALL)
}

/// Voxels the fast path takes at a time: a fixed-size block the compiler turns into whole
/// vectors (two of 4 doubles with AVX2, one of 8 with AVX-512), so that a run's last voxels,
/// padded into a block, do not fall to a scalar loop.
const BLOCK: usize = 8;

/// The fast path of a block of [`BLOCK`] voxels: adds the sum of the `K` rotations' small terms
/// of voxel `i` (scores `s[q][i]`) to `a1[i]`/`a2[i]` where all `2K` are small, and sets
/// `big[i]` where they are not (voxel left unchanged, for the exact path).
#[inline(always)]
fn work_block<T: Float, const K: usize, const CHECK2: bool>(
    a1: &mut [i64; BLOCK],
    a2: &mut [i64; BLOCK],
    s: &[[T; BLOCK]; K],
    scale: [f64; 2],
    big: &mut [u64; BLOCK],
) {
    for i in 0..BLOCK {
        let (mut t1, mut t2, mut all) = (0i64, 0i64, true);
        for sq in s {
            let u = f64_of(sq[i]);
            let (x1, x2) = (u * scale[0], u * u * scale[1]);
            all &= is_small::<CHECK2>(x1, x2);
            t1 = t1.wrapping_add(small_term(x1));
            t2 = t2.wrapping_add(small_term(x2));
        }
        a1[i] += if all { t1 } else { 0 };
        a2[i] += if all { t2 } else { 0 };
        // Lane-wise over all blocks, so that the test vectorises without packing masks.
        big[i] |= u64::from(!all);
    }
}

/// [`work_block`] over the low parts `p1`, `p2` of `m` voxels (`m ≤ p1.len()`), `score(q, i)`
/// rotation `q`'s score of voxel `i`: whole blocks in place, the last `m % BLOCK` voxels padded
/// with zero scores into one. Returns whether any voxel needs the exact path.
#[inline(always)]
fn work_blocks<T: Float, const K: usize, const CHECK2: bool>(
    p1: &mut [i64],
    p2: &mut [i64],
    m: usize,
    score: impl Fn(usize, usize) -> T,
    scale: [f64; 2],
) -> bool {
    let (b1, r1) = p1[..m].as_chunks_mut::<BLOCK>();
    let (b2, r2) = p2[..m].as_chunks_mut::<BLOCK>();
    let mut big = [0u64; BLOCK];
    for (k, (a1, a2)) in b1.iter_mut().zip(b2.iter_mut()).enumerate() {
        let blk: [[T; BLOCK]; K] =
            std::array::from_fn(|q| std::array::from_fn(|i| score(q, k * BLOCK + i)));
        work_block::<T, K, CHECK2>(a1, a2, &blk, scale, &mut big);
    }
    let n = r1.len();
    if n > 0 {
        let i0 = m - n;
        let blk: [[T; BLOCK]; K] = std::array::from_fn(|q| {
            std::array::from_fn(|i| {
                if i < n {
                    score(q, i0 + i)
                } else {
                    T::from_f64(0.0)
                }
            })
        });
        let (mut a1, mut a2) = ([0i64; BLOCK], [0i64; BLOCK]);
        a1[..n].copy_from_slice(r1);
        a2[..n].copy_from_slice(r2);
        work_block::<T, K, CHECK2>(&mut a1, &mut a2, &blk, scale, &mut big);
        r1.copy_from_slice(&a1[..n]);
        r2.copy_from_slice(&a2[..n]);
    }
    big.iter().fold(0, |a, &b| a | b) != 0
}

/// [`moments_add_work`], testing the squares when `CHECK2`.
#[inline(always)]
fn add_work<T: Float, const CHECK2: bool>(
    w: &mut WorkLine<'_>,
    j: usize,
    s: &[T],
    scale: [f64; 2],
) {
    let m = s.len();
    let ([p1, p2], [h1, h2]) = (&mut w.p, &mut w.h);
    let (p1, p2) = (&mut p1[j..j + m], &mut p2[j..j + m]);
    if work_blocks::<T, 1, CHECK2>(p1, p2, m, |_, i| s[i], scale) {
        for (i, &v) in s.iter().enumerate() {
            let v = f64_of(v);
            let (x1, x2) = (v * scale[0], v * v * scale[1]);
            if !is_small::<CHECK2>(x1, x2) {
                work_add(&mut h1[j + i], &mut p1[i], moment_quantize(x1));
                work_add(&mut h2[j + i], &mut p2[i], moment_quantize(x2));
            }
        }
    }
}

/// [`moments_add_work`] of `K` rotations' scores at once (`s[q][..m]` rotation `q`'s, offset
/// `j` into the line): where all `2K` terms of a voxel are small, their sums are added to the
/// low parts in one read and one write of each word; the other voxels get each term exactly.
/// Integer sums, so the words are those of `K` [`moments_add_work`] calls; `K` terms of at
/// most `2⁵¹` are `K` of the [`MOMENT_PASSES`] passes an opening holds.
#[inline(always)]
pub fn moments_add_work_group<T: Float, const CH: usize, const K: usize>(
    w: &mut WorkLine<'_>,
    j: usize,
    s: &[[T; CH]; K],
    m: usize,
    scale: [f64; 2],
) {
    if squares_follow(scale) {
        add_work_group::<T, CH, K, false>(w, j, s, m, scale)
    } else {
        add_work_group::<T, CH, K, true>(w, j, s, m, scale)
    }
}

/// [`moments_add_work_group`], testing the squares when `CHECK2`.
#[inline(always)]
fn add_work_group<T: Float, const CH: usize, const K: usize, const CHECK2: bool>(
    w: &mut WorkLine<'_>,
    j: usize,
    s: &[[T; CH]; K],
    m: usize,
    scale: [f64; 2],
) {
    let ([p1, p2], [h1, h2]) = (&mut w.p, &mut w.h);
    let (p1, p2) = (&mut p1[j..j + m], &mut p2[j..j + m]);
    if work_blocks::<T, K, CHECK2>(p1, p2, m, |q, i| s[q][i], scale) {
        for i in 0..m {
            let terms = s.map(|sq| {
                let v = f64_of(sq[i]);
                (v * scale[0], v * v * scale[1])
            });
            if !terms.iter().all(|&(x1, x2)| is_small::<CHECK2>(x1, x2)) {
                for (q1, q2) in terms {
                    work_add(&mut h1[j + i], &mut p1[i], moment_quantize(q1));
                    work_add(&mut h2[j + i], &mut p2[i], moment_quantize(q2));
                }
            }
        }
    }
}

/// Adds accumulators `b` into `a` (same length, 4 words per voxel): the moments of the union
/// of two disjoint sets of passes.
pub fn moments_merge(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.chunks_exact_mut(2).zip(b.chunks_exact(2)) {
        let v = moment_word(x).wrapping_add(moment_word(y));
        set_moment_word(x, v);
    }
}

/// `true` when a sum holds an out-of-range or NaN score ([`MOMENT_FLAG`]).
#[inline]
pub fn moments_flagged(sum: i128) -> bool {
    sum.unsigned_abs() >= 1u128 << 99
}

/// Mean, population standard deviation and `(best − mean) / std` of one voxel's scores from
/// its moment words `w` (canonical: `[Σq₁ low, high, Σq₂ low, high]`) over `nrot` rotations at
/// `scale`, with the best score `best`; `None` when a sum holds the out-of-range flag. A
/// variance within the resolution of the terms is no spread (std 0, z 0).
pub fn voxel_statistics(w: &[i64], best: f64, nrot: usize, scale: [f64; 2]) -> Option<[f64; 3]> {
    let (s1, s2) = (moment_word(&w[0..2]), moment_word(&w[2..4]));
    if moments_flagged(s1) || moments_flagged(s2) {
        return None;
    }
    let nf = nrot as f64;
    let mean = s1 as f64 / (nf * scale[0]);
    let e2 = s2 as f64 / (nf * scale[1]);
    let mut var = e2 - mean * mean;
    // Within the resolution of the terms (each rounded to 2^-k) and of f64: no spread.
    let tol = 4.0 * (e2.abs() * f64::EPSILON + 1.0 / scale[1] + mean.abs() / scale[0]);
    if var.is_nan() || var <= tol {
        var = 0.0;
    }
    let std = var.sqrt();
    let z = if std > 0.0 { (best - mean) / std } else { 0.0 };
    Some([mean, std, if z.is_finite() { z } else { 0.0 }])
}

/// The error of a voxel whose moment sums are flagged (a NaN score, or one beyond the range
/// the sums were sized for at `scale`).
pub fn statistics_flagged(voxel: usize, scale: [f64; 2]) -> Error {
    Error::invalid(
        "score_stats",
        format!(
            "voxel {voxel}: a score was NaN or beyond the statistics' range (|score| up to \
             2^62 / {:e}); the scores are not what the statistics assume",
            scale[0]
        ),
    )
}

/// The score statistics of a run of voxels, as [`Correlate::moment_statistics`] writes them:
/// from the moment words `words` (4 per voxel), the best scores `best` and, after a background
/// correction, the shift `shift` of each voxel's scores (the best already corrected: the mean
/// moves with it, std and z do not), into `out` = `[mean, std, z]`. A voxel no rotation scored
/// (best −∞) has mean and std NaN and z −∞. Returns the first voxel (offset in the run) whose
/// sums are flagged ([`moments_flagged`]), leaving it and the later ones unwritten.
///
/// [`Correlate::moment_statistics`]: super::Correlate::moment_statistics
pub fn statistics_run<T: Float>(
    words: &[i64],
    best: &[T],
    shift: Option<&[T]>,
    nrot: usize,
    scale: [f64; 2],
    [mean, std, z]: [&mut [T]; 3],
) -> Option<usize> {
    for (i, (w, &b)) in words.chunks_exact(4).zip(best).enumerate() {
        let b = b.as_f64();
        let [m, s, zz] = if b == f64::NEG_INFINITY {
            [f64::NAN, f64::NAN, f64::NEG_INFINITY]
        } else {
            let sh = shift.map_or(0.0, |s| s[i].as_f64());
            let Some([m, s, zz]) = voxel_statistics(w, b + sh, nrot, scale) else {
                return Some(i);
            };
            [m - sh, s, zz]
        };
        mean[i] = T::from_f64(m);
        std[i] = T::from_f64(s);
        z[i] = T::from_f64(zz);
    }
    None
}

/// `1 / (s · n)` of pytme's `norm_scores` from `C(f, m)`, `C(f², m)` (already scaled).
#[inline(always)]
pub fn inv_den(c1: f64, c2: f64, n: f64, eps: f64) -> f64 {
    let e1 = c1 / n;
    let e2 = c2 / n;
    let mut s = (e2 - e1 * e1).max(0.0).sqrt();
    if s < eps {
        s = 1.0;
    }
    1.0 / (s * n)
}

/// FLC score from the unscaled correlations `c = C(f, t̂)`, `u1 = C(f, m)`,
/// `u2 = C(f², m)`, with `k = scale / n` (and `kt`, the same in `T`): the local variance
/// `e2 − e1²` (`e = u·k`) is formed in f64, where its cancellation is harmless; the square
/// root and the division run in `T`. For `f32` data that is the same result to a few f32
/// ulps (the inputs are f32 FFT outputs anyway) at a fraction of the cost of f64
/// division/square root, the throughput limit of this pass.
#[inline(always)]
pub fn local_score_mixed<T: Float>(c: T, u1: T, u2: T, k: f64, kt: T, eps: T) -> T {
    let e1 = f64_of(u1) * k;
    let var = f64_of(u2) * k - e1 * e1;
    let mut s = T::from_f64(var).max(T::zero()).sqrt();
    if s < eps {
        s = T::one();
    }
    c * kt / s
}

/// Host kernel of [`super::Correlate::inverse_denominator`] for output rows `rows`.
pub fn inverse_denominator<T: Float>(
    c1: &[T],
    c2: &[T],
    fast: &[usize],
    shift: &[isize],
    scale: T,
    n: T,
    eps: T,
    out: &[usize],
    rows: Range<usize>,
    dst: &mut [T],
) -> Result<()> {
    let total: usize = fast.iter().product();
    if c1.len() != total || c2.len() != total {
        return Err(Error::shape("mask correlations", fmt_shape(fast), c1.len()));
    }
    let row_len: usize = out[1..].iter().product();
    if dst.len() != rows.len() * row_len {
        return Err(Error::shape("denominator", rows.len() * row_len, dst.len()));
    }
    let (offs, last) = line_offsets(fast, shift, out, rows)?;
    let (sc, nf, ep) = (f64_of(scale), f64_of(n), f64_of(eps));
    let nl = last.len();
    for (li, &base) in offs.iter().enumerate() {
        for j in 0..nl {
            let q = base + last[j];
            dst[li * nl + j] = T::from_f64(inv_den(f64_of(c1[q]) * sc, f64_of(c2[q]) * sc, nf, ep));
        }
    }
    Ok(())
}

/// Host kernel of [`super::Correlate::gather_window`].
pub fn gather_window<T: Float>(
    src: &[T],
    sshape: &[usize],
    start: &[isize],
    len: &[usize],
    ext: WindowExtension<'_>,
    dst: &mut [T],
    dshape: &[usize],
) -> Result<()> {
    let d = sshape.len();
    if dshape.len() != d || start.len() != d || len.len() != d {
        return Err(Error::shape(
            "gather_window",
            format!("{d} axes"),
            fmt_shape(dshape),
        ));
    }
    if let WindowExtension::Periodic(p) = ext
        && (p.len() != d || p.iter().zip(sshape).any(|(p, s)| p < s))
    {
        return Err(Error::shape(
            "gather_window period",
            format!("≥ {}", fmt_shape(sshape)),
            fmt_shape(p),
        ));
    }
    // Per-axis source index (None = zero) for every destination index.
    let maps: Vec<Vec<Option<usize>>> = (0..d)
        .map(|k| {
            (0..dshape[k])
                .map(|j| {
                    if j >= len[k] {
                        return None;
                    }
                    let p = start[k] + j as isize;
                    let s = sshape[k] as isize;
                    match ext {
                        WindowExtension::Periodic(per) => {
                            let q = p.rem_euclid(per[k] as isize);
                            (q < s).then_some(q as usize)
                        }
                        WindowExtension::Symmetric => {
                            let q = p.rem_euclid(2 * s);
                            Some(if q >= s {
                                (2 * s - 1 - q) as usize
                            } else {
                                q as usize
                            })
                        }
                    }
                })
                .collect()
        })
        .collect();
    let sst = strides(sshape);
    let dst_st = strides(dshape);
    let total: usize = dshape.iter().product();
    if dst.len() != total || src.len() != sshape.iter().product::<usize>() {
        return Err(Error::shape(
            "gather_window buffers",
            fmt_shape(dshape),
            dst.len(),
        ));
    }
    let mut idx = vec![0usize; d];
    for (flat, v) in dst.iter_mut().enumerate() {
        let mut rem = flat;
        for k in 0..d {
            idx[k] = rem / dst_st[k];
            rem %= dst_st[k];
        }
        let mut off = 0usize;
        let mut zero = false;
        for k in 0..d {
            match maps[k][idx[k]] {
                Some(i) => off += i * sst[k],
                None => {
                    zero = true;
                    break;
                }
            }
        }
        *v = if zero { T::zero() } else { src[off] };
    }
    Ok(())
}

/// Host kernel of [`super::Correlate::insert_block`].
pub fn insert_block<T: Element>(
    src: &[T],
    sshape: &[usize],
    offset: &[usize],
    dst: &mut [T],
    dshape: &[usize],
) -> Result<()> {
    let d = sshape.len();
    if dshape.len() != d || offset.len() != d || (0..d).any(|k| offset[k] + sshape[k] > dshape[k]) {
        return Err(Error::shape(
            "insert_block",
            format!("a block inside {}", fmt_shape(dshape)),
            format!("{} at {:?}", fmt_shape(sshape), offset),
        ));
    }
    let (sst, dstr) = (strides(sshape), strides(dshape));
    let nl = sshape[d - 1];
    let lines = src.len() / nl.max(1);
    for l in 0..lines {
        let mut rem = l * nl;
        let mut off = offset[d - 1];
        for k in 0..d - 1 {
            let i = rem / sst[k];
            rem %= sst[k];
            off += (i + offset[k]) * dstr[k];
        }
        dst[off..off + nl].copy_from_slice(&src[l * nl..(l + 1) * nl]);
    }
    Ok(())
}

/// Host kernel of [`super::Correlate::combine_masked_correlations`]: `c_ft` is overwritten by the scores;
/// `rest = [c_fm, c_tt, c_f2m, c_tt2, c_tm]`.
pub fn combine_masked_correlations<T: Float>(
    c_ft: &mut [T],
    rest: [&[T]; 5],
    scale: T,
    eps: T,
    overlap_ratio: T,
) {
    let [c_fm, c_tt, c_f2m, c_tt2, c_tm] = rest;
    let (sc, ep) = (f64_of(scale), f64_of(eps));
    let n = c_ft.len();
    let mut den = vec![0.0f64; n];
    let mut max_den = 0.0f64;
    let mut max_ov = f64::NEG_INFINITY;
    for i in 0..n {
        let ov = (f64_of(c_tm[i]) * sc).max(ep);
        let fm = f64_of(c_fm[i]) * sc;
        let tt = f64_of(c_tt[i]) * sc;
        let fix = (f64_of(c_f2m[i]) * sc - fm * fm / ov).max(0.0);
        let mov = (f64_of(c_tt2[i]) * sc - tt * tt / ov).max(0.0);
        den[i] = (fix * mov).sqrt();
        max_den = max_den.max(den[i]);
        max_ov = max_ov.max(ov);
    }
    for i in 0..n {
        let ov = (f64_of(c_tm[i]) * sc).max(ep);
        if ov < f64_of(overlap_ratio) * max_ov {
            c_ft[i] = T::zero();
            continue;
        }
        let fm = f64_of(c_fm[i]) * sc;
        let tt = f64_of(c_tt[i]) * sc;
        let num = f64_of(c_ft[i]) * sc - fm * tt / ov;
        let mut d = den[i];
        if d < 1e3 * ep * max_den {
            d = 1.0;
        }
        c_ft[i] = T::from_f64((num / d).clamp(-1.0, 1.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every edge of the quantisation: ties either way, the ±2⁶² limit and one step past it,
    /// the 2³² split, the range where f64 holds halves (2⁵¹..2⁵²) and only integers (2⁵³..),
    /// −0, NaN, ±∞ and subnormals.
    fn edge_values() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 4.0,
            MOMENT_LIMIT,
            -MOMENT_LIMIT,
            MOMENT_LIMIT.next_up(),
            (-MOMENT_LIMIT).next_down(),
            MOMENT_LIMIT.next_down(),
            f64::MAX,
        ];
        for e in [31, 32, 33, 51, 52, 53, 61] {
            let p = 2f64.powi(e);
            for x in [
                p,
                p - 0.5,
                p + 0.5,
                p - 1.0,
                p + 1.0,
                p.next_down(),
                p.next_up(),
            ] {
                v.push(x);
                v.push(-x);
            }
        }
        v
    }

    /// Random values over the whole range, with random signs and fractions, and the edges.
    fn values() -> Vec<f64> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut vals = edge_values();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mant = (x >> 11) as f64 / (1u64 << 53) as f64;
            let e = (x % 66) as i32 - 2;
            let s = if x & (1 << 9) == 0 { 1.0 } else { -1.0 };
            vals.push(s * mant * 2f64.powi(e));
            vals.push(s * ((x >> 20) as f64 + 0.5));
        }
        vals
    }

    #[test]
    fn small_terms_are_moment_quantize() {
        let mut n = 0;
        for v in values() {
            if v.abs() <= MOMENT_SMALL {
                assert_eq!(small_term(v) as i128, moment_quantize(v), "{v:e}");
                n += 1;
            }
        }
        assert!(n > 10_000, "{n} values in range");
    }

    /// Canonical sums `start`, then `passes` passes of the scores `s` over units of `u`
    /// voxels in lines of `nl`, each pass in runs of at most 50 voxels (offsets inside a
    /// line), through the working form, against [`moments_add`] term by term.
    fn check_working_form<T: Float>(
        s: &[T],
        (u, nl): (usize, usize),
        start: i128,
        passes: usize,
        scale: [f64; 2],
    ) {
        let mut want = vec![0i64; 4 * s.len()];
        for w in want.chunks_exact_mut(2) {
            set_moment_word(w, start);
        }
        let mut got = want.clone();
        for _ in 0..passes {
            for (w, &v) in want.chunks_exact_mut(4).zip(s) {
                moments_add(w, f64_of(v), scale);
            }
        }
        moments_open(&mut got, u);
        for pass in 0..passes {
            if pass > 0 && pass % MOMENT_PASSES == 0 {
                moments_close(&mut got, u);
                moments_open(&mut got, u);
            }
            for (unit, su) in got.chunks_exact_mut(4 * u).zip(s.chunks_exact(u)) {
                for (li, sl) in su.chunks_exact(nl).enumerate() {
                    let mut w = WorkLine::of_unit(unit, li * nl, nl);
                    let mut j = 0;
                    while j < nl {
                        let m = 50.min(nl - j);
                        moments_add_work(&mut w, j, &sl[j..j + m], scale);
                        j += m;
                    }
                }
            }
        }
        moments_close(&mut got, u);
        assert_eq!(got, want, "scale {scale:?}, start {start}, {passes} passes");
    }

    #[test]
    fn the_working_form_adds_the_same_bits_as_one_term_at_a_time() {
        // Scores of both types, units of one line and of several (several runs per line), the
        // scales of the normalised scores and larger ones, starting sums near a carry, across a
        // carry, past 2⁶⁴ either way and holding a flag; every edge of the quantisation.
        let vals = values();
        let starts: [i128; 6] = [
            0,
            (1 << 64) - 3,
            -(1 << 64) + 2,
            i64::MAX as i128,
            -5,
            MOMENT_FLAG + 7,
        ];
        // The first two scales let the fast path skip the squares' test (`squares_follow`);
        // with `[1, 1]` a score inside `±2⁵¹` can have its square beyond it.
        for scale in [
            [2f64.powi(52), 2f64.powi(42)],
            [2f64.powi(61), 2f64.powi(0)],
            [1.0, 1.0],
        ] {
            for (k, &st) in starts.iter().enumerate() {
                let n = 260;
                let s64: Vec<f64> = (0..n)
                    .map(|i| {
                        let base = vals[(i * 7 + k * 131) % vals.len()] / scale[0];
                        if i % 3 == 0 {
                            base
                        } else {
                            (i as f64 * 0.37).sin() * 0.999
                        }
                    })
                    .collect();
                let s32: Vec<f32> = s64.iter().map(|&v| v as f32).collect();
                check_working_form(&s64, (130, 130), st, 3, scale);
                check_working_form(&s32, (130, 130), st, 3, scale);
                check_working_form(&s32, (260, 65), st, 2, scale);
                check_working_form(&s64, (1, 1), st, 2, scale);
                check_working_form(&s64, (4, 2), st, 2, scale);
            }
        }
    }

    #[test]
    fn the_working_form_holds_its_passes_at_the_largest_small_terms() {
        // Every term at ±2⁵¹, the most the fast path adds, for more passes than one opening
        // holds (the loop reopens every MOMENT_PASSES), from sums at the edges of i64 and of
        // a 2⁶⁴ carry.
        let scale = [1.0, 2f64.powi(-51)];
        let top = MOMENT_SMALL;
        let s = [top, -top, top, top.next_down(), -top, 0.0];
        for start in [
            0,
            i64::MAX as i128,
            i64::MIN as i128,
            (1 << 64) - 1,
            -(1 << 70),
        ] {
            check_working_form(&s, (3, 3), start, MOMENT_PASSES + 5, scale);
        }
    }

    /// `K` rotations' scores added at once ([`moments_add_work_group`]) give the sums of `K`
    /// [`moments_add_work`] calls, for runs of every length up to a chunk (whole blocks and
    /// padded last ones) and offsets into a line (the second of its unit), with scores past the
    /// fast path (larger, beyond [`MOMENT_LIMIT`], NaN) in some voxels of some rotations.
    fn check_group<T: Float, const K: usize>(vals: &[f64], scale: [f64; 2]) {
        const CH: usize = 64;
        let (nl, u) = (150, 300);
        for m in 1..=CH {
            for j in [0, 3, nl - m] {
                let mut s = [[T::from_f64(0.0); CH]; K];
                for (q, sq) in s.iter_mut().enumerate() {
                    for (i, v) in sq.iter_mut().take(m).enumerate() {
                        let x = vals[(m * 31 + q * 17 + i * 7 + j) % vals.len()];
                        // Mostly fast-path scores, a few of any size.
                        *v = T::from_f64(if (i + q + m) % 11 == 0 {
                            x / scale[0]
                        } else {
                            (x * 1e-3).sin() * 0.49
                        });
                    }
                }
                let mut want: Vec<i64> = (0..4 * u as i64).map(|v| v * 7919 % 1001).collect();
                moments_open(&mut want, u);
                let mut got = want.clone();
                let mut w = WorkLine::of_unit(&mut want, nl, nl);
                for sq in &s {
                    moments_add_work(&mut w, j, &sq[..m], scale);
                }
                moments_add_work_group(&mut WorkLine::of_unit(&mut got, nl, nl), j, &s, m, scale);
                // The same sums; the working form's words may split them differently.
                moments_close(&mut want, u);
                moments_close(&mut got, u);
                assert_eq!(got, want, "K {K}, m {m}, j {j}, scale {scale:?}");
            }
        }
    }

    #[test]
    fn a_group_adds_the_words_of_its_rotations_one_by_one() {
        let vals = values();
        for scale in [
            [2f64.powi(52), 2f64.powi(42)],
            [1.0, 1.0],
            [2f64.powi(12), 2f64.powi(10)],
        ] {
            check_group::<f32, 2>(&vals, scale);
            check_group::<f32, 3>(&vals, scale);
            check_group::<f64, 4>(&vals, scale);
        }
    }
}
