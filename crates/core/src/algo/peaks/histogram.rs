//! numpy's `histogram(values, bins=n)` with equal bins, in the values' own precision: edges
//! `linspace(min, max, n + 1)` computed in `T` as numpy computes them for a float32 array
//! (`delta = max − min`, `step = delta / n`, `edge[i] = i · step + min`, the last edge `max`),
//! a value in bin `i` when `edge[i] ≤ v < edge[i + 1]`, the last bin closed. A single value
//! (`min = max`) gets the range `min − 0.5 .. max + 0.5`, as numpy.

use crate::dtype::Float;

/// Counts and edges of `values` (NaN and infinities skipped, as numpy refuses them) in `bins`
/// equal bins; `None` when no value is finite or `bins` is 0.
pub fn histogram<T: Float>(values: &[T], bins: usize) -> Option<(Vec<usize>, Vec<T>)> {
    if bins == 0 {
        return None;
    }
    let mut lo = T::infinity();
    let mut hi = T::neg_infinity();
    for &v in values.iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    if lo == hi {
        lo = T::from_f64(lo.as_f64() - 0.5);
        hi = T::from_f64(hi.as_f64() + 0.5);
    }
    let delta = hi - lo;
    let step = delta / T::from_f64(bins as f64);
    let mut edges: Vec<T> = (0..=bins)
        .map(|i| {
            if step == T::zero() {
                T::from_f64(i as f64) / T::from_f64(bins as f64) * delta + lo
            } else {
                T::from_f64(i as f64) * step + lo
            }
        })
        .collect();
    edges[bins] = hi;
    let mut counts = vec![0usize; bins];
    for &v in values.iter().filter(|v| v.is_finite()) {
        if v < lo || v > hi {
            continue;
        }
        let i = edges.partition_point(|e| *e <= v).saturating_sub(1);
        counts[i.min(bins - 1)] += 1;
    }
    Some((counts, edges))
}

/// Bin centres `(edge[i] + edge[i + 1]) / 2`, in `T` as numpy computes them.
pub fn centres<T: Float>(edges: &[T]) -> Vec<T> {
    edges
        .windows(2)
        .map(|w| (w[0] + w[1]) / T::from_f64(2.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_edges_and_counts() {
        // np.histogram(np.float32([0.1, 0.2, 0.2, 0.35, 0.7]), bins=3)
        let v = [0.1f32, 0.2, 0.2, 0.35, 0.7];
        let (c, e) = histogram(&v, 3).expect("histogram");
        assert_eq!(c, vec![3, 1, 1]);
        assert_eq!(e[0], 0.1f32);
        assert_eq!(e[3], 0.7f32);
        let step = (0.7f32 - 0.1f32) / 3.0f32;
        assert_eq!(e[1], step + 0.1f32);
        assert_eq!(e[2], 2.0f32 * step + 0.1f32);
        // one value: numpy's ±0.5 range, the value in the middle bin
        let (c, e) = histogram(&[2.0f64], 4).expect("histogram");
        assert_eq!(c, vec![0, 0, 1, 0]);
        assert_eq!((e[0], e[4]), (1.5, 2.5));
        assert!(histogram::<f32>(&[f32::NAN], 3).is_none());
        assert!(histogram(&[1.0f32], 0).is_none());
    }
}
