use crate::backend::{Arr, BackendTypes};
use crate::dtype::{Float, Index};
use crate::error::Result;

/// Fused kernels of correlation-based template matching (one pass over a volume each).
pub trait Correlate: BackendTypes {
    /// Running maximum over rotations: where `scores > best` (strict; NaN never wins),
    /// `best = scores` and `best_index = index`. All three arrays have the same shape.
    fn running_max<T: Float, I: Index>(
        &self,
        scores: &Arr<Self, T>,
        best: &mut Arr<Self, T>,
        best_index: &mut Arr<Self, I>,
        index: I,
    ) -> Result<()>;
}
