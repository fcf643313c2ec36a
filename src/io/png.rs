//! A 16-bit grayscale PNG of a 2-D map or of the central `z` slice of a 3-D map, with peaks
//! marked by square outlines.

use std::path::Path;

use ndarray::{ArrayD, Axis};

use super::io_err;
use crate::Result;

/// Renders `map` (2-D, or the central section along axis 0 of a 3-D map) to 16-bit grayscale
/// samples scaled from the slice's finite min (0) to max (65535), and draws a square outline of
/// half-width 3 (white, with a black inner ring) around every peak whose `z` lies within 2 of
/// the slice. Returns `(width, height, samples)`.
pub fn render_slice(
    map: &ArrayD<f32>,
    peaks: &[Vec<usize>],
) -> std::result::Result<(usize, usize, Vec<u16>), String> {
    let (slice, z0) = match map.ndim() {
        2 => (map.clone(), None),
        3 => {
            let z = map.shape()[0] / 2;
            (map.index_axis(Axis(0), z).to_owned().into_dyn(), Some(z))
        }
        d => return Err(format!("cannot draw a {d}-D map, expected 2-D or 3-D")),
    };
    let (h, w) = (slice.shape()[0], slice.shape()[1]);
    let (lo, hi) = slice
        .iter()
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let mut px: Vec<u16> = slice
        .iter()
        .map(|&v| {
            if v.is_finite() {
                (((v - lo) / span).clamp(0.0, 1.0) * 65535.0).round() as u16
            } else {
                0
            }
        })
        .collect();
    for p in peaks {
        let (y, x) = match (z0, p.as_slice()) {
            (None, [y, x]) => (*y as isize, *x as isize),
            (Some(z0), [z, y, x]) if z.abs_diff(z0) <= 2 => (*y as isize, *x as isize),
            _ => continue,
        };
        for (r, val) in [(3isize, u16::MAX), (2, 0)] {
            for d in -r..=r {
                for (yy, xx) in [
                    (y - r, x + d),
                    (y + r, x + d),
                    (y + d, x - r),
                    (y + d, x + r),
                ] {
                    if yy >= 0 && xx >= 0 && (yy as usize) < h && (xx as usize) < w {
                        px[yy as usize * w + xx as usize] = val;
                    }
                }
            }
        }
    }
    Ok((w, h, px))
}

/// Writes [`render_slice`] of `map` to a PNG file.
pub fn write_png(path: impl AsRef<Path>, map: &ArrayD<f32>, peaks: &[Vec<usize>]) -> Result<()> {
    let path = path.as_ref();
    let (w, h, px) = render_slice(map, peaks).map_err(|m| io_err(path, m))?;
    let file =
        std::fs::File::create(path).map_err(|e| io_err(path, format!("cannot write: {e}")))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Sixteen);
    let mut writer = enc
        .write_header()
        .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))?;
    let bytes: Vec<u8> = px.iter().flat_map(|v| v.to_be_bytes()).collect();
    writer
        .write_image_data(&bytes)
        .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))?;
    writer
        .finish()
        .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))
}
