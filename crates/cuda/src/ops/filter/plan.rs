//! How the separable max filter runs on the device: the order of the axis passes and, per
//! pass, which of the three kernels of `filter.cu` computes it (`maxf1d` per output,
//! `maxf1d_tile` van Herk in shared-memory tiles, `maxf1d_vh` van Herk per line). All three
//! compute the CPU backend's van Herk value exactly, NaN and −0 included (see `filter.cu`);
//! the tests below run host models of the kernels, index map for index map, against
//! `Cpu::max_filter`.

/// Lines per shared-memory tile (`MM_VH_W` in `filter.cu`).
pub(crate) const TILE_LINES: usize = 16;

/// Elements per tile row in shared memory: one more than [`TILE_LINES`], so that a warp
/// walking down a contiguous line (stride 17 elements) hits 32 different banks.
const TILE_PITCH: usize = TILE_LINES + 1;

/// Shared memory a tile may use. A block is 256 threads and an SM (H100/H200: 228 KiB,
/// 2048 threads) holds 8 such blocks, so 24 KiB keeps it full; the tile then covers up to 180
/// extended rows of `f32` (90 of `f64`).
const TILE_SHARED_BYTES: usize = 24 * 1024;

/// Smallest window that runs van Herk rather than the per-output loop. The loop reads about
/// `size + 1` values per output through L1 (plus `size` more at the outputs that start a
/// segment); a tile costs about 8 memory operations per output whatever the size (one global
/// read into shared memory, two shared reads and writes in the scans, two shared reads and a
/// global write for the output) plus the halo (`size − 1` rows per `chunk`). The two meet near
/// 7; below it the loop also skips the tile's barriers.
pub(crate) const VAN_HERK_MIN: usize = 8;

/// The kernel of one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxPass {
    /// `maxf1d`: one thread per output, `O(size)` reads.
    Direct,
    /// `maxf1d_tile`: tiles of [`TILE_LINES`] lines × `chunk` outputs.
    Tiled {
        /// Outputs per tile along the axis.
        chunk: usize,
    },
    /// `maxf1d_vh`: one thread per line in global memory, for windows too large for a tile.
    Lines,
}

/// The kernel for a pass of window `size` (> 1) along an axis of length `len`, elements of
/// `elem` bytes: the loop below [`VAN_HERK_MIN`]; otherwise a tile as long as the budget allows,
/// when its outputs are at least as many as its halo rows (reads ≤ 2× the data) or it holds a
/// whole line; otherwise (windows beyond ~120 `f32` or ~60 `f64` samples) one thread per line.
pub(crate) fn max_pass_kind(len: usize, size: usize, elem: usize) -> MaxPass {
    if size < VAN_HERK_MIN {
        return MaxPass::Direct;
    }
    let rows = TILE_SHARED_BYTES / (2 * TILE_PITCH * elem);
    let halo = size - 1;
    if rows > halo {
        let chunk = (rows - halo).min(len);
        if chunk >= halo.min(len) {
            return MaxPass::Tiled { chunk };
        }
    }
    MaxPass::Lines
}

/// Dynamic shared memory of a `maxf1d_tile` launch: `x`/`h` and `g`, each `(chunk + size −
/// 1)` rows of [`TILE_PITCH`] elements.
pub(crate) fn tile_shared_bytes(chunk: usize, size: usize, elem: usize) -> usize {
    2 * (chunk + size - 1) * TILE_PITCH * elem
}

/// Number of tiles of a `maxf1d_tile` pass over `lines` lines of length `len`.
pub(crate) fn tile_count(lines: usize, len: usize, chunk: usize) -> usize {
    lines.div_ceil(TILE_LINES) * len.div_ceil(chunk)
}

/// The axes with a window > 1, in the order every backend filters them
/// ([`monomorph_core::max_filter_pass_order`]). The order matters only where a NaN is within
/// reach (the passes do not commute there).
pub(crate) fn pass_order(size: &[usize]) -> Vec<usize> {
    monomorph_core::max_filter_pass_order(size)
}

#[cfg(test)]
mod tests {
    //! Host models of the three kernels (same index arithmetic, threads run one after the
    //! other within a phase: they touch disjoint data between barriers) checked against the
    //! CPU backend, NaN, −0, every border mode, windows longer than the axis.

    use super::*;
    use monomorph_core::{BorderMode, Double, Filter, Memory};
    use monomorph_cpu::Cpu;

    /// `mm_border` of `common.cuh`.
    fn border(j: i64, n: i64, mode: i32) -> i64 {
        if (0..n).contains(&j) {
            return j;
        }
        match mode {
            0 => {
                if j < 0 {
                    0
                } else {
                    n - 1
                }
            }
            1 => {
                let m = j.rem_euclid(2 * n);
                if m >= n { 2 * n - 1 - m } else { m }
            }
            2 => {
                if n == 1 {
                    return 0;
                }
                let p = 2 * n - 2;
                let m = j.rem_euclid(p);
                if m >= n { p - m } else { m }
            }
            3 => j.rem_euclid(n),
            _ => -1,
        }
    }

    /// `mm_vmax`.
    fn vmax(a: f64, b: f64) -> f64 {
        if b > a { b } else { a }
    }

    /// One pass's geometry and border, as the kernels receive it.
    struct Pass<'a> {
        s: &'a [f64],
        len: i64,
        stride: i64,
        size: i64,
        mode: i32,
        cval: f64,
    }

    impl Pass<'_> {
        fn lines(&self) -> i64 {
            self.s.len() as i64 / self.len
        }
        fn base(&self, l: i64) -> i64 {
            (l / self.stride) * self.len * self.stride + l % self.stride
        }
        /// `mm_maxf_read`.
        fn read(&self, base: i64, j: i64) -> f64 {
            let jj = border(j, self.len, self.mode);
            if jj < 0 {
                self.cval
            } else {
                self.s[(base + jj * self.stride) as usize]
            }
        }
    }

    /// `mm_maxf1d`.
    fn direct_model(p: &Pass, d: &mut [f64]) {
        let (size, lo) = (p.size, p.size / 2);
        for i in 0..d.len() as i64 {
            let c = (i / p.stride) % p.len;
            let base = i - c * p.stride;
            let hend = (c / size + 1) * size - 1;
            let mut h = p.read(base, hend - lo);
            for e in (c..hend).rev() {
                h = vmax(p.read(base, e - lo), h);
            }
            let q = c + size - 1;
            let gs = (q / size) * size;
            let mut g = p.read(base, gs - lo);
            for e in gs + 1..=q {
                g = vmax(g, p.read(base, e - lo));
            }
            d[i as usize] = vmax(h, g);
        }
    }

    /// The (row, lane) pairs of `mm_tile_each`, in its order for one thread after another
    /// (which thread takes a pair does not matter: each pair is taken once and the pairs of a
    /// phase touch disjoint cells).
    fn tile_each(rows: i64, stride: i64, threads: i64) -> Vec<(i64, i64)> {
        let w_all = TILE_LINES as i64;
        let mut v = Vec::new();
        for tid in 0..threads {
            if stride == 1 {
                let (lane, warp, warps) = (tid & 31, tid >> 5, threads >> 5);
                let mut w = warp;
                while w < w_all {
                    let mut r = lane;
                    while r < rows {
                        v.push((r, w));
                        r += 32;
                    }
                    w += warps;
                }
            } else {
                let mut t = tid;
                while t < rows * w_all {
                    v.push((t / w_all, t % w_all));
                    t += threads;
                }
            }
        }
        let mut sorted = v.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), v.len(), "a pair taken twice");
        assert_eq!(v.len() as i64, rows * w_all, "a pair missed");
        v
    }

    /// `mm_maxf1d_tile`, tile by tile (the grid-stride order does not matter: tiles are
    /// disjoint), each phase's threads one after the other.
    fn tile_model(p: &Pass, d: &mut [f64], chunk: i64) {
        let (size, lo) = (p.size, p.size / 2);
        let w_all = TILE_LINES as i64;
        let pitch = TILE_PITCH as i64;
        let lines = p.lines();
        let rows_max = chunk + size - 1;
        let mut sx = vec![f64::NAN; (rows_max * pitch) as usize];
        let mut sg = vec![f64::NAN; (rows_max * pitch) as usize];
        let (groups, chunks) = ((lines + w_all - 1) / w_all, (p.len + chunk - 1) / chunk);
        assert_eq!(
            (groups * chunks) as usize,
            tile_count(lines as usize, p.len as usize, chunk as usize)
        );
        assert!(sx.len() * 16 <= tile_shared_bytes(chunk as usize, size as usize, 8));
        for tile in 0..groups * chunks {
            let l0 = (tile / chunks) * w_all;
            let c0 = (tile % chunks) * chunk;
            let nl = (lines - l0).min(w_all);
            let nc = (p.len - c0).min(chunk);
            let rows = nc + size - 1;
            // Poison the buffers: a read of a cell this tile did not write shows up as NaN
            // where the CPU has a number (the inputs of the NaN-free cases).
            sx.fill(f64::NAN);
            sg.fill(f64::NAN);
            for (r, w) in tile_each(rows, p.stride, 256) {
                let mut v = p.cval;
                if w < nl {
                    v = p.read(p.base(l0 + w), c0 + r - lo);
                }
                sx[(r * pitch + w) as usize] = v;
            }
            let s0 = c0 / size;
            let nseg = (c0 + rows - 1) / size - s0 + 1;
            let off = s0 * size - c0;
            for t in 0..nseg * w_all {
                let w = t % w_all;
                let start = off + (t / w_all) * size;
                let (a, b) = (start.max(0), (start + size).min(rows));
                let at = |r: i64| (r * pitch + w) as usize;
                let mut g = sx[at(a)];
                sg[at(a)] = g;
                for r in a + 1..b {
                    g = vmax(g, sx[at(r)]);
                    sg[at(r)] = g;
                }
                let mut h = sx[at(b - 1)];
                for r in (a..b - 1).rev() {
                    h = vmax(sx[at(r)], h);
                    sx[at(r)] = h;
                }
            }
            for (r, w) in tile_each(nc, p.stride, 256) {
                if w < nl {
                    let o = p.base(l0 + w) + (c0 + r) * p.stride;
                    let h = sx[(r * pitch + w) as usize];
                    let g = sg[((r + size - 1) * pitch + w) as usize];
                    d[o as usize] = vmax(h, g);
                }
            }
        }
    }

    /// `mm_maxf1d_vh`.
    fn lines_model(p: &Pass, d: &mut [f64]) {
        let (size, lo) = (p.size, p.size / 2);
        let ext = p.len + size - 1;
        for line in 0..p.lines() {
            let base = p.base(line);
            let mut g = p.cval;
            for e in 0..ext {
                let v = p.read(base, e - lo);
                g = if e % size == 0 { v } else { vmax(g, v) };
                if e >= size - 1 {
                    d[(base + (e - size + 1) * p.stride) as usize] = g;
                }
            }
            let mut h = p.cval;
            for e in (0..ext).rev() {
                let v = p.read(base, e - lo);
                h = if (e + 1) % size == 0 || e == ext - 1 {
                    v
                } else {
                    vmax(v, h)
                };
                if e < p.len {
                    let at = (base + e * p.stride) as usize;
                    d[at] = vmax(h, d[at]);
                }
            }
        }
    }

    /// Which model runs each pass.
    #[derive(Clone, Copy, Debug)]
    enum Force {
        Planned,
        Direct,
        Tiled(usize),
        Lines,
    }

    /// The device's `max_filter` on the host: [`pass_order`], then each pass by a model.
    fn device_model(
        x: &[f64],
        shape: &[usize],
        size: &[usize],
        mode: BorderMode,
        force: Force,
    ) -> Vec<f64> {
        let (code, cval) = crate::ops::border_code(mode);
        let mut cur = x.to_vec();
        for k in pass_order(size) {
            let stride: usize = shape[k + 1..].iter().product();
            let p = Pass {
                s: &cur,
                len: shape[k] as i64,
                stride: stride as i64,
                size: size[k] as i64,
                mode: code,
                cval,
            };
            let mut out = vec![f64::NAN; cur.len()];
            let kind = match force {
                Force::Planned => max_pass_kind(shape[k], size[k], 8),
                Force::Direct => MaxPass::Direct,
                Force::Tiled(c) => MaxPass::Tiled { chunk: c },
                Force::Lines => MaxPass::Lines,
            };
            match kind {
                MaxPass::Direct => direct_model(&p, &mut out),
                MaxPass::Tiled { chunk } => tile_model(&p, &mut out, chunk as i64),
                MaxPass::Lines => lines_model(&p, &mut out),
            }
            cur = out;
        }
        cur
    }

    const MODES: [BorderMode; 5] = [
        BorderMode::Nearest,
        BorderMode::Reflect,
        BorderMode::Mirror,
        BorderMode::Wrap,
        BorderMode::Constant(0.25),
    ];

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        /// Levels with ties, ±0 and (when `nan`) some NaN and ±∞.
        fn value(&mut self, nan: bool) -> f64 {
            match self.next() % 23 {
                0 if nan => f64::NAN,
                1 if nan => f64::INFINITY,
                2 if nan => f64::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                v => (v % 9) as f64 - 4.0,
            }
        }
    }

    /// Every model, planned or forced, equals `Cpu::max_filter` bit for bit (NaN payloads
    /// aside: NaN compares by `is_nan`) on odd shapes, every border mode, windows from 2 to
    /// beyond the axis, with and without NaN.
    #[test]
    fn kernel_models_equal_the_cpu_bit_for_bit() {
        let cpu = Cpu::<Double>::with_threads(1).expect("cpu");
        let mut rng = Rng(99);
        let shapes: [&[usize]; 6] = [
            &[1],
            &[23],
            &[9, 14],
            &[3, 1, 17],
            &[6, 7, 8],
            &[2, 5, 3, 4],
        ];
        let mut cases = 0;
        for shape in shapes {
            for nan in [false, true] {
                let n: usize = shape.iter().product();
                let x: Vec<f64> = (0..n).map(|_| rng.value(nan)).collect();
                let arr =
                    ndarray::ArrayD::from_shape_vec(shape.to_vec(), x.clone()).expect("shape");
                let src = cpu.upload(arr.view()).expect("upload");
                for mode in MODES {
                    for s in [2usize, 3, 5, 8, 9, 21, 40] {
                        let mut size: Vec<usize> = shape.iter().map(|_| s).collect();
                        if shape.len() > 1 {
                            size[0] = 3; // anisotropic
                        }
                        let mut dst = cpu.zeros::<f64>(shape).expect("zeros");
                        cpu.max_filter(&src, &size, mode, &mut dst).expect("cpu");
                        let want = cpu.download(&dst).expect("down");
                        let want: Vec<f64> = want.iter().copied().collect();
                        for force in [
                            Force::Planned,
                            Force::Direct,
                            Force::Tiled(1),
                            Force::Tiled(4),
                            Force::Tiled(13),
                            Force::Lines,
                        ] {
                            let got = device_model(&x, shape, &size, mode, force);
                            let same = got.iter().zip(&want).all(|(a, b)| {
                                (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
                            });
                            assert!(
                                same,
                                "{shape:?} size {size:?} {mode:?} {force:?} nan {nan}:\n got {:?}\nwant {:?}",
                                got, want
                            );
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert!(cases > 1000);
    }

    #[test]
    fn direct_for_small_windows_tiles_for_large_lines_beyond() {
        assert_eq!(max_pass_kind(512, 3, 4), MaxPass::Direct);
        assert_eq!(max_pass_kind(512, 7, 8), MaxPass::Direct);
        // 24 KiB / (2 · 17 · 4 B) = 180 rows of f32: 160 outputs and a halo of 20 at size 21.
        assert_eq!(max_pass_kind(512, 21, 4), MaxPass::Tiled { chunk: 160 });
        assert_eq!(max_pass_kind(512, 21, 8), MaxPass::Tiled { chunk: 70 });
        // A short axis: one tile per line, whatever the window.
        assert_eq!(max_pass_kind(5, 21, 8), MaxPass::Tiled { chunk: 5 });
        // The tile's outputs may not be fewer than its halo rows.
        assert_eq!(max_pass_kind(512, 91, 4), MaxPass::Tiled { chunk: 90 });
        assert_eq!(max_pass_kind(512, 92, 4), MaxPass::Lines);
        assert_eq!(max_pass_kind(512, 61, 8), MaxPass::Lines);
        for (len, size, elem) in [(512, 21, 4), (5, 21, 8), (512, 91, 4), (300, 45, 8)] {
            if let MaxPass::Tiled { chunk } = max_pass_kind(len, size, elem) {
                assert!(tile_shared_bytes(chunk, size, elem) <= 24 * 1024);
            }
        }
    }

    #[test]
    fn passes_follow_the_cpu_order() {
        assert_eq!(pass_order(&[3, 3, 3]), vec![2, 1, 0]);
        assert_eq!(pass_order(&[3, 1, 3, 3]), vec![3, 2, 0]);
        assert_eq!(pass_order(&[3, 1, 1]), vec![0]);
        assert_eq!(pass_order(&[3, 3]), vec![0, 1]);
        assert_eq!(pass_order(&[1, 2, 1]), vec![1]);
    }
}
