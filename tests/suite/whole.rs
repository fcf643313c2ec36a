//! `MatchJob::run_whole` (one item, the result kept on the backend) against the Part path
//! (`run_range` over every rotation, then `finish`): bit for bit, for the options whose maps
//! differ (statistics, background, several templates, padding, double precision), and with
//! the inputs as foreign buffers adopted by the backend (the device path, on the CPU).

use std::sync::Arc;

use monomorph::algo::matching::{Background, MatchResult, Score};
use monomorph::algo::rotations::RotationSet;
use monomorph::backend::{ForeignBuffer, Location};
use monomorph::ndarray::{ArrayD, IxDyn};
use monomorph::work::{Control, ExtraTemplate, JobArray, MatchJob};
use monomorph::{Backend, Cpu, DType, Double, HostArray, Real, Single};

fn noise(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 2000) as f32 / 1000.0 - 1.0
    })
}

/// Every map and number of a result, exactly (floats as bits).
fn bits<B: Backend>(b: &B, r: &MatchResult<B>) -> Vec<(String, Vec<u64>)> {
    let f = |a| {
        b.download(a)
            .unwrap()
            .iter()
            .map(|v: &_| Real::as_f64(*v).to_bits())
            .collect()
    };
    let i = |a| {
        b.download(a)
            .unwrap()
            .iter()
            .map(|v: &_| Real::as_f64(*v).to_bits())
            .collect()
    };
    let mut out = vec![
        ("scores".into(), f(&r.scores)),
        ("rotation_index".into(), i(&r.rotation_index)),
        ("ssum".into(), vec![r.ssum.to_bits()]),
        (
            "ssum_parts".into(),
            r.ssum_parts.iter().map(|v| v.to_bits()).collect(),
        ),
        (
            "tiles".into(),
            vec![
                r.tiles as u64,
                r.n_rotations as u64,
                r.rotations.len() as u64,
            ],
        ),
    ];
    if let Some(t) = &r.template_index {
        out.push(("template_index".into(), i(t)));
    }
    if let Some(s) = &r.background_shift {
        out.push(("background_shift".into(), f(s)));
    }
    if let Some(m) = &r.moments {
        let w = b
            .download(&m.acc)
            .unwrap()
            .iter()
            .map(|&v| v as u64)
            .collect();
        out.push(("moments".into(), w));
    }
    if let Some(s) = r.statistics(b).unwrap() {
        out.push(("mean".into(), f(&s.mean)));
        out.push(("std".into(), f(&s.std)));
        out.push(("z".into(), f(&s.z)));
    }
    out
}

fn parts_path<B: Backend>(b: &B, job: &MatchJob) -> MatchResult<B> {
    let part = job
        .run_range(b, 0..job.rotations.len(), &Control::new(), 0)
        .unwrap();
    job.finish(b, part).unwrap()
}

fn jobs() -> Vec<(&'static str, MatchJob)> {
    let target = noise(&[22, 20, 18], 1);
    let template = noise(&[7, 7, 7], 2);
    let rot = || RotationSet::uniform(3, 60.0).unwrap();
    let base = |score| {
        MatchJob::new(
            HostArray::F32(target.clone()),
            HostArray::F32(template.clone()),
            score,
            rot(),
        )
    };
    let mut stats = base(Score::FLCSphericalMask);
    stats.score_stats = true;
    let mut bg = base(Score::FLC);
    bg.background = Some(Background::PhaseScrambling);
    bg.score_stats = true;
    bg.pad_edges = true;
    let mut two = base(Score::CC);
    two.more_templates = vec![ExtraTemplate {
        template: HostArray::F32(noise(&[7, 7, 7], 3)),
        mask: None,
    }];
    vec![
        ("statistics", stats),
        ("background", bg),
        ("two templates", two),
    ]
}

#[test]
fn a_whole_run_kept_on_the_backend_is_the_part_paths_bit_for_bit() {
    let b = Cpu::<Single>::new();
    for (what, job) in jobs() {
        let want = bits(&b, &parts_path(&b, &job));
        let got = bits(&b, &job.run_whole(&b, &Control::new(), 0).unwrap());
        assert_eq!(got, want, "{what}");
    }
    let d = Cpu::<Double>::new();
    let (_, job) = jobs().remove(0);
    let want = bits(&d, &parts_path(&d, &job));
    assert_eq!(
        bits(&d, &job.run_whole(&d, &Control::new(), 0).unwrap()),
        want
    );
}

/// A host buffer described as a foreign one (what the DLPack intake does with a producer's
/// tensor), kept alive by its owner.
#[allow(unsafe_code)]
fn foreign(a: ArrayD<f32>, at: Location) -> ForeignBuffer {
    let a = Arc::new(a);
    let addr = a.as_ptr() as usize;
    let shape = a.shape().to_vec();
    // SAFETY: `a` holds `shape`'s product of f32 in C order (a fresh standard-layout array),
    // owned by the description and never written. A location other than the host is refused
    // by `adopt` before anything is read.
    unsafe { ForeignBuffer::new(addr, DType::F32, shape, at, a) }.unwrap()
}

#[test]
fn foreign_inputs_are_adopted_and_match_as_host_data_does() {
    let b = Cpu::<Single>::new();
    for (what, job) in jobs() {
        let want = bits(&b, &job.run_whole(&b, &Control::new(), 0).unwrap());
        let mut dev = job.clone();
        let host = |a: &JobArray| a.host().unwrap().to_float::<f32>();
        dev.target = foreign(host(&job.target), Location::Host).into();
        dev.template = foreign(host(&job.template), Location::Host).into();
        assert_eq!(dev.target.location(), Location::Host);
        let got = bits(&b, &dev.run_whole(&b, &Control::new(), 0).unwrap());
        assert_eq!(got, want, "{what}");
    }
    // Its values are checked where it lives: a NaN is an input error naming the target.
    let (_, mut job) = jobs().remove(0);
    let mut nan = noise(&[22, 20, 18], 1);
    nan[[3, 4, 5]] = f32::NAN;
    job.target = foreign(nan, Location::Host).into();
    let err = job
        .run_whole(&b, &Control::new(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`target`: 1 NaN or infinite value(s)"),
        "{err}"
    );
    // A buffer on a GPU is refused by the CPU backend, naming where it lives.
    let (_, mut job) = jobs().remove(0);
    job.target = foreign(noise(&[22, 20, 18], 1), Location::Cuda(1)).into();
    let err = job
        .run_whole(&b, &Control::new(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("CUDA device 1") && err.contains("cpu backend"),
        "{err}"
    );
}
