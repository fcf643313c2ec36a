//! Algorithms, generic over the backend.

pub mod cg;
pub mod filters;
pub mod fit;
pub mod matching;
pub mod peaks;
pub mod rotations;

mod result_peaks;
