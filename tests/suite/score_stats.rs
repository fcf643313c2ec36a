//! Per-voxel statistics of the score over the rotations (`MatchParams::score_stats`,
//! `match --score-stats`): against a brute-force host computation from each rotation's own
//! score map (3-D FLC and 2-D CC, single and double precision), tiled = untiled, and the
//! command's outputs. Byte identity over MPI ranks is checked in `mpi.rs` and `list.rs`'s
//! style below.

use monomorph::algo::matching::{MatchParams, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use monomorph::{Double, FloatOf, Real};
use ndarray::{ArrayD, IxDyn};

/// Deterministic values in [-1, 1).
fn noise(shape: &[usize], seed: u64) -> ArrayD<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005) | 1;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f64) / (1u64 << 23) as f64 - 1.0
    })
}

/// A smooth-ish blob template with some asymmetry, and a target holding one copy of it in
/// noise.
fn inputs(d: usize) -> (ArrayD<f64>, ArrayD<f64>, ArrayD<f64>) {
    let (tn, pn) = if d == 3 { (18, 6) } else { (40, 9) };
    let tshape = vec![tn; d];
    let pshape = vec![pn; d];
    let template = ArrayD::from_shape_fn(IxDyn(&pshape), |i| {
        let c = (pn as f64 - 1.0) / 2.0;
        let r2: f64 = (0..d).map(|k| (i[k] as f64 - c).powi(2)).sum();
        (-r2 / 4.0).exp() + 0.3 * (i[0] as f64) / pn as f64 - 0.2 * (i[d - 1] as f64 / pn as f64)
    });
    let mask = ArrayD::from_shape_fn(IxDyn(&pshape), |i| {
        let c = (pn as f64 - 1.0) / 2.0;
        let r2: f64 = (0..d).map(|k| (i[k] as f64 - c).powi(2)).sum();
        if r2 <= c * c + 0.5 { 1.0 } else { 0.0 }
    });
    let mut target = noise(&tshape, 17 + d as u64).mapv(|v| 0.5 * v);
    let at = vec![3usize; d];
    for (j, v) in template.indexed_iter() {
        let mut p = at.clone();
        for k in 0..d {
            p[k] += j[k];
        }
        target[IxDyn(&p)] += *v;
    }
    (target, template, mask)
}

fn rotations(d: usize) -> RotationSet {
    if d == 3 {
        RotationSet::uniform(3, 90.0).unwrap()
    } else {
        // 2-D: 9 angles, one repeated (equal scores in two rotations of every voxel).
        let deg = [0.0f64, 40.0, 80.0, 40.0, 120.0, 160.0, 200.0, 250.0, 310.0];
        let flat: Vec<f64> = deg
            .iter()
            .flat_map(|a| {
                let (s, c) = a.to_radians().sin_cos();
                [c, -s, s, c]
            })
            .collect();
        RotationSet::from_matrices(2, &flat).unwrap()
    }
}

fn up<B: Backend>(b: &B, a: &ArrayD<f64>) -> monomorph::Arr<B, FloatOf<B>> {
    b.upload(a.mapv(FloatOf::<B>::from_f64).view()).unwrap()
}

fn down<B: Backend>(b: &B, a: &monomorph::Arr<B, FloatOf<B>>) -> ArrayD<f64> {
    b.download(a).unwrap().mapv(|v| v.as_f64())
}

/// (mean, std, z) of the run with statistics, and the brute-force ones from one run per
/// rotation (each rotation's best is its score map), all in f64.
#[allow(clippy::type_complexity)]
fn both<B: Backend>(
    b: &B,
    d: usize,
    score: Score,
    tile: Option<Vec<usize>>,
) -> ([ArrayD<f64>; 3], [ArrayD<f64>; 3], ArrayD<f64>) {
    let (target, template, mask) = inputs(d);
    let (t, p, m) = (up(b, &target), up(b, &template), up(b, &mask));
    let rots = rotations(d);
    let mut params = MatchParams::new(score, rots.clone());
    params.template_mask = Some(&m);
    params.score_stats = true;
    params.tile_shape = tile;
    let r = match_template(b, &t, &p, &params).unwrap();
    let st = r.statistics(b).unwrap().expect("statistics");
    let got = [down(b, &st.mean), down(b, &st.std), down(b, &st.z)];
    let best = down(b, &r.scores);
    // Brute force: each rotation alone.
    let n = rots.len();
    let maps: Vec<ArrayD<f64>> = (0..n)
        .map(|k| {
            let one = RotationSet::from_matrices(d, rots.matrix(k)).unwrap();
            let mut q = MatchParams::new(score, one);
            q.template_mask = Some(&m);
            let r = match_template(b, &t, &p, &q).unwrap();
            assert!(r.moments.is_none());
            down(b, &r.scores)
        })
        .collect();
    let mean = maps
        .iter()
        .fold(ArrayD::zeros(best.raw_dim()), |a, m| a + m)
        / n as f64;
    let var = maps.iter().fold(ArrayD::zeros(best.raw_dim()), |a, m| {
        a + (m - &mean).mapv(|v| v * v)
    }) / n as f64;
    let std = var.mapv(f64::sqrt);
    let z = ndarray::Zip::from(&best)
        .and(&mean)
        .and(&std)
        .map_collect(|&bst, &mu, &s| if s > 0.0 { (bst - mu) / s } else { 0.0 });
    (got, [mean, std, z], best)
}

fn max_abs_diff(a: &ArrayD<f64>, b: &ArrayD<f64>) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Statistics equal the brute-force ones: mean and std to the score's round-off, z to that
/// over std (z where std is tiny is dominated by round-off; such voxels are checked by
/// their numerator instead).
fn check<B: Backend>(b: &B, d: usize, score: Score, tol: f64) {
    let (got, want, best) = both(b, d, score, None);
    let scale = best.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (k, name) in ["mean", "std"].iter().enumerate() {
        let e = max_abs_diff(&got[k], &want[k]);
        assert!(
            e <= tol * scale,
            "{d}-D {score}: {name} off by {e} (scale {scale})"
        );
    }
    for ((gz, wz), (s, (bst, mu))) in got[2]
        .iter()
        .zip(&want[2])
        .zip(want[1].iter().zip(best.iter().zip(&want[0])))
    {
        assert!(gz.is_finite());
        if *s > 1e-3 * scale {
            assert!(
                (gz - wz).abs() <= tol * scale / s * (1.0 + wz.abs()) * 4.0,
                "{d}-D {score}: z {gz} vs {wz} (std {s})"
            );
        } else {
            // Not enough spread to check z's ratio: its numerator is the best minus the mean.
            assert!((bst - mu).abs() <= 4.0 * tol * scale + *s * gz.abs().max(1.0));
        }
    }
    // The repeated 2-D rotation does not change the definition: std over all N rotations.
    assert!(got[1].iter().all(|v| *v >= 0.0));
}

#[test]
fn statistics_equal_a_brute_force_over_the_rotations() {
    let s = Cpu::<Single>::new();
    check(&s, 3, Score::FLC, 1e-6);
    check(&s, 2, Score::CC, 1e-6);
    // Double: the squares' grid (2^-42 for the normalised scores, whose bound keeps room up to
    // |s| = 1024) limits std to ~1e-12 absolute, coarser than f64 round-off.
    let dd = Cpu::<Double>::new();
    check(&dd, 3, Score::FLC, 1e-11);
    check(&dd, 2, Score::CC, 1e-11);
}

#[test]
fn statistics_of_a_tiled_run_equal_the_untiled_ones() {
    for (d, score, tile) in [
        (3, Score::FLC, vec![7, 9, 18]),
        (2, Score::NCC, vec![13, 17]),
    ] {
        let b = Cpu::<Single>::new();
        let (untiled, _, best) = both(&b, d, score, None);
        let (tiled, _, best_t) = both(&b, d, score, Some(tile));
        let scale = best.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(max_abs_diff(&best, &best_t) <= 1e-5 * scale);
        for k in 0..2 {
            let e = max_abs_diff(&untiled[k], &tiled[k]);
            assert!(e <= 1e-5 * scale, "{d}-D {score}: statistic {k} off by {e}");
        }
    }
}

#[test]
fn a_constant_score_has_zero_std_and_zero_z() {
    // A constant target: CC scores are the same for every rotation of a rotation-invariant
    // template (a centred cube of ones), so std = 0 and z = 0, not NaN.
    let b = Cpu::<Single>::new();
    let t = b
        .upload(ArrayD::from_elem(IxDyn(&[12, 12]), 1.0f32).view())
        .unwrap();
    let p = b
        .upload(ArrayD::from_elem(IxDyn(&[3, 3]), 1.0f32).view())
        .unwrap();
    let flat = [1.0, 0.0, 0.0, 1.0, 0.0, -1.0, 1.0, 0.0];
    let mut params = MatchParams::new(Score::CC, RotationSet::from_matrices(2, &flat).unwrap());
    params.score_stats = true;
    params.interpolation = monomorph::Interpolation::Linear;
    let r = match_template(&b, &t, &p, &params).unwrap();
    let st = r.statistics(&b).unwrap().unwrap();
    let (std, z) = (b.download(&st.std).unwrap(), b.download(&st.z).unwrap());
    assert!(std.iter().all(|&v| v == 0.0), "{std}");
    assert!(z.iter().all(|&v| v == 0.0), "{z}");
}

#[test]
fn positions_not_searched_have_no_statistics() {
    // A search box: outside it the score is −∞ (not searched); its statistics are NaN (mean,
    // std) and −∞ (z), not numbers that look measured; inside they are the full run's.
    let b = Cpu::<Single>::new();
    let (target, template, mask) = inputs(3);
    let (t, p, m) = (up(&b, &target), up(&b, &template), up(&b, &mask));
    let mut params = MatchParams::new(Score::FLC, rotations(3));
    params.template_mask = Some(&m);
    params.score_stats = true;
    let full = match_template(&b, &t, &p, &params).unwrap();
    let full = full.statistics(&b).unwrap().unwrap();
    let boxed: Vec<(usize, usize)> = target.shape().iter().map(|&n| (2, n - 2)).collect();
    params.search_box = Some(&boxed);
    let r = match_template(&b, &t, &p, &params).unwrap();
    let st = r.statistics(&b).unwrap().unwrap();
    let (scores, mean, std, z) = (
        down(&b, &r.scores),
        down(&b, &st.mean),
        down(&b, &st.std),
        down(&b, &st.z),
    );
    let full_mean = down(&b, &full.mean);
    let mut outside = 0;
    for (i, &s) in scores.iter().enumerate() {
        let (mu, sd, zz) = (
            mean.as_slice().unwrap()[i],
            std.as_slice().unwrap()[i],
            z.as_slice().unwrap()[i],
        );
        if s == f64::NEG_INFINITY {
            outside += 1;
            assert!(
                mu.is_nan() && sd.is_nan() && zz == f64::NEG_INFINITY,
                "{i}: {mu} {sd} {zz}"
            );
        } else {
            assert!(
                mu.is_finite() && sd.is_finite() && zz.is_finite(),
                "{i}: {mu} {sd} {zz}"
            );
            let fm = full_mean.as_slice().unwrap()[i];
            assert!(
                (mu - fm).abs() <= 1e-5,
                "{i}: mean {mu} vs the full run's {fm}"
            );
        }
    }
    assert!(outside > 0 && outside < scores.len(), "{outside}");
}

/// Exactness of the sums: the moments of rotation ranges, added as the MPI merge adds them,
/// are the moments of the whole set, bit for bit (3 parts of the 2-D set, and of the 3-D one).
#[test]
fn moments_of_rotation_ranges_add_up_to_the_whole_bit_for_bit() {
    for d in [2, 3] {
        let b = Cpu::<Single>::new();
        let (target, template, mask) = inputs(d);
        let (t, p, m) = (up(&b, &target), up(&b, &template), up(&b, &mask));
        let rots = rotations(d);
        let run = |flat: &[f64]| {
            let mut q = MatchParams::new(Score::FLC, RotationSet::from_matrices(d, flat).unwrap());
            q.template_mask = Some(&m);
            q.score_stats = true;
            let r = match_template(&b, &t, &p, &q).unwrap();
            let mo = r.moments.unwrap();
            (b.download(&mo.acc).unwrap(), mo.scale)
        };
        let all = rots.as_flat().to_vec();
        let (whole, scale) = run(&all);
        let n = rots.len();
        let dd = d * d;
        let cuts = [0, n / 3, 2 * n / 3 + 1, n];
        let mut sum = ArrayD::<i64>::zeros(whole.raw_dim());
        for w in cuts.windows(2) {
            let (part, sc) = run(&all[w[0] * dd..w[1] * dd]);
            assert_eq!(sc, scale, "the scales depend on the inputs only");
            monomorph::backend::host::moments_merge(
                sum.as_slice_mut().unwrap(),
                part.as_slice().unwrap(),
            );
        }
        assert_eq!(sum, whole, "{d}-D");
    }
}

/// The moments a run accumulates are, bit for bit, the canonical sums that
/// `host::moments_add` gives from each rotation's own score map, term by term: FLC scores past
/// 0.5 (terms beyond the score pass's fast path, `MOMENT_SMALL`) included, and a 2-D run of
/// more rotations than one opening of the backend's working form holds (`MOMENT_PASSES`).
fn exact_moments<B: Backend>(b: &B, d: usize, rots: &RotationSet) {
    use monomorph::backend::host::moments_add;
    let (target, template, mask) = inputs(d);
    let (t, p, m) = (up(b, &target), up(b, &template), up(b, &mask));
    let mut q = MatchParams::new(Score::FLC, rots.clone());
    q.template_mask = Some(&m);
    q.score_stats = true;
    let mo = match_template(b, &t, &p, &q).unwrap().moments.unwrap();
    let got = b.download(&mo.acc).unwrap();
    let mut want = ArrayD::<i64>::zeros(got.raw_dim());
    let mut past_half = 0;
    for k in 0..rots.len() {
        let mut one = MatchParams::new(
            Score::FLC,
            RotationSet::from_matrices(d, rots.matrix(k)).unwrap(),
        );
        one.template_mask = Some(&m);
        let s = down(b, &match_template(b, &t, &p, &one).unwrap().scores);
        past_half += s.iter().filter(|v| v.abs() > 0.5).count();
        let words = want.as_slice_mut().unwrap().chunks_exact_mut(4);
        for (w, &v) in words.zip(s.iter()) {
            moments_add(w, v, mo.scale);
        }
    }
    assert!(
        past_half > 0,
        "{d}-D: no score past 0.5, the exact path is not exercised"
    );
    assert!(
        got == want,
        "{d}-D, {} rotations: moments differ",
        rots.len()
    );
}

#[test]
fn moments_are_the_exact_sums_of_each_rotations_scores() {
    let n = monomorph::backend::host::MOMENT_PASSES + 6;
    let flat: Vec<f64> = (0..n)
        .flat_map(|k| {
            let (s, c) = (k as f64 * 0.35).to_radians().sin_cos();
            [c, -s, s, c]
        })
        .collect();
    exact_moments(
        &Cpu::<Single>::new(),
        2,
        &RotationSet::from_matrices(2, &flat).unwrap(),
    );
    exact_moments(&Cpu::<Double>::new(), 3, &rotations(3));
}

/// The first `k` of `rots` with rotation `of` repeated right after it (`k + 1` rotations);
/// returns the repeat's index too (its scores tie with rotation `of`'s everywhere, so it
/// never wins). Where the repeat falls in the groups the CPU backend scores together (of 4,
/// the last of a run 1 to 3) decides whether the tie is inside a group or across two.
fn with_repeat(d: usize, rots: &RotationSet, k: usize, of: usize) -> (RotationSet, usize) {
    let mut flat = Vec::new();
    for i in 0..k {
        flat.extend_from_slice(rots.matrix(i));
        if i == of {
            flat.extend_from_slice(rots.matrix(i));
        }
    }
    (RotationSet::from_matrices(d, &flat).unwrap(), of + 1)
}

/// A run with statistics (its rotations scored in groups of up to 4 on the CPU backend, the
/// last group 1 to 3) against each rotation run alone and folded in order: the best score
/// and its rotation (strict `>`: the repeat never wins), every Σ score² part and the moment
/// words, bit for bit; untiled and tiled.
fn groups_against_single_rotations<B: Backend>(
    b: &B,
    d: usize,
    score: Score,
    (rots, repeat): &(RotationSet, usize),
    tile: Option<Vec<usize>>,
) {
    use monomorph::backend::host::moments_add;
    let (target, template, mask) = inputs(d);
    let (t, p, m) = (up(b, &target), up(b, &template), up(b, &mask));
    let mut q = MatchParams::new(score, rots.clone());
    q.template_mask = Some(&m);
    q.score_stats = true;
    q.tile_shape = tile.clone();
    let r = match_template(b, &t, &p, &q).unwrap();
    let (best, index) = (
        b.download(&r.scores).unwrap(),
        b.download(&r.rotation_index).unwrap(),
    );
    let mo = r.moments.unwrap();
    let got = b.download(&mo.acc).unwrap();
    let n = rots.len();
    let mut want_best =
        ArrayD::from_elem(best.raw_dim(), FloatOf::<B>::from_f64(f64::NEG_INFINITY));
    let mut want_index = ArrayD::from_elem(best.raw_dim(), -1i64);
    let mut want = ArrayD::<i64>::zeros(got.raw_dim());
    let mut want_parts = vec![f64::NAN; r.ssum_parts.len()];
    for k in 0..n {
        let mut one = MatchParams::new(
            score,
            RotationSet::from_matrices(d, rots.matrix(k)).unwrap(),
        );
        one.template_mask = Some(&m);
        one.tile_shape = tile.clone();
        let r1 = match_template(b, &t, &p, &one).unwrap();
        let s = b.download(&r1.scores).unwrap();
        for ((w, bi), &v) in want_best
            .iter_mut()
            .zip(want_index.iter_mut())
            .zip(s.iter())
        {
            if v > *w {
                *w = v;
                *bi = k as i64;
            }
        }
        let words = want.as_slice_mut().unwrap().chunks_exact_mut(4);
        for (w, &v) in words.zip(s.iter()) {
            moments_add(w, v.as_f64(), mo.scale);
        }
        // Parts: tiles outer, rotations inner.
        for (j, &part) in r1.ssum_parts.iter().enumerate() {
            want_parts[j * n + k] = part;
        }
    }
    let what = format!(
        "{d}-D {score}, {n} rotations, tiles {tile:?} ({} jobs)",
        r.tiles
    );
    assert!(tile.is_none() || r.tiles > 1, "{what}: not tiled");
    let bits = |a: &ArrayD<FloatOf<B>>| a.iter().map(|v| v.as_f64().to_bits()).collect::<Vec<_>>();
    assert!(
        bits(&best) == bits(&want_best),
        "{what}: best scores differ"
    );
    let index: Vec<i64> = index.iter().map(|v| v.as_f64() as i64).collect();
    assert!(
        index == want_index.iter().copied().collect::<Vec<_>>(),
        "{what}: indices differ"
    );
    assert!(
        !index.contains(&(*repeat as i64)),
        "{what}: the repeat won a tie"
    );
    assert!(got == want, "{what}: moments differ");
    let pbits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        pbits(&r.ssum_parts),
        pbits(&want_parts),
        "{what}: Σ score² parts"
    );
}

#[test]
fn rotations_scored_in_groups_give_each_rotations_own_results() {
    let r3 = rotations(3);
    let b = Cpu::<Single>::new();
    // One rotation (alone; no repeat: index 1 is none).
    let one = (RotationSet::from_matrices(3, r3.matrix(0)).unwrap(), 1);
    groups_against_single_rotations(&b, 3, Score::FLC, &one, None);
    // 2 to 9 rotations (k + 1): a group of 4 and then 1 to 3, or one group of 2 or 3; the
    // repeat of rotation `of` inside its group (of = 0, 1, 2, 5), or the first of the next
    // group, tied across groups (of = 3).
    for (k, of, tile) in [
        (1, 0, None),
        (2, 1, None),
        (3, 0, None),
        (4, 3, None),
        (5, 2, None),
        (6, 3, Some(vec![9, 18, 18])),
        (7, 5, None),
        (8, 3, Some(vec![18, 9, 18])),
    ] {
        let rots = with_repeat(3, &r3, k, of);
        groups_against_single_rotations(&b, 3, Score::FLC, &rots, tile);
    }
    let rots = with_repeat(3, &r3, 4, 0);
    groups_against_single_rotations(&b, 3, Score::FLCSphericalMask, &rots, None);
    let r2 = rotations(2);
    let rots = with_repeat(2, &r2, 8, 2);
    groups_against_single_rotations(&Cpu::<Double>::new(), 2, Score::CC, &rots, None);
    let rots = with_repeat(2, &r2, 8, 4);
    groups_against_single_rotations(
        &Cpu::<Single>::new(),
        2,
        Score::NCC,
        &rots,
        Some(vec![20, 40]),
    );
}

/// Progress is reported once per rotation, in order, when rotations are scored in groups (1
/// to 9 rotations: groups of 4, then 1 to 3); a cancel after any rotation of a group stops
/// there (the later ones' counts are not reported).
#[test]
fn progress_counts_every_rotation_of_a_group_and_cancels_between_them() {
    use std::ops::ControlFlow;
    use std::sync::Mutex;
    let b = Cpu::<Single>::new();
    let (target, template, mask) = inputs(3);
    let (t, p, m) = (up(&b, &target), up(&b, &template), up(&b, &mask));
    let r3 = rotations(3);
    for n in 1..=9 {
        let flat: Vec<f64> = (0..n).flat_map(|i| r3.matrix(i).to_vec()).collect();
        let rots = RotationSet::from_matrices(3, &flat).unwrap();
        for stop in std::iter::once(None).chain((1..n).map(Some)) {
            let seen = Mutex::new(Vec::new());
            let cb = |done: usize, total: usize| {
                seen.lock().unwrap().push((done, total));
                if Some(done) == stop {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            };
            let mut q = MatchParams::new(Score::FLC, rots.clone());
            q.template_mask = Some(&m);
            q.score_stats = true;
            q.progress = Some(&cb);
            let r = match_template(&b, &t, &p, &q);
            let last = stop.unwrap_or(n);
            let want: Vec<(usize, usize)> = (1..=last).map(|d| (d, n)).collect();
            assert_eq!(
                *seen.lock().unwrap(),
                want,
                "{n} rotations, stop at {stop:?}"
            );
            match stop {
                None => assert!(r.is_ok()),
                Some(s) => assert!(
                    matches!(r, Err(monomorph::Error::Cancelled { done, total }) if done == s && total == n),
                    "{n} rotations, stop at {s}: {:?}",
                    r.err()
                ),
            }
        }
    }
}

#[cfg(feature = "cli")]
mod cli {
    use std::path::Path;
    use std::process::Command;

    use super::*;

    fn bin() -> Command {
        Command::new(env!("CARGO_BIN_EXE_monomorph"))
    }

    fn save(dir: &Path, name: &str, a: &ArrayD<f64>) -> String {
        let p = dir.join(name);
        ndarray_npy::write_npy(&p, &a.mapv(|v| v as f32)).unwrap();
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn match_writes_the_statistics_beside_the_scores() {
        let dir = std::env::temp_dir().join(format!("monomorph-stats-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (target, template, mask) = inputs(3);
        let (t, p, m) = (
            save(&dir, "t.npy", &target),
            save(&dir, "p.npy", &template),
            save(&dir, "m.npy", &mask),
        );
        let out = dir.join("out");
        let o = bin()
            .args([
                "match",
                "-m",
                &t,
                "-i",
                &p,
                "--template-mask",
                &m,
                "-s",
                "flc",
            ])
            .args([
                "-a",
                "90",
                "--score-stats",
                "-q",
                "--out",
                out.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = |n: &str| -> ArrayD<f32> { ndarray_npy::read_npy(out.join(n)).unwrap() };
        let (s, mean, std, z) = (
            r("scores.npy"),
            r("score_mean.npy"),
            r("score_std.npy"),
            r("score_z.npy"),
        );
        assert_eq!(mean.shape(), s.shape());
        for (((s, mu), sd), z) in s.iter().zip(&mean).zip(&std).zip(&z) {
            assert!(*sd >= 0.0 && *mu <= *s + 1e-6 && z.is_finite());
            if *sd > 1e-3 {
                assert!(
                    (z - (s - mu) / sd).abs() <= 1e-3 * (1.0 + z.abs()),
                    "{z} {s} {mu} {sd}"
                );
            }
        }
        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
        assert_eq!(info["score_stats"]["files"][2], "score_z");
        // Without the flag: no statistics files.
        let out2 = dir.join("out2");
        let o = bin()
            .args(["match", "-m", &t, "-i", &p, "-s", "cc", "-a", "90", "-q"])
            .args(["--out", out2.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success());
        assert!(!out2.join("score_mean.npy").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
