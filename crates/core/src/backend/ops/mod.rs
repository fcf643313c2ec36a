//! One trait per op family (see the [`backend`](crate::backend) module docs for conventions).

mod correlate;
mod elementwise;
mod filter;
mod linalg;
mod memory;
mod reduce;
mod resample;
mod spectral;

pub use correlate::*;
pub use elementwise::*;
pub use filter::*;
pub use linalg::*;
pub use memory::*;
pub use reduce::*;
pub use resample::*;
pub use spectral::*;
