//! monomorph's integration tests: one binary (one link) with a module per area.
//!
//! Fixture data lives in `tests/fixtures/` (copied from the peers' reference cases), so the
//! project tests itself without `../shared`.

mod api;
mod cg;
mod cg_trust;
mod cli;
mod cli_peaks;
mod cli_robust;
mod cli_solve;
mod common;
mod conformance;
mod filter_fixtures;
mod fuzz;
mod io_cli;
mod matching;
mod orientation;
mod peaks;
mod resample_fixtures;
#[cfg(feature = "cli")]