//! The one place that chooses the CPU backend's SIMD path.
//!
//! Every kernel with a vector path (the FFT's twiddle passes, the transposes, the Van Herk max
//! filter, the fused score update) asks [`level`] which vector unit to use, instead of probing
//! CPU features itself. The levels nest: each implies every lower one, so a kernel compiled
//! for a lower level may run wherever a higher one was detected.
//!
//! On every path the arithmetic is the same (no implicit contraction into FMA), so results do
//! not depend on the level; only the vector width does.

use std::sync::OnceLock;

/// The widest vector unit of this CPU that the backend's kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// No AVX (or not x86-64): the baseline code.
    Baseline,
    /// AVX (256-bit float vectors).
    Avx,
    /// AVX2 and FMA (and AVX).
    Avx2Fma,
    /// AVX-512F (and AVX2, FMA, AVX).
    Avx512,
}

/// The level of this CPU, detected once (runtime feature detection).
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(detect)
}

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if !has!("avx") {
            return Level::Baseline;
        }
        if !(has!("avx2") && has!("fma")) {
            return Level::Avx;
        }
        if !has!("avx512f") {
            return Level::Avx2Fma;
        }
        Level::Avx512
    }
    #[cfg(not(target_arch = "x86_64"))]
    Level::Baseline
}

/// `true` when the CPU has AVX (every level above [`Level::Baseline`]).
#[inline]
pub(crate) fn has_avx() -> bool {
    level() >= Level::Avx
}

/// `true` when the CPU has AVX2 and FMA (and AVX).
#[inline]
pub(crate) fn has_avx2_fma() -> bool {
    level() >= Level::Avx2Fma
}

/// `true` when the CPU has AVX-512F (and AVX2, FMA, AVX).
#[inline]
pub(crate) fn has_avx512() -> bool {
    level() >= Level::Avx512
}

/// Defines `fn $name` running the always-inlined kernel `$body` compiled for the widest vector
/// unit the CPU has ([`level`]): AVX-512F, else AVX2+FMA, else AVX, else the baseline. The
/// arithmetic, hence the result, is the same on every path (no contraction into FMA happens
/// implicitly); only the vector width changes.
macro_rules! widest_simd {
    ($(#[$m:meta])* fn $name:ident<$($g:ident: $bound:ident),*>($($a:ident: $t:ty),* $(,)?)
        -> $r:ty = $body:path;) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        fn $name<$($g: $bound),*>($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx512<$($g: $bound),*>($($a: $t),*) -> $r {
                    $body($($a),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2<$($g: $bound),*>($($a: $t),*) -> $r {
                    $body($($a),*)
                }
                #[target_feature(enable = "avx")]
                #[allow(clippy::too_many_arguments)]
                fn avx<$($g: $bound),*>($($a: $t),*) -> $r {
                    $body($($a),*)
                }
                match $crate::simd::level() {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (the level says so).
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($a),*) },
                    // SAFETY: the CPU has AVX2 and FMA (the level says so).
                    $crate::simd::Level::Avx2Fma => return unsafe { avx2($($a),*) },
                    // SAFETY: the CPU has AVX (the level says so).
                    $crate::simd::Level::Avx => return unsafe { avx($($a),*) },
                    $crate::simd::Level::Baseline => {}
                }
            }
            $body($($a),*)
        }
    };
}
pub(crate) use widest_simd;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_nest_and_match_the_features() {
        let l = level();
        assert_eq!(l, detect(), "cached once, the same as a fresh detection");
        assert!(!has_avx512() || has_avx2_fma());
        assert!(!has_avx2_fma() || has_avx());
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            assert_eq!(has_avx(), has!("avx"));
            if has_avx512() {
                assert!(has!("avx512f") && has!("avx2") && has!("fma"));
            }
        }
    }
}
