//! Missing-wedge filters as pytme 0.3.6 builds them (`filters/wedge.py`,
//! `filters/reconstruction.py`): the binary continuous wedge between two tilt angles, and the
//! tilt-series wedge made by gridding one central line (or slice) per tilt into the Fourier
//! volume by trilinear splatting. All arrays here are full grids (fftn layout, DC at index 0)
//! in the frame pytme builds them in (see `compose.rs` for the frames).

use ndarray::{ArrayD, IxDyn};

use super::grid::{full_from_fn, norm_at};
use crate::error::{Error, Result};

/// The remaining (rotation) axis of a 3-D box given the opening and tilt axes.
pub fn rot_axis_of(opening: usize, tilt: usize) -> usize {
    (0..3)
        .find(|&i| i != opening && i != tilt)
        .expect("three axes leave one")
}

/// Tilt angle `a` (degrees) in index units of a non-cubic box: `atan(tan(a) n_o / n_t)`
/// (pytme computes it for cubic boxes too, where it is the identity up to rounding).
pub fn aspect_corrected(a: f64, shape: &[usize], opening: usize, tilt: usize) -> f64 {
    let ar = shape[opening] as f64 / shape[tilt] as f64;
    (a.to_radians().tan() * ar).atan().to_degrees()
}

/// The float32 rotation matrix about one array axis (scipy `from_euler('xyz')` on that axis).
fn rotation_about_axis(axis: usize, deg: f64) -> [[f32; 3]; 3] {
    let t = deg.to_radians();
    let (c, s) = (t.cos() as f32, t.sin() as f32);
    match axis {
        0 => [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]],
        1 => [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]],
        _ => [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]],
    }
}

/// A binary continuous wedge (pytme `continuous_wedge`, then `WedgeReconstructed`'s Nyquist
/// sphere), evaluated point by point.
#[derive(Clone, Debug)]
pub struct ContinuousWedge {
    start: f64,
    stop: f64,
    opening: usize,
    tilt: usize,
}

impl ContinuousWedge {
    /// The wedge for tilt range `(a, b)` (degrees; absolute values taken, as float32 first) on a
    /// box of `shape`.
    pub fn new(angles: (f64, f64), shape: &[usize], opening: usize, tilt: usize) -> Self {
        let a0 = aspect_corrected((angles.0 as f32).abs() as f64, shape, opening, tilt);
        let a1 = aspect_corrected((angles.1 as f32).abs() as f64, shape, opening, tilt);
        ContinuousWedge {
            start: (90.0 - a0).to_radians().tan(),
            stop: (-(90.0 - a1)).to_radians().tan(),
            opening,
            tilt,
        }
    }

    /// Whether integer frequency `u` (on `shape`) is kept: inside the wedge's two sectors and
    /// `|k| <= 0.5` cycles/voxel.
    pub fn keeps(&self, u: &[i64], shape: &[usize]) -> bool {
        let ko = u[self.opening] as f32;
        let kt = u[self.tilt] as f32;
        let ratio = if ko == 0.0 {
            (90f64.to_radians().tan() + 1.0) as f32 as f64
        } else {
            (kt / ko) as f64
        };
        (self.start <= ratio || self.stop >= ratio) && norm_at(u, shape, Some(1.0)) <= 0.5
    }
}

/// Central slices gridded into a 3-D Fourier volume (pytme `ReconstructFromTilt`, method
/// `gridding`). `slices[j]` (DC at index 0) lives on `shape` without the opening axis; its
/// integer frequency coordinates are rotated about the remaining axis by tilt `angles[j]`
/// (aspect-corrected) and splatted trilinearly with periodic wrap: `V += w v`, `S += w s`
/// (`s` = `data_weights` or 1), `I += w`. Result `V min(I, 1) / S` where `S > 1e-6`, else 0,
/// cut to `|k| <= 0.5`; full grid of `shape`, DC at 0.
pub fn reconstruct(
    slices: &[ArrayD<f64>],
    data_weights: Option<&[ArrayD<f64>]>,
    shape: &[usize],
    angles: &[f64],
    opening: usize,
    tilt: usize,
) -> Result<ArrayD<f64>> {
    if shape.len() != 3 {
        return Err(Error::invalid(
            "tilt angles",
            "a tilt-series wedge or per-tilt filter needs a 3-D box",
        ));
    }
    let rot = rot_axis_of(opening, tilt);
    let mut grid_shape: Vec<usize> = (0..3).filter(|&a| a != opening).map(|a| shape[a]).collect();
    grid_shape.insert(opening, 1);
    let n_grid: usize = grid_shape.iter().product();
    let total: usize = shape.iter().product();
    let mut v = vec![0f64; total];
    let mut s = vec![0f32; total];
    let mut iw = vec![0f32; total];
    let strides = [shape[1] * shape[2], shape[2], 1];
    for (j, &a) in angles.iter().enumerate() {
        let slice = &slices[j];
        let sw = data_weights.map(|w| &w[j]);
        let r = rotation_about_axis(rot, aspect_corrected(a, shape, opening, tilt));
        for g in 0..n_grid {
            // centred index of the grid point, C order over grid_shape
            let gi = [
                g / (grid_shape[1] * grid_shape[2]),
                (g / grid_shape[2]) % grid_shape[1],
                g % grid_shape[2],
            ];
            let c: [f32; 3] =
                std::array::from_fn(|a| (gi[a] as i64 - (grid_shape[a] / 2) as i64) as f32);
            // the slice value at this centred position (slices are stored DC at 0)
            let sidx: Vec<usize> = (0..3)
                .filter(|&a| a != opening)
                .map(|a| {
                    let n = grid_shape[a] as i64;
                    (c[a] as i64).rem_euclid(n) as usize
                })
                .collect();
            let sample = slice[IxDyn(&sidx)];
            let sweight = sw.map_or(1.0, |w| w[IxDyn(&sidx)]);
            let mut fl = [0i64; 3];
            let mut fr = [0f64; 3];
            for i in 0..3 {
                let mut acc = 0f32;
                for (k, &ck) in c.iter().enumerate() {
                    acc += r[i][k] * ck;
                }
                let gc = acc as f64 + (shape[i] / 2) as f64;
                fl[i] = gc.floor() as i64;
                fr[i] = gc - fl[i] as f64;
            }
            for dz in 0..2 {
                let iz = (fl[2] + dz).rem_euclid(shape[2] as i64) as usize;
                let wz = if dz == 1 { fr[2] } else { 1.0 - fr[2] };
                for dy in 0..2 {
                    let iy = (fl[1] + dy).rem_euclid(shape[1] as i64) as usize;
                    let wy = wz * if dy == 1 { fr[1] } else { 1.0 - fr[1] };
                    for dx in 0..2 {
                        let ix = (fl[0] + dx).rem_euclid(shape[0] as i64) as usize;
                        let w = wy * if dx == 1 { fr[0] } else { 1.0 - fr[0] };
                        let p = ix * strides[0] + iy * strides[1] + iz * strides[2];
                        v[p] += w * sample;
                        s[p] = (s[p] as f64 + w * sweight) as f32;
                        iw[p] = (iw[p] as f64 + w) as f32;
                    }
                }
            }
        }
    }
    // centred result -> cut -> ifftshift: fft index i holds centred index (i + n/2) mod n
    let out = full_from_fn(shape, |u| {
        let p: usize = (0..3)
            .map(|a| {
                let n = shape[a] as i64;
                let centred = (u[a] + n / 2).rem_euclid(n) as usize;
                centred * strides[a]
            })
            .sum();
        if norm_at(u, shape, Some(1.0)) > 0.5 {
            return 0.0;
        }
        let rec = (v[p] as f32 * iw[p].min(1.0)) as f64;
        if s[p] > 1e-6 {
            (rec as f32 / s[p]) as f64
        } else {
            0.0
        }
    });
    Ok(out)
}

/// pytme's tilt-series wedge (`WedgeReconstructed` with angles): one line per tilt along the
/// tilt axis (value 1, or `cos(angle)` when `weighted`), gridded into the (tilt, opening) plane,
/// tiled along the rotation axis, cut to `|k| <= 0.5`; binarised (`> 0`) unless `weighted`.
pub fn step_wedge(
    shape: &[usize],
    angles: &[f64],
    opening: usize,
    tilt: usize,
    weighted: bool,
) -> Result<ArrayD<f64>> {
    if shape.len() != 3 {
        return Err(Error::invalid(
            "tilt angles",
            "a tilt-series wedge needs a 3-D box (use a two-angle range in 2-D)",
        ));
    }
    let rot = rot_axis_of(opening, tilt);
    let mut wshape = shape.to_vec();
    wshape[rot] = 1;
    let slice_shape: Vec<usize> = (0..3)
        .filter(|&a| a != opening)
        .map(|a| wshape[a])
        .collect();
    let lines: Vec<ArrayD<f64>> = angles
        .iter()
        .map(|&a| {
            let w = if weighted {
                (a.to_radians().cos() as f32) as f64
            } else {
                1.0
            };
            ArrayD::from_elem(IxDyn(&slice_shape), w)
        })
        .collect();
    let plane = reconstruct(&lines, None, &wshape, angles, opening, tilt)?;
    Ok(full_from_fn(shape, |u| {
        let mut pidx = [0usize; 3];
        for a in 0..3 {
            pidx[a] = if a == rot {
                0
            } else {
                u[a].rem_euclid(shape[a] as i64) as usize
            };
        }
        if norm_at(u, shape, Some(1.0)) > 0.5 {
            return 0.0;
        }
        let v = plane[IxDyn(&pidx)];
        if weighted {
            (v as f32) as f64
        } else if v > 0.0 {
            1.0
        } else {
            0.0
        }
    }))
}

/// Per-tilt exposure weights (pytme `Wedge` with `weight_type` relion or grigorieff), one
/// slice per tilt on the slice grid (the box without the opening axis, DC at 0), `k` in 1/Å
/// from the truncated `int(n * voxel)` grid. relion: `exp(-d k²) cos(angle)`; grigorieff:
/// `exp(d / (-2 (0.245 k^-1.665 + 2.81)))`. Cubic boxes only (pytme rotates the grid of a
/// non-cubic one).
pub fn exposure_slices(
    shape: &[usize],
    angles: &[f64],
    doses: &[f64],
    opening: usize,
    voxel: f64,
    grigorieff: bool,
) -> Result<Vec<ArrayD<f64>>> {
    if shape.iter().any(|&n| n != shape[0]) {
        return Err(Error::invalid(
            "tilt-weighting",
            "relion/grigorieff exposure weights need a cubic template box",
        ));
    }
    let sl: Vec<usize> = (0..shape.len())
        .filter(|&a| a != opening)
        .map(|a| shape[a])
        .collect();
    Ok(angles
        .iter()
        .zip(doses)
        .map(|(&a, &d)| {
            let d = d as f32 as f64;
            let c = (a as f32).to_radians().cos() as f64;
            full_from_fn(&sl, |u| {
                let k = norm_at(u, &sl, Some(voxel)) as f64;
                let v = if grigorieff {
                    let crit = 0.245 * k.powf(-1.665) + 2.81;
                    (d / (-2.0 * crit)).exp()
                } else {
                    (-d * k * k).exp() * c
                };
                (v as f32) as f64
            })
        })
        .collect())
}
