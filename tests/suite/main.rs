//! monomorph's integration tests: one binary (one link) with a module per area.
//!
//! Fixture data lives in `tests/fixtures/` (copied from the peers' reference cases), so the
//! project tests itself without `../shared`.

mod cg;
mod cli;
mod common;
mod conformance;
mod filter_fixtures;
mod fuzz;
mod io_cli;
mod matching;
mod peaks;
mod resample_fixtures;
