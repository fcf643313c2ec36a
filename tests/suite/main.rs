//! monomorph's integration tests: one binary (one link) with a module per area.
//!
//! Fixture data lives in `tests/fixtures/` (copied from the peers' reference cases), so the
//! project tests itself without `../shared`.

mod common;
mod conformance;
mod resample_fixtures;
mod filter_fixtures;
mod matching;
mod peaks;
mod cg;
mod cli;
