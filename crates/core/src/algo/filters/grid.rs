//! Frequency grids as pytme 0.3.6 builds them (`filters/_utils.py::fftfreqn`): integer
//! frequencies in fftfreq order, scaled by `int(n * q)` (truncated), stored in float32, and
//! `|k|` summed in float32 in axis order, so that hard thresholds agree bit for bit.

use ndarray::{ArrayD, IxDyn};

/// The integer frequency of index `i` on an axis of `n` (numpy's `fftfreq(n)[i] * n`).
pub fn int_freq(i: usize, n: usize) -> i64 {
    if i < n.div_ceil(2) {
        i as i64
    } else {
        i as i64 - n as i64
    }
}

/// pytme's per-axis frequency of integer frequency `u` on an axis of `n` with sampling `q`:
/// `f32(u / int(n * q))` (`q = None`: the integer itself).
pub fn axis_freq(u: i64, n: usize, q: Option<f64>) -> f32 {
    match q {
        None => u as f32,
        Some(q) => (u as f64 / ((n as f64 * q) as i64) as f64) as f32,
    }
}

/// `|k|` as pytme forms it: float32 squares summed in axis order, float32 square root.
pub fn norm_f32(k: &[f32]) -> f32 {
    let mut acc = 0f32;
    for &v in k {
        acc += v * v;
    }
    acc.sqrt()
}

/// `|k|` on the full grid of `shape` at integer frequencies `u` with sampling `q` for every
/// axis (pytme's `fftfreqn(shape, q)` norm).
pub fn norm_at(u: &[i64], shape: &[usize], q: Option<f64>) -> f32 {
    let mut acc = 0f32;
    for (&ui, &n) in u.iter().zip(shape) {
        let v = axis_freq(ui, n, q);
        acc += v * v;
    }
    acc.sqrt()
}

/// Visits every index of `shape` (C order) with its integer frequencies.
pub fn for_each_freq(shape: &[usize], mut f: impl FnMut(&[usize], &[i64])) {
    let d = shape.len();
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; d];
    let mut u: Vec<i64> = vec![0; d];
    loop {
        for a in 0..d {
            u[a] = int_freq(idx[a], shape[a]);
        }
        f(&idx, &u);
        let mut a = d;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// A full-grid array (fftn layout, DC at 0) from a function of the integer frequencies.
pub fn full_from_fn(shape: &[usize], mut f: impl FnMut(&[i64]) -> f64) -> ArrayD<f64> {
    let mut out = Vec::with_capacity(shape.iter().product());
    for_each_freq(shape, |_, u| out.push(f(u)));
    ArrayD::from_shape_vec(IxDyn(shape), out).expect("grid length matches its shape")
}

/// The rfft half-grid shape of `shape` (last axis `n/2 + 1`).
pub fn half_shape(shape: &[usize]) -> Vec<usize> {
    let mut h = shape.to_vec();
    if let Some(l) = h.last_mut() {
        *l = *l / 2 + 1;
    }
    h
}

/// Crops a full-grid array to its rfft half grid (`crop_real_fourier`).
pub fn crop_half(full: &ArrayD<f64>) -> ArrayD<f64> {
    let d = full.ndim();
    let n = full.shape()[d - 1];
    full.slice_axis(ndarray::Axis(d - 1), ndarray::Slice::from(0..n / 2 + 1))
        .to_owned()
}

/// Rounds to float32 (pytme's filters are float32 arrays).
pub fn f32_round(v: f64) -> f64 {
    v as f32 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_freq_is_numpy_fftfreq_times_n() {
        let even: Vec<i64> = (0..4).map(|i| int_freq(i, 4)).collect();
        assert_eq!(even, [0, 1, -2, -1]);
        let odd: Vec<i64> = (0..5).map(|i| int_freq(i, 5)).collect();
        assert_eq!(odd, [0, 1, 2, -2, -1]);
    }

    #[test]
    fn sampling_truncates_n_times_q() {
        // 16 x 6.8 = 108.8 -> 108 (pytme's astype(int))
        assert_eq!(axis_freq(3, 16, Some(6.8)), (3.0f64 / 108.0) as f32);
        // q = 0.5 on an odd box: u / int(n/2)
        assert_eq!(axis_freq(2, 5, Some(0.5)), 1.0);
    }
}
