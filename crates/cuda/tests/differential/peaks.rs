//! Peak calling, the max filter and `top_k` on the device: the CPU's answers (bit for bit
//! where the kernels promise it).

use crate::common::make;
use monomorph_core::Real;
use monomorph_core::algo::peaks::{PeakParams, find_peaks};
use monomorph_core::testing::Lcg;
use monomorph_core::{Double, Memory, Precision, Single};
use monomorph_cpu::Cpu;

/// Peak calling on the same map gives the same peaks.
fn peaks_agree<P: Precision>() {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(11);
    let map = rng.array::<<P as Precision>::Float>(&[30, 28, 26]);
    let params = PeakParams::with_min_distance(3);
    let a = find_peaks(&cpu, &cpu.upload(map.view()).unwrap(), &params).unwrap();
    let b = find_peaks(&gpu, &gpu.upload(map.view()).unwrap(), &params).unwrap();
    assert_eq!(a, b, "peaks differ between CPU and CUDA");
}

#[test]
fn peaks_single() {
    peaks_agree::<Single>();
}

#[test]
fn peaks_double() {
    peaks_agree::<Double>();
}

/// Bitwise equality, every NaN equal to every NaN.
fn same_bits<T: Real>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            #[allow(clippy::eq_op)]
            let both_nan = x != x && y != y;
            both_nan || bytemuck::bytes_of(x) == bytemuck::bytes_of(y)
        })
}

/// Values with many ties; for floats also −0, +0, ±∞ and NaN (one in ~20).
fn levels<T: Real>(rng: &mut u64, n: usize, special: bool) -> Vec<T> {
    (0..n)
        .map(|_| {
            *rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = *rng >> 33;
            let v = match r % 20 {
                0 if special => f64::NAN,
                1 if special => f64::INFINITY,
                2 if special => f64::NEG_INFINITY,
                3 if special => -0.0,
                x => (x % 9) as f64 - 4.0,
            };
            T::from_f64(v)
        })
        .collect()
}

/// `max_filter` on the device equals the CPU's (one thread: the CPU's axis order is then
/// fixed) for every dtype, border mode and kernel: windows of 2–7 (per-output loop), 8–91
/// (shared-memory tiles, several tiles per line on the 300- and 400-long axes) and 100 (one
/// thread per line), on contiguous and strided axes, NaN and −0 included for floats.
fn max_filter_agrees<P: Precision, T: Real>(special: bool) {
    use monomorph_core::{BorderMode, Filter};
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::with_threads(1).expect("cpu");
    let mut rng = 17u64;
    let modes = [
        BorderMode::Nearest,
        BorderMode::Reflect,
        BorderMode::Mirror,
        BorderMode::Wrap,
        BorderMode::Constant(-1.5),
    ];
    let cases: [(&[usize], &[usize]); 8] = [
        (&[37], &[21]),
        (&[3, 400], &[1, 21]),
        (&[400, 5], &[21, 3]),
        (&[19, 23], &[100, 8]),
        (&[4, 6, 300], &[3, 5, 61]),
        (&[6, 7, 9], &[2, 9, 30]),
        (&[130, 3, 5], &[91, 1, 2]),
        (&[2, 3, 4, 5], &[3, 2, 7, 8]),
    ];
    for (shape, size) in cases {
        let n: usize = shape.iter().product();
        let h = ndarray::ArrayD::from_shape_vec(shape.to_vec(), levels::<T>(&mut rng, n, special))
            .expect("shape");
        let (dc, dg) = (cpu.upload(h.view()).unwrap(), gpu.upload(h.view()).unwrap());
        for mode in modes {
            let mut oc = cpu.zeros::<T>(shape).unwrap();
            let mut og = gpu.zeros::<T>(shape).unwrap();
            cpu.max_filter(&dc, size, mode, &mut oc).unwrap();
            gpu.max_filter(&dg, size, mode, &mut og).unwrap();
            let (c, g) = (cpu.download(&oc).unwrap(), gpu.download(&og).unwrap());
            let (c, g): (Vec<T>, Vec<T>) =
                (c.iter().copied().collect(), g.iter().copied().collect());
            assert!(
                same_bits(&c, &g),
                "max_filter {shape:?} size {size:?} {mode:?} {}: cuda differs from cpu",
                std::any::type_name::<T>()
            );
        }
    }
}

#[test]
fn max_filter_f32_with_nan() {
    max_filter_agrees::<Single, f32>(true);
}

#[test]
fn max_filter_f64_with_nan() {
    max_filter_agrees::<Double, f64>(true);
}

#[test]
fn max_filter_integers() {
    max_filter_agrees::<Single, i32>(false);
    max_filter_agrees::<Double, i64>(false);
}

/// `top_k` for k > 1 on the device equals the CPU's: ties by index, NaN excluded, −0 equal
/// to +0, ±∞, integers, all equal, all NaN, k at and beyond the number of elements.
fn top_k_agrees<P: Precision, T: Real>(special: bool) {
    use monomorph_core::Reduce;
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = 23u64;
    let n = 20_000;
    let mut arrays: Vec<Vec<T>> = vec![
        levels::<T>(&mut rng, n, special),
        vec![T::from_f64(2.0); n],
        (0..n)
            .map(|i| T::from_f64(((i * 7919) % 10007) as f64 - 5000.0))
            .collect(),
    ];
    if special {
        arrays.push(vec![T::from_f64(f64::NAN); 300]);
        arrays.push(
            (0..300)
                .map(|i| T::from_f64(if i % 2 == 0 { -0.0 } else { 0.0 }))
                .collect(),
        );
    }
    for v in arrays {
        let len = v.len();
        let h = ndarray::ArrayD::from_shape_vec(vec![len], v).expect("shape");
        let (dc, dg) = (cpu.upload(h.view()).unwrap(), gpu.upload(h.view()).unwrap());
        for k in [2usize, 5, 1000, 6000, len - 1, len, len + 9] {
            let c = cpu.top_k(&dc, k).unwrap();
            let g = gpu.top_k(&dg, k).unwrap();
            let ci: Vec<usize> = c.iter().map(|p| p.0).collect();
            let gi: Vec<usize> = g.iter().map(|p| p.0).collect();
            let cv: Vec<T> = c.iter().map(|p| p.1).collect();
            let gv: Vec<T> = g.iter().map(|p| p.1).collect();
            assert!(
                ci == gi && same_bits(&cv, &gv),
                "top_k k {k} of {len} {}: indices or values differ",
                std::any::type_name::<T>()
            );
        }
    }
}

#[test]
fn top_k_floats() {
    top_k_agrees::<Single, f32>(true);
    top_k_agrees::<Double, f64>(true);
}

#[test]
fn top_k_integers() {
    top_k_agrees::<Single, i32>(false);
    top_k_agrees::<Double, i64>(false);
}

/// pytme's recursive caller reads the map in descending order through `top_k` batches: the
/// same peaks on both backends.
#[test]
fn recursive_peaks_agree() {
    use monomorph_core::algo::peaks::{PytmeParams, call_peaks_recursive};
    let Some(gpu) = make::<Single>() else { return };
    let cpu = Cpu::<Single>::new();
    let mut rng = Lcg::new(31);
    let map = rng.array::<f32>(&[40, 36, 30]);
    let params = PytmeParams {
        num_peaks: 300,
        min_distance: 4,
        ..PytmeParams::default()
    };
    let a =
        call_peaks_recursive::<_, f32, i64>(&cpu, &cpu.upload(map.view()).unwrap(), &params, None)
            .unwrap();
    let b =
        call_peaks_recursive::<_, f32, i64>(&gpu, &gpu.upload(map.view()).unwrap(), &params, None)
            .unwrap();
    assert_eq!(a, b, "recursive peaks differ between CPU and CUDA");
}
