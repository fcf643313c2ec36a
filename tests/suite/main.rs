//! monomorph's integration tests: one binary (one link) with a module per area.
//!
//! Fixture data lives in `tests/fixtures/` (copied from the peers' reference cases), so the
//! project tests itself without `../shared`.

mod api;
mod cg;
#[cfg(feature = "cli")]
mod cli;
mod common;
mod conformance;
mod filter_fixtures;
mod matching;
mod peaks;
mod resample_fixtures;
