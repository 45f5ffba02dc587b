//! Duff: the exponential mechanism over a dataset-distance utility (Muñoz Medina & Gillenwater,
//! "Duff: a dataset-distance-based utility function family for the exponential mechanism";
//! docs/statistics.md, "Duff").
//!
//! For a statistic f and a public, finite set of outputs y, Duff's utility is the distance from the
//! data set to the nearest one whose statistic is y, `u(y, D) = −min { d(D, D') : f(D') = y }`,
//! d counting records replaced (or added and removed, [`Neighbours`]). One neighbour step moves
//! D by 1, so by the triangle inequality u moves by at most 1 whatever f is, and
//! `P(y) ∝ exp(ε·u(y, D)/2)` is ε-DP (the exponential mechanism, seed 003 Theorem 1.3; the factor
//! 2 stays: u can move up for one output and down for another between neighbours).
//!
//! The outputs are the `points` evenly spaced values of `[lo, hi]` ([`Grid`]); values are clipped
//! to the range and snapped to the nearest grid value first, a per-record map that keeps
//! neighbours neighbours. The distances, for a data set with i(y) records below y, e(y) at y and
//! k(y) above (n records, target rank m = max(1, ⌈qn⌉)):
//!
//! - quantile, replace: `max(0, i − m + 1, m − i − e)` (one change fixes one unit of either
//!   shortfall, and only one of the two can fail at a time);
//! - quantile, add/remove: the fewest adds at y and removals from the far side that make
//!   `i' < m(n') ≤ i' + e'` ([`quantile_distances`] derives it);
//! - count of records ≥ t: |c − y| (under replacement only y ≤ n is reachable);
//! - clipped mean, replace: 0 at the mean itself, else the smallest k ≥ 1 for which replacing the
//!   k largest (or smallest) records by values of the range can reach y (replaced records are any
//!   reals of the range, so every value in between is reachable too).
//!
//! Sampling inverts the cumulative weights `exp(−ε(d − d_min)/2)` (shifted by the smallest
//! distance, so the weights never all underflow). Cost: one pass over the data, a sort for the
//! mean, and O(log n) per grid value for the add/remove quantile.

use rand::Rng as _;

use super::{check_range, rank, Neighbours, Statistic};
use crate::error::{Error, Result};
use crate::mechanisms::check_epsilon;
use crate::rng::Rng;

/// A distance no finite number of steps reaches (the output gets probability 0).
pub const UNREACHABLE: u64 = u64::MAX;

/// `points` evenly spaced values of `[lo, hi]`, and the snapping of a value to the nearest one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    lo: f64,
    hi: f64,
    points: usize,
}

impl Grid {
    /// `points` ≥ 2 values of `[lo, hi]` (finite, lo < hi).
    pub fn new(lo: f64, hi: f64, points: usize) -> Result<Self> {
        check_range(lo, hi)?;
        if points < 2 {
            return Err(Error::InvalidParameter {
                name: "points",
                requirement: ">= 2",
                value: points as f64,
            });
        }
        Ok(Grid { lo, hi, points })
    }

    /// The number of values.
    pub fn points(&self) -> usize {
        self.points
    }

    /// The lower end.
    pub fn lo(&self) -> f64 {
        self.lo
    }

    /// The upper end.
    pub fn hi(&self) -> f64 {
        self.hi
    }

    /// Value number `g` (0 ≤ g < points).
    pub fn value(&self, g: usize) -> f64 {
        if g + 1 == self.points {
            return self.hi;
        }
        self.lo + (self.hi - self.lo) * g as f64 / (self.points - 1) as f64
    }

    /// The index of the value nearest to `x` clipped to the range (NaN maps to the lower end).
    pub fn snap(&self, x: f64) -> usize {
        let t = if x.is_nan() {
            0.0
        } else {
            ((x.clamp(self.lo, self.hi) - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
        };
        ((t * (self.points - 1) as f64).round() as usize).min(self.points - 1)
    }

    /// Records per grid value.
    pub fn histogram(&self, data: &[f64]) -> Vec<u64> {
        let mut counts = vec![0u64; self.points];
        for &x in data {
            counts[self.snap(x)] += 1;
        }
        counts
    }
}

/// Duff's distance of every grid value for the q-quantile of the data summarised by `hist`
/// (records per grid value).
///
/// Replace: `max(0, i − m + 1, m − i − e)`, m = max(1, ⌈qn⌉).
///
/// Add/remove (n' = n + adds − removals, m' its rank): y is the m'-th order statistic exactly
/// when e' ≥ 1 and `i' < m' ≤ i' + e'`. When y is too low (i + e < m) the only useful steps add a
/// record at y (the second condition's slack grows by 1 − q) or remove one above it (by q); when
/// too high (i ≥ m), add at y (q) or remove one below (1 − q). For a number of steps T the best
/// split puts all steps on one kind (the slack is monotone in the split, floors included), so the
/// distance is the smallest T with a feasible extreme split — found by bisection, since the best
/// slack does not decrease with T. Taking the adds first and the removals after, the other
/// condition holds at the first feasible T (module docs of docs/statistics.md).
pub fn quantile_distances(hist: &[u64], q: f64, neighbours: Neighbours) -> Vec<u64> {
    let n: u64 = hist.iter().sum();
    let mut below = 0u64;
    hist.iter()
        .map(|&e| {
            let i = below;
            below += e;
            let k = n - i - e;
            match neighbours {
                Neighbours::Replace => {
                    let m = rank(q, n as usize) as i64;
                    let (i, j) = (i as i64, (i + e) as i64);
                    (i - m + 1).max(m - j).max(0) as u64
                }
                Neighbours::AddRemove => add_remove_quantile(i, e, k, q),
            }
        })
        .collect()
}

/// The add/remove distance for one grid value with i records below, e at and k above it.
fn add_remove_quantile(i: u64, e: u64, k: u64, q: f64) -> u64 {
    let n = i + e + k;
    let m = rank(q, n as usize) as u64;
    if e >= 1 && i < m && m <= i + e {
        return 0;
    }
    let a0 = u64::from(e == 0);
    let r_of = |t: u64, cap: u64, far_side_first: bool| {
        if far_side_first {
            cap.min(t - a0)
        } else {
            0
        }
    };
    let feasible: Box<dyn Fn(u64) -> bool> = if i + e < m {
        // Too low: adds at y and removals above.
        Box::new(move |t: u64| {
            let r = r_of(t, k, q >= 0.5);
            let a = t - r;
            i + e + a >= rank(q, (n + a - r) as usize) as u64
        })
    } else {
        // Too high: adds at y and removals below.
        Box::new(move |t: u64| {
            let r = r_of(t, i, q <= 0.5);
            let a = t - r;
            i - r < rank(q, (n + a - r) as usize) as u64
        })
    };
    let cap = if i + e < m { k } else { i };
    let (mut lo, mut hi) = (a0, a0 + cap);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if feasible(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Duff's distance of every grid value for the clipped mean under replacement (module docs):
/// grid indices g_1 ≤ … ≤ g_n with sum T; output j is at distance 0 when T = jn, otherwise the
/// smallest k ≥ 1 with `T − top_k ≤ jn ≤ T − bottom_k + k(G − 1)`.
pub fn mean_distances(grid: &Grid, data: &[f64]) -> Vec<u64> {
    let mut g: Vec<u64> = data.iter().map(|&x| grid.snap(x) as u64).collect();
    g.sort_unstable();
    let n = g.len() as u64;
    let top = (grid.points - 1) as u64;
    let total: u64 = g.iter().sum();
    // down[k]: how far the sum can fall by replacing the k largest by 0; up[k]: how far it can
    // rise by replacing the k smallest by the top value.
    let mut down = vec![0u64; g.len() + 1];
    let mut up = vec![0u64; g.len() + 1];
    for k in 0..g.len() {
        down[k + 1] = down[k] + g[g.len() - 1 - k];
        up[k + 1] = up[k] + (top - g[k]);
    }
    (0..grid.points as u64)
        .map(|j| {
            let target = j * n;
            if target == total {
                0
            } else if target < total {
                let need = total - target;
                down.partition_point(|&d| d < need).max(1) as u64
            } else {
                let need = target - total;
                up.partition_point(|&u| u < need).max(1) as u64
            }
        })
        .collect()
}

/// Duff's distance for the count of records ≥ `at_least` over the outputs `lo..lo + points`
/// (integers): |c − y|; under replacement an output above n is unreachable.
pub fn count_distances(
    data: &[f64],
    at_least: f64,
    grid: &Grid,
    neighbours: Neighbours,
) -> Vec<u64> {
    let c = data.iter().filter(|&&x| x >= at_least).count() as u64;
    let n = data.len() as u64;
    (0..grid.points)
        .map(|g| {
            let y = grid.value(g) as u64;
            if neighbours == Neighbours::Replace && y > n {
                UNREACHABLE
            } else {
                c.abs_diff(y)
            }
        })
        .collect()
}

/// The exact law `exp(−ε(d − d_min)/2)` normalised (0 for unreachable outputs).
pub fn law_from_distances(distances: &[u64], epsilon: f64) -> Vec<f64> {
    let w = weights(distances, epsilon);
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

fn weights(distances: &[u64], epsilon: f64) -> Vec<f64> {
    let dmin = distances.iter().copied().min().unwrap_or(0);
    distances
        .iter()
        .map(|&d| {
            if d == UNREACHABLE {
                0.0
            } else {
                (0.5 * epsilon * (dmin as f64 - d as f64)).exp()
            }
        })
        .collect()
}

/// One grid index from the law of [`law_from_distances`], by one uniform draw against the
/// cumulative weights.
pub fn sample_from_distances(distances: &[u64], epsilon: f64, rng: &mut Rng) -> usize {
    let w = weights(distances, epsilon);
    let mut cum = Vec::with_capacity(w.len());
    let mut total = 0.0;
    for x in &w {
        total += x;
        cum.push(total);
    }
    let r = rng.random::<f64>() * total;
    let g = cum.partition_point(|&c| c <= r).min(w.len() - 1);
    // r rounds up to the total only at the end of the range; never land on a zero weight.
    (0..=g).rev().find(|&h| w[h] > 0.0).unwrap_or(g)
}

/// The Duff quantile on a grid under replacement, with the level q given per release (the
/// bandit's private sensitivities, docs/bandit.md).
#[derive(Debug, Clone, Copy)]
pub struct DuffQuantile {
    epsilon: f64,
    grid: Grid,
}

impl DuffQuantile {
    /// ε > 0 for one quantile; outputs on `points` ≥ 2 evenly spaced values of `[lo, hi]`.
    pub fn new(epsilon: f64, lo: f64, hi: f64, points: usize) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        Ok(DuffQuantile {
            epsilon,
            grid: Grid::new(lo, hi, points)?,
        })
    }

    /// ε of one release.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Grid value number `g`.
    pub fn value(&self, g: usize) -> f64 {
        self.grid.value(g)
    }

    /// The grid index nearest to `x` clipped to the range.
    pub fn snap(&self, x: f64) -> usize {
        self.grid.snap(x)
    }

    /// The target rank m = max(1, ⌈qn⌉).
    pub fn rank(q: f64, n: usize) -> usize {
        rank(q, n)
    }

    /// Duff's utility (minus the distance) of every grid value for the `q`-quantile of `data`.
    pub fn utilities(&self, data: &[f64], q: f64) -> Vec<f64> {
        quantile_distances(&self.grid.histogram(data), q, Neighbours::Replace)
            .into_iter()
            .map(|d| -(d as f64))
            .collect()
    }

    /// The exact output law over the grid.
    pub fn law(&self, data: &[f64], q: f64) -> Vec<f64> {
        let d = quantile_distances(&self.grid.histogram(data), q, Neighbours::Replace);
        law_from_distances(&d, self.epsilon)
    }

    /// One private `q`-quantile of `data` (at least one record).
    pub fn sample(&self, data: &[f64], q: f64, rng: &mut Rng) -> f64 {
        let d = quantile_distances(&self.grid.histogram(data), q, Neighbours::Replace);
        self.grid
            .value(sample_from_distances(&d, self.epsilon, rng))
    }

    /// The `q_lo`- and `q_hi`-quantiles of `data`, each with this mechanism's ε (2ε together).
    pub fn sample_pair(&self, data: &[f64], q_lo: f64, q_hi: f64, rng: &mut Rng) -> (f64, f64) {
        (self.sample(data, q_lo, rng), self.sample(data, q_hi, rng))
    }
}

/// Duff for any [`Statistic`], with validated ε, grid and neighbour relation.
#[derive(Debug, Clone, Copy)]
pub struct Duff {
    epsilon: f64,
    statistic: Statistic,
    grid: Grid,
    neighbours: Neighbours,
}

impl Duff {
    /// ε > 0; outputs on `points` evenly spaced values of `[lo, hi]` — for a count, the integers
    /// of `[lo, hi]` (lo ≥ 0, at least two of them), whatever `points` says. The clipped mean is
    /// defined under replacement only (with removals alone the reachable means are subset sums,
    /// with no closed form): an error under add/remove.
    pub fn new(
        epsilon: f64,
        statistic: Statistic,
        lo: f64,
        hi: f64,
        points: usize,
        neighbours: Neighbours,
    ) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        let statistic = statistic.validate()?;
        check_range(lo, hi)?;
        let grid = match statistic {
            Statistic::Count { .. } => {
                let (a, b) = (lo.max(0.0).ceil(), hi.floor());
                if b - a < 1.0 {
                    return Err(Error::Invalid(format!(
                        "a count's outputs are the integers of [lo, hi] with lo >= 0; [{lo}, {hi}] \
                         holds fewer than two"
                    )));
                }
                Grid::new(a, b, (b - a) as usize + 1)?
            }
            _ => Grid::new(lo, hi, points)?,
        };
        if statistic == Statistic::ClippedMean && neighbours == Neighbours::AddRemove {
            return Err(Error::Invalid(
                "Duff's clipped mean is defined under replace neighbours only; use --neighbours \
                 replace"
                    .into(),
            ));
        }
        Ok(Duff {
            epsilon,
            statistic,
            grid,
            neighbours,
        })
    }

    /// ε of one release.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The output grid.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The distance of every output from `data` ([`UNREACHABLE`] for none).
    pub fn distances(&self, data: &[f64]) -> Vec<u64> {
        match self.statistic {
            Statistic::Quantile(q) => {
                quantile_distances(&self.grid.histogram(data), q, self.neighbours)
            }
            Statistic::Count { at_least } => {
                count_distances(data, at_least, &self.grid, self.neighbours)
            }
            Statistic::ClippedMean => mean_distances(&self.grid, data),
        }
    }

    /// The exact output law over the grid.
    pub fn law(&self, data: &[f64]) -> Vec<f64> {
        law_from_distances(&self.distances(data), self.epsilon)
    }

    /// One private value.
    pub fn sample(&self, data: &[f64], rng: &mut Rng) -> f64 {
        let d = self.distances(data);
        self.grid
            .value(sample_from_distances(&d, self.epsilon, rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_values_and_snapping() {
        let d = DuffQuantile::new(1.0, 0.0, 1.0, 11).unwrap();
        assert_eq!(d.value(0), 0.0);
        assert_eq!(d.value(10), 1.0);
        assert_eq!(d.snap(0.34), 3);
        assert_eq!(d.snap(2.0), 10);
        assert_eq!(d.snap(-1.0), 0);
        assert!(DuffQuantile::new(1.0, 0.0, 1.0, 1).is_err());
        assert!(DuffQuantile::new(0.0, 0.0, 1.0, 11).is_err());
    }

    #[test]
    fn the_true_quantile_has_utility_zero() {
        let d = DuffQuantile::new(1.0, 0.0, 1.0, 11).unwrap();
        let data = [0.1, 0.1, 0.5, 1.0, 1.0, 1.0];
        // p90 of 6 records: m = 6, x_(6) = 1.0.
        let u = d.utilities(&data, 0.9);
        assert_eq!(u[10], 0.0);
        // 0.5: i = 2, j = 3, m = 6: 3 changes.
        assert_eq!(u[5], -3.0);
    }

    #[test]
    fn construction_names_the_bad_value() {
        let e = Duff::new(-1.0, Statistic::MEDIAN, 0.0, 1.0, 11, Neighbours::Replace)
            .unwrap_err()
            .to_string();
        assert!(e.contains("-1"), "{e}");
        let e = Duff::new(
            1.0,
            Statistic::Quantile(1.5),
            0.0,
            1.0,
            11,
            Neighbours::Replace,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1.5"), "{e}");
        assert!(Duff::new(
            1.0,
            Statistic::ClippedMean,
            0.0,
            1.0,
            11,
            Neighbours::AddRemove
        )
        .is_err());
        let c = Duff::new(
            1.0,
            Statistic::Count { at_least: 1.0 },
            0.0,
            5.5,
            2,
            Neighbours::AddRemove,
        )
        .unwrap();
        assert_eq!(c.grid().points(), 6);
        assert_eq!(c.grid().value(5), 5.0);
    }
}
