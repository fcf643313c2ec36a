//! A fuzz harness on stable Rust for every reader and parser of untrusted input: `.npy` and MRC
//! files (plain, gzip and bzip2), Euler-angle CSV files, CSR matrix parts, and the size and
//! memory arguments of the command line.
//!
//! The inputs are structure-aware: each property generates a *valid* input (any dtype, byte
//! order, memory order, format version, axis order, extended header…) and then mutates it
//! (header fields set to hostile values, shape and dtype text rewritten, bytes flipped, the file
//! truncated or extended, the compressed stream corrupted). Every input must give `Ok` or a
//! clean `Err`: a panic fails the property (proptest catches it and shrinks the input), and a
//! watchdog aborts the process, naming the reader, when one input runs longer than
//! [`HANG_LIMIT`]. Where the answer is known it is checked too: a valid file decodes to its
//! values, a truncated one is an error, and the compressed path agrees with the plain one.
//!
//! In CI each property runs its default number of cases (a few thousand in all, seconds in
//! release). The long run, one million inputs per reader:
//!
//! ```text
//! MONOMORPH_FUZZ_CASES=1000000 nice cargo test --release --all-features --test suite fuzz:: \
//!     -- --nocapture --test-threads=1
//! ```
//!
//! Each property prints one line: inputs run, the slowest input, the total time.

use std::fmt::Debug;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use monomorph::cli::args::{parse_bytes, parse_dims};
use monomorph::io::{Codec, Format, HostArray, decode_array, read_euler_csv};
use monomorph::prelude::*;
use ndarray::{ArrayD, Dimension, IxDyn};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The longest one input may take before the watchdog calls it a hang.
const HANG_LIMIT: Duration = Duration::from_secs(10);

/// Cases per property: `MONOMORPH_FUZZ_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("MONOMORPH_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Aborts the process when one input runs longer than [`HANG_LIMIT`].
struct Watchdog {
    started_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    slowest_us: AtomicU64,
    inputs: AtomicU64,
}

impl Watchdog {
    fn start(name: &'static str) -> Self {
        let started_ms = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let (s, st) = (started_ms.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let at = s.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64 + 1;
                if at != 0 && now.saturating_sub(at) > HANG_LIMIT.as_millis() as u64 {
                    eprintln!("fuzz {name}: HANG, one input ran longer than {HANG_LIMIT:?}");
                    std::process::abort();
                }
            }
        });
        Watchdog {
            started_ms,
            stop,
            epoch,
            slowest_us: AtomicU64::new(0),
            inputs: AtomicU64::new(0),
        }
    }

    /// Times one input.
    fn case<T>(&self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        self.started_ms.store(
            self.epoch.elapsed().as_millis() as u64 + 1,
            Ordering::Relaxed,
        );
        let r = f();
        self.started_ms.store(0, Ordering::Relaxed);
        self.inputs.fetch_add(1, Ordering::Relaxed);
        self.slowest_us
            .fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        r
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs `check` on `cases(default)` inputs from `strategy` under a watchdog and reports.
fn fuzz<S: Strategy>(
    name: &'static str,
    default: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: Debug,
{
    let n = cases(default);
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    });
    let wd = Watchdog::start(name);
    let t0 = Instant::now();
    let result = runner.run(&strategy, |v| wd.case(|| check(v)));
    eprintln!(
        "fuzz {name}: {} inputs (of {n} asked; more when a failure is shrunk), slowest {:.2} ms, {:.1} s in all: {}",
        wd.inputs.load(Ordering::Relaxed),
        wd.slowest_us.load(Ordering::Relaxed) as f64 / 1e3,
        t0.elapsed().as_secs_f64(),
        if result.is_ok() {
            "0 panics, 0 hangs, every answer as expected"
        } else {
            "FAILED"
        }
    );
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Byte-level mutations shared by the file readers.

/// One edit of a file's bytes.
#[derive(Debug, Clone)]
enum Edit {
    /// Cut the file to `len % (len + 1)` bytes.
    Truncate(usize),
    /// Append bytes.
    Append(Vec<u8>),
    /// Set one byte (position modulo the length).
    Set(usize, u8),
    /// Overwrite a little-endian 32-bit word at a 4-byte aligned position (MRC header fields).
    Word(usize, i32),
    /// Overwrite a range with arbitrary bytes.
    Splice(usize, Vec<u8>),
}

fn hostile_i32() -> impl Strategy<Value = i32> {
    prop_oneof![
        any::<i32>(),
        Just(0),
        Just(-1),
        Just(1),
        Just(i32::MAX),
        Just(i32::MIN),
        Just(1 << 20),
        Just(1 << 30),
        0..70i32,
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Truncate),
        proptest::collection::vec(any::<u8>(), 1..16).prop_map(Edit::Append),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Set(p, b)),
        (0usize..256, hostile_i32()).prop_map(|(w, v)| Edit::Word(w, v)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..12)
        )
            .prop_map(|(p, b)| Edit::Splice(p, b)),
    ]
}

/// Applies `edits`; `true` when the result is a strict prefix of the original (it must fail).
fn apply(bytes: &mut Vec<u8>, edits: &[Edit]) -> bool {
    let orig = bytes.clone();
    for e in edits {
        let len = bytes.len();
        match e {
            Edit::Truncate(n) => bytes.truncate(n % (len + 1)),
            Edit::Append(b) => bytes.extend_from_slice(b),
            Edit::Set(p, b) if len > 0 => bytes[p % len] = *b,
            Edit::Word(w, v) if 4 * w + 4 <= len => {
                bytes[4 * w..4 * w + 4].copy_from_slice(&v.to_le_bytes())
            }
            Edit::Splice(p, b) if len > 0 => {
                let p = p % len;
                let end = (p + b.len()).min(len);
                bytes[p..end].copy_from_slice(&b[..end - p]);
            }
            _ => {}
        }
    }
    bytes.len() < orig.len() && orig.starts_with(bytes)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("gzip to memory");
    e.finish().expect("gzip to memory")
}

fn bzip2(bytes: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    e.write_all(bytes).expect("bzip2 to memory");
    e.finish().expect("bzip2 to memory")
}

/// The plain and the compressed paths give the same answer on the same bytes.
fn same_answer(
    plain: &Result<monomorph::io::Volume, String>,
    packed: &Result<monomorph::io::Volume, String>,
    codec: &str,
) -> Result<(), TestCaseError> {
    match (plain, packed) {
        (Ok(a), Ok(b)) => {
            // Bit for bit (a flipped byte can make a NaN, which equals nothing).
            let bits = |v: &monomorph::io::Volume| {
                v.data
                    .to_float::<f64>()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(a.data.dtype(), b.data.dtype());
            prop_assert_eq!(a.data.shape(), b.data.shape());
            prop_assert!(bits(a) == bits(b), "{} decodes other values", codec);
        }
        (Err(_), Err(_)) => {}
        (a, b) => prop_assert!(
            false,
            "plain {:?} but {} {:?}",
            a.as_ref().map(|_| ()),
            codec,
            b.as_ref().map(|_| ())
        ),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// .npy

const NPY_DTYPES: [&str; 8] = ["f4", "f8", "i4", "i8", "i1", "u1", "i2", "u2"];

/// A valid `.npy` file to start from.
#[derive(Debug, Clone)]
struct NpySpec {
    dtype: usize,
    big: bool,
    fortran: bool,
    version: u8,
    shape: Vec<usize>,
    seed: u64,
}

fn npy_spec() -> impl Strategy<Value = NpySpec> {
    (
        0..NPY_DTYPES.len(),
        any::<bool>(),
        any::<bool>(),
        1u8..=3,
        proptest::collection::vec(0usize..5, 0..4),
        any::<u64>(),
    )
        .prop_map(|(dtype, big, fortran, version, shape, seed)| NpySpec {
            dtype,
            big,
            fortran,
            version,
            shape,
            seed,
        })
}

/// The file's bytes and the values it holds (in C order, as f64).
fn npy_file(s: &NpySpec) -> (Vec<u8>, ArrayD<f64>) {
    let code = NPY_DTYPES[s.dtype];
    let order = if code.ends_with('1') {
        '|'
    } else if s.big {
        '>'
    } else {
        '<'
    };
    let shape = match s.shape.len() {
        1 => format!("({},)", s.shape[0]),
        _ => format!(
            "({})",
            s.shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{order}{code}', 'fortran_order': {}, 'shape': {shape}, }}",
        if s.fortran { "True" } else { "False" }
    );
    let pre = if s.version == 1 { 10 } else { 12 };
    while !(pre + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut f = b"\x93NUMPY".to_vec();
    f.extend_from_slice(&[s.version, 0]);
    if s.version == 1 {
        f.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        f.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    f.extend_from_slice(dict.as_bytes());
    let mut x = s.seed | 1;
    let values = ArrayD::from_shape_fn(IxDyn(&s.shape), |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = (x % 200) as f64 - 100.0;
        match code {
            "u1" | "u2" => r.abs(),
            "f4" | "f8" => r / 8.0,
            _ => r,
        }
    });
    let stored: Vec<f64> = if s.fortran {
        values.t().iter().copied().collect()
    } else {
        values.iter().copied().collect()
    };
    for v in stored {
        let (le, be): (Vec<u8>, Vec<u8>) = match code {
            "f4" => (
                (v as f32).to_le_bytes().into(),
                (v as f32).to_be_bytes().into(),
            ),
            "f8" => (v.to_le_bytes().into(), v.to_be_bytes().into()),
            "i4" => (
                (v as i32).to_le_bytes().into(),
                (v as i32).to_be_bytes().into(),
            ),
            "i8" => (
                (v as i64).to_le_bytes().into(),
                (v as i64).to_be_bytes().into(),
            ),
            "i1" => (vec![v as i8 as u8], vec![v as i8 as u8]),
            "u1" => (vec![v as u8], vec![v as u8]),
            "i2" => (
                (v as i16).to_le_bytes().into(),
                (v as i16).to_be_bytes().into(),
            ),
            _ => (
                (v as u16).to_le_bytes().into(),
                (v as u16).to_be_bytes().into(),
            ),
        };
        f.extend_from_slice(if s.big { &be } else { &le });
    }
    (f, values)
}

/// Text edits of the header dictionary: hostile shapes and dtypes.
#[derive(Debug, Clone)]
enum NpyText {
    Shape(String),
    Descr(String),
    Fortran(String),
}

fn npy_text() -> impl Strategy<Value = NpyText> {
    let num = prop_oneof![
        (0u64..6).prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        Just("18446744073709551615".to_string()),
        Just("-1".to_string()),
        Just("4294967296".to_string()),
        Just("99999999999999999999999".to_string()),
        "[ 0-9a-zL,()-]{0,6}",
    ];
    prop_oneof![
        proptest::collection::vec(num, 0..5).prop_map(|v| NpyText::Shape(v.join(", "))),
        "[<>|=]?[a-zA-Z]?[0-9]{0,2}".prop_map(NpyText::Descr),
        prop_oneof![
            Just("True".to_string()),
            Just("False".to_string()),
            "[a-zA-Z]{0,6}"
        ]
        .prop_map(NpyText::Fortran),
    ]
}

fn apply_npy_text(bytes: &mut Vec<u8>, t: &NpyText) {
    let Ok(text) = std::str::from_utf8(bytes.get(10..).unwrap_or(&[])) else {
        return;
    };
    let (key, val) = match t {
        NpyText::Shape(v) => ("'shape': (", format!("{v})")),
        NpyText::Descr(v) => ("'descr': '", format!("{v}'")),
        NpyText::Fortran(v) => ("'fortran_order': ", v.clone()),
    };
    let Some(i) = text.find(key) else { return };
    let start = i + key.len();
    let end = text[start..]
        .find([')', '\'', ','])
        .map_or(text.len(), |e| start + e + 1);
    let mut s = text.to_string();
    s.replace_range(start..end, &val);
    bytes.truncate(10);
    bytes.extend_from_slice(s.as_bytes());
}

#[test]
fn npy_reader() {
    fuzz(
        "npy (plain and gzip)",
        1500,
        (
            npy_spec(),
            proptest::collection::vec(npy_text(), 0..2),
            proptest::collection::vec(edit(), 0..3),
        ),
        |(spec, texts, edits)| {
            let (mut bytes, values) = npy_file(&spec);
            let pristine = texts.is_empty() && edits.is_empty();
            for t in &texts {
                apply_npy_text(&mut bytes, t);
            }
            let prefix = apply(&mut bytes, &edits);
            let plain = decode_array(&bytes, Format::Npy, Codec::Plain);
            if pristine {
                let v = plain.as_ref().map_err(|e| TestCaseError::fail(e.clone()))?;
                prop_assert_eq!(v.data.to_float::<f64>(), values);
            }
            if prefix && texts.is_empty() {
                prop_assert!(plain.is_err(), "a truncated file decoded");
            }
            let packed = decode_array(&gzip(&bytes), Format::Npy, Codec::Gzip);
            same_answer(&plain, &packed, "gzip")
        },
    );
}

// ---------------------------------------------------------------------------------------------
// MRC

/// A valid MRC file to start from.
#[derive(Debug, Clone)]
struct MrcSpec {
    mode: i32,
    big: bool,
    dims: [usize; 3],
    nsymbt: usize,
    axes: usize,
    seed: u64,
}

const AXIS_ORDERS: [[i32; 3]; 6] = [
    [1, 2, 3],
    [1, 3, 2],
    [2, 1, 3],
    [2, 3, 1],
    [3, 1, 2],
    [3, 2, 1],
];

fn mrc_spec() -> impl Strategy<Value = MrcSpec> {
    (
        prop_oneof![Just(0), Just(1), Just(2), Just(6), Just(12)],
        any::<bool>(),
        [1usize..5, 1usize..5, 1usize..5],
        prop_oneof![Just(0usize), 1usize..80],
        0..AXIS_ORDERS.len(),
        any::<u64>(),
    )
        .prop_map(|(mode, big, dims, nsymbt, axes, seed)| MrcSpec {
            mode,
            big,
            dims,
            nsymbt,
            axes,
            seed,
        })
}

/// The file's bytes and, in file order, the values it holds.
fn mrc_file(s: &MrcSpec) -> (Vec<u8>, Vec<f32>) {
    let [nx, ny, nz] = s.dims;
    let mut h = vec![0u8; 1024];
    let put = |h: &mut Vec<u8>, w: usize, v: i32| {
        let b = if s.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        h[4 * w..4 * w + 4].copy_from_slice(&b);
    };
    for (w, v) in [
        (0, nx as i32),
        (1, ny as i32),
        (2, nz as i32),
        (3, s.mode),
        (7, nx as i32),
        (8, ny as i32),
        (9, nz as i32),
        (23, s.nsymbt as i32),
    ] {
        put(&mut h, w, v);
    }
    for (k, &m) in AXIS_ORDERS[s.axes].iter().enumerate() {
        put(&mut h, 16 + k, m);
    }
    h[208..212].copy_from_slice(b"MAP ");
    h[212..214].copy_from_slice(if s.big { &[0x11, 0x11] } else { &[0x44, 0x44] });
    h.extend(std::iter::repeat_n(0xAB, s.nsymbt));
    let mut x = s.seed | 1;
    let mut values = Vec::new();
    for _ in 0..nx * ny * nz {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = (x % 200) as i32 - 100;
        let (v, bytes): (f32, Vec<u8>) = match s.mode {
            0 => (r as f32, vec![r as i8 as u8]),
            1 => (
                r as f32,
                if s.big {
                    (r as i16).to_be_bytes().into()
                } else {
                    (r as i16).to_le_bytes().into()
                },
            ),
            6 => {
                let u = r.unsigned_abs() as u16;
                (
                    u as f32,
                    if s.big {
                        u.to_be_bytes().into()
                    } else {
                        u.to_le_bytes().into()
                    },
                )
            }
            12 => {
                // integers up to 100 and halves are exact in float16: 1.5 = 0x3e00 scaled.
                let v = r as f32 / 2.0;
                let half = f32_to_f16_exact(v);
                (
                    v,
                    if s.big {
                        half.to_be_bytes().into()
                    } else {
                        half.to_le_bytes().into()
                    },
                )
            }
            _ => {
                let v = r as f32 / 8.0;
                (
                    v,
                    if s.big {
                        v.to_be_bytes().into()
                    } else {
                        v.to_le_bytes().into()
                    },
                )
            }
        };
        values.push(v);
        h.extend_from_slice(&bytes);
    }
    (h, values)
}

/// float16 bits of a value that float16 holds exactly (|v| ≤ 50, a multiple of 0.5).
fn f32_to_f16_exact(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let sign = if v < 0.0 { 0x8000u16 } else { 0 };
    let a = v.abs();
    let e = a.log2().floor() as i32;
    let frac = ((a / 2f32.powi(e) - 1.0) * 1024.0).round() as u16;
    sign | (((e + 15) as u16) << 10) | frac
}

#[test]
fn mrc_reader() {
    fuzz(
        "mrc (plain and gzip)",
        1500,
        (mrc_spec(), proptest::collection::vec(edit(), 0..3)),
        |(spec, edits)| {
            let (mut bytes, values) = mrc_file(&spec);
            let pristine = edits.is_empty();
            let prefix = apply(&mut bytes, &edits);
            let plain = decode_array(&bytes, Format::Mrc, Codec::Plain);
            if pristine {
                let v = plain.as_ref().map_err(|e| TestCaseError::fail(e.clone()))?;
                let HostArray::F32(a) = &v.data else {
                    return Err(TestCaseError::fail("MRC data is not float32"));
                };
                let [nx, ny, nz] = spec.dims;
                prop_assert_eq!(a.len(), nx * ny * nz);
                if spec.axes == 0 {
                    prop_assert_eq!(a.iter().copied().collect::<Vec<_>>(), values);
                } else {
                    let sorted = |mut v: Vec<f32>| {
                        v.sort_by(f32::total_cmp);
                        v
                    };
                    prop_assert_eq!(sorted(a.iter().copied().collect()), sorted(values));
                }
            }
            if prefix {
                prop_assert!(plain.is_err(), "a truncated file decoded");
            }
            let packed = decode_array(&gzip(&bytes), Format::Mrc, Codec::Gzip);
            same_answer(&plain, &packed, "gzip")
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Compressed streams: corrupt the compressed bytes themselves.

#[test]
fn compressed_streams() {
    fuzz(
        "gzip and bzip2 streams (npy and mrc inside)",
        400,
        (
            npy_spec(),
            mrc_spec(),
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(edit(), 0..3),
        ),
        |(nspec, mspec, mrc, bz, edits)| {
            let (format, raw) = if mrc {
                (Format::Mrc, mrc_file(&mspec).0)
            } else {
                (Format::Npy, npy_file(&nspec).0)
            };
            let plain = decode_array(&raw, format, Codec::Plain);
            prop_assert!(plain.is_ok(), "the valid file did not decode");
            let (codec, mut packed) = if bz {
                (Codec::Bzip2, bzip2(&raw))
            } else {
                (Codec::Gzip, gzip(&raw))
            };
            if edits.is_empty() {
                let got = decode_array(&packed, format, codec);
                return same_answer(&plain, &got, "compressed");
            }
            let prefix = apply(&mut packed, &edits);
            let got = decode_array(&packed, format, codec);
            if prefix {
                prop_assert!(got.is_err(), "a truncated {:?} stream decoded", codec);
            }
            Ok(())
        },
    );
}

/// A gzip bomb — a tiny file whose header announces a huge array, or whose stream holds far
/// more than the header says — is an error before the memory is spent.
#[test]
fn compressed_bombs_fail_cleanly() {
    // 2^40 float32 elements announced in a 200-byte gzip file.
    let a = ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
    let mut npy = monomorph::io::npy::encode_npy(&a);
    let text = String::from_utf8_lossy(&npy[10..]).replace("(4, 4)", "(1048576, 1048576)");
    npy.truncate(10);
    npy.extend_from_slice(text.as_bytes());
    let e = decode_array(&gzip(&npy), Format::Npy, Codec::Gzip).unwrap_err();
    assert!(e.contains("more than"), "{e}");
    // A valid header followed by 64 MiB of zeros (compresses to ~64 KiB): stops after the data.
    let mut big = monomorph::io::npy::encode_npy(&a);
    big.resize(big.len() + (64 << 20), 0);
    let t = Instant::now();
    let e = decode_array(&gzip(&big), Format::Npy, Codec::Gzip).unwrap_err();
    assert!(e.contains("more data follows"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
    let e = decode_array(&bzip2(&npy), Format::Npy, Codec::Bzip2).unwrap_err();
    assert!(e.contains("truncated") || e.contains("more than"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Euler-angle CSV (read from a file, as `--euler` reads it).

fn euler_line() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        (-720.0f64..720.0).prop_map(|v| format!("{v}")),
        (-720i32..720).prop_map(|v| v.to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("1e400".to_string()),
        Just(String::new()),
        "[a-z#.eE+-]{1,4}",
    ];
    let sep = prop_oneof![
        Just(","),
        Just(" "),
        Just("\t"),
        Just(", "),
        Just(";"),
        Just(",,")
    ];
    prop_oneof![
        8 => (proptest::collection::vec(num, 0..5), sep).prop_map(|(v, s)| v.join(s)),
        1 => Just("phi,theta,psi".to_string()),
        1 => "#[ -~]{0,10}",
        1 => "\\PC{0,12}",
    ]
}

fn valid_triple() -> impl Strategy<Value = [f64; 3]> {
    (-360i32..360, 0i32..180, -360i32..360)
        .prop_map(|(a, b, c)| [a as f64 / 4.0, b as f64 / 2.0, c as f64])
}

#[test]
fn euler_csv_reader() {
    let dir = std::env::temp_dir().join(format!("monomorph-fuzz-euler-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let path = dir.join("e.csv");
    fuzz(
        "euler csv",
        1500,
        prop_oneof![
            proptest::collection::vec(valid_triple(), 1..6).prop_map(Ok),
            (
                proptest::collection::vec(euler_line(), 0..6),
                proptest::collection::vec(any::<u8>(), 0..4),
                any::<bool>()
            )
                .prop_map(Err),
        ],
        |input| {
            match input {
                Ok(triples) => {
                    let text: String = triples
                        .iter()
                        .map(|t| format!("{},{},{}\n", t[0], t[1], t[2]))
                        .collect();
                    std::fs::write(&path, text).expect("scratch file");
                    let got =
                        read_euler_csv(&path).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(got, triples);
                }
                Err((lines, junk, crlf)) => {
                    let mut text = lines.join(if crlf { "\r\n" } else { "\n" }).into_bytes();
                    text.extend_from_slice(&junk);
                    std::fs::write(&path, text).expect("scratch file");
                    if let Ok(v) = read_euler_csv(&path) {
                        prop_assert!(!v.is_empty());
                        prop_assert!(v.iter().flatten().all(|x| x.is_finite()));
                    }
                }
            }
            Ok(())
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// CSR parts, as `solve --csr` hands them to the library.

/// A valid CSR matrix (pattern and values) and edits to its parts.
#[derive(Debug, Clone)]
struct CsrCase {
    nrows: usize,
    ncols: usize,
    indptr: Vec<i64>,
    indices: Vec<i64>,
    batch: usize,
    per_entry: bool,
    edits: Vec<(u8, usize, i64)>,
}

fn csr_case() -> impl Strategy<Value = CsrCase> {
    (
        0usize..6,
        0usize..6,
        any::<u64>(),
        1usize..3,
        any::<bool>(),
        proptest::collection::vec(
            (
                0u8..5,
                any::<usize>(),
                prop_oneof![-3i64..12, any::<i64>(), Just(i64::MAX), Just(i64::MIN)],
            ),
            0..3,
        ),
    )
        .prop_map(|(nrows, ncols, seed, batch, per_entry, edits)| {
            let mut x = seed | 1;
            let mut indptr = vec![0i64];
            let mut indices = Vec::new();
            for _ in 0..nrows {
                for c in 0..ncols {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 3 == 0 {
                        indices.push(c as i64);
                    }
                }
                indptr.push(indices.len() as i64);
            }
            CsrCase {
                nrows,
                ncols,
                indptr,
                indices,
                batch,
                per_entry,
                edits,
            }
        })
}

#[test]
fn csr_parts() {
    let cpu = Cpu::<Double>::new();
    fuzz("csr parts", 1500, csr_case(), |c| {
        let (mut indptr, mut indices) = (c.indptr.clone(), c.indices.clone());
        let (mut nrows, mut ncols) = (c.nrows, c.ncols);
        let mut data_len = indices.len();
        let mut x_cols = ncols;
        for &(what, at, v) in &c.edits {
            match what {
                0 if !indptr.is_empty() => {
                    let n = indptr.len();
                    indptr[at % n] = v;
                }
                1 if !indices.is_empty() => {
                    let n = indices.len();
                    indices[at % n] = v;
                }
                2 => match at % 4 {
                    0 => {
                        indptr.pop();
                    }
                    1 => indices.push(v),
                    2 => nrows = (v.unsigned_abs() % 8) as usize,
                    _ => ncols = (v.unsigned_abs() % 8) as usize,
                },
                3 => data_len = (v.unsigned_abs() % 12) as usize,
                _ => x_cols = (v.unsigned_abs() % 8) as usize,
            }
        }
        let shape: Vec<usize> = if c.per_entry {
            vec![c.batch, data_len]
        } else {
            vec![data_len]
        };
        let data = ArrayD::from_shape_fn(IxDyn(&shape), |i| {
            (0..i.ndim()).map(|k| i[k]).sum::<usize>() as f64 + 1.0
        });
        let valid = c.edits.is_empty();
        let m =
            monomorph::CsrMatrix::from_parts(&cpu, nrows, ncols, &indptr, &indices, data.view());
        if valid {
            prop_assert!(m.is_ok(), "a valid CSR matrix was rejected: {:?}", m.err());
        }
        let Ok(m) = m else { return Ok(()) };
        let x = cpu
            .upload(ArrayD::<f64>::ones(IxDyn(&[c.batch, x_cols])).view())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut y = cpu
            .zeros::<f64>(&[c.batch, m.nrows])
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let r = cpu.matvec_csr(&m, &x, &mut y);
        if valid && x_cols == ncols {
            prop_assert!(r.is_ok(), "matvec on a valid matrix failed: {:?}", r.err());
            // Against the dense product: row sums of the values.
            let y = cpu
                .download(&y)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for b in 0..c.batch {
                for i in 0..nrows {
                    let (s, e) = (indptr[i] as usize, indptr[i + 1] as usize);
                    let want: f64 = (s..e)
                        .map(|k| if c.per_entry { data[[b, k]] } else { data[[k]] })
                        .sum();
                    prop_assert_eq!(y[[b, i]], want);
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Size and memory arguments.

fn bytes_arg() -> impl Strategy<Value = (String, Option<u64>)> {
    let unit = prop_oneof![
        Just(("", 1u64)),
        Just(("B", 1)),
        Just(("K", 1 << 10)),
        Just(("k", 1 << 10)),
        Just(("M", 1 << 20)),
        Just(("MiB", 1 << 20)),
        Just(("G", 1 << 30)),
        Just(("GB", 1 << 30)),
        Just(("T", 1 << 40)),
    ];
    prop_oneof![
        // A whole number with a unit: the exact byte count.
        (1u64..1 << 20, unit.clone()).prop_map(|(v, (u, m))| (format!("{v}{u}"), Some(v * m))),
        // Halves with a unit of at least K: exact too.
        (0u64..1 << 10, unit.clone()).prop_map(|(v, (u, m))| {
            let want = (m >= 1024 && v > 0).then_some(v * m / 2);
            (format!("{}{u}", v as f64 / 2.0), want)
        }),
        // Anything else: Ok or a clean error.
        "[ 0-9.eE+-]{0,8}[a-zA-Z]{0,3}".prop_map(|s| (s, None)),
        "\\PC{0,12}".prop_map(|s| (s, None)),
    ]
}

#[test]
fn size_arguments() {
    fuzz(
        "size and memory arguments",
        3000,
        (
            bytes_arg(),
            prop_oneof![
                proptest::collection::vec(
                    prop_oneof![1usize..5000, any::<usize>(), Just(0usize)],
                    0..5
                )
                .prop_map(|v| v
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("x")),
                "[0-9xX, -]{0,12}",
                "\\PC{0,12}",
            ],
        ),
        |((s, want), dims)| {
            match (parse_bytes(&s), want) {
                (Ok(b), Some(w)) => prop_assert_eq!(b, w),
                (Err(e), Some(w)) if w > 0 => {
                    prop_assert!(false, "'{}' should be {} bytes: {}", s, w, e)
                }
                (Ok(b), _) => prop_assert!(b >= 1),
                (Err(e), _) => prop_assert!(!e.is_empty()),
            }
            if let Ok(d) = parse_dims(&dims) {
                prop_assert!((1..=3).contains(&d.len()) && !d.contains(&0));
                let cells = d.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
                prop_assert!(cells.is_some_and(|c| c <= isize::MAX as usize));
            }
            Ok(())
        },
    );
}

/// Inputs the long run found, kept as fixed cases.
#[test]
fn found_by_the_long_run() {
    // A dtype whose first character is multi-byte: `split_at(1)` panicked inside it.
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    let mut dict = "{'descr': '\u{80}4', 'fortran_order': False, 'shape': (2,), }".to_string();
    while !(10 + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    f.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    f.extend_from_slice(dict.as_bytes());
    f.extend_from_slice(&[0u8; 8]);
    let e = decode_array(&f, Format::Npy, Codec::Plain).unwrap_err();
    assert!(e.contains("unsupported dtype"), "{e}");
    let e = decode_array(&gzip(&f), Format::Npy, Codec::Gzip).unwrap_err();
    assert!(e.contains("unsupported dtype"), "{e}");
}
