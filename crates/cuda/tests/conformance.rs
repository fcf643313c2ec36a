//! The backend conformance suite of `monomorph_core::testing`, for `Cuda<Single>` and
//! `Cuda<Double>`, plus the no-device contract (an error, never a panic).
//!
//! Without a usable CUDA device every suite test prints a skip line and passes; with
//! `MONOMORPH_REQUIRE_CUDA=1` (set by the device bundle's `run.sh`) a skip is a failure, so a
//! GPU run cannot pass vacuously.

use monomorph_core::{Double, Error, Precision, Single};
use monomorph_cuda::Cuda;

/// The backend on device 0, or `None` (with a skip line) when this machine has no CUDA.
fn make<P: Precision>() -> Option<Cuda<P>> {
    match Cuda::<P>::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("MONOMORPH_REQUIRE_CUDA").as_deref() == Ok("1") {
                panic!("MONOMORPH_REQUIRE_CUDA=1 but no CUDA backend: {e}");
            }
            println!("skipped: {e}");
            None
        }
    }
}

mod single {
    fn make() -> Option<monomorph_cuda::Cuda<super::Single>> {
        super::make()
    }
    monomorph_core::backend_test_suite!(make);
}

mod double {
    fn make() -> Option<monomorph_cuda::Cuda<super::Double>> {
        super::make()
    }
    monomorph_core::backend_test_suite!(make);
}

#[test]
fn without_cuda_new_is_an_error_naming_the_missing_piece() {
    match monomorph_cuda::probe() {
        Ok(report) => {
            // A CUDA machine: the constructor must work, and an absent ordinal must not panic.
            assert!(report.devices > 0);
            assert!(Cuda::<Single>::new(0).is_ok());
            let err = Cuda::<Single>::new(report.devices + 7).unwrap_err();
            assert!(matches!(err, Error::DeviceUnavailable(_)), "{err}");
        }
        Err(why) => {
            let err = Cuda::<Single>::new(0).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::DeviceUnavailable(_)), "{msg}");
            assert!(
                ["driver", "device", "NVRTC", "cuFFT"]
                    .iter()
                    .any(|lib| msg.contains(lib)),
                "the error must name what is missing: {msg}"
            );
            assert!(msg.contains(&why), "{msg} vs probe {why}");
            assert!(Cuda::<Double>::new(0).is_err());
            assert_eq!(monomorph_cuda::device_count(), 0);
        }
    }
}

#[test]
fn kernel_compilation_without_nvrtc_is_an_error() {
    if monomorph_cuda::libraries().nvrtc {
        return;
    }
    let err = monomorph_cuda::kernels::compile("", "compute_90").unwrap_err();
    assert!(err.to_string().contains("NVRTC"), "{err}");
}
