//! One unit of work of a run: an output box of the target and how its input window is read
//! (a tile, or the whole FFT grid). `plan.rs` makes them, `state.rs` and `run.rs` run them.

use crate::shape::fast_shape;

/// One unit of work: an output box of the target and how its input window is read.
///
/// The job scores every position of its output box (the running sum of squared scores covers
/// them all), but only the part of the box inside the target, `keep`, reaches the result maps:
/// a circular run scores the whole FFT grid, as pytme does, so that `ssum` is pytme's.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub(super) out_offset: Vec<usize>,
    pub(super) out_shape: Vec<usize>,
    /// Shape of the box's corner `[0, keep)` that lies inside the target (the whole box, the
    /// target when the box is the whole FFT grid), `None` when the box lies in the padding.
    pub(super) keep: Option<Vec<usize>>,
    pub(super) start: Vec<isize>,
    pub(super) len: Vec<usize>,
    pub(super) fast: Vec<usize>,
    pub(super) shift: Vec<isize>,
}

/// The untiled circular job: every position of the FFT grid `fast_shape(target)` is scored;
/// the target's corner is kept.
pub(super) fn circular_job(target: &[usize], tshape: &[usize]) -> Job {
    let fast = fast_shape(target);
    Job {
        out_offset: vec![0; target.len()],
        out_shape: fast.clone(),
        keep: Some(target.to_vec()),
        start: vec![0; target.len()],
        len: fast.clone(),
        shift: tshape.iter().map(|&n| -((n / 2) as isize)).collect(),
        fast,
    }
}

/// A job whose output box `offset + [0, out)` lies inside the target (`inside`) or in the
/// padding beyond it, read from the extension through a window with the template's margin.
pub(super) fn window_job(offset: &[usize], out: &[usize], tshape: &[usize], inside: bool) -> Job {
    let len: Vec<usize> = out.iter().zip(tshape).map(|(o, n)| o + n - 1).collect();
    Job {
        out_offset: offset.to_vec(),
        out_shape: out.to_vec(),
        keep: inside.then(|| out.to_vec()),
        start: offset
            .iter()
            .zip(tshape)
            .map(|(&a, &n)| a as isize - (n / 2) as isize)
            .collect(),
        fast: fast_shape(&len),
        len,
        shift: vec![0; out.len()],
    }
}
