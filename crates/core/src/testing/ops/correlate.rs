//! Correlate: the matching loop's fused ops against their unfused definitions.

use ndarray::{ArrayD, IxDyn};
use num_traits::Float as _;

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat};

pub fn running_max_strict<B: Backend>(b: &B) {
    let shape = [2, 3];
    let f = |v: &[f64]| {
        ArrayD::from_shape_vec(
            IxDyn(&shape),
            v.iter().map(|&x| FloatOf::<B>::from_f64(x)).collect(),
        )
        .expect("shape")
    };
    let mut best = b
        .full::<FloatOf<B>>(&shape, FloatOf::<B>::neg_infinity())
        .expect("full");
    let mut idx = b
        .full::<IntOf<B>>(&shape, IntOf::<B>::from_f64(-1.0))
        .expect("full");
    let s0 = f(&[1.0, 2.0, 3.0, 0.0, f64::NAN, -1.0]);
    let s1 = f(&[1.0, 5.0, 2.0, 0.5, 7.0, f64::NAN]);
    // The running max of the matching loop: score_max_update with the identity scale and no
    // shift reads the scores as they are.
    let mut ssum = b.zeros::<f64>(&[1]).expect("zeros");
    for (k, s) in [s0, s1].iter().enumerate() {
        b.score_max_update(
            &up(b, s),
            Normalization::Scaled {
                scale: FloatOf::<B>::from_f64(1.0),
            },
            CorrWindow { shift: &[0, 0] },
            RunningMax {
                best: &mut best,
                best_index: &mut idx,
                index: IntOf::<B>::from_f64(k as f64),
                ssum: &mut ssum,
                moments: None,
            },
        )
        .expect("score_max_update");
    }
    assert_eq!(flat(&down(b, &best)), vec![1.0, 5.0, 3.0, 0.5, 7.0, -1.0]);
    assert_eq!(
        flat(&down(b, &idx)),
        vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0],
        "ties keep the earlier rotation; NaN never wins"
    );
}

/// A random array zero outside the corner box `nonzero`.
fn boxed<B: Backend>(rng: &mut Lcg, shape: &[usize], nonzero: &[usize]) -> ArrayD<FloatOf<B>> {
    let mut h = host::<B>(rng, shape);
    for (i, v) in h.indexed_iter_mut() {
        if (0..shape.len()).any(|k| i[k] >= nonzero[k]) {
            *v = FloatOf::<B>::from_f64(0.0);
        }
    }
    h
}

fn spectrum<B: Backend>(b: &B, plan: &B::Fft, h: &ArrayD<FloatOf<B>>) -> Arr<B, ComplexOf<B>> {
    let mut s = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(plan, &up(b, h), &mut s).expect("rfft");
    s
}

/// The fused matching pipeline (`rfft_pruned_mul_conj` → `irfft_score_max_update`) equals
/// `rfft_pruned` → `complex_mul_conj` → `irfft` → `score_max_update` for every normalisation,
/// on geometries that take each CPU path (fused slabs or rows; the products fused with the
/// slowest axis' transforms or formed after a full forward), with the circular window and a
/// smaller, shifted one; and rejects mismatched factor/output counts.
pub fn fused_pipeline_equals_unfused<B: Backend>(b: &B) {
    #[allow(clippy::type_complexity)]
    let cases: [(&[usize], &[usize], &[usize], &[isize]); 6] = [
        (&[24, 20, 18], &[7, 5, 6], &[24, 20, 18], &[-3, -2, -4]),
        (&[24, 20, 18], &[7, 5, 6], &[13, 15, 9], &[5, -7, 2]),
        (
            &[96, 96, 96],
            &[24, 24, 24],
            &[96, 96, 96],
            &[-12, -12, -12],
        ),
        (&[96, 96, 96], &[24, 24, 24], &[60, 70, 50], &[20, -5, 7]),
        (&[1024, 520], &[40, 33], &[1024, 520], &[-20, -16]),
        (&[40, 36], &[9, 8], &[21, 30], &[3, 33]),
    ];
    let mut rng = Lcg::new(91);
    for (fast, nz, out, shift) in cases {
        let axes: Vec<usize> = (0..fast.len()).collect();
        let plan = b.fft_plan(fast, &axes).expect("plan");
        let cs = plan.complex_shape().to_vec();
        let f = host::<B>(&mut rng, fast);
        let f2 = f.mapv(|v| v * v);
        let (sf, sf2) = (spectrum(b, &plan, &f), spectrum(b, &plan, &f2));
        let t = up(b, &boxed::<B>(&mut rng, fast, nz));
        let m = up(b, &boxed::<B>(&mut rng, fast, nz).mapv(|v| v.abs()));
        let den = up(b, &host::<B>(&mut rng, out));
        let window = CorrWindow { shift };
        let scale = FloatOf::<B>::from_f64(1.0 / f.len() as f64);
        let (n, e) = (FloatOf::<B>::from_f64(30.0), FloatOf::<B>::from_f64(1e-3));
        let zeros = || b.zeros::<ComplexOf<B>>(&cs).expect("zeros");
        let corr = || b.corr_spectrum(&plan).expect("corr_spectrum");
        for kind in 0..3 {
            let run = |fused: bool| {
                let (mut x, mut y, mut y1, mut y2) = (zeros(), corr(), corr(), corr());
                let mut work: Vec<Arr<B, FloatOf<B>>> =
                    (0..3).map(|_| b.zeros(fast).expect("zeros")).collect();
                // Earlier rotations: a running max to beat, and an index to keep.
                let mut best = up(b, &host::<B>(&mut Lcg::new(5), out));
                let mut idx = b
                    .full::<IntOf<B>>(out, IntOf::<B>::from_f64(0.0))
                    .expect("full");
                let mut ssum = b.full::<f64>(&[1], 0.5).expect("full");
                let index = IntOf::<B>::from_f64(3.0);
                if fused {
                    b.rfft_pruned_mul_conj(&plan, &t, nz, &mut x, &[&sf], &mut [&mut y])
                        .expect("rfft_pruned_mul_conj");
                    if kind == 2 {
                        b.rfft_pruned_mul_conj(
                            &plan,
                            &m,
                            nz,
                            &mut x,
                            &[&sf, &sf2],
                            &mut [&mut y1, &mut y2],
                        )
                        .expect("rfft_pruned_mul_conj");
                    }
                    let norm = match kind {
                        0 => Normalization::Scaled { scale },
                        1 => Normalization::Denominator {
                            scale,
                            inv_den: &den,
                        },
                        _ => Normalization::Local {
                            scale,
                            c1: &mut y1,
                            c2: &mut y2,
                            n,
                            eps: e,
                        },
                    };
                    let rm = RunningMax {
                        best: &mut best,
                        best_index: &mut idx,
                        index,
                        ssum: &mut ssum,
                        moments: None,
                    };
                    b.irfft_score_max_update(&plan, &mut y, norm, &mut work, window, rm)
                        .expect("irfft_score_max_update");
                } else {
                    let (w0, wr) = work.split_at_mut(1);
                    let (y, y1, y2) = (y.scratch(), y1.scratch(), y2.scratch());
                    b.rfft_pruned(&plan, &t, nz, &mut x).expect("rfft_pruned");
                    b.complex_mul_conj(&sf, &x, y).expect("complex_mul_conj");
                    b.irfft(&plan, y, &mut w0[0]).expect("irfft");
                    if kind == 2 {
                        b.rfft_pruned(&plan, &m, nz, &mut x).expect("rfft_pruned");
                        b.complex_mul_conj(&sf, &x, y1).expect("complex_mul_conj");
                        b.complex_mul_conj(&sf2, &x, y2).expect("complex_mul_conj");
                        b.irfft(&plan, y1, &mut wr[0]).expect("irfft");
                        b.irfft(&plan, y2, &mut wr[1]).expect("irfft");
                    }
                    let norm = match kind {
                        0 => Normalization::Scaled { scale },
                        1 => Normalization::Denominator {
                            scale,
                            inv_den: &den,
                        },
                        _ => Normalization::Local {
                            scale,
                            c1: &wr[0],
                            c2: &wr[1],
                            n,
                            eps: e,
                        },
                    };
                    let rm = RunningMax {
                        best: &mut best,
                        best_index: &mut idx,
                        index,
                        ssum: &mut ssum,
                        moments: None,
                    };
                    b.score_max_update(&w0[0], norm, window, rm)
                        .expect("score_max_update");
                }
                (down(b, &best), down(b, &idx), down(b, &ssum)[[0]])
            };
            let (fb, fi, fs) = run(true);
            let (ub, ui, us) = run(false);
            let what = format!("fused pipeline (norm {kind}) on {fast:?} box {nz:?} → {out:?}");
            assert!(flat(&fi) == flat(&ui), "{what}: indices differ");
            assert!(
                fi.iter().any(|&v| v == IntOf::<B>::from_f64(3.0)),
                "{what}: nothing updated"
            );
            assert_close(&format!("{what}: best"), &flat(&fb), &flat(&ub), 0.0, 0.0);
            assert_close(&format!("{what}: ssum"), &[fs], &[us], 1e-9, 0.0);
        }
        let (mut x, mut one) = (zeros(), corr());
        assert!(
            b.rfft_pruned_mul_conj(&plan, &t, nz, &mut x, &[&sf, &sf2], &mut [&mut one])
                .is_err(),
            "two factors, one output"
        );
    }
}

/// A group of 2 to [`MAX_GROUP`] rotations scored in one pass (`irfft_score_max_update_group`)
/// gives, bit for bit, what one `irfft_score_max_update` call per rotation in order gives: the
/// running maximum (an earlier rotation winning a tie: a later rotation with an earlier one's
/// very products never wins), each rotation's Σ score², and the moment words (from non-zero
/// sums, in the working form, with scales that keep every term on the fast path and scales
/// that send many terms beyond it, past `MOMENT_LIMIT` too), for every normalisation, on
/// geometries that take each CPU path (fused slabs or rows, 2-D and 3-D, circular and shifted
/// windows).
pub fn fused_group_equals_separate_passes<B: Backend>(b: &B) {
    #[allow(clippy::type_complexity)]
    let cases: [(&[usize], &[usize], &[usize], &[isize]); 5] = [
        (&[24, 20, 18], &[7, 5, 6], &[24, 20, 18], &[-3, -2, -4]),
        (&[24, 20, 18], &[7, 5, 6], &[13, 15, 9], &[5, -7, 2]),
        (&[48, 40, 36], &[12, 12, 12], &[30, 35, 25], &[20, -5, 7]),
        (&[1024, 520], &[40, 33], &[1024, 520], &[-20, -16]),
        (&[40, 36], &[9, 8], &[21, 30], &[3, 33]),
    ];
    let mut rng = Lcg::new(92);
    for (fast, nz, out, shift) in cases {
        let axes: Vec<usize> = (0..fast.len()).collect();
        let plan = b.fft_plan(fast, &axes).expect("plan");
        let cs = plan.complex_shape().to_vec();
        let f = host::<B>(&mut rng, fast);
        let f2 = f.mapv(|v| v * v);
        let (sf, sf2) = (spectrum(b, &plan, &f), spectrum(b, &plan, &f2));
        let ts: Vec<_> = (0..MAX_GROUP)
            .map(|_| up(b, &boxed::<B>(&mut rng, fast, nz)))
            .collect();
        let ms: Vec<_> = (0..MAX_GROUP)
            .map(|_| up(b, &boxed::<B>(&mut rng, fast, nz).mapv(|v| v.abs())))
            .collect();
        let den = up(b, &host::<B>(&mut rng, out));
        let window = CorrWindow { shift };
        let scale = FloatOf::<B>::from_f64(1.0 / f.len() as f64);
        let e = FloatOf::<B>::from_f64(1e-3);
        let ns = [30.0, 17.0, 23.0, 11.0].map(FloatOf::<B>::from_f64);
        let mut mshape = out.to_vec();
        mshape.push(4);
        let start: ArrayD<i64> = ArrayD::from_shape_fn(IxDyn(&mshape), |i| {
            let v =
                (ndarray::Dimension::slice(&i).iter().sum::<usize>() as i64 * 7919) % 1001 - 500;
            if i[out.len()] % 2 == 1 {
                -(v & 1)
            } else {
                v << 40
            }
        });
        let zeros = || b.zeros::<ComplexOf<B>>(&cs).expect("zeros");
        let corr = || b.corr_spectrum(&plan).expect("corr_spectrum");
        let ids: Vec<IntOf<B>> = (0..MAX_GROUP)
            .map(|q| IntOf::<B>::from_f64(3.0 + q as f64))
            .collect();
        for (kind, k) in (0..3).flat_map(|kind| (2..=MAX_GROUP).map(move |k| (kind, k))) {
            // Which rotation's products each member of the group has: all distinct; all the
            // first's (ties with the first); the last a repeat of the one before it.
            let sources: Vec<Vec<usize>> = vec![
                (0..k).collect(),
                vec![0; k],
                (0..k).map(|q| q.min(k - 2)).collect(),
            ];
            for src in sources {
                for msc in [
                    [2f64.powi(12), 2f64.powi(10)],
                    [2f64.powi(60), 2f64.powi(56)],
                ] {
                    // `start`: the words before the passes; `open`: opened first (fresh zero
                    // words may take passes without an opening, `Correlate::moments_open`).
                    let run = |grouped: bool, start: &ArrayD<i64>, open: bool| {
                        let mut x = zeros();
                        let mut prods: Vec<[CorrSpectrum<B>; 3]> = Vec::new();
                        for &q in &src {
                            let [mut y, mut y1, mut y2] = [corr(), corr(), corr()];
                            b.rfft_pruned_mul_conj(
                                &plan,
                                &ts[q],
                                nz,
                                &mut x,
                                &[&sf],
                                &mut [&mut y],
                            )
                            .expect("rfft_pruned_mul_conj");
                            if kind == 2 {
                                b.rfft_pruned_mul_conj(
                                    &plan,
                                    &ms[q],
                                    nz,
                                    &mut x,
                                    &[&sf, &sf2],
                                    &mut [&mut y1, &mut y2],
                                )
                                .expect("rfft_pruned_mul_conj");
                            }
                            prods.push([y, y1, y2]);
                        }
                        let mut work: Vec<Arr<B, FloatOf<B>>> =
                            (0..3).map(|_| b.zeros(fast).expect("zeros")).collect();
                        let mut best = up(b, &host::<B>(&mut Lcg::new(5), out));
                        let mut idx = b
                            .full::<IntOf<B>>(out, IntOf::<B>::from_f64(0.0))
                            .expect("full");
                        let mut ssum: Vec<Arr<B, f64>> = (0..k)
                            .map(|q| {
                                b.full::<f64>(&[1], 0.5f64.powi(q as i32 + 1))
                                    .expect("full")
                            })
                            .collect();
                        let mut acc = if open {
                            let mut a = up(b, start);
                            b.moments_open(&mut a).expect("moments_open");
                            a
                        } else {
                            b.zeros::<i64>(start.shape()).expect("zeros")
                        };
                        let norm = |n, c1, c2| match kind {
                            0 => Normalization::Scaled { scale },
                            1 => Normalization::Denominator {
                                scale,
                                inv_den: &den,
                            },
                            _ => Normalization::Local {
                                scale,
                                c1,
                                c2,
                                n,
                                eps: e,
                            },
                        };
                        let (s0, later_sums) = ssum.split_first_mut().expect("k ≥ 2");
                        let (p0, later) = prods.split_first_mut().expect("k ≥ 2");
                        let [y, y1, y2] = p0;
                        let mut rm = RunningMax {
                            best: &mut best,
                            best_index: &mut idx,
                            index: ids[0],
                            ssum: s0,
                            moments: Some(Moments {
                                acc: &mut acc,
                                scale: msc,
                            }),
                        };
                        let rest = later.iter_mut().zip(later_sums.iter_mut()).enumerate().map(
                            |(q, ([z, z1, z2], s))| PairedPass {
                                spec: z,
                                norm: norm(ns[src[q + 1]], z1, z2),
                                index: ids[q + 1],
                                ssum: s,
                            },
                        );
                        if grouped {
                            b.irfft_score_max_update_group(
                                &plan,
                                y,
                                norm(ns[0], y1, y2),
                                rest.collect(),
                                &mut work,
                                window,
                                rm,
                            )
                            .expect("irfft_score_max_update_group");
                        } else {
                            b.irfft_score_max_update(
                                &plan,
                                y,
                                norm(ns[0], y1, y2),
                                &mut work,
                                window,
                                rm.reborrow(),
                            )
                            .expect("irfft_score_max_update");
                            for pass in rest {
                                let mut r = rm.reborrow();
                                r.index = pass.index;
                                r.ssum = pass.ssum;
                                b.irfft_score_max_update(
                                    &plan, pass.spec, pass.norm, &mut work, window, r,
                                )
                                .expect("irfft_score_max_update");
                            }
                        }
                        b.moments_close(&mut acc).expect("moments_close");
                        let sums: Vec<u64> =
                            ssum.iter().map(|s| down(b, s)[[0]].to_bits()).collect();
                        (down(b, &best), down(b, &idx), sums, down(b, &acc))
                    };
                    let (pb, pi, ps, pm) = run(true, &start, true);
                    let (ub, ui, us, um) = run(false, &start, true);
                    let zero = ArrayD::<i64>::zeros(start.raw_dim());
                    let (_, _, _, fresh) = run(true, &zero, false);
                    let (_, _, _, opened) = run(false, &zero, true);
                    let what = format!(
                        "group of {k} (norm {kind}, products {src:?}, scales {msc:?}) on {fast:?} box {nz:?} → {out:?}"
                    );
                    assert!(flat(&pi) == flat(&ui), "{what}: indices differ");
                    let bits = |a: &ArrayD<FloatOf<B>>| -> Vec<u64> {
                        a.iter().map(|v| v.as_f64().to_bits()).collect()
                    };
                    assert!(bits(&pb) == bits(&ub), "{what}: best differs");
                    assert_eq!(ps, us, "{what}: ssum");
                    assert!(pm == um, "{what}: moment words differ");
                    assert!(pm != start, "{what}: moments untouched");
                    assert!(
                        fresh == opened,
                        "{what}: fresh zero words without an opening differ from opened ones"
                    );
                    assert!(fresh != zero, "{what}: fresh moments untouched");
                    for (q, &i) in ids[..k].iter().enumerate() {
                        // A member wins somewhere unless it repeats an earlier one.
                        let first = src.iter().position(|&v| v == src[q]) == Some(q);
                        assert_eq!(
                            pi.iter().any(|&v| v == i),
                            first,
                            "{what}: member {q} wins where it may, never on a tie"
                        );
                    }
                }
            }
        }
    }
}

/// `gather_window` equals the host kernel for both extensions, negative and past-the-end
/// starts and a window shorter than the destination, on a volume large enough to be split.
pub fn gather_window_matches_host<B: Backend>(b: &B) {
    let mut rng = Lcg::new(92);
    let sshape = [37, 40, 20];
    let src = host::<B>(&mut rng, &sshape);
    let dshape = [50, 41, 23];
    let period = [64, 48, 27];
    for ext in [
        WindowExtension::Periodic(&period),
        WindowExtension::Symmetric,
    ] {
        for (start, len) in [
            ([-5isize, 3, -7], [45usize, 38, 23]),
            ([30, -41, 50], [50, 41, 10]),
        ] {
            let mut want =
                ArrayD::<FloatOf<B>>::from_elem(IxDyn(&dshape), FloatOf::<B>::from_f64(7.0));
            host::gather_window(
                src.as_slice().expect("contiguous"),
                &sshape,
                &start,
                &len,
                ext,
                want.as_slice_mut().expect("contiguous"),
                &dshape,
            )
            .expect("host gather_window");
            let mut got = up(
                b,
                &ArrayD::from_elem(IxDyn(&dshape), FloatOf::<B>::from_f64(7.0)),
            );
            b.gather_window(&up(b, &src), &start, &len, ext, &mut got)
                .expect("gather_window");
            assert!(
                down(b, &got) == want,
                "gather_window {ext:?} start {start:?} len {len:?}"
            );
        }
    }
}

/// [`Correlate::moment_statistics`] against [`host::statistics_run`] voxel by voxel, bit for
/// bit: spread and constant voxels, voxels no rotation scored (best −∞), with and without a
/// background shift, over enough voxels for a backend to split them; the first flagged voxel
/// (in C order) is the one the error names, whichever block holds a later one.
pub fn moment_statistics_match_host<B: Backend>(b: &B) {
    type T<B> = FloatOf<B>;
    let shape = [24usize, 24, 40];
    let n: usize = shape.iter().product();
    let scale = [2f64.powi(40), 2f64.powi(38)];
    let nrot = 37;
    let mut g = Lcg::new(11);
    let mut words = vec![0i64; 4 * n];
    let mut best = vec![T::<B>::from_f64(0.0); n];
    for i in 0..n {
        // Sums of `nrot` quantised scores in [-1, 1): |Σq₁| < nrot·2^40, Σq₂ ≥ 0.
        let m = g.next_f64();
        let spread = if i % 7 == 0 {
            0.0
        } else {
            0.5 * (g.next_f64() + 1.0)
        };
        let s1 = (m * nrot as f64 * scale[0]) as i128;
        let s2 = ((m * m + spread * spread) * nrot as f64 * scale[1]) as i128;
        host::set_moment_word(&mut words[4 * i..4 * i + 2], s1);
        host::set_moment_word(&mut words[4 * i + 2..4 * i + 4], s2);
        best[i] = T::<B>::from_f64(if i % 13 == 5 {
            f64::NEG_INFINITY
        } else {
            g.next_f64()
        });
    }
    let shift: Vec<T<B>> = (0..n)
        .map(|_| T::<B>::from_f64(0.1 * g.next_f64()))
        .collect();
    let mut ashape = shape.to_vec();
    ashape.push(4);
    let up_words = |w: &[i64]| {
        b.upload_owned(ArrayD::from_shape_vec(IxDyn(&ashape), w.to_vec()).unwrap())
            .unwrap()
    };
    let up = |v: &[T<B>]| {
        b.upload_owned(ArrayD::from_shape_vec(IxDyn(&shape), v.to_vec()).unwrap())
            .unwrap()
    };
    let (acc, dbest, dshift) = (up_words(&words), up(&best), up(&shift));
    for with_shift in [false, true] {
        let sh = with_shift.then_some(&dshift);
        let got = b.moment_statistics(&acc, scale, &dbest, sh, nrot).unwrap();
        let zero = || vec![T::<B>::from_f64(0.0); n];
        let (mut m, mut s, mut z) = (zero(), zero(), zero());
        let hs = with_shift.then_some(shift.as_slice());
        let flagged =
            host::statistics_run(&words, &best, hs, nrot, scale, [&mut m, &mut s, &mut z]);
        assert_eq!(flagged, None);
        for (k, want) in [m, s, z].iter().enumerate() {
            let have = flat(&b.download(&got[k]).unwrap());
            assert_eq!(have.len(), n);
            for i in 0..n {
                let (h, w) = (have[i], want[i].as_f64());
                assert!(
                    h.to_bits() == w.to_bits() || (h.is_nan() && w.is_nan()),
                    "output {k} voxel {i} (shift {with_shift}): {h} vs host {w}"
                );
            }
        }
        // Some voxels spread, some constant (std 0 and z 0), some unscored (z −∞).
        let z = flat(&b.download(&got[2]).unwrap());
        assert!(z.contains(&f64::NEG_INFINITY));
        assert!(flat(&b.download(&got[1]).unwrap()).contains(&0.0));
    }
    // Two flagged voxels far apart: the first is named.
    let (first, later) = (n / 3 + 1, n - 2);
    for v in [first, later] {
        host::set_moment_word(&mut words[4 * v..4 * v + 2], host::MOMENT_FLAG);
    }
    let Err(err) = b.moment_statistics(&up_words(&words), scale, &dbest, None, nrot) else {
        panic!("flagged sums gave statistics");
    };
    let err = err.to_string();
    assert!(err.contains(&format!("voxel {first}:")), "{err}");
}
