//! Hypothesis tests and confidence bounds for checking samplers against exact distributions
//! (docs/ARCHITECTURE.md, "Tests") and for the privacy audit: chi-square goodness of fit, chi-square homogeneity
//! of two samples, and Clopper–Pearson bounds.

use statrs::function::beta::beta_reg;
use statrs::function::gamma::gamma_ur;

/// The outcome of a chi-square test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquare {
    /// The statistic.
    pub statistic: f64,
    /// Degrees of freedom after pooling sparse cells.
    pub dof: usize,
    /// Upper-tail probability of the statistic under the null hypothesis.
    pub p_value: f64,
}

/// Minimum expected count per cell; sparser cells are pooled so the chi-square approximation holds.
const MIN_EXPECTED: f64 = 5.0;

fn chi_square_p(statistic: f64, dof: usize) -> f64 {
    // A statistic of exactly 0 (observed = expected in every cell) is the best possible fit; the
    // incomplete gamma function is undefined at 0.
    if dof == 0 || statistic <= 0.0 {
        return 1.0;
    }
    if statistic == f64::INFINITY {
        return 0.0;
    }
    gamma_ur(dof as f64 / 2.0, statistic / 2.0)
}

/// Goodness of fit of observed `counts` to probabilities `probs` (same length, summing to 1 up to
/// rounding). Cells with expected count below 5 are pooled, in order, into their neighbours.
///
/// # Panics
/// If the lengths differ (a caller bug).
pub fn chi_square_gof(counts: &[u64], probs: &[f64]) -> ChiSquare {
    assert_eq!(
        counts.len(),
        probs.len(),
        "counts and probabilities differ in length"
    );
    let n: u64 = counts.iter().sum();
    let n = n as f64;
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut obs, mut exp) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs) {
        obs += c as f64;
        exp += p * n;
        if exp >= MIN_EXPECTED {
            cells.push((obs, exp));
            obs = 0.0;
            exp = 0.0;
        }
    }
    if exp > 0.0 || obs > 0.0 {
        match cells.last_mut() {
            Some(last) => {
                last.0 += obs;
                last.1 += exp;
            }
            None => cells.push((obs, exp)),
        }
    }
    let mut statistic = 0.0;
    for &(o, e) in &cells {
        if e > 0.0 {
            statistic += (o - e) * (o - e) / e;
        } else if o > 0.0 {
            // An observation where the hypothesis puts no mass: reject outright.
            statistic = f64::INFINITY;
        }
    }
    let dof = cells.len().saturating_sub(1);
    ChiSquare {
        statistic,
        dof,
        p_value: chi_square_p(statistic, dof),
    }
}

/// Chi-square test that two samples of counts over the same outcomes come from one distribution.
/// Outcomes with pooled expected count below 5 are merged in order.
///
/// # Panics
/// If the lengths differ (a caller bug).
pub fn chi_square_homogeneity(a: &[u64], b: &[u64]) -> ChiSquare {
    assert_eq!(a.len(), b.len(), "count vectors differ in length");
    let na: u64 = a.iter().sum();
    let nb: u64 = b.iter().sum();
    let (na, nb) = (na as f64, nb as f64);
    let total = na + nb;
    let min_share = na.min(nb) / total;
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut ca, mut cb) = (0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        ca += x as f64;
        cb += y as f64;
        if (ca + cb) * min_share >= MIN_EXPECTED {
            cells.push((ca, cb));
            ca = 0.0;
            cb = 0.0;
        }
    }
    if ca + cb > 0.0 {
        match cells.last_mut() {
            Some(last) => {
                last.0 += ca;
                last.1 += cb;
            }
            None => cells.push((ca, cb)),
        }
    }
    let mut statistic = 0.0;
    for &(x, y) in &cells {
        let col = x + y;
        let (ea, eb) = (col * na / total, col * nb / total);
        statistic += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
    }
    let dof = cells.len().saturating_sub(1);
    ChiSquare {
        statistic,
        dof,
        p_value: chi_square_p(statistic, dof),
    }
}

/// Bisection for the `x` in [0, 1] where the increasing function `f` crosses `target`.
fn bisect(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One-sided Clopper–Pearson lower bound for a binomial proportion: with probability at least
/// 1 − α the true p is ≥ the returned value, given `k` successes in `n` trials.
pub fn clopper_pearson_lower(k: u64, n: u64, alpha: f64) -> f64 {
    assert!(k <= n, "more successes than trials");
    if k == 0 {
        return 0.0;
    }
    // The α quantile of Beta(k, n − k + 1).
    let (a, b) = (k as f64, (n - k) as f64 + 1.0);
    bisect(|x| beta_reg(a, b, x), alpha)
}

/// One-sided Clopper–Pearson upper bound: with probability at least 1 − α the true p is ≤ it.
pub fn clopper_pearson_upper(k: u64, n: u64, alpha: f64) -> f64 {
    assert!(k <= n, "more successes than trials");
    if k == n {
        return 1.0;
    }
    // The 1 − α quantile of Beta(k + 1, n − k).
    let (a, b) = (k as f64 + 1.0, (n - k) as f64);
    bisect(|x| beta_reg(a, b, x), 1.0 - alpha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi_square_matches_known_values() {
        // scipy.stats.chisquare([16, 18, 16, 14, 12, 12]) → statistic 2.0, p 0.8491450360846096
        let r = chi_square_gof(&[16, 18, 16, 14, 12, 12], &[1.0 / 6.0; 6]);
        assert!((r.statistic - 2.0).abs() < 1e-12);
        assert_eq!(r.dof, 5);
        assert!((r.p_value - 0.849_145_036_084_609_6).abs() < 1e-9);
    }

    #[test]
    fn clopper_pearson_matches_known_values() {
        // scipy.stats.beta.ppf(0.05, 5, 16) and beta.ppf(0.95, 6, 15).
        let lo = clopper_pearson_lower(5, 20, 0.05);
        let hi = clopper_pearson_upper(5, 20, 0.05);
        assert!((lo - 0.104_080_835_910_136_09).abs() < 1e-9, "{lo}");
        assert!((hi - 0.455_582_404_001_748_9).abs() < 1e-9, "{hi}");
        assert_eq!(clopper_pearson_lower(0, 10, 0.05), 0.0);
        assert_eq!(clopper_pearson_upper(10, 10, 0.05), 1.0);
    }
}
