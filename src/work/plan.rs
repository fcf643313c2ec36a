//! The work plan: items (job, rotation range), made by one planner.

use std::cmp::Reverse;
use std::ops::Range;

/// The rotations part `k` of `n` searches: `nrot` split into contiguous ranges, in part order,
/// whose lengths differ by at most one (empty when there are more parts than rotations).
pub fn rotation_range(nrot: usize, n: usize, k: usize) -> Range<usize> {
    let n = n.max(1);
    nrot * k / n..nrot * (k + 1) / n
}

/// One unit of work: rotations `range` of job `job`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The job's index in the executor's job list.
    pub job: usize,
    /// The rotations.
    pub range: Range<usize>,
}

/// The items a run is cut into, in the order they are handed out. Every job's items cover
/// its rotations exactly once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The items.
    pub items: Vec<Item>,
}

/// What the planner knows of a job: its size (voxels) and its rotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobSize {
    /// Voxels of the target.
    pub voxels: u64,
    /// Rotations searched.
    pub rotations: u64,
}

impl Plan {
    /// Each job whole, in order.
    pub fn whole(nrots: &[usize]) -> Plan {
        Plan {
            items: nrots
                .iter()
                .enumerate()
                .map(|(job, &n)| Item { job, range: 0..n })
                .collect(),
        }
    }

    /// One job's rotations split into `workers` contiguous ranges ([`rotation_range`]), one
    /// per worker, in order (some empty when there are more workers than rotations).
    pub fn split(nrot: usize, workers: usize) -> Plan {
        Plan {
            items: (0..workers.max(1))
                .map(|k| Item {
                    job: 0,
                    range: rotation_range(nrot, workers, k),
                })
                .collect(),
        }
    }

    /// Jobs of sizes `jobs` balanced over `workers` taking items on demand: whole jobs when
    /// there are at least as many jobs as workers, else each job's rotations in
    /// ⌈workers / jobs⌉ contiguous ranges; the largest items (voxels × rotations) first, list
    /// order among equals.
    pub fn balanced(jobs: &[JobSize], workers: usize) -> Plan {
        let t = jobs.len().max(1);
        let per = if jobs.len() >= workers {
            1
        } else {
            workers.div_ceil(t)
        };
        let mut items = Vec::new();
        for (job, s) in jobs.iter().enumerate() {
            let n = s.rotations as usize;
            let p = per.min(n).max(1);
            for k in 0..p {
                items.push(Item {
                    job,
                    range: rotation_range(n, p, k),
                });
            }
        }
        items.sort_by_key(|it| Reverse(jobs[it.job].voxels * it.range.len() as u64));
        Plan { items }
    }

    /// Rotations over every item.
    pub fn rotations(&self) -> u64 {
        self.items.iter().map(|i| i.range.len() as u64).sum()
    }

    /// The number of items of job `job`.
    pub fn parts_of(&self, job: usize) -> usize {
        self.items.iter().filter(|i| i.job == job).count()
    }

    /// The number of jobs the plan names (one past the highest job index).
    pub fn jobs(&self) -> usize {
        self.items.iter().map(|i| i.job + 1).max().unwrap_or(0)
    }

    /// Whether item `k` is its job's only item.
    pub fn is_whole(&self, k: usize) -> bool {
        self.parts_of(self.items[k].job) == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_in_order_and_balance() {
        let r: Vec<_> = (0..3).map(|k| rotation_range(10, 3, k)).collect();
        assert_eq!(r, [0..3, 3..6, 6..10]);
        assert_eq!(rotation_range(2, 3, 0), 0..0);
        let s = |v, r| JobSize {
            voxels: v,
            rotations: r,
        };
        // Fewer jobs than workers: ranges; the largest first.
        let p = Plan::balanced(&[s(10, 4), s(100, 4)], 3);
        let got: Vec<(usize, Range<usize>)> =
            p.items.iter().map(|i| (i.job, i.range.clone())).collect();
        assert_eq!(got, [(1, 0..2), (1, 2..4), (0, 0..2), (0, 2..4)]);
        assert_eq!((p.rotations(), p.parts_of(0), p.jobs()), (8, 2, 2));
        // As many jobs as workers: whole jobs.
        let p = Plan::balanced(&[s(10, 4), s(100, 4)], 2);
        assert!(p.is_whole(0) && p.items[0].job == 1);
    }
}
