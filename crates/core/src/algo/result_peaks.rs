//! Peaks straight from a matching result.

use crate::algo::matching::MatchResult;
use crate::algo::peaks::{Peak, PeakParams, find_peaks_with_rotations};
use crate::backend::Backend;
use crate::error::Result;

impl<B: Backend> MatchResult<B> {
    /// The peaks of the score map, each with its best rotation attached
    /// ([`Peak::rotation`]: the index into [`MatchResult::rotations`] and the matrix):
    /// [`find_peaks_with_rotations`] with every argument but the parameters taken from `self`.
    ///
    /// ```
    /// # use monomorph_core as monomorph;
    /// # use monomorph_cpu::Cpu;
    /// use monomorph::prelude::*;
    /// use monomorph::ndarray::Array2;
    ///
    /// let b = Cpu::<Single>::new();
    /// let template = Array2::from_shape_fn((5, 5), |(y, x)| (y * 5 + x) as f32); // asymmetric
    /// let mut target = Array2::<f32>::zeros((32, 32));
    /// target.slice_mut(monomorph::ndarray::s![10..15, 20..25]).assign(&template);
    /// let (t, p) = (b.upload_array(&target)?, b.upload_array(&template)?);
    /// let params = MatchParams::new(Score::FLC, RotationSet::uniform(2, 90.0)?);
    /// let result = match_template(&b, &t, &p, &params)?;
    /// let peaks = result.peaks(&b, &PeakParams { num_peaks: Some(1), ..PeakParams::default() })?;
    /// assert_eq!(peaks[0].coord, vec![12, 22]); // where the template's centre voxel landed
    /// assert_eq!(peaks[0].rotation.as_ref().map(|r| r.0), Some(0)); // the identity
    /// # Ok::<(), monomorph::Error>(())
    /// ```
    pub fn peaks(&self, b: &B, params: &PeakParams) -> Result<Vec<Peak>> {
        let rotations = self.rotations.to_array();
        find_peaks_with_rotations(
            b,
            &self.scores,
            params,
            &self.rotation_index,
            rotations.view(),
        )
    }
}
