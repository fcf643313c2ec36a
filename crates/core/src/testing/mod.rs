//! The backend conformance suite, written once and instantiated per backend with
//! [`backend_test_suite!`](crate::backend_test_suite).
