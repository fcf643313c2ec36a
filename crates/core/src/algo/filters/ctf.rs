//! The contrast transfer function as pytme 0.3.6 builds it (`filters/ctf.py::create_ctf`):
//! `sin(chi)`, `chi = pi lambda k² (df - Cs lambda² k² / 2) + phase + atan(A / sqrt(1 - A²))`,
//! `k` in 1/Å, defocus and Cs in Å (positive defocus = underfocus).

use ndarray::ArrayD;

use super::grid::{full_from_fn, norm_at};

/// Microscope parameters of one CTF.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Microscope {
    /// Acceleration voltage in kV.
    pub voltage_kv: f64,
    /// Spherical aberration in Å.
    pub cs: f64,
    /// Amplitude contrast fraction, in [0, 1).
    pub amplitude_contrast: f64,
}

/// The relativistic electron wavelength in Å for `voltage_kv` (pytme's constants).
pub fn electron_wavelength(voltage_kv: f64) -> f64 {
    let (h, e, m, c) = (
        6.62606896e-34,
        1.60217646e-19,
        9.10938215e-31,
        299792458.0f64,
    );
    let energy = e * voltage_kv * 1e3;
    h * c / (energy * energy + 2.0 * energy * m * c * c).sqrt() * 1e10
}

/// `sin(chi)` at spatial frequency `k` (1/Å) for `defocus` (Å) and phase shift (radians).
pub fn ctf_value(k: f64, defocus: f64, phase_shift: f64, mic: &Microscope) -> f64 {
    let lam = electron_wavelength(mic.voltage_kv);
    let k2 = k * k;
    let a = mic.amplitude_contrast;
    let chi = (defocus - 0.5 * mic.cs * lam * lam * k2) * std::f64::consts::PI * lam * k2
        + phase_shift
        + (a / (1.0 - a * a).sqrt()).atan();
    chi.sin()
}

/// How the CTF enters the template filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtfCorrection {
    /// The target was phase flipped: the template gets `|CTF|` (per tilt: gridded as
    /// phase-flip-weighted, `sum w CTF² / sum w |CTF|`).
    PhaseFlip,
    /// The target was not corrected: the template gets the signed CTF.
    Raw,
}

/// pytme `CTFReconstructed`: one CTF on the full grid of `shape` (any dimension), `k = |k| /
/// voxel` with `|k|` in cycles/voxel (float32).
pub fn single_ctf(
    shape: &[usize],
    voxel: f64,
    defocus: f64,
    phase_shift: f64,
    mic: &Microscope,
    correction: CtfCorrection,
) -> ArrayD<f64> {
    full_from_fn(shape, |u| {
        let k = norm_at(u, shape, Some(1.0)) as f64 / voxel;
        let c = ctf_value(k, defocus, phase_shift, mic);
        match correction {
            CtfCorrection::PhaseFlip => c.abs(),
            CtfCorrection::Raw => c,
        }
    })
}

/// One tilt of a per-tilt CTF (from a CTF file).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TiltCtf {
    /// Mean defocus in Å (CTFFIND: `(df1 + df2) / 2`).
    pub defocus: f64,
    /// Half the defocus difference in Å (CTFFIND: `(df1 - df2) / 2`).
    pub defocus_delta: f64,
    /// Astigmatism azimuth in degrees.
    pub astigmatism_angle: f64,
    /// Additional phase shift in radians.
    pub phase_shift: f64,
}

/// pytme `CTF` (per tilt): the raw (signed) CTF of one tilt on the slice grid `slice_shape`
/// (the box without the opening axis, DC at 0), with astigmatism `df + delta cos(2 (phi -
/// azimuth))`, `phi = atan2(u_b, u_a)` over the two slice axes.
pub fn tilt_ctf(slice_shape: &[usize], voxel: f64, t: &TiltCtf, mic: &Microscope) -> ArrayD<f64> {
    let az = t.astigmatism_angle.to_radians();
    full_from_fn(slice_shape, |u| {
        let mut df = t.defocus;
        if t.defocus_delta != 0.0 && u.len() >= 2 {
            let phi = (u[1] as f32 as f64).atan2(u[0] as f32 as f64);
            df += t.defocus_delta * (2.0 * (phi - az)).cos();
        }
        let k = norm_at(u, slice_shape, Some(1.0)) as f64 / voxel;
        ctf_value(k, df, t.phase_shift, mic)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wavelength_at_300_kv_is_0_0197_angstrom() {
        assert!((electron_wavelength(300.0) - 0.019687).abs() < 1e-5);
    }

    #[test]
    fn ctf_starts_at_the_amplitude_contrast() {
        let mic = Microscope {
            voltage_kv: 300.0,
            cs: 2.7e7,
            amplitude_contrast: 0.07,
        };
        assert!((ctf_value(0.0, 30000.0, 0.0, &mic) - 0.07).abs() < 1e-12);
    }
}
