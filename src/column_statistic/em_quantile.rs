//! Private quantiles by the exponential mechanism (Smith 2011, "Privacy-preserving statistical
//! estimation with optimal convergence rates"; docs/statistics.md, "The exponential-mechanism
//! quantile"; the bandit's private sensitivities, docs/bandit.md).
//!
//! The n data points are clipped to `[lo, hi]` and sorted, `x_(0) = lo ≤ x_(1) ≤ … ≤ x_(n) ≤
//! x_(n+1) = hi`. Interval `I_i = [x_(i), x_(i+1)]`, i = 0..n, has i points below it; its utility
//! for the q-quantile is `−|i − qn|`, which moves by at most 1 when one point is replaced. The
//! mechanism picks interval i with probability `∝ |I_i| · exp(−ε|i − qn|/2)` and returns a uniform
//! point of it, so the output density at y is `exp(−ε|i(y) − qn|/2) / Z`: numerator and
//! normaliser each move by at most `e^{ε/2}` between neighbouring data sets — ε-DP. Empty intervals
//! (ties) have probability 0. Cost: one sort, O(n).

use rand::Rng as _;

use super::check_range;
use crate::error::Result;
use crate::mechanisms::check_epsilon;
use crate::rng::Rng;

/// The exponential-mechanism quantile with validated ε and range.
#[derive(Debug, Clone, Copy)]
pub struct EmQuantile {
    epsilon: f64,
    lo: f64,
    hi: f64,
}

impl EmQuantile {
    /// ε > 0 for one quantile; data are clipped to `[lo, hi]` (finite, lo < hi).
    pub fn new(epsilon: f64, lo: f64, hi: f64) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        check_range(lo, hi)?;
        Ok(EmQuantile { epsilon, lo, hi })
    }

    /// ε of one release.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The `i`-th edge of the intervals the sorted data cut the range into: `lo`, the data, `hi`.
    fn edge(&self, sorted: &[f64], i: usize) -> f64 {
        if i == 0 {
            self.lo
        } else if i > sorted.len() {
            self.hi
        } else {
            sorted[i - 1]
        }
    }

    /// Clips `data` to the range and sorts it (the mechanism's view of the data).
    pub fn clip_sorted(&self, data: &[f64]) -> Vec<f64> {
        let mut v: Vec<f64> = data.iter().map(|&x| x.clamp(self.lo, self.hi)).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// One private `q`-quantile (0 ≤ q ≤ 1) of `data` (any order; NaN is a contract violation).
    pub fn sample(&self, data: &[f64], q: f64, rng: &mut Rng) -> f64 {
        let sorted = self.clip_sorted(data);
        self.sample_sorted(&sorted, q, rng)
    }

    /// As [`EmQuantile::sample`] on data already clipped to the range and sorted ascending.
    pub fn sample_sorted(&self, sorted: &[f64], q: f64, rng: &mut Rng) -> f64 {
        let n = sorted.len();
        let target = q * n as f64;
        let edge = |i: usize| self.edge(sorted, i);
        // Log weights ln|I_i| − ε|i − qn|/2, shifted by their maximum (no underflow to all zeros).
        let mut logw = Vec::with_capacity(n + 1);
        let mut max = f64::NEG_INFINITY;
        for i in 0..=n {
            let len = edge(i + 1) - edge(i);
            let lw = if len > 0.0 {
                len.ln() - 0.5 * self.epsilon * (i as f64 - target).abs()
            } else {
                f64::NEG_INFINITY
            };
            max = max.max(lw);
            logw.push(lw);
        }
        let mut cum = Vec::with_capacity(n + 1);
        let mut total = 0.0;
        for lw in &logw {
            total += (lw - max).exp();
            cum.push(total);
        }
        let u = rng.random::<f64>() * total;
        let i = cum.partition_point(|&c| c <= u).min(n);
        // partition_point can land on an empty interval only through rounding at its boundary;
        // step back to the last non-empty one.
        let i = (0..=i)
            .rev()
            .find(|&j| logw[j] > f64::NEG_INFINITY)
            .unwrap_or(i);
        let (a, b) = (edge(i), edge(i + 1));
        a + (b - a) * rng.random::<f64>()
    }

    /// The pair (p10, p90)-style release: the `q_lo`- and `q_hi`-quantiles of `data`, each with
    /// this mechanism's ε (the pair costs 2ε by composition).
    pub fn sample_pair(&self, data: &[f64], q_lo: f64, q_hi: f64, rng: &mut Rng) -> (f64, f64) {
        let sorted = self.clip_sorted(data);
        (
            self.sample_sorted(&sorted, q_lo, rng),
            self.sample_sorted(&sorted, q_hi, rng),
        )
    }

    /// The exact probability of each bin `[edges[b], edges[b + 1])` (the last one closed): the
    /// density `exp(−ε|i(y) − qn|/2)/Z` integrated over the bin, interval by interval. `edges`
    /// ascending, covering the range.
    pub fn bin_law(&self, data: &[f64], q: f64, edges: &[f64]) -> Vec<f64> {
        let sorted = self.clip_sorted(data);
        let n = sorted.len();
        let target = q * n as f64;
        let edge = |i: usize| self.edge(&sorted, i);
        let logw: Vec<f64> = (0..=n)
            .map(|i| -0.5 * self.epsilon * (i as f64 - target).abs())
            .collect();
        let max = logw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let mut bins = vec![0.0; edges.len() - 1];
        let mut total = 0.0;
        for (i, lw) in logw.iter().enumerate() {
            let (a, b) = (edge(i), edge(i + 1));
            if b <= a {
                continue;
            }
            let w = (lw - max).exp();
            total += w * (b - a);
            for (bin, e) in bins.iter_mut().zip(edges.windows(2)) {
                let overlap = b.min(e[1]) - a.max(e[0]);
                if overlap > 0.0 {
                    *bin += w * overlap;
                }
            }
        }
        bins.iter().map(|x| x / total).collect()
    }
}
