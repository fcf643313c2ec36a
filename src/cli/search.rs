//! `monomorph match`'s search restriction: `--scheduling-mask` (pytme) and
//! `--search-z/-y/-x` (pytom-match-pick).

use std::path::PathBuf;

use clap::Args;
use monomorph::io::HostArray;
use ndarray::Dimension;
use serde_json::json;

use super::error::{CliError, CliResult};
use super::output::{opt_path_json, read_input};

/// The search-restriction flags of `monomorph match`.
#[derive(Args, Debug, Clone, Default)]
pub struct SearchArgs {
    /// Binary mask (target-shaped, values 0 and 1) of the positions where a match may occur,
    /// as pytme's --scheduling-mask: only its bounding box is tiled, tiles holding no 1 are
    /// skipped (no FFT work), and positions at 0 are not searched (score -inf, rotation index
    /// -1 in the outputs; pytme leaves real scores wherever its boxes happen to reach, here
    /// the outputs do not depend on the tiling). Scores at 1 equal a full run's. No peak is
    /// ever called at a position not searched.
    #[arg(long, value_name = "M", help_heading = "Restricting the search")]
    pub scheduling_mask: Option<PathBuf>,
    /// Search only positions START..STOP (STOP excluded, 0-based voxels; either end may be
    /// left out) along z, array axis 0 (3-D only), as pytom-match-pick's --search-z (e.g. the
    /// ice layer). The target is cropped to the box plus the template's reach on the axes the
    /// box cuts (an axis searched whole keeps a full run's circular grid), so the work is the
    /// box's plus that margin and the scores inside equal a full run's; the outputs keep the
    /// target's shape, with score -inf and rotation index -1 outside (not searched).
    #[arg(long, value_name = "START:STOP", value_parser = parse_range, help_heading = "Restricting the search")]
    pub search_z: Option<Range>,
    /// As --search-z along y (array axis 0 in 2-D, 1 in 3-D).
    #[arg(long, value_name = "START:STOP", value_parser = parse_range, help_heading = "Restricting the search")]
    pub search_y: Option<Range>,
    /// As --search-z along x (the last array axis).
    #[arg(long, value_name = "START:STOP", value_parser = parse_range, help_heading = "Restricting the search")]
    pub search_x: Option<Range>,
}

/// A `START:STOP` range; an end left out is the axis' end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First position (default 0).
    pub start: Option<usize>,
    /// One past the last position (default: the axis length).
    pub stop: Option<usize>,
}

fn parse_range(s: &str) -> Result<Range, String> {
    let (a, z) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: expected START:STOP (e.g. 40:120)"))?;
    let num = |t: &str| -> Result<Option<usize>, String> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse::<usize>()
            .map(Some)
            .map_err(|_| format!("`{s}`: `{t}` is not a voxel index >= 0, expected START:STOP"))
    };
    Ok(Range {
        start: num(a)?,
        stop: num(z)?,
    })
}

/// The checked restriction of one target.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// The scheduling mask (checked: target-shaped, binary, not empty inside the box).
    pub mask: Option<HostArray>,
    /// One `start..stop` per axis, when any range was given.
    pub ranges: Option<Vec<(usize, usize)>>,
}

impl SearchArgs {
    /// Reads and checks the restriction for a target of shape `ts` (exit 2 naming the flag).
    pub fn check(&self, ts: &[usize]) -> CliResult<Search> {
        let d = ts.len();
        let flags: Vec<(&str, Option<Range>)> = if d == 3 {
            vec![
                ("--search-z", self.search_z),
                ("--search-y", self.search_y),
                ("--search-x", self.search_x),
            ]
        } else {
            if let Some(r) = self.search_z {
                return Err(CliError::input(format!(
                    "--search-z {}: a 2-D target has no z axis, expected --search-y/--search-x",
                    show(r)
                )));
            }
            vec![("--search-y", self.search_y), ("--search-x", self.search_x)]
        };
        let mut ranges = None;
        if flags.iter().any(|(_, r)| r.is_some()) {
            let mut v = Vec::with_capacity(d);
            for ((flag, r), &s) in flags.iter().zip(ts) {
                let (a, z) = match r {
                    Some(r) => (r.start.unwrap_or(0), r.stop.unwrap_or(s)),
                    None => (0, s),
                };
                if a >= z || z > s {
                    return Err(CliError::input(format!(
                        "{flag} {}: empty or outside the target's 0:{s} on that axis, expected \
                         START < STOP <= {s}",
                        show(r.unwrap_or(Range {
                            start: None,
                            stop: None
                        }))
                    )));
                }
                v.push((a, z));
            }
            ranges = Some(v);
        }
        let mask = match &self.scheduling_mask {
            Some(p) => Some(read_mask(p, ts, ranges.as_deref())?),
            None => None,
        };
        Ok(Search { mask, ranges })
    }

    /// The restriction as run.json records it.
    pub fn to_json(&self, s: &Search) -> serde_json::Value {
        json!({
            "scheduling_mask": opt_path_json(&self.scheduling_mask),
            "ranges": s.ranges,
            "not_searched": "score -inf, rotation index -1",
        })
    }
}

fn show(r: Range) -> String {
    let f = |v: Option<usize>| v.map_or(String::new(), |v| v.to_string());
    format!("{}:{}", f(r.start), f(r.stop))
}

/// Reads `--scheduling-mask` and checks it: the target's shape, only 0 and 1, a 1 inside the
/// searched box.
fn read_mask(
    p: &std::path::Path,
    ts: &[usize],
    ranges: Option<&[(usize, usize)]>,
) -> CliResult<HostArray> {
    let m = read_input("--scheduling-mask", p, &[2, 3])?;
    let shape = m.data.shape().to_vec();
    if shape != ts {
        return Err(CliError::input(format!(
            "--scheduling-mask {}: shape {shape:?}, expected the target's shape {ts:?}",
            p.display()
        )));
    }
    let v = m.data.to_float::<f64>();
    let bad = v.iter().filter(|&&x| x != 0.0 && x != 1.0).count();
    if bad > 0 {
        return Err(CliError::input(format!(
            "--scheduling-mask {}: {bad} value(s) other than 0 and 1, expected a binary mask",
            p.display()
        )));
    }
    let inside = v.indexed_iter().any(|(ix, &x)| {
        x == 1.0
            && ranges.is_none_or(|r| {
                ix.as_array_view()
                    .iter()
                    .zip(r)
                    .all(|(&i, &(a, z))| i >= a && i < z)
            })
    });
    if !inside {
        return Err(CliError::input(format!(
            "--scheduling-mask {}: no voxel is 1{}, expected at least one position to search",
            p.display(),
            if ranges.is_some() {
                " inside the --search-z/y/x box"
            } else {
                ""
            }
        )));
    }
    Ok(m.data)
}
