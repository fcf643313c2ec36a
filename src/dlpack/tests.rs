//! The structs read and written without an interpreter: producers made here, consumers too.
#![allow(unsafe_code)]

use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::ArrayD;

use crate::backend::{ExportedBuffer, Location};
use crate::host_array::HostArray;

/// A producer's managed tensor over `data` with the given layout; its deleter counts.
struct Made {
    _data: Vec<u8>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    count: &'static AtomicUsize,
}

unsafe extern "C" fn count_legacy(p: *mut DLManagedTensor) {
    // SAFETY: made by `legacy` below: the context is a boxed `Made`.
    let m = unsafe { Box::from_raw((*p).manager_ctx.cast::<Made>()) };
    m.count.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the managed tensor was boxed by `legacy`.
    drop(unsafe { Box::from_raw(p) });
}

fn legacy(
    data: Vec<u8>,
    dtype: DLDataType,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    offset: u64,
    device_type: i32,
    count: &'static AtomicUsize,
) -> *mut DLManagedTensor {
    let mut m = Box::new(Made {
        _data: data,
        shape,
        strides,
        count,
    });
    let t = DLTensor {
        data: m._data.as_mut_ptr().cast(),
        device: DLDevice {
            device_type,
            device_id: 0,
        },
        ndim: m.shape.len() as i32,
        dtype,
        shape: m.shape.as_mut_ptr(),
        strides: m
            .strides
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: offset,
    };
    Box::into_raw(Box::new(DLManagedTensor {
        dl_tensor: t,
        manager_ctx: Box::into_raw(m).cast(),
        deleter: Some(count_legacy),
    }))
}

const F32: DLDataType = DLDataType {
    code: 2,
    bits: 32,
    lanes: 1,
};

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn an_exported_array_comes_back_in_place_and_each_share_is_released_once() {
    let a = ArrayD::from_shape_vec(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
    let e = Exported::new(HostArray::F32(a));
    assert_eq!((e.shape(), e.dtype()), (vec![2, 3], "float32"));
    let p = e.managed();
    assert_eq!(Arc::strong_count(&e), 2);
    // SAFETY: `p` is a fresh managed tensor of `e`, owned here.
    let f = unsafe { ForeignArray::from_legacy(p) }.expect("a valid tensor");
    assert_eq!(
        (f.shape(), f.dtype(), f.device()),
        (&[2, 3][..], Dtype::F32, (CPU, 0))
    );
    let h = f.into_host_array(|f| f).expect("on the host");
    let v = h.float_view::<f32>().expect("float32 read as it is");
    assert_eq!(
        v.as_ptr() as usize,
        e.data_ptr(),
        "the exported buffer, not a copy"
    );
    assert_eq!(v[[1, 2]], 6.5);
    assert!(h.borrowed().expect("lent").read_in_place());
    drop(v);
    assert_eq!(Arc::strong_count(&e), 2, "the job's input holds the share");
    drop(h);
    assert_eq!(
        Arc::strong_count(&e),
        1,
        "the deleter ran once with the last reader"
    );
    // Unconsumed shares are released by whoever drops them: the same deleter.
    let q = e.managed();
    // SAFETY: `q` is a fresh managed tensor of `e`; its deleter is called once.
    unsafe { ((*q).deleter.unwrap())(q) };
    assert_eq!(Arc::strong_count(&e), 1);
}

#[test]
fn exports_of_every_output_type_describe_their_buffer() {
    let i = ArrayD::from_shape_vec(vec![3], vec![-1i32, 0, 7]).unwrap();
    let e = Exported::new(HostArray::I32(i));
    let p = e.managed();
    // SAFETY: a fresh managed tensor of `e`.
    let t = unsafe { &(*p).dl_tensor };
    assert_eq!((t.dtype.code, t.dtype.bits, t.ndim), (0, 32, 1));
    // SAFETY: as above; released once.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    assert_eq!(
        f.into_host_array(|f| f).unwrap(),
        HostArray::I32(ArrayD::from_shape_vec(vec![3], vec![-1, 0, 7]).unwrap())
    );
    assert_eq!(Arc::strong_count(&e), 1);
    let d = Exported::new(HostArray::F64(ArrayD::zeros(vec![2, 0, 4])));
    let p = d.managed();
    // SAFETY: a fresh managed tensor of `d`, released once below.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    assert_eq!(f.shape(), &[2, 0, 4]);
    assert_eq!(
        f.into_host_array(|f| f).unwrap(),
        HostArray::F64(ArrayD::zeros(vec![2, 0, 4]))
    );
    assert_eq!(Arc::strong_count(&d), 1);
}

#[test]
fn bad_tensors_are_refused_and_still_released_once() {
    static N: AtomicUsize = AtomicUsize::new(0);
    let data = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0]);
    let cases: Vec<(*mut DLManagedTensor, &str)> = vec![
        // A transposed (Fortran-ordered) 3×2 view.
        (
            legacy(data.clone(), F32, vec![3, 2], Some(vec![1, 3]), 0, CPU, &N),
            "not C-contiguous",
        ),
        (
            legacy(
                data.clone(),
                DLDataType {
                    code: 5,
                    bits: 64,
                    lanes: 1,
                },
                vec![3],
                None,
                0,
                CPU,
                &N,
            ),
            "DLPack dtype (code 5",
        ),
        (
            legacy(data.clone(), F32, vec![6], None, 2, CPU, &N),
            "not aligned for float32",
        ),
        (
            legacy(data.clone(), F32, vec![-6], None, 0, CPU, &N),
            "extent -6",
        ),
        (
            legacy(data.clone(), F32, vec![6], None, 0, 14, &N),
            "DLPack device type 14",
        ),
    ];
    let k = cases.len();
    for (p, want) in cases {
        // SAFETY: `p` was made above and is released by `from_legacy` (once).
        let e = unsafe { ForeignArray::from_legacy(p) }.unwrap_err();
        assert!(e.contains(want), "{e:?} should say {want:?}");
    }
    assert_eq!(N.load(Ordering::SeqCst), k, "each deleter called once");
}

#[test]
fn layouts_dlpack_allows_are_read_as_they_are() {
    static N: AtomicUsize = AtomicUsize::new(0);
    let data = floats(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // Explicit C strides, an arbitrary stride on an axis of extent 1, and an offset of one
    // element: all read in place.
    let p = legacy(data, F32, vec![2, 1, 3], Some(vec![3, 99, 1]), 4, CPU, &N);
    // SAFETY: made above; released once when `h` drops.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    let h = f.into_host_array(|f| f).unwrap();
    assert_eq!(h.float_view::<f32>().unwrap()[[1, 0, 2]], 6.0);
    assert_eq!(N.load(Ordering::SeqCst), 0, "alive while read");
    drop(h);
    assert_eq!(N.load(Ordering::SeqCst), 1);
    // Small integer types and bool are converted to float32; on a GPU: no host array.
    let p = legacy(
        vec![0, 1, 2, 255],
        DLDataType {
            code: 6,
            bits: 8,
            lanes: 1,
        },
        vec![4],
        None,
        0,
        CPU,
        &N,
    );
    // SAFETY: made above; released once, here.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    assert_eq!(f.dtype().name(), "bool");
    let h = f.into_host_array(|f| f).unwrap();
    assert_eq!(
        h.to_float::<f32>().into_raw_vec_and_offset().0,
        vec![0.0, 1.0, 1.0, 1.0]
    );
    let p = legacy(floats(&[1.0]), F32, vec![1], None, 0, CUDA, &N);
    // SAFETY: made above; released once, here.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    assert_eq!((f.on_host(), f.device()), (false, (CUDA, 0)));
    assert!(f.into_host_array(|f| f).unwrap_err().contains("GPU 0"));
    assert_eq!(N.load(Ordering::SeqCst), 3);
}

#[test]
fn a_versioned_tensor_of_another_major_version_is_released_unread() {
    static N: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn count(p: *mut DLManagedTensorVersioned) {
        N.fetch_add(1, Ordering::SeqCst);
        // SAFETY: boxed below.
        drop(unsafe { Box::from_raw(p) });
    }
    let mut shape = [2i64];
    let mut data = [1.0f64, 2.0];
    let mut make = |major| {
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count),
            flags: 0,
            dl_tensor: DLTensor {
                data: data.as_mut_ptr().cast(),
                device: DLDevice {
                    device_type: CPU,
                    device_id: 0,
                },
                ndim: 1,
                dtype: DLDataType {
                    code: 2,
                    bits: 64,
                    lanes: 1,
                },
                shape: shape.as_mut_ptr(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        }))
    };
    let (v2, v1) = (make(2), make(1));
    // SAFETY: made above, released once each.
    let e = unsafe { ForeignArray::from_versioned(v2) }.unwrap_err();
    assert!(e.contains("version 2"), "{e}");
    // SAFETY: as above.
    let f = unsafe { ForeignArray::from_versioned(v1) }.unwrap();
    let h = f.into_host_array(|f| f).unwrap();
    assert_eq!(h.float_view::<f64>().unwrap().as_ptr(), data.as_ptr());
    drop(h);
    assert_eq!(N.load(Ordering::SeqCst), 2);
}

#[test]
fn backend_arrays_export_where_they_live_and_foreign_ones_adopt_on_their_device() {
    use crate::{Cpu, Foreign, Memory, Single};
    let b = Cpu::<Single>::new();
    let h = ArrayD::from_shape_vec(vec![2, 3], vec![1.0f32, -2.0, 3.5, 4.0, 5.0, 6.0]).unwrap();
    let e = Exported::from_backend(b.export(b.upload(h.view()).unwrap()).unwrap()).unwrap();
    assert_eq!(
        (e.device(), e.shape(), e.dtype()),
        ((CPU, 0), vec![2, 3], "float32")
    );
    let copy = Exported::copy_of(&e).expect("host memory is copied");
    assert_ne!(copy.data_ptr(), e.data_ptr());
    let p = e.managed();
    // SAFETY: a fresh managed tensor of `e`, released once when the buffer drops.
    let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
    let buf = f.into_foreign_buffer(|f| f).unwrap();
    assert_eq!((buf.location(), buf.addr()), (Location::Host, e.data_ptr()));
    assert_eq!(b.download(&b.adopt(&buf).unwrap()).unwrap(), h);
    assert_eq!(Arc::strong_count(&e), 2, "the buffer holds the share");
    drop(buf);
    assert_eq!(Arc::strong_count(&e), 1);

    // A GPU array: described on its device, never read here; the CPU backend refuses it.
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = legacy(floats(&[1.0, 2.0]), F32, vec![2], None, 0, CUDA, &N);
    // SAFETY: made above; released once when `buf` drops.
    let buf = unsafe { ForeignArray::from_legacy(p) }
        .unwrap()
        .into_foreign_buffer(|f| f)
        .unwrap();
    assert_eq!(buf.location(), Location::Cuda(0));
    let err = b.adopt(&buf).err().unwrap().to_string();
    assert!(err.contains("CUDA device 0"), "{err}");
    drop(buf);
    let p = legacy(
        vec![0; 8],
        DLDataType {
            code: 0,
            bits: 32,
            lanes: 1,
        },
        vec![2],
        None,
        0,
        CUDA,
        &N,
    );
    // SAFETY: as above.
    let err = unsafe { ForeignArray::from_legacy(p) }
        .unwrap()
        .into_foreign_buffer(|f| f)
        .unwrap_err();
    assert!(
        err.contains("int32") && err.contains("float32 or float64"),
        "{err}"
    );
    assert_eq!(N.load(Ordering::SeqCst), 2, "each released once");

    // A backend array on a GPU exports as kDLCUDA on its ordinal; its owner is dropped with
    // the last share; it is not copied on the host.
    let owner = Arc::new(7u8);
    let e = Exported::from_backend(ExportedBuffer {
        addr: 4096,
        location: Location::Cuda(3),
        shape: vec![4, 2],
        dtype: crate::DType::I64,
        owner: Box::new(owner.clone()),
    })
    .unwrap();
    assert_eq!((e.device(), e.dtype()), ((CUDA, 3), "int64"));
    assert!(Exported::copy_of(&e).is_none());
    let p = e.managed();
    // SAFETY: a fresh managed tensor; only its description is read, then it is released.
    unsafe {
        assert_eq!(
            (*p).dl_tensor.device,
            DLDevice {
                device_type: CUDA,
                device_id: 3
            }
        );
        assert_eq!(
            std::slice::from_raw_parts((*p).dl_tensor.strides, 2),
            &[2, 1]
        );
        ((*p).deleter.unwrap())(p);
    }
    drop(e);
    assert_eq!(
        Arc::strong_count(&owner),
        1,
        "the owner dropped with the last share"
    );
}
