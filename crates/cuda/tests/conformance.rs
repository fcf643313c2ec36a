//! The backend conformance suite of `monomorph_core::testing`, for `Cuda<Single>` and
//! `Cuda<Double>`, plus the no-device contract (an error, never a panic).
//!
//! Without a usable CUDA device every suite test prints a skip line and passes; with
//! `MONOMORPH_REQUIRE_CUDA=1` (set by the device bundle's `run.sh`) a skip is a failure, so a
//! GPU run cannot pass vacuously. With the `cpu-stand-in` feature the suite is instantiated
//! with `Cpu<P>` in the device's place (see `common`).

mod common;

use monomorph_core::{Double, Error, Single};
use monomorph_cuda::Cuda;

mod single {
    fn make() -> Option<super::common::Dev<super::Single>> {
        super::common::make()
    }
    monomorph_core::backend_test_suite!(make);
}

mod double {
    fn make() -> Option<super::common::Dev<super::Double>> {
        super::common::make()
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
