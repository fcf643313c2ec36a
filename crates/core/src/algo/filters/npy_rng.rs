//! numpy's `default_rng(seed).choice(n, k, replace=False)`, so that the whitening picks the
//! same patches as pytme when a target has more than its patch budget: `SeedSequence` →
//! `PCG64` (128-bit LCG, XSL-RR output) → Floyd's sampling (or a tail shuffle for large
//! populations) with Lemire's bounded integers, as `numpy/random/_generator.pyx` does.

/// numpy's `SeedSequence(seed).generate_state(4, uint64)` for a seed below 2^32.
fn seed_sequence_state(seed: u32) -> [u64; 4] {
    const INIT_A: u32 = 0x43b0_d7e5;
    const MULT_A: u32 = 0x931e_8875;
    const INIT_B: u32 = 0x8b51_f9dd;
    const MULT_B: u32 = 0x58f3_8ded;
    const MIX_MULT_L: u32 = 0xca01_f9dd;
    const MIX_MULT_R: u32 = 0x4973_f715;
    const XSHIFT: u32 = 16;
    let mut hash_const = INIT_A;
    let hashmix = |value: u32, hc: &mut u32| {
        let mut v = value ^ *hc;
        *hc = hc.wrapping_mul(MULT_A);
        v = v.wrapping_mul(*hc);
        v ^ (v >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L
            .wrapping_mul(x)
            .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let entropy = [seed];
    let mut pool = [0u32; 4];
    for (i, slot) in pool.iter_mut().enumerate() {
        let e = entropy.get(i).copied().unwrap_or(0);
        *slot = hashmix(e, &mut hash_const);
    }
    for src in 0..4 {
        for dst in 0..4 {
            if src != dst {
                let h = hashmix(pool[src], &mut hash_const);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    let mut words = [0u32; 8];
    let mut hc = INIT_B;
    for (i, w) in words.iter_mut().enumerate() {
        let mut v = pool[i % 4] ^ hc;
        hc = hc.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hc);
        *w = v ^ (v >> XSHIFT);
    }
    std::array::from_fn(|i| words[2 * i] as u64 | ((words[2 * i + 1] as u64) << 32))
}

/// numpy's PCG64 bit generator (with its 32-bit output buffer).
struct Pcg64 {
    state: u128,
    inc: u128,
    buffered: Option<u32>,
}

const PCG_MULT: u128 = (2549297995355413924u128 << 64) + 4865540595714422341u128;

impl Pcg64 {
    fn new(seed: u32) -> Self {
        let v = seed_sequence_state(seed);
        let initstate = ((v[0] as u128) << 64) | v[1] as u128;
        let initseq = ((v[2] as u128) << 64) | v[3] as u128;
        let mut g = Pcg64 {
            state: 0,
            inc: (initseq << 1) | 1,
            buffered: None,
        };
        g.step();
        g.state = g.state.wrapping_add(initstate);
        g.step();
        g
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    fn next_u64(&mut self) -> u64 {
        self.step();
        let hi = (self.state >> 64) as u64;
        let lo = self.state as u64;
        let rot = (self.state >> 122) as u32;
        (hi ^ lo).rotate_right(rot)
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(v) = self.buffered.take() {
            return v;
        }
        let n = self.next_u64();
        self.buffered = Some((n >> 32) as u32);
        n as u32
    }

    /// A uniform integer in `[0, rng]` (numpy `random_bounded_uint64`, Lemire, unmasked).
    fn bounded(&mut self, rng: u64) -> u64 {
        if rng == 0 {
            return 0;
        }
        if rng <= 0xFFFF_FFFF {
            if rng == 0xFFFF_FFFF {
                return self.next_u32() as u64;
            }
            let excl = (rng as u32) + 1;
            let mut m = self.next_u32() as u64 * excl as u64;
            let mut left = m as u32;
            if left < excl {
                let threshold = excl.wrapping_neg() % excl;
                while left < threshold {
                    m = self.next_u32() as u64 * excl as u64;
                    left = m as u32;
                }
            }
            return m >> 32;
        }
        if rng == u64::MAX {
            return self.next_u64();
        }
        let excl = rng + 1;
        let mut m = self.next_u64() as u128 * excl as u128;
        let mut left = m as u64;
        if left < excl {
            let threshold = excl.wrapping_neg() % excl;
            while left < threshold {
                m = self.next_u64() as u128 * excl as u128;
                left = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

/// `default_rng(seed).standard_normal(n, dtype=np.float32)`, bit for bit: numpy's float32
/// ziggurat (`random_standard_normal_f`) over PCG64's buffered 32-bit outputs, with its
/// tables ([`super::npy_ziggurat`]), its tail (`log1pf`) and its rejection test against
/// `exp` in double precision.
pub fn standard_normal_f32(seed: u32, n: usize) -> Vec<f32> {
    use super::npy_ziggurat::{FI_FLOAT, KI_FLOAT, WI_FLOAT};
    const R: f32 = 3.654_152_9; // ziggurat_nor_r_f
    const INV_R: f32 = 0.273_661_24; // ziggurat_nor_inv_r_f
    let mut g = Pcg64::new(seed);
    let next_float = |g: &mut Pcg64| (g.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0);
    let (wi, fi) = (
        |i: usize| f32::from_bits(WI_FLOAT[i]),
        |i: usize| f32::from_bits(FI_FLOAT[i]),
    );
    (0..n)
        .map(|_| {
            loop {
                let r = g.next_u32();
                let idx = (r & 0xff) as usize;
                let sign = (r >> 8) & 1;
                let rabs = (r >> 9) & 0x007f_ffff;
                let mut x = rabs as f32 * wi(idx);
                if sign == 1 {
                    x = -x;
                }
                if rabs < KI_FLOAT[idx] {
                    break x;
                }
                if idx == 0 {
                    break loop {
                        let xx = -INV_R * (-next_float(&mut g)).ln_1p();
                        let yy = -(-next_float(&mut g)).ln_1p();
                        if yy + yy > xx * xx {
                            break if (rabs >> 8) & 1 == 1 {
                                -(R + xx)
                            } else {
                                R + xx
                            };
                        }
                    };
                }
                let u = next_float(&mut g);
                if (((fi(idx - 1) - fi(idx)) * u + fi(idx)) as f64)
                    < (-0.5 * x as f64 * x as f64).exp()
                {
                    break x;
                }
            }
        })
        .collect()
}

/// `np.sort(default_rng(seed).choice(n, k, replace=False))` (`k <= n`).
pub fn choose_sorted(seed: u32, n: usize, k: usize) -> Vec<usize> {
    let mut g = Pcg64::new(seed);
    let mut out: Vec<usize> = if n > 10000 && k > n / 50 {
        // tail shuffle of arange(n): numpy _shuffle_int(n, max(n - k, 1)), Lemire draws
        let mut idx: Vec<usize> = (0..n).collect();
        let first = (n - k).max(1);
        let mut i = n - 1;
        while i >= first {
            let j = g.bounded(i as u64) as usize;
            idx.swap(i, j);
            i -= 1;
        }
        idx[n - k..].to_vec()
    } else {
        // Floyd's algorithm
        let mut set = std::collections::HashSet::with_capacity(k);
        let mut v = Vec::with_capacity(k);
        for j in n - k..n {
            let t = g.bounded(j as u64) as usize;
            let pick = if set.contains(&t) { j } else { t };
            set.insert(pick);
            v.push(pick);
        }
        v
    };
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcg64_of_seed_42_is_numpys() {
        // np.random.default_rng(42).bit_generator.random_raw(3)
        let mut g = Pcg64::new(42);
        let raw: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(
            raw,
            [
                14276969152011380360,
                8095878257575067585,
                15838336090824644132
            ]
        );
    }

    #[test]
    fn choice_without_replacement_is_numpys() {
        // np.sort(np.random.default_rng(42).choice(n, k, replace=False))[:10]
        let floyd = choose_sorted(42, 1350, 1024);
        assert_eq!(floyd[..10], [3, 5, 6, 8, 10, 11, 13, 14, 15, 16]);
        assert_eq!(floyd[1019..], [1345, 1346, 1347, 1348, 1349]);
        let small = choose_sorted(42, 5000, 64);
        assert_eq!(
            small[..10],
            [218, 317, 338, 424, 440, 457, 465, 634, 770, 822]
        );
        let tail = choose_sorted(42, 20000, 1024);
        assert_eq!(tail[..10], [83, 94, 104, 127, 137, 146, 151, 195, 232, 236]);
    }
}
