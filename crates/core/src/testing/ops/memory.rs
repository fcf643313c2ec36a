//! Memory: allocation, transfers, casts, errors.

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

use super::*;
use crate::backend::*;
use crate::backend::{ForeignBuffer, Location};
use crate::dtype::Real;
use crate::testing::{Lcg, flat};

pub fn memory_roundtrip<B: Backend>(b: &B) {
    let mut rng = Lcg::new(1);
    for shape in [vec![7], vec![3, 5], vec![4, 3, 6], vec![1, 1, 1]] {
        let h = host::<B>(&mut rng, &shape);
        let d = up(b, &h);
        assert_eq!(d.shape(), &shape[..]);
        assert_eq!(down(b, &d), h, "upload/download of {shape:?}");
        let mut z = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
        assert!(
            down(b, &z)
                .iter()
                .all(|v| *v == FloatOf::<B>::from_f64(0.0))
        );
        b.copy(&d, &mut z).expect("copy");
        assert_eq!(down(b, &z), h);
        let taken = b.download_owned(b.duplicate(&d).expect("duplicate"));
        assert_eq!(
            taken.expect("download_owned"),
            h,
            "download_owned of {shape:?}"
        );
        b.fill(&mut z, FloatOf::<B>::from_f64(2.5)).expect("fill");
        assert!(down(b, &z).iter().all(|v| v.as_f64() == 2.5));
        let f = b
            .full::<IntOf<B>>(&shape, IntOf::<B>::from_f64(-3.0))
            .expect("full");
        assert!(down(b, &f).iter().all(|v| v.as_f64() == -3.0));
    }
    let h = host::<B>(&mut rng, &[2, 6]);
    let d = b.reshape(up(b, &h), &[3, 4]).expect("reshape");
    assert_eq!(d.shape(), &[3, 4]);
    assert_eq!(flat(&down(b, &d)), flat(&h));
    let c: Arr<B, Complex<FloatOf<B>>> = up(
        b,
        &ArrayD::from_shape_fn(IxDyn(&[3, 2]), |i| {
            Complex::new(
                FloatOf::<B>::from_f64(i[0] as f64),
                FloatOf::<B>::from_f64(i[1] as f64 - 0.5),
            )
        }),
    );
    let back = down(b, &c);
    assert_eq!(back[[2, 1]].re.as_f64(), 2.0);
    assert_eq!(back[[2, 1]].im.as_f64(), 0.5);
    b.synchronize().expect("synchronize");
}

pub fn memory_errors<B: Backend>(b: &B) {
    let h = ArrayD::<FloatOf<B>>::zeros(IxDyn(&[2, 3]));
    let d = up(b, &h);
    let mut wrong = b.zeros::<FloatOf<B>>(&[3, 2]).expect("zeros");
    assert!(matches!(
        b.copy(&d, &mut wrong),
        Err(crate::Error::Shape { .. })
    ));
    assert!(b.reshape(d, &[4, 2]).is_err());
    let huge = b.available_memory().saturating_mul(4).max(1 << 40);
    let err = b
        .zeros::<f64>(&[(huge / 8) as usize])
        .err()
        .expect("allocation larger than the available memory must fail");
    match err {
        crate::Error::OutOfMemory {
            requested,
            available,
            ..
        } => {
            assert!(requested > available);
            let msg = err_msg(requested, available);
            assert!(!msg.is_empty());
        }
        e => panic!("expected OutOfMemory, got {e}"),
    }
}

fn err_msg(requested: u64, available: u64) -> String {
    crate::Error::OutOfMemory {
        what: "x".into(),
        requested,
        available,
    }
    .to_string()
}

pub fn cast_roundtrip<B: Backend>(b: &B) {
    let h = ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| (i[0] * 4 + i[1]) as f64 - 5.0);
    let d = up(b, &h.mapv(FloatOf::<B>::from_f64));
    let mut i = b.zeros::<IntOf<B>>(&[3, 4]).expect("zeros");
    b.cast(&d, &mut i).expect("cast");
    assert_eq!(flat(&down(b, &i)), flat(&h));
    let mut f = b.zeros::<f64>(&[3, 4]).expect("zeros");
    b.cast(&i, &mut f).expect("cast");
    assert_eq!(down(b, &f), h);
}

/// Describes an exported buffer as a foreign one (what a DLPack consumer does with a
/// producer's capsule), keeping its owner alive in the description.
#[allow(unsafe_code)]
fn described(
    e: crate::backend::ExportedBuffer,
    at: Location,
    dtype: crate::DType,
) -> ForeignBuffer {
    let owner: std::sync::Arc<dyn std::any::Any + Send + Sync> = std::sync::Arc::new(e.owner);
    // SAFETY: `e` came from `Foreign::export`: `addr` holds `shape`'s product of compact
    // C-ordered values of `e.dtype` in `e.location`'s memory, owned by `owner`, which the
    // description keeps; nothing writes them. Where `at`/`dtype` differ from the export's (the
    // error cases), `adopt` must refuse before reading anything.
    unsafe { ForeignBuffer::new(e.addr, dtype, e.shape, at, owner) }.expect("a valid description")
}

/// [`Foreign`]: export → adopt gives the array back (float type, the other float type, empty),
/// as a copy that leaves the source unchanged; another location, device or element type is an
/// error, not a panic; a misaligned address is refused when described.
pub fn foreign_roundtrip<B: Backend>(b: &B) {
    let mut rng = Lcg::new(7);
    let here = b.location();
    for shape in [vec![5], vec![3, 4], vec![2, 3, 5], vec![0, 3]] {
        let h = host::<B>(&mut rng, &shape);
        let e = b.export(up(b, &h)).expect("export");
        assert_eq!(
            (e.location, &e.shape[..], e.dtype),
            (here, &shape[..], <FloatOf<B> as crate::Element>::DTYPE)
        );
        let f = described(e, here, <FloatOf<B> as crate::Element>::DTYPE);
        let mut a = b.adopt(&f).expect("adopt");
        assert_eq!(down(b, &a), h, "export → adopt of {shape:?}");
        // A copy: writing it leaves the source as it was.
        b.fill(&mut a, FloatOf::<B>::from_f64(9.0)).expect("fill");
        assert_eq!(
            down(b, &b.adopt(&f).expect("adopt again")),
            h,
            "source of {shape:?}"
        );
    }
    // The other float type is converted as `as` does.
    let wide = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |i| i[0] as f64 * 0.1 - i[1] as f64 / 3.0);
    let e = b.export(up(b, &wide)).expect("export f64");
    assert_eq!(e.dtype, crate::DType::F64);
    let f = described(e, here, crate::DType::F64);
    assert_eq!(
        down(b, &b.adopt(&f).expect("adopt f64")),
        wide.mapv(FloatOf::<B>::from_f64)
    );
    let narrow = wide.mapv(|v| v as f32);
    let f = described(
        b.export(up(b, &narrow)).expect("export f32"),
        here,
        crate::DType::F32,
    );
    assert_eq!(
        down(b, &b.adopt(&f).expect("adopt f32")),
        narrow.mapv(|v| FloatOf::<B>::from_f64(v as f64))
    );
    // Index arrays export with their type.
    let idx = b
        .full::<IntOf<B>>(&[4], IntOf::<B>::from_f64(-1.0))
        .expect("full");
    assert_eq!(
        b.export(idx).expect("export ints").dtype,
        <IntOf<B> as crate::Element>::DTYPE
    );
    // Refused before anything is read: another place, another device, another type.
    let elsewhere = match here {
        Location::Host => vec![Location::Cuda(0)],
        Location::Cuda(n) => vec![Location::Host, Location::Cuda(n + 1)],
    };
    let h = host::<B>(&mut rng, &[2, 2]);
    for at in elsewhere {
        let f = described(
            b.export(up(b, &h)).expect("export"),
            at,
            <FloatOf<B> as crate::Element>::DTYPE,
        );
        let err = b.adopt(&f).err().expect("another location").to_string();
        assert!(
            err.contains(&at.to_string()) && err.contains("buffer"),
            "{err}"
        );
    }
    let ints = b.full::<i32>(&[2, 2], 3).expect("full");
    let f = described(b.export(ints).expect("export"), here, crate::DType::I32);
    let err = b.adopt(&f).err().expect("int32").to_string();
    assert!(
        err.contains("int32") && err.contains("float32 or float64"),
        "{err}"
    );
    #[allow(unsafe_code)]
    // SAFETY: refused before the address is kept (misaligned), so nothing is ever read.
    let odd =
        unsafe { ForeignBuffer::new(3, crate::DType::F32, vec![2], here, std::sync::Arc::new(())) };
    assert!(
        odd.expect_err("misaligned")
            .to_string()
            .contains("not aligned")
    );
}
