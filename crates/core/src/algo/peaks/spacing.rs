//! Greedy minimum-distance filtering of a ranked candidate list, on the host, with a grid of
//! buckets so that each candidate is compared only with the kept points of the neighbouring
//! cells (O(3^d) cells per candidate instead of O(kept)).

use std::collections::HashMap;

/// When two points are "too close".
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Closeness {
    /// scikit-image's `ensure_spacing`: Minkowski `p`-norm distance `< spacing` (strict).
    /// `p = ∞` is the Chebyshev distance, `p = 2` the Euclidean one.
    Minkowski { p: f64, spacing: usize },
    /// pytme's C++ `find_candidate_indices` on integer coordinates: the Euclidean distance is
    /// truncated to an integer and compared with `<=`, so a pair is too close when
    /// `Σd² < (spacing + 1)²`.
    FlooredEuclidean { spacing: usize },
}

impl Closeness {
    /// The same rule with the spacing clamped to `Σ shape`: every distance between two voxels
    /// of the map (any p-norm, p >= 1) is at most `Σ (s − 1)`, below the clamped spacing, so
    /// "too close" is unchanged for every pair.
    fn clamped(self, shape: &[usize]) -> Self {
        let cap = shape
            .iter()
            .fold(0usize, |a, &s| a.saturating_add(s))
            .max(1);
        match self {
            Closeness::Minkowski { p, spacing } => Closeness::Minkowski {
                p,
                spacing: spacing.min(cap),
            },
            Closeness::FlooredEuclidean { spacing } => Closeness::FlooredEuclidean {
                spacing: spacing.min(cap),
            },
        }
    }

    /// Every too-close pair differs by less than this on every axis (the bucket edge).
    fn reach(self) -> usize {
        match self {
            Closeness::Minkowski { spacing, .. } => spacing,
            Closeness::FlooredEuclidean { spacing } => spacing + 1,
        }
    }

    #[inline]
    fn too_close(self, a: &[usize], b: &[usize]) -> bool {
        match self {
            Closeness::Minkowski { p, spacing } => {
                if p.is_infinite() {
                    a.iter().zip(b).all(|(&x, &y)| x.abs_diff(y) < spacing)
                } else if p == 2.0 {
                    let s: u128 = a
                        .iter()
                        .zip(b)
                        .map(|(&x, &y)| (x.abs_diff(y) as u128).pow(2))
                        .sum();
                    s < (spacing as u128).pow(2)
                } else if p == 1.0 {
                    let s: u128 = a.iter().zip(b).map(|(&x, &y)| x.abs_diff(y) as u128).sum();
                    s < spacing as u128
                } else {
                    // scipy's `minkowski`: (Σ|d|^p)^(1/p) in f64.
                    let s: f64 = a
                        .iter()
                        .zip(b)
                        .map(|(&x, &y)| (x.abs_diff(y) as f64).powf(p))
                        .sum();
                    s.powf(1.0 / p) < spacing as f64
                }
            }
            Closeness::FlooredEuclidean { spacing } => {
                let s: u128 = a
                    .iter()
                    .zip(b)
                    .map(|(&x, &y)| (x.abs_diff(y) as u128).pow(2))
                    .sum();
                s < (spacing as u128 + 1).pow(2)
            }
        }
    }
}

/// Bucket storage: dense when the grid is small, hashed otherwise.
enum Heads {
    Dense(Vec<u32>),
    Sparse(HashMap<usize, u32>),
}

const NONE: u32 = u32::MAX;

impl Heads {
    fn get(&self, cell: usize) -> u32 {
        match self {
            Heads::Dense(v) => v[cell],
            Heads::Sparse(m) => m.get(&cell).copied().unwrap_or(NONE),
        }
    }
    fn set(&mut self, cell: usize, k: u32) {
        match self {
            Heads::Dense(v) => v[cell] = k,
            Heads::Sparse(m) => {
                m.insert(cell, k);
            }
        }
    }
}

/// Greedy spacing: walks `order` (indices into `coords`, best first) and keeps a point unless it
/// is too close to a point kept before it; stops after `max_out` kept points. Returns the kept
/// indices in walk order. `coords[i]` has one entry per axis of `shape`.
pub(crate) fn greedy_spacing(
    coords: &[Vec<usize>],
    order: &[usize],
    shape: &[usize],
    rule: Closeness,
    max_out: usize,
) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    if max_out == 0 || order.is_empty() {
        return kept;
    }
    // A spacing beyond the largest distance in the map (every pair too close) acts like any
    // larger one: clamp it so that the bucket edge cannot overflow.
    let rule = rule.clamped(shape);
    let reach = rule.reach().max(1);
    let ndim = shape.len();
    let grid: Vec<usize> = shape.iter().map(|&s| s.div_ceil(reach).max(1)).collect();
    let n_cells = grid.iter().try_fold(1usize, |a, &g| a.checked_mul(g));
    let mut heads = match n_cells {
        Some(n) if n <= (1 << 22).max(order.len().saturating_mul(8)) => Heads::Dense(vec![NONE; n]),
        _ => Heads::Sparse(HashMap::new()),
    };
    // Linked lists of kept points per cell: next[k] is the previous head.
    let mut next: Vec<u32> = Vec::new();
    let mut cell = vec![0usize; ndim];
    let mut lo = vec![0usize; ndim];
    let mut hi = vec![0usize; ndim];
    let mut cur = vec![0usize; ndim];
    let flat = |c: &[usize]| {
        c.iter()
            .zip(&grid)
            .fold(0usize, |acc, (&x, &g)| acc * g + x)
    };
    for &i in order {
        let p = &coords[i];
        for k in 0..ndim {
            cell[k] = p[k] / reach;
            lo[k] = cell[k].saturating_sub(1);
            hi[k] = (cell[k] + 1).min(grid[k] - 1);
        }
        // Odometer over the 3^d neighbouring cells.
        cur.copy_from_slice(&lo);
        let mut close = false;
        'cells: loop {
            let mut h = heads.get(flat(&cur));
            while h != NONE {
                if rule.too_close(p, &coords[kept[h as usize]]) {
                    close = true;
                    break 'cells;
                }
                h = next[h as usize];
            }
            let mut k = ndim;
            loop {
                if k == 0 {
                    break 'cells;
                }
                k -= 1;
                if cur[k] < hi[k] {
                    cur[k] += 1;
                    break;
                }
                cur[k] = lo[k];
            }
        }
        if !close {
            let c = flat(&cell);
            let id = kept.len() as u32;
            next.push(heads.get(c));
            heads.set(c, id);
            kept.push(i);
            if kept.len() >= max_out {
                break;
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(
        coords: &[Vec<usize>],
        order: &[usize],
        rule: Closeness,
        max_out: usize,
    ) -> Vec<usize> {
        let mut kept: Vec<usize> = Vec::new();
        for &i in order {
            if kept.len() >= max_out {
                break;
            }
            if kept
                .iter()
                .all(|&j| !rule.too_close(&coords[i], &coords[j]))
            {
                kept.push(i);
            }
        }
        kept
    }

    #[test]
    fn grid_equals_brute_force() {
        let mut seed = 12345u64;
        let mut rnd = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % m
        };
        for trial in 0..60 {
            let ndim = 1 + trial % 3;
            let shape: Vec<usize> = (0..ndim).map(|_| 1 + rnd(30)).collect();
            let n = rnd(200);
            let coords: Vec<Vec<usize>> = (0..n)
                .map(|_| shape.iter().map(|&s| rnd(s)).collect())
                .collect();
            let order: Vec<usize> = (0..n).collect();
            let spacing = rnd(8);
            for rule in [
                Closeness::Minkowski {
                    p: f64::INFINITY,
                    spacing,
                },
                Closeness::Minkowski { p: 2.0, spacing },
                Closeness::Minkowski { p: 1.0, spacing },
                Closeness::Minkowski { p: 3.0, spacing },
                Closeness::FlooredEuclidean { spacing },
            ] {
                let max_out = if trial % 2 == 0 {
                    usize::MAX
                } else {
                    1 + rnd(10)
                };
                let g = greedy_spacing(&coords, &order, &shape, rule, max_out);
                assert_eq!(
                    g,
                    brute(&coords, &order, rule, max_out),
                    "{rule:?} {shape:?}"
                );
            }
        }
    }

    #[test]
    fn strictness() {
        let c = vec![vec![0, 0], vec![0, 3], vec![2, 3]];
        let cheb = Closeness::Minkowski {
            p: f64::INFINITY,
            spacing: 3,
        };
        assert_eq!(
            greedy_spacing(&c, &[0, 1, 2], &[10, 10], cheb, 10),
            vec![0, 1]
        );
        // (0,0)–(2,3): Euclidean 3.61 ≥ 3 survives; floored 3 <= 3 is rejected.
        let c = vec![vec![0, 0], vec![2, 3]];
        let e = Closeness::Minkowski { p: 2.0, spacing: 3 };
        assert_eq!(greedy_spacing(&c, &[0, 1], &[10, 10], e, 10), vec![0, 1]);
        let f = Closeness::FlooredEuclidean { spacing: 3 };
        assert_eq!(greedy_spacing(&c, &[0, 1], &[10, 10], f, 10), vec![0]);
    }
}
