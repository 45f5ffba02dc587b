//! Correlation of scores and sensitivities (docs/mechanisms.md, "Correlations"): Spearman, Pearson and the weighted correlation
//! of seed 001 appendix I. Used by `cgem` to choose between GEM and mGEM and by every experiment to
//! describe a selection problem. A constant vector has correlation 0 by convention.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which correlation `cgem` uses (docs/mechanisms.md, `cgem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Chooser {
    /// Spearman's rank correlation (the paper's default).
    #[default]
    Spearman,
    /// Pearson's product-moment correlation.
    Pearson,
    /// The weighted correlation of docs/mechanisms.md, "Correlations".
    Weighted,
    /// Not a correlation: mGEM when its utility bound at the GEM budget is at least GEM's
    /// ([`crate::numerics::bounds`], seed 001 appendix J). An extension; the paper gives no numbers.
    Bound,
}

impl Chooser {
    /// All choosers with their CLI names.
    pub const ALL: [(&'static str, Chooser); 4] = [
        ("spearman", Chooser::Spearman),
        ("pearson", Chooser::Pearson),
        ("weighted", Chooser::Weighted),
        ("bound", Chooser::Bound),
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Chooser::Spearman => "spearman",
            Chooser::Pearson => "pearson",
            Chooser::Weighted => "weighted",
            Chooser::Bound => "bound",
        }
    }

    /// The chooser called `name`.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
            .ok_or_else(|| Error::UnknownName {
                kind: "correlation chooser",
                name: name.to_string(),
                valid: "spearman, pearson, weighted, bound".into(),
            })
    }

    /// The correlation of `x` and `y` (equal lengths); `None` for [`Chooser::Bound`], which is not
    /// a correlation.
    pub fn correlation(self, x: &[f64], y: &[f64]) -> Option<f64> {
        match self {
            Chooser::Spearman => Some(spearman(x, y)),
            Chooser::Pearson => Some(pearson(x, y)),
            Chooser::Weighted => Some(weighted_correlation(x, y)),
            Chooser::Bound => None,
        }
    }

    /// `cgem`'s true bit for scores `q` and sensitivities `Δ` (validated, equal lengths): 1 (run
    /// mGEM) when the correlation is ≥ 0, or, for [`Chooser::Bound`], when mGEM's utility bound at
    /// `epsilon_g` and `beta` is at least GEM's.
    pub fn mgem_bit(self, q: &[f64], sens: &[f64], epsilon_g: f64, beta: f64) -> bool {
        match self.correlation(q, sens) {
            Some(r) => r >= 0.0,
            None => super::bounds::mgem_bound_at_least_gem(q, sens, epsilon_g, beta),
        }
    }
}

/// Weighted Pearson correlation; 0 when either weighted variance is 0.
fn weighted_pearson(x: &[f64], y: &[f64], w: &[f64]) -> f64 {
    assert_eq!(
        x.len(),
        y.len(),
        "correlation of vectors of different lengths"
    );
    let sw: f64 = w.iter().sum();
    if x.is_empty() || sw.is_nan() || sw <= 0.0 {
        return 0.0;
    }
    let mx = x.iter().zip(w).map(|(a, w)| a * w).sum::<f64>() / sw;
    let my = y.iter().zip(w).map(|(a, w)| a * w).sum::<f64>() / sw;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for ((a, b), w) in x.iter().zip(y).zip(w) {
        let (dx, dy) = (a - mx, b - my);
        sxy += w * dx * dy;
        sxx += w * dx * dx;
        syy += w * dy * dy;
    }
    if sxx <= 0.0 || syy <= 0.0 {
        0.0
    } else {
        (sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0)
    }
}

/// Pearson's correlation; 0 if either vector is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    weighted_pearson(x, y, &vec![1.0; x.len()])
}

/// Ranks 1..n with ties given their average rank.
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    // Ascending by `f64::total_cmp`, ties by index (the order of a stable sort), as one integer
    // per value: the sort compares integers instead of following two indices per comparison.
    let mut keyed: Vec<u128> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| (u128::from(super::total_order_key(v)) << 64) | i as u128)
        .collect();
    keyed.sort_unstable();
    let idx: Vec<usize> = keyed.iter().map(|&k| k as u64 as usize).collect();
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        // positions i..=j (0-based) share the average of ranks i+1..=j+1
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &t in &idx[i..=j] {
            ranks[t] = r;
        }
        i = j + 1;
    }
    ranks
}

/// Spearman's rank correlation: Pearson on average ranks.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&average_ranks(x), &average_ranks(y))
}

/// Number of score buckets of the weighted correlation (docs/mechanisms.md, "Correlations").
pub const WEIGHTED_BUCKETS: usize = 5;

/// The weighted correlation of seed 001 appendix I (docs/mechanisms.md, "Correlations"): `[q_min, q_max]` split into 5 equal
/// buckets (the last closed); `w_a = Δ_a / max{Δ_b : b in a's bucket}`; then the weighted Pearson
/// correlation of `q` and `Δ`.
pub fn weighted_correlation(q: &[f64], sens: &[f64]) -> f64 {
    assert_eq!(
        q.len(),
        sens.len(),
        "correlation of vectors of different lengths"
    );
    if q.is_empty() {
        return 0.0;
    }
    let (lo, hi) = q
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let width = hi - lo;
    let bucket = |v: f64| -> usize {
        if width.is_nan() || width <= 0.0 {
            return 0;
        }
        (((v - lo) / width * WEIGHTED_BUCKETS as f64).floor() as usize).min(WEIGHTED_BUCKETS - 1)
    };
    let mut bmax = [0.0f64; WEIGHTED_BUCKETS];
    for (&v, &d) in q.iter().zip(sens) {
        let b = bucket(v);
        bmax[b] = bmax[b].max(d);
    }
    let w: Vec<f64> = q
        .iter()
        .zip(sens)
        .map(|(&v, &d)| {
            let m = bmax[bucket(v)];
            if m > 0.0 {
                d / m
            } else {
                0.0
            }
        })
        .collect();
    weighted_pearson(q, sens, &w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 4.0, 6.0, 8.0, 100.0];
        assert!((spearman(&x, &y) - 1.0).abs() < 1e-12);
        assert!(pearson(&x, &y) < 0.8);
        assert_eq!(pearson(&x, &[3.0; 5]), 0.0);
        assert_eq!(spearman(&[1.0; 5], &y), 0.0);
        // scipy.stats.spearmanr([1,2,2,3],[1,3,2,4]) = 0.9486832980505138
        let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]);
        assert!((r - 0.948_683_298_050_513_8).abs() < 1e-12, "{r}");
        assert_eq!(average_ranks(&[3.0, 1.0, 3.0]), vec![2.5, 1.0, 2.5]);
    }

    #[test]
    fn weighted_equals_pearson_with_equal_weights() {
        // One bucket per distinct score and equal sensitivities inside each bucket → w = 1.
        let q = [0.0, 1.0, 2.0, 3.0, 4.0];
        let d = [1.0, 3.0, 2.0, 5.0, 4.0];
        assert!((weighted_correlation(&q, &d) - pearson(&q, &d)).abs() < 1e-12);
        assert_eq!(weighted_correlation(&[1.0; 3], &[1.0, 2.0, 3.0]), 0.0);
    }

    /// Bucketing with unequal weights, worked out by hand (docs/mechanisms.md, "Correlations").
    ///
    /// q = (0, 1, 2, 3.5, 9, 10), Δ = (1, 2, 4, 1, 3, 6). [q_min, q_max] = [0, 10] in 5 buckets of
    /// width 2: [0, 2) holds 0 and 1; [2, 4) holds 2 (on the boundary: the upper bucket) and 3.5;
    /// [8, 10] (the last, closed) holds 9 and 10. Bucket maxima of Δ: 2, 4, 6, so
    /// w = (1/2, 1, 1, 1/4, 1/2, 1), Σw = 17/4.
    /// Weighted means: q̄ = (0 + 1 + 2 + 7/8 + 9/2 + 10) / (17/4) = 147/34,
    /// Δ̄ = (1/2 + 2 + 4 + 1/4 + 3/2 + 6) / (17/4) = 57/17.
    /// Weighted sums: Σw(q−q̄)(Δ−Δ̄) = 387/17, Σw(q−q̄)² = 1175/17, Σw(Δ−Δ̄)² = 229/17,
    /// so ρ_w = 387 / √(1175 · 229) = 387 / √269075 = 0.746060918416630.
    #[test]
    fn weighted_correlation_buckets_by_hand() {
        let q = [0.0, 1.0, 2.0, 3.5, 9.0, 10.0];
        let d = [1.0, 2.0, 4.0, 1.0, 3.0, 6.0];
        let want = 387.0 / 269_075f64.sqrt();
        assert!((want - 0.746_060_918_416_630).abs() < 1e-15);
        let got = weighted_correlation(&q, &d);
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
        // Power: the unweighted Pearson (0.6866) and the weights with q = 2 put in the lower bucket
        // (w = (1/4, 1/2, 1, 1, 1/2, 1): 0.6592) are far from it.
        let lower = weighted_pearson(&q, &d, &[0.25, 0.5, 1.0, 1.0, 0.5, 1.0]);
        for wrong in [pearson(&q, &d), lower] {
            assert!((got - wrong).abs() > 0.05, "{got} vs wrong {wrong}");
        }
        // Scores shifted and scaled keep the buckets, hence the weights and ρ_w.
        let q2: Vec<f64> = q.iter().map(|v| 3.0 * v - 7.0).collect();
        assert!((weighted_correlation(&q2, &d) - want).abs() < 1e-14);
    }
}
