//! `monomorph._native`: the extension behind the Python package `monomorph`.
//!
//! One entry runs a `monomorph` subcommand in-process (`monomorph::cli::embed`): the Python
//! layer turns keywords into the command's own flags, so every flag keeps its meaning,
//! default and validation, and numpy arrays stand for the input files. The GIL is released
//! while the command runs on a worker thread; the calling thread polls Python's signal
//! handlers every 50 ms, so Ctrl-C stops the run at its next rotation and raises
//! `KeyboardInterrupt`.
//!
//! Inputs are read in place: a C-ordered, aligned float32/float64 numpy array is lent to the
//! command as a [`Borrowed`] buffer (the array object kept alive by it, and read-borrowed here
//! until the worker is joined), so the job uploads it straight from numpy's memory (on the CPU
//! backend that upload is the run's working target: the input's only copy). Int32/int64 (and
//! anything else numpy could not lend as it is) are copied once.
//!
//! Outputs come back without a copy: the command hands the arrays its `.npy` files would hold
//! to the session ([`Session::outputs`]) and each becomes a numpy array that owns the Rust
//! buffer (`PyArray::from_owned_array`); with `--out (array)` no file is written at all.
//!
//! DLPack: another library's array (a torch tensor, anything with `__dlpack__`) is taken
//! through the protocol by [`take_dlpack`] (its capsule consumed, the managed tensor checked
//! by [`monomorph::dlpack`]) and a host one lent in place like a numpy array; results for such
//! a caller come back as [`DLPackArray`]s (the command's buffers exported as DLPack capsules,
//! no copy) that the caller's library's `from_dlpack` takes. A `match` target/template the
//! Python layer names in `run_command`'s `adopt` is handed over as a buffer on its device
//! (`Session::foreign`: a GPU tensor never read on the host); its maps come back as
//! [`DLPackArray`]s of that device (`Session::exported`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use monomorph::cli::embed::{self, Progress, Session};
use monomorph::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, Exported, ForeignArray, live_exports,
};
use monomorph::io::Volume;
use monomorph::ndarray::ArrayD;
use monomorph::{Borrowed, HostArray};
use numpy::{Element, PyArray, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{IntoPyObjectExt, ffi};

/// A C-ordered numpy array of element type `T` as an owned host array (one copy: the command
/// owns its inputs), or `None` when `obj` holds another type.
fn owned<T: Element + Clone>(obj: &Bound<'_, PyAny>) -> Option<ArrayD<T>> {
    let a = obj.extract::<PyReadonlyArrayDyn<'_, T>>().ok()?;
    Some(a.as_array().to_owned())
}

/// The numpy arrays lent to one run: read-borrowed (numpy's borrow flags: no Rust code takes
/// them writable meanwhile) until the run's worker is joined; dropped on the calling thread.
#[derive(Default)]
struct Lent<'py> {
    f32: Vec<PyReadonlyArrayDyn<'py, f32>>,
    f64: Vec<PyReadonlyArrayDyn<'py, f64>>,
    /// Each lent buffer by flag, to tell afterwards how the command read it.
    buffers: Vec<(String, Borrowed)>,
}

/// A C-ordered, aligned, non-empty numpy array of float type `T` lent in place (`None` when
/// `obj` is not one): the buffer of `a`, kept alive by a reference to the array object.
fn lend<'py, T: Element + 'static>(
    obj: &Bound<'py, PyAny>,
) -> Option<(PyReadonlyArrayDyn<'py, T>, *const T, Vec<usize>)> {
    let a = obj.extract::<PyReadonlyArrayDyn<'py, T>>().ok()?;
    let ptr = a.as_array().as_ptr();
    let ok = a.is_c_contiguous() && a.len() > 0 && ptr.align_offset(align_of::<T>()) == 0;
    let shape = a.shape().to_vec();
    ok.then_some((a, ptr, shape))
}

/// A numpy array as the command's host array: float32/float64 lent in place
/// ([`Borrowed`], recorded in `lent`), the others (and arrays numpy cannot lend as they are)
/// copied once.
fn host_array<'py>(
    flag: &str,
    obj: &Bound<'py, PyAny>,
    lent: &mut Lent<'py>,
) -> PyResult<HostArray> {
    // The owner every clone of the borrowed buffer holds: the numpy array object (its data
    // lives while it does; a `Py` dropped off the interpreter's threads is released later).
    let owner = || -> std::sync::Arc<dyn std::any::Any + Send + Sync> {
        std::sync::Arc::new(obj.clone().unbind())
    };
    if let Ok(f) = obj.cast::<Foreign>() {
        let taken = f.get().inner.lock().ok().and_then(|mut g| g.take());
        let a = taken
            .ok_or_else(|| PyValueError::new_err(format!("{flag}: a DLPack array given twice")))?;
        let data = a
            .into_host_array(|a| WithGil(Some(a)))
            .map_err(|e| PyValueError::new_err(format!("{flag}: {e}")))?;
        if let Some(b) = data.borrowed() {
            lent.buffers.push((flag.to_string(), b.clone()));
        }
        return Ok(data);
    }
    if let Some((a, ptr, shape)) = lend::<f32>(obj) {
        // SAFETY: `ptr` is the aligned, C-ordered data of `a` (`shape`'s product of f32), kept
        // allocated by `owner` (a reference to the array). The command only reads it; the
        // caller's Python code must not write to the array while the run reads it, the same
        // contract as numpy's own GIL-releasing functions. `a`'s read borrow is held in `lent`
        // until the worker is joined.
        let b = unsafe { Borrowed::float32(ptr, shape, owner()) };
        lent.f32.push(a);
        lent.buffers.push((flag.to_string(), b.clone()));
        return Ok(HostArray::Borrowed(b));
    }
    if let Some((a, ptr, shape)) = lend::<f64>(obj) {
        // SAFETY: as for float32 above.
        let b = unsafe { Borrowed::float64(ptr, shape, owner()) };
        lent.f64.push(a);
        lent.buffers.push((flag.to_string(), b.clone()));
        return Ok(HostArray::Borrowed(b));
    }
    if let Some(a) = owned::<f32>(obj) {
        return Ok(HostArray::F32(a));
    }
    if let Some(a) = owned::<f64>(obj) {
        return Ok(HostArray::F64(a));
    }
    if let Some(a) = owned::<i32>(obj) {
        return Ok(HostArray::I32(a));
    }
    if let Some(a) = owned::<i64>(obj) {
        return Ok(HostArray::I64(a));
    }
    Err(PyTypeError::new_err(format!(
        "{flag}: expected a numpy array of float32, float64, int32 or int64"
    )))
}

/// Releases a [`ForeignArray`] (its producer's deleter) with the GIL held, whichever thread
/// drops the last reader: a Python producer's deleter may touch reference counts.
struct WithGil(Option<ForeignArray>);

impl Drop for WithGil {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            Python::attach(|_| drop(a));
        }
    }
}

/// Another library's array taken through DLPack ([`take_dlpack`]), not yet read: the
/// command's input for the flag it is given to (lent in place when on the host). Its
/// producer's buffer is released when this object and every reader are gone.
#[pyclass(module = "monomorph._native", frozen)]
struct Foreign {
    inner: Mutex<Option<ForeignArray>>,
    shape: Vec<usize>,
    dtype: &'static str,
    device: (i32, i32),
}

#[pymethods]
impl Foreign {
    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }
    /// Number of axes.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// numpy's name of the element type.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype
    }
    /// (DLPack device type, ordinal).
    #[getter]
    fn device(&self) -> (i32, i32) {
        self.device
    }
}

const DLTENSOR: &std::ffi::CStr = c"dltensor";
const USED_DLTENSOR: &std::ffi::CStr = c"used_dltensor";
const DLTENSOR_VERSIONED: &std::ffi::CStr = c"dltensor_versioned";
const USED_DLTENSOR_VERSIONED: &std::ffi::CStr = c"used_dltensor_versioned";

/// Takes `obj`'s array through DLPack (`obj.__dlpack__(max_version=(1, 0))`, or without the
/// keyword for a producer older than DLPack 1.0): consumes the capsule (renamed
/// `used_dltensor…`, so its destructor leaves the tensor to us) and checks the tensor.
/// `ValueError` with what is wrong (the caller names the argument): a layout that is not
/// C-contiguous, an element type the command does not read, misaligned data, another device.
///
/// `stream` is passed on as `__dlpack__(stream=…)` when given: for a CUDA array the caller
/// passes 1 (the legacy default stream; DLPack: the producer orders its pending work before
/// that stream), and the backend adopting it synchronises its context before reading anyway.
#[pyfunction]
#[pyo3(signature = (obj, stream=None))]
fn take_dlpack(py: Python<'_>, obj: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Foreign> {
    let kw = PyDict::new(py);
    kw.set_item("max_version", (1, 0))?;
    if let Some(s) = stream {
        kw.set_item("stream", s)?;
    }
    let cap = match obj.call_method("__dlpack__", (), Some(&kw)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => match stream {
            Some(s) => {
                let legacy = PyDict::new(py);
                legacy.set_item("stream", s)?;
                obj.call_method("__dlpack__", (), Some(&legacy))?
            }
            None => obj.call_method0("__dlpack__")?,
        },
        Err(e) => return Err(e),
    };
    let p = cap.as_ptr();
    // SAFETY: `p` is a live object (`cap` holds it). `PyCapsule_IsValid` only reads it; a
    // valid capsule of DLPack's name holds a managed tensor of that kind (the protocol), which
    // becomes ours once the capsule is renamed "used_…": its destructor then leaves it alone
    // (DLPack's rule), and `ForeignArray` calls its deleter once. The names are static.
    let taken = unsafe {
        if ffi::PyCapsule_IsValid(p, DLTENSOR_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(p, DLTENSOR_VERSIONED.as_ptr());
            if m.is_null() || ffi::PyCapsule_SetName(p, USED_DLTENSOR_VERSIONED.as_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            ForeignArray::from_versioned(m.cast::<DLManagedTensorVersioned>())
        } else if ffi::PyCapsule_IsValid(p, DLTENSOR.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(p, DLTENSOR.as_ptr());
            if m.is_null() || ffi::PyCapsule_SetName(p, USED_DLTENSOR.as_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            ForeignArray::from_legacy(m.cast::<DLManagedTensor>())
        } else {
            return Err(PyValueError::new_err(format!(
                "__dlpack__ returned a {}, expected an unused DLPack capsule",
                cap.get_type().name()?
            )));
        }
    };
    // An error has released the tensor already (dropped with the GIL held: we hold it).
    let a = taken.map_err(PyValueError::new_err)?;
    Ok(Foreign {
        shape: a.shape().to_vec(),
        dtype: a.dtype().name(),
        device: a.device(),
        inner: Mutex::new(Some(a)),
    })
}

/// A result array lent to another library through DLPack: `from_dlpack(obj)` of numpy,
/// PyTorch, CuPy, JAX… gives an array viewing the command's buffer (no copy), which lives
/// until this object and every such array are gone. On the CPU (`__dlpack_device__` is
/// `(1, 0)`).
#[pyclass(module = "monomorph._native", frozen)]
struct DLPackArray {
    e: Arc<Exported>,
}

/// The destructor of [`DLPackArray::__dlpack__`]'s capsules: releases a tensor no consumer
/// took (a consumer renames the capsule and calls the deleter itself).
unsafe extern "C" fn drop_capsule(cap: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL held on a capsule made below; under its unused
    // name it still holds the managed tensor made for it, released here once.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, DLTENSOR.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(cap, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            if let Some(d) = (*p).deleter {
                d(p)
            }
        }
    }
}

#[pymethods]
impl DLPackArray {
    /// A DLPack capsule (`"dltensor"`) of the buffer, a new share of it. `stream` is ignored
    /// (host memory); `dl_device` other than the CPU and `copy=False` are refused; `copy=True`
    /// exports a copy. A legacy capsule whatever `max_version` (consumers take both).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version);
        if let Some(d) = dl_device
            && d != self.e.device()
        {
            return Err(PyBufferError::new_err(format!(
                "dl_device {d:?}: the array is on {:?} and is not copied to other devices",
                self.e.device()
            )));
        }
        let e = if copy == Some(true) {
            Exported::copy_of(&self.e).ok_or_else(|| {
                PyBufferError::new_err("copy=True: a GPU array is copied by its own library")
            })?
        } else {
            self.e.clone()
        };
        let p = e.managed();
        // SAFETY: `p` is a fresh managed tensor owned by the new capsule (its destructor
        // releases it unless a consumer took it); the name is static.
        unsafe {
            let cap = ffi::PyCapsule_New(p.cast(), DLTENSOR.as_ptr(), Some(drop_capsule));
            if cap.is_null() {
                if let Some(d) = (*p).deleter {
                    d(p)
                }
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, cap))
        }
    }

    /// Where the buffer lives: `(1, 0)` for the CPU, `(2, n)` for CUDA device `n`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.e.device()
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.e.shape()
    }

    /// numpy's name of the element type.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.e.dtype()
    }

    /// The buffer's address (for tests that a consumer views it, not a copy).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.e.data_ptr()
    }

    fn __repr__(&self) -> String {
        format!(
            "DLPackArray(shape={:?}, dtype={})",
            self.e.shape(),
            self.e.dtype()
        )
    }
}

/// How many exported tensors ([`DLPackArray::__dlpack__`]) their consumers have not released.
#[pyfunction]
fn dlpack_exports_alive() -> usize {
    live_exports()
}

/// A host array handed back by the command as a numpy array owning its buffer (no copy).
fn to_numpy<'py>(py: Python<'py>, a: HostArray) -> Bound<'py, PyAny> {
    match a {
        HostArray::F32(a) => PyArray::from_owned_array(py, a).into_any(),
        HostArray::F64(a) => PyArray::from_owned_array(py, a).into_any(),
        HostArray::I32(a) => PyArray::from_owned_array(py, a).into_any(),
        HostArray::I64(a) => PyArray::from_owned_array(py, a).into_any(),
        // Never an output (outputs are the command's own arrays); copied if it were.
        b @ HostArray::Borrowed(_) => to_numpy(py, b.into_owned()),
    }
}

/// What one run returns: exit code, error message, results as JSON, output arrays by name, and
/// how each lent input was read by flag (`"borrowed"`: in place; `"converted"`: into another
/// type or an owned copy).
type Outcome<'py> = (u8, String, String, Bound<'py, PyDict>, Bound<'py, PyDict>);

/// Runs `monomorph ARGS…` in this process and returns `(exit code, error message, results as
/// JSON, output arrays)`: 0 and an empty message on success. `arrays` are `(flag, numpy
/// array)` pairs read where the flag's value is `(array)` (a folder flag's files as
/// `--csr/indptr.npy` for `--csr (array)`); `documents` are `(name, text)` pairs read where a
/// path is `(array)/name` (`run.json` for `--match-run (array)`); `progress(done, total)` is
/// called as rotations finish (an exception in it stops the run and is raised); `bar` shows
/// the command's progress bar on stderr when it is a terminal. The output arrays (`scores`,
/// `x`, …: what the `.npy` files hold) are numpy arrays owning the command's buffers, or with
/// `export` [`DLPackArray`]s lending them (for a DLPack caller's library). An array may be a
/// [`Foreign`] ([`take_dlpack`]) instead of a numpy array.
///
/// `adopt` names flags whose array (a [`Foreign`]) is handed to the command as a buffer that
/// lives on its device (`Session::foreign`): `match` adopts it on the backend of that device
/// and keeps its result there; those outputs come back as [`DLPackArray`]s of that device.
#[pyfunction]
#[pyo3(signature = (args, arrays, progress=None, bar=false, documents=Vec::new(), export=false, adopt=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn run_command<'py>(
    py: Python<'py>,
    args: Vec<String>,
    arrays: Vec<(String, Bound<'py, PyAny>)>,
    progress: Option<Py<PyAny>>,
    bar: bool,
    documents: Vec<(String, String)>,
    export: bool,
    adopt: Vec<String>,
) -> PyResult<Outcome<'py>> {
    let stop = Arc::new(AtomicBool::new(false));
    let callback_error: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let mut session = Session {
        bar,
        stop: stop.clone(),
        documents: documents.into_iter().collect(),
        ..Session::default()
    };
    let mut lent = Lent::default();
    let mut adopted = Vec::new();
    for (flag, obj) in &arrays {
        if adopt.contains(flag)
            && let Ok(f) = obj.cast::<Foreign>()
        {
            let taken = f.get().inner.lock().ok().and_then(|mut g| g.take());
            let a = taken.ok_or_else(|| {
                PyValueError::new_err(format!("{flag}: a DLPack array given twice"))
            })?;
            let buf = a
                .into_foreign_buffer(|a| WithGil(Some(a)))
                .map_err(|e| PyValueError::new_err(format!("{flag}: {e}")))?;
            session.foreign.insert(flag.clone(), buf);
            adopted.push(flag.clone());
            continue;
        }
        let data = host_array(flag, obj, &mut lent)?;
        session.arrays.insert(
            flag.clone(),
            Volume {
                data,
                voxel_size: None,
            },
        );
    }
    if let Some(cb) = progress {
        let (stop, err) = (stop.clone(), callback_error.clone());
        let f: Progress = Arc::new(move |done: u64, total: u64| {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (done, total)) {
                    if let Ok(mut slot) = err.lock() {
                        slot.get_or_insert(e);
                    }
                    stop.store(true, Ordering::Relaxed);
                }
            });
        });
        session.progress = Some(f);
    }
    let (outcome, interrupted) = py.detach(|| {
        let (tx, rx) = channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    embed::run(args, session)
                }));
                let _ = tx.send(r);
            });
            let mut interrupted: Option<PyErr> = None;
            loop {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(r) => return (Some(r), interrupted),
                    Err(RecvTimeoutError::Disconnected) => return (None, interrupted),
                    Err(RecvTimeoutError::Timeout) => {
                        if interrupted.is_none()
                            && let Err(e) = Python::attach(|py| py.check_signals())
                        {
                            interrupted = Some(e);
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    });
    // The worker is joined: every reader of the lent buffers has ended.
    let how = PyDict::new(py);
    for (flag, b) in std::mem::take(&mut lent.buffers) {
        let taken = if b.converted() {
            "converted"
        } else {
            "borrowed"
        };
        how.set_item(flag, taken)?;
    }
    for flag in adopted {
        how.set_item(flag, "adopted")?;
    }
    drop(lent);
    if let Some(e) = interrupted {
        return Err(e);
    }
    if let Some(e) = callback_error.lock().ok().and_then(|mut e| e.take()) {
        return Err(e);
    }
    let out = PyDict::new(py);
    match outcome {
        Some(Ok((session, done))) => {
            let results = serde_json::Value::Object(session.results.into_iter().collect());
            for (name, e) in session.exported {
                let e = Exported::from_backend(e).map_err(PyValueError::new_err)?;
                out.set_item(name, DLPackArray { e }.into_bound_py_any(py)?)?;
            }
            for (name, a) in session.outputs {
                if export {
                    let e = DLPackArray {
                        e: Exported::new(a),
                    };
                    out.set_item(name, e.into_bound_py_any(py)?)?;
                } else {
                    out.set_item(name, to_numpy(py, a))?;
                }
            }
            Ok(match done {
                Ok(()) => (0, String::new(), results.to_string(), out, how),
                Err(e) => (e.code, e.message, results.to_string(), out, how),
            })
        }
        Some(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Ok((
                1,
                format!("internal error (a bug, please report it): {what}"),
                "{}".into(),
                out,
                how,
            ))
        }
        None => Ok((
            1,
            "internal error: the worker ended".into(),
            "{}".into(),
            out,
            how,
        )),
    }
}

/// Why CUDA device `ordinal` cannot run a match (the CUDA backend's own probe: driver,
/// device, NVRTC, cuFFT), in one line; `None` when it can.
#[pyfunction]
fn cuda_unavailable(py: Python<'_>, ordinal: usize) -> Option<String> {
    py.detach(|| {
        #[cfg(feature = "cuda")]
        let why = monomorph::Cuda::<monomorph::Single>::new(ordinal)
            .err()
            .map(|e| e.to_string());
        #[cfg(not(feature = "cuda"))]
        let why = Some(monomorph::Error::NotCompiled("cuda").to_string());
        let _ = ordinal;
        why
    })
}

/// What `monomorph devices` prints, as JSON: one object per backend.
#[pyfunction]
fn devices_json(py: Python<'_>) -> String {
    py.detach(|| embed::devices().to_string())
}

/// What `monomorph SUB --help` prints, or `None` for an unknown subcommand.
#[pyfunction]
fn help_text(sub: &str) -> Option<String> {
    embed::help(sub)
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ARRAY", embed::ARRAY)?;
    m.add_function(wrap_pyfunction!(run_command, m)?)?;
    m.add_function(wrap_pyfunction!(devices_json, m)?)?;
    m.add_function(wrap_pyfunction!(help_text, m)?)?;
    m.add_function(wrap_pyfunction!(take_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_unavailable, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack_exports_alive, m)?)?;
    m.add_class::<Foreign>()?;
    m.add_class::<DLPackArray>()?;
    Ok(())
}
