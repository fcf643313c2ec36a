//! One trait per op family (see the [`backend`](crate::backend) module docs for conventions).

mod correlate;
mod elementwise;
mod filter;
mod foreign;
mod linalg;
mod memory;
mod reduce;
mod resample;
mod spectral;
mod stencil;

pub use correlate::*;
pub use elementwise::*;
pub use filter::*;
pub use foreign::*;
pub use linalg::*;
pub use memory::*;
pub use reduce::*;
pub use resample::*;
pub use spectral::*;
pub use stencil::*;

// The checks' shape helpers with the argument's name built only on failure: the checks run on
// every op call, and most names carry the op's (`format!`), which a passing call should not pay
// for. Messages are exactly those of `crate::shape`'s helpers.

/// [`crate::shape::same_shape`] naming the argument lazily.
fn same_shape_named(what: impl FnOnce() -> String, a: &[usize], b: &[usize]) -> crate::Result<()> {
    if a == b {
        Ok(())
    } else {
        crate::shape::same_shape(&what(), a, b)
    }
}

/// [`crate::shape::rows_of`] naming the argument lazily.
fn rows_of_named(what: impl FnOnce() -> String, shape: &[usize]) -> crate::Result<(usize, usize)> {
    match shape {
        [rows, n] => Ok((*rows, *n)),
        _ => crate::shape::rows_of(&what(), shape),
    }
}

/// [`crate::shape::per_row`] naming the argument lazily.
fn per_row_named<T>(what: impl FnOnce() -> String, v: &[T], rows: usize) -> crate::Result<()> {
    if v.len() == rows {
        Ok(())
    } else {
        crate::shape::per_row(&what(), v, rows)
    }
}
