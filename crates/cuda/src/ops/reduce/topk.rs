//! The host side of `top_k` for `k > 1` on the device: a radix select over a composite key
//! (see `reduce.cu`), driven by [`RadixSelect`] from the 256-bin histograms of the kernel
//! `topk_hist`, then one compaction (`topk_select`) of the elements at or above the selected
//! prefix. Only the histograms (2 KiB per pass) and at most `k + SLACK` elements (or every
//! non-NaN element when `k` is at least their number) cross to the host.
//!
//! The composite key makes every element distinct: the value's order-preserving key (−0 as
//! +0, NaN excluded), then `n − 1 − index`. The `k`-th largest composite key is therefore
//! unique, and the elements at or above it are exactly the CPU's `k` first by (value
//! descending, index ascending); a selection that stops early on a shorter prefix takes a
//! superset, which the host sort and truncation reduce to the same list.

/// Candidates a selection may hand to the host beyond `k` before another pass narrows them.
pub(crate) const SLACK: u64 = 4096;

/// Bits of the index part of the composite key for `n` elements: enough for `n − 1`, whole
/// digits, at least one.
pub(crate) fn index_bits(n: usize) -> u32 {
    let need = usize::BITS - (n.saturating_sub(1)).leading_zeros();
    need.div_ceil(8).max(1) * 8
}

/// The prefix a pass works on (the kernels' `known`, `vpre`, `ipre`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prefix {
    /// Top bits of the composite key fixed so far (a multiple of 8).
    pub known: u32,
    /// The fixed bits of the value key (all of them once `known >= vbits`).
    pub vpre: u64,
    /// The fixed bits of the index key (when `known > vbits`).
    pub ipre: u64,
}

/// The state of one radix selection of the `k` largest of `n` elements.
#[derive(Debug, Clone)]
pub(crate) struct RadixSelect {
    k: u64,
    vbits: u32,
    ibits: u32,
    prefix: Prefix,
    /// Elements known to rank above the current prefix's bucket.
    above: u64,
    /// Elements the compaction at the current prefix takes (when final).
    candidates: u64,
    done: bool,
}

impl RadixSelect {
    /// A selection of the `k` (≥ 1) largest of `n` elements whose value key has `vbits` (32 or
    /// 64) bits.
    pub(crate) fn new(k: usize, n: usize, vbits: u32) -> Self {
        RadixSelect {
            k: k as u64,
            vbits,
            ibits: index_bits(n),
            prefix: Prefix {
                known: 0,
                vpre: 0,
                ipre: 0,
            },
            above: 0,
            candidates: 0,
            done: false,
        }
    }

    /// Bits of the value key and of the index key.
    pub(crate) fn widths(&self) -> (u32, u32) {
        (self.vbits, self.ibits)
    }

    /// The prefix of the next histogram pass or, once [`Self::done`], of the compaction.
    pub(crate) fn prefix(&self) -> Prefix {
        self.prefix
    }

    /// Whether the prefix is final.
    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// How many elements the compaction at the final prefix takes.
    pub(crate) fn candidates(&self) -> u64 {
        self.candidates
    }

    /// Takes the histogram of the pass at [`Self::prefix`] and moves to the bucket holding the
    /// `k`-th largest; final when at most `k + SLACK` elements are at or above it, when the key
    /// is complete (one element in the bucket), or, on the first pass, when there are no more
    /// than `k` non-NaN elements (all of them are taken).
    pub(crate) fn feed(&mut self, hist: &[u64; 256]) {
        assert!(!self.done, "radix select fed after its last pass");
        if self.prefix.known == 0 {
            let total: u64 = hist.iter().sum();
            if total <= self.k {
                self.candidates = total;
                self.done = true;
                return;
            }
        }
        let mut digit = 0usize;
        for b in (0..256).rev() {
            if self.above + hist[b] >= self.k {
                digit = b;
                break;
            }
            self.above += hist[b];
        }
        let p = &mut self.prefix;
        if p.known < self.vbits {
            p.vpre = (p.vpre << 8) | digit as u64;
        } else {
            p.ipre = (p.ipre << 8) | digit as u64;
        }
        p.known += 8;
        self.candidates = self.above + hist[digit];
        self.done = self.candidates <= self.k + SLACK || p.known == self.vbits + self.ibits;
    }
}

#[cfg(test)]
pub(crate) mod model {
    //! The kernels of `reduce.cu` on the host, as written there.

    use super::Prefix;

    /// `mm_key` of an `f32`.
    pub(crate) fn key_f32(v: f32) -> u64 {
        let b = (if v == 0.0 { 0.0f32 } else { v }).to_bits();
        (if b & 0x8000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000
        }) as u64
    }

    /// `mm_key` of an `f64`.
    pub(crate) fn key_f64(v: f64) -> u64 {
        let b = (if v == 0.0 { 0.0f64 } else { v }).to_bits();
        if b >> 63 != 0 { !b } else { b | (1 << 63) }
    }

    /// `mm_key` of an `i32` / `i64`.
    pub(crate) fn key_i32(v: i32) -> u64 {
        ((v as u32) ^ 0x8000_0000) as u64
    }
    pub(crate) fn key_i64(v: i64) -> u64 {
        (v as u64) ^ (1 << 63)
    }

    /// `mm_topk_match`.
    pub(crate) fn matches(vk: u64, ik: u64, w: (u32, u32), p: Prefix, at_least: bool) -> bool {
        let (vbits, ibits) = w;
        if p.known == 0 {
            return true;
        }
        if p.known <= vbits {
            let top = vk >> (vbits - p.known);
            return if at_least {
                top >= p.vpre
            } else {
                top == p.vpre
            };
        }
        let itop = ik >> (ibits - (p.known - vbits));
        if at_least {
            vk > p.vpre || (vk == p.vpre && itop >= p.ipre)
        } else {
            vk == p.vpre && itop == p.ipre
        }
    }

    /// `mm_topk_hist` over keys (`None` for NaN).
    pub(crate) fn hist(keys: &[Option<u64>], w: (u32, u32), p: Prefix) -> [u64; 256] {
        let (vbits, ibits) = w;
        let n = keys.len() as u64;
        let mut h = [0u64; 256];
        for (i, k) in keys.iter().enumerate() {
            let Some(vk) = *k else { continue };
            let ik = n - 1 - i as u64;
            if !matches(vk, ik, w, p, false) {
                continue;
            }
            let digit = if p.known < vbits {
                (vk >> (vbits - p.known - 8)) & 0xFF
            } else {
                (ik >> (ibits - (p.known - vbits) - 8)) & 0xFF
            };
            h[digit as usize] += 1;
        }
        h
    }

    /// `mm_topk_select`: the indices taken (in index order; the kernel's order is arbitrary).
    pub(crate) fn select(keys: &[Option<u64>], w: (u32, u32), p: Prefix) -> Vec<usize> {
        let n = keys.len() as u64;
        (0..keys.len())
            .filter(|&i| keys[i].is_some_and(|vk| matches(vk, n - 1 - i as u64, w, p, true)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::model::*;
    use super::*;
    use monomorph_core::{Double, Memory, Real, Reduce};
    use monomorph_cpu::Cpu;

    /// The whole device algorithm on the host: passes until final, compaction, host sort
    /// (as `Reduce::top_k` does), and the number of passes.
    fn run<T: Real>(
        vals: &[T],
        keys: &[Option<u64>],
        k: usize,
        vbits: u32,
    ) -> (Vec<(usize, T)>, usize) {
        let mut rs = RadixSelect::new(k, vals.len(), vbits);
        let mut passes = 0;
        while !rs.done() {
            rs.feed(&hist(keys, rs.widths(), rs.prefix()));
            passes += 1;
            assert!(passes <= 32, "radix select does not end");
        }
        let idx = select(keys, rs.widths(), rs.prefix());
        assert_eq!(idx.len() as u64, rs.candidates(), "candidates counted");
        assert!(
            idx.len() as u64 <= k as u64 + SLACK,
            "at most k + SLACK cross"
        );
        let mut out: Vec<(usize, T)> = idx.into_iter().map(|i| (i, vals[i])).collect();
        super::super::sort_top(&mut out, k);
        (out, passes)
    }

    fn cpu_top<T: Real>(vals: &[T], k: usize) -> Vec<(usize, T)> {
        let cpu = Cpu::<Double>::with_threads(1).expect("cpu");
        let a = ndarray::ArrayD::from_shape_vec(vec![vals.len()], vals.to_vec()).expect("shape");
        cpu.top_k(&cpu.upload(a.view()).expect("up"), k)
            .expect("top_k")
    }

    fn same<T: Real>(a: &[(usize, T)], b: &[(usize, T)]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.0 == y.0 && bytemuck::bytes_of(&x.1) == bytemuck::bytes_of(&y.1))
    }

    fn check<T: Real>(what: &str, vals: &[T], key: impl Fn(T) -> Option<u64>, vbits: u32) {
        let keys: Vec<Option<u64>> = vals.iter().map(|&v| key(v)).collect();
        let n = vals.len();
        for k in [2usize, 3, 7, 64, 1000, n.saturating_sub(1).max(2), n, n + 5] {
            let (got, _) = run(vals, &keys, k, vbits);
            let want = cpu_top(vals, k);
            assert!(same(&got, &want), "{what} k {k}: {got:?}\nvs CPU {want:?}");
        }
    }

    fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 33
        }
    }

    fn f64_key(v: f64) -> Option<u64> {
        (!v.is_nan()).then(|| key_f64(v))
    }
    fn f32_key(v: f32) -> Option<u64> {
        (!v.is_nan()).then(|| key_f32(v))
    }

    #[test]
    fn keys_preserve_order_and_merge_zeros() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -2.0,
            -1e-310,
            -0.0,
            0.0,
            1e-310,
            3.0,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(key_f64(w[0]) <= key_f64(w[1]), "{w:?}");
            assert!(key_f32(w[0] as f32) <= key_f32(w[1] as f32), "{w:?}");
        }
        assert_eq!(key_f64(-0.0), key_f64(0.0));
        assert_eq!(key_f32(-0.0), key_f32(0.0));
        assert!(
            key_i32(i32::MIN) < key_i32(-1)
                && key_i32(-1) < key_i32(0)
                && key_i32(0) < key_i32(i32::MAX)
        );
        assert!(key_i64(i64::MIN) < key_i64(-1) && key_i64(0) < key_i64(i64::MAX));
        assert_eq!(index_bits(1), 8);
        assert_eq!(index_bits(256), 8);
        assert_eq!(index_bits(257), 16);
        assert_eq!(index_bits(1 << 27), 32);
    }

    #[test]
    fn selection_equals_the_cpu_on_ties_nan_zeros_and_infinities() {
        let mut r = lcg(5);
        for n in [1usize, 2, 9, 300, 5000] {
            let v: Vec<f64> = (0..n)
                .map(|_| match r() % 13 {
                    0 => f64::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    3 => f64::INFINITY,
                    4 => f64::NEG_INFINITY,
                    x => (x % 5) as f64 - 2.5,
                })
                .collect();
            check(&format!("f64 levels n {n}"), &v, f64_key, 64);
            let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            check(&format!("f32 levels n {n}"), &v32, f32_key, 32);
            let distinct: Vec<f64> = (0..n).map(|_| (r() as f64) * 1e-3 - 1e6).collect();
            check(&format!("f64 distinct n {n}"), &distinct, f64_key, 64);
            let ints: Vec<i32> = (0..n)
                .map(|_| match r() % 50 {
                    0 => i32::MIN,
                    1 => i32::MAX,
                    x => (x % 7) as i32 - 3,
                })
                .collect();
            check(&format!("i32 n {n}"), &ints, |v| Some(key_i32(v)), 32);
            let longs: Vec<i64> = (0..n)
                .map(|_| ((r() % 11) as i64 - 5) * (1 << 40))
                .collect();
            check(&format!("i64 n {n}"), &longs, |v| Some(key_i64(v)), 64);
        }
    }

    #[test]
    fn all_equal_all_nan_and_no_more_than_k() {
        for n in [3usize, 700, 70_000] {
            // All equal: the value digits never split, the index digits pick the first k.
            let eq = vec![1.5f32; n];
            check(&format!("equal n {n}"), &eq, f32_key, 32);
            let keys: Vec<Option<u64>> = eq.iter().map(|&v| f32_key(v)).collect();
            let (got, _) = run(&eq, &keys, 10, 32);
            assert_eq!(
                got.iter().map(|p| p.0).collect::<Vec<_>>(),
                (0..10.min(n)).collect::<Vec<_>>()
            );
            let nan = vec![f64::NAN; n];
            check(&format!("NaN n {n}"), &nan, f64_key, 64);
            let keys: Vec<Option<u64>> = nan.iter().map(|&v| f64_key(v)).collect();
            assert!(run(&nan, &keys, 5, 64).0.is_empty());
        }
    }

    /// The selection narrows quickly on spread values: at most k + SLACK cross, in few passes.
    #[test]
    fn few_passes_on_spread_values() {
        let mut r = lcg(8);
        let v: Vec<f32> = (0..200_000)
            .map(|_| (r() % 1_000_000) as f32 / 1e6)
            .collect();
        let keys: Vec<Option<u64>> = v.iter().map(|&x| f32_key(x)).collect();
        let (got, passes) = run(&v, &keys, 1000, 32);
        assert_eq!(got.len(), 1000);
        assert!(passes <= 4, "{passes} passes");
        assert!(same(&got, &cpu_top(&v, 1000)));
    }
}
