//! A small RGB raster for line plots (histograms, fitted curves, thresholds) written as an
//! 8-bit PNG: lines, rectangles, dashed lines and numbers in a 3×5 pixel font. No fonts, no
//! plotting dependency.

use std::path::Path;

use super::io_err;
use crate::Result;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// An RGB image, row-major, origin at the top left.
#[derive(Debug, Clone)]
pub struct Canvas {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    px: Vec<u8>,
}

/// The 3×5 glyphs of `0-9 . - e +`, one row of 3 bits per entry (top first).
fn glyph(c: char) -> Option<[u8; 5]> {
    Some(match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '-' => [0, 0, 7, 0, 0],
        '+' => [0, 2, 7, 2, 0],
        'e' => [0, 7, 7, 4, 7],
        ' ' => [0, 0, 0, 0, 0],
        _ => return None,
    })
}

impl Canvas {
    /// A canvas filled with `bg`.
    pub fn new(width: usize, height: usize, bg: Rgb) -> Self {
        let mut px = Vec::with_capacity(width * height * 3);
        for _ in 0..width * height {
            px.extend_from_slice(&bg);
        }
        Canvas { width, height, px }
    }

    /// Sets one pixel (outside the canvas: nothing).
    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let i = (y as usize * self.width + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    /// The colour of a pixel.
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        let i = (y * self.width + x) * 3;
        [self.px[i], self.px[i + 1], self.px[i + 2]]
    }

    /// A filled rectangle with corners `(x0, y0)`, `(x1, y1)` (inclusive, any order).
    pub fn fill_rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0.min(y1)..=y0.max(y1) {
            for x in x0.min(x1)..=x0.max(x1) {
                self.set(x, y, c);
            }
        }
    }

    /// A line `width` pixels thick from `(x0, y0)` to `(x1, y1)`; with `dash = Some((on,
    /// off))` a dashed one.
    #[allow(clippy::too_many_arguments)]
    pub fn line(
        &mut self,
        x0: f64,
        y0: f64,
        x1: f64,
        y1: f64,
        width: i64,
        c: Rgb,
        dash: Option<(usize, usize)>,
    ) {
        if ![x0, y0, x1, y1].iter().all(|v| v.is_finite()) {
            return;
        }
        let n = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
        let half = width / 2;
        for k in 0..=n {
            if let Some((on, off)) = dash
                && k % (on + off) >= on
            {
                continue;
            }
            let t = k as f64 / n as f64;
            let x = (x0 + t * (x1 - x0)).round() as i64;
            let y = (y0 + t * (y1 - y0)).round() as i64;
            self.fill_rect(
                x - half,
                y - half,
                x - half + width - 1,
                y - half + width - 1,
                c,
            );
        }
    }

    /// Text of digits, `.`, `-`, `+`, `e` and spaces in the 3×5 font scaled by `scale`, its
    /// top left at `(x, y)`; other characters are skipped. Returns the width drawn.
    pub fn text(&mut self, x: i64, y: i64, s: &str, scale: i64, c: Rgb) -> i64 {
        let mut cx = x;
        for ch in s.chars() {
            let Some(g) = glyph(ch) else { continue };
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        let px = cx + col * scale;
                        let py = y + row as i64 * scale;
                        self.fill_rect(px, py, px + scale - 1, py + scale - 1, c);
                    }
                }
            }
            cx += 4 * scale;
        }
        cx - x
    }

    /// Writes the canvas as an 8-bit RGB PNG.
    pub fn write_png(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let file =
            std::fs::File::create(path).map_err(|e| io_err(path, format!("cannot write: {e}")))?;
        let mut enc = png::Encoder::new(
            std::io::BufWriter::new(file),
            self.width as u32,
            self.height as u32,
        );
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc
            .write_header()
            .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))?;
        w.write_image_data(&self.px)
            .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))?;
        w.finish()
            .map_err(|e| io_err(path, format!("cannot write PNG: {e}")))
    }
}

/// A tick label: up to 4 significant digits, without trailing zeros.
pub fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if (1e-3..1e5).contains(&a) {
        let decimals = (3 - a.log10().floor() as i64).clamp(0, 6) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{v:.2e}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// About `n` round tick positions covering `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(hi > lo) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut k = 0.0;
    while first + k * step <= hi + 1e-9 * step {
        out.push(first + k * step);
        k += 1.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_ticks() {
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(20.0), "20");
        assert_eq!(tick_label(0.1905), "0.1905");
        let t = ticks(0.16, 0.34, 5);
        assert_eq!(t.len(), 3);
        assert!((t[0] - 0.2).abs() < 1e-12 && (t[2] - 0.3).abs() < 1e-12);
        let mut c = Canvas::new(20, 10, [255; 3]);
        assert!(c.text(0, 0, "1.5", 1, [0; 3]) > 0);
        assert_eq!(c.get(1, 0), [0; 3]);
        c.line(0.0, 9.0, 19.0, 9.0, 1, [1, 2, 3], None);
        assert_eq!(c.get(10, 9), [1, 2, 3]);
    }
}
