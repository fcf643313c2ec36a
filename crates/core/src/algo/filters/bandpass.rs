//! pytme 0.3.6's Gaussian band edges (`filters/bandpass.py::gaussian_bandpass`, the only kind
//! `pytme match` builds): `exp(-ln2 k² / (s/L)²)` times `1 - exp(-ln2 k² / (s/H)²)`, `k` in
//! cycles/voxel (float32 `|k|`), `s` the voxel size in Å: each edge is 0.5 at 1/L (1/H) Å⁻¹.

use super::grid::norm_at;

/// The Gaussian band-pass weight at integer frequency `u` of a box of `shape`.
pub fn gaussian_bandpass_at(
    u: &[i64],
    shape: &[usize],
    voxel: f64,
    lowpass: Option<f64>,
    highpass: Option<f64>,
) -> f64 {
    let k = norm_at(u, shape, Some(1.0)) as f64;
    let k2 = k * k;
    let ln2 = std::f64::consts::LN_2;
    let mut out = 1.0;
    if let Some(l) = lowpass {
        out *= (-k2 / ((voxel / l).powi(2) / ln2)).exp();
    }
    if let Some(h) = highpass {
        out *= 1.0 - (-k2 / ((voxel / h).powi(2) / ln2)).exp();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_edge_is_one_half_at_its_resolution() {
        // 8 Å voxels, lowpass 32 Å: k = 8/32 = 0.25 cycles/voxel = 4 of 16
        let v = gaussian_bandpass_at(&[4, 0, 0], &[16, 16, 16], 8.0, Some(32.0), None);
        assert!((v - 0.5).abs() < 1e-12, "{v}");
        let v = gaussian_bandpass_at(&[4, 0, 0], &[16, 16, 16], 8.0, None, Some(32.0));
        assert!((v - 0.5).abs() < 1e-12, "{v}");
        assert_eq!(
            gaussian_bandpass_at(&[0, 0, 0], &[16, 16, 16], 8.0, None, Some(32.0)),
            0.0
        );
    }
}
