//! monomorph's integration tests: one binary (one link) with a module per area.
//!
//! Fixture data lives in `tests/fixtures/` (copied from the peers' reference cases), so the
//! project tests itself without `../shared`.

mod api;
mod background;
mod cg;
mod cg_pressure;
mod cg_round_trips;
mod cg_trust;
#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod cli_filters;
#[cfg(feature = "cli")]
mod cli_hostile;
#[cfg(feature = "cli")]
mod cli_peaks;
#[cfg(feature = "cli")]
mod cli_pressure;
mod cli_pytom;
#[cfg(feature = "cli")]
mod cli_robust;
#[cfg(feature = "cli")]
mod cli_search;
#[cfg(feature = "cli")]
mod cli_solve;
mod common;
mod conformance;
#[cfg(feature = "cli")]
mod devices;
mod filter_fixtures;
mod filters;
mod fit;
#[cfg(feature = "io")]
mod fuzz;
#[cfg(feature = "cli")]
mod io_cli;
#[cfg(feature = "cli")]
mod list;
mod matching;
mod matching_filters;
#[cfg(feature = "cli")]
mod mpi;
#[cfg(feature = "cli")]
mod multi_template;
#[cfg(feature = "cli")]
mod orientation;
mod peaks;
#[cfg(feature = "cli")]
mod planted;
#[cfg(feature = "cli")]
mod pytme_frame;
mod pytom_pick;
#[cfg(feature = "cli")]
mod refine;
mod relion5;
mod resample_fixtures;
mod rotation_edges;
mod rotation_sets;
mod score_stats;
mod search;
mod symmetry;
#[cfg(feature = "cli")]
mod tilt_files;
mod whole;
