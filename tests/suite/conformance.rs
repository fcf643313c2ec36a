//! The backend conformance suite (`monomorph_core::testing`), instantiated for every backend
//! compiled in. CUDA instances live in `crates/cuda/tests/conformance.rs`.

mod cpu_single {
    fn make() -> Option<monomorph::Cpu<monomorph::Single>> {
        Some(monomorph::Cpu::new())
    }
    monomorph_core::backend_test_suite!(make);
}

mod cpu_double {
    fn make() -> Option<monomorph::Cpu<monomorph::Double>> {
        Some(monomorph::Cpu::new())
    }
    monomorph_core::backend_test_suite!(make);
}
