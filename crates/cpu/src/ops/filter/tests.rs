use super::*;
use monomorph_core::testing::reference;
use monomorph_core::{Double, Single};
use ndarray::IxDyn;

const MODES: [BorderMode; 6] = [
    BorderMode::Nearest,
    BorderMode::Reflect,
    BorderMode::Mirror,
    BorderMode::Wrap,
    BorderMode::Constant(0.25),
    BorderMode::Constant(-3.0),
];

/// Pseudo-random levels (many ties) in `0..levels`.
fn levels(shape: &[usize], seed: usize, levels: usize) -> ArrayD<f64> {
    let mut x = seed as u64 * 0x9E37_79B9_7F4A_7C15 + 1;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % levels as u64) as f64
    })
}

/// Every path of `max_pass` (contiguous lines transposed in blocks with a partial last
/// block, wide blocks with a partial width, in place on later passes, the interleaved
/// path for small strides, the plane-by-plane path) against brute force, for all modes,
/// odd and even sizes, windows longer than the axis, in f32, f64 and i32.
#[test]
fn max_filter_paths_match_brute_force() {
    let shapes: [&[usize]; 8] = [
        &[1],
        &[300],
        &[3, 45],
        &[20, 40],
        &[17, 290],
        &[5, 9, 70],
        &[5, 40, 33],
        &[2, 3, 33, 20],
    ];
    // windows longer than the axis only on the small shapes (brute force is slow)
    let sizes: [usize; 6] = [2, 3, 4, 7, 12, 50];
    for (si, shape) in shapes.iter().enumerate() {
        let a = levels(shape, si + 1, 17);
        let nsizes = if a.len() <= 1000 { 6 } else { 5 };
        for k in 0..nsizes {
            for (m, &mode) in MODES.iter().enumerate() {
                // per-axis sizes: rotate through the list so axes differ
                let size: Vec<usize> = (0..shape.len())
                    .map(|ax| sizes[(k + ax + m) % nsizes])
                    .collect();
                let e = reference::max_filter(&a, &size, mode);
                let what = format!("{shape:?} size {size:?} {mode:?}");

                let a32 = a.mapv(|v| v as f32);
                let mut o32 = ArrayD::<f32>::zeros(IxDyn(shape));
                Cpu::<Single>::new()
                    .max_filter(&a32, &size, mode, &mut o32)
                    .expect("f32");
                assert_eq!(o32.mapv(f64::from), e, "f32 {what}");

                let mut o64 = ArrayD::<f64>::zeros(IxDyn(shape));
                Cpu::<Double>::new()
                    .max_filter(&a, &size, mode, &mut o64)
                    .expect("f64");
                assert_eq!(o64, e, "f64 {what}");

                if let BorderMode::Constant(c) = mode
                    && c.fract() != 0.0
                {
                    continue;
                }
                let ai = a.mapv(|v| v as i32);
                let mut oi = ArrayD::<i32>::zeros(IxDyn(shape));
                Cpu::<Single>::new()
                    .max_filter(&ai, &size, mode, &mut oi)
                    .expect("i32");
                assert_eq!(oi.mapv(f64::from), e, "i32 {what}");
            }
        }
    }
}

/// The transposes (whole tiles of every instruction set available here, the portable
/// tiles, and the ragged edges) against the definition, for 4- and 8-byte elements.
#[test]
fn transposes_match_the_definition() {
    fn check<E: Copy + PartialEq + std::fmt::Debug + From<u16>>() {
        for (rows, cols) in [(1, 1), (3, 5), (16, 16), (17, 33), (40, 23), (64, 48)] {
            let (ss, ds) = (cols + 3, rows + 5);
            let src: Vec<E> = (0..rows * ss).map(|k| E::from(k as u16)).collect();
            let naive =
                |d: &[E]| (0..rows).all(|r| (0..cols).all(|c| d[c * ds + r] == src[r * ss + c]));
            let mut dst = vec![E::from(0); cols * ds];
            // SAFETY: both rectangles are inside their vectors.
            unsafe { transpose::transpose(src.as_ptr(), ss, dst.as_mut_ptr(), ds, rows, cols) };
            assert!(naive(&dst), "{rows}x{cols} {}", std::mem::size_of::<E>());
            let mut dst = vec![E::from(0); cols * ds];
            let (r8, c8) = (rows & !7, cols & !7);
            // SAFETY: as above; the portable tiles cover the `r8 × c8` corner only.
            unsafe { transpose::portable_tiles(src.as_ptr(), ss, dst.as_mut_ptr(), ds, r8, c8) };
            assert!(
                (0..r8).all(|r| (0..c8).all(|c| dst[c * ds + r] == src[r * ss + c])),
                "portable {rows}x{cols}"
            );
        }
    }
    check::<f32>();
    check::<u32>();
    check::<f64>();
    check::<u64>();
}

/// With NaN in reach the 1-D passes do not commute, so the answer depends on their order. The
/// order is [`monomorph_core::max_filter_pass_order`] whatever the thread count (the
/// plane-by-plane route is taken only with enough planes per thread): 1, 2 and 8 threads give
/// the same bits, on few planes and on many.
#[test]
fn nan_results_do_not_depend_on_the_thread_count() {
    use monomorph_core::{Filter, Memory};
    for shape in [&[6usize, 7, 8][..], &[2, 9, 11], &[40, 5, 6], &[3, 2, 5, 7]] {
        let mut x = levels(shape, 7, 50);
        let n = x.len();
        for (i, v) in x.iter_mut().enumerate() {
            if (i * 7919) % n < n / 9 {
                *v = f64::NAN;
            }
        }
        let size: Vec<usize> = shape.iter().map(|&l| (l / 2).max(2)).collect();
        for mode in MODES {
            let mut outs = Vec::new();
            for threads in [1, 2, 8] {
                let b = Cpu::<Double>::with_threads(threads).unwrap();
                let src = b.upload(x.view()).unwrap();
                let mut dst = b.zeros::<f64>(shape).unwrap();
                b.max_filter(&src, &size, mode, &mut dst).unwrap();
                let bits: Vec<u64> = b
                    .download(&dst)
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                outs.push(bits);
            }
            assert_eq!(outs[0], outs[1], "{shape:?} {mode:?}: 1 vs 2 threads");
            assert_eq!(outs[0], outs[2], "{shape:?} {mode:?}: 1 vs 8 threads");
        }
    }
}
