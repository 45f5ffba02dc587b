//! Shared numerics: samplers (floating-point in [`distributions`], exact in [`exact`]),
//! percentiles, means with standard errors, correlations, utility bounds and the hypothesis tests
//! used to check them.

pub mod bounds;
pub mod correlation;
pub mod distributions;
pub mod exact;
pub mod hypothesis;
pub mod percentile;
pub mod summary;

pub use bounds::{utility_bounds, GemBoundReading, UtilityBounds};
pub use correlation::{pearson, spearman, weighted_correlation, Chooser};
pub use percentile::percentile_linear;
pub use summary::mean_se;

/// Checks one selection problem — at least one candidate, one sensitivity per score, finite
/// scores, finite positive sensitivities — and returns its largest sensitivity and largest
/// score. Errors name the first bad value. The one check of a problem: the mechanisms'
/// `Problem` and the utility bounds both make it.
pub fn check_problem(scores: &[f64], sens: &[f64]) -> crate::error::Result<(f64, f64)> {
    use crate::error::Error;
    if scores.is_empty() {
        return Err(Error::EmptyCandidates);
    }
    if scores.len() != sens.len() {
        return Err(Error::LengthMismatch {
            scores: scores.len(),
            sensitivities: sens.len(),
        });
    }
    let mut max_sens = 0.0f64;
    let mut max_score = f64::NEG_INFINITY;
    for (index, (&q, &d)) in scores.iter().zip(sens).enumerate() {
        if !q.is_finite() {
            return Err(Error::NonFiniteScore { index, value: q });
        }
        if !(d.is_finite() && d > 0.0) {
            return Err(Error::BadSensitivity { index, value: d });
        }
        max_sens = max_sens.max(d);
        max_score = max_score.max(q);
    }
    Ok((max_sens, max_score))
}

/// Every how many items [`best_k`] samples to find its cut.
const CUT_STRIDE: usize = 8;

/// The `k` best-scored items of `scores` not in `excluded` (sorted ascending), best first: score
/// descending by `f64::total_cmp`, ties by item index ascending. Fewer when fewer items are left.
///
/// First a cut: the k-th best score among every eighth eligible item. At least k items score at
/// or above it, so the k best of all do too, and only the items at or above it (about
/// `k · CUT_STRIDE`) are ranked — the same items in the same order as ranking them all, for a
/// fraction of the work (`model::top_k_equals_ranking_every_item` in `tests/model.rs` checks it
/// against a full sort).
pub fn best_k(scores: &[f64], excluded: &[u32], k: usize) -> Vec<u32> {
    debug_assert!(excluded.windows(2).all(|w| w[0] < w[1]), "excluded sorted");
    if k == 0 {
        return Vec::new();
    }
    // Calls `f(j)` for every `stride`-th item j that is not excluded, in ascending order.
    let each_eligible = |stride: usize, f: &mut dyn FnMut(usize)| {
        let mut ex = excluded.iter().peekable();
        for j in (0..scores.len()).step_by(stride) {
            while ex.next_if(|&&e| (e as usize) < j).is_some() {}
            if ex.peek().is_some_and(|&&e| e as usize == j) {
                continue;
            }
            f(j);
        }
    };
    let mut sample: Vec<u64> = Vec::with_capacity(scores.len() / CUT_STRIDE + 1);
    each_eligible(CUT_STRIDE, &mut |j| sample.push(total_order_key(scores[j])));
    let cut = (sample.len() >= k).then(|| {
        let (_, &mut c, _) = sample.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        c
    });
    // One integer per item, ordered as (score descending by `f64::total_cmp`, item ascending): the
    // selection compares integers instead of following two indices per comparison.
    let mut keys: Vec<u128> = Vec::new();
    each_eligible(1, &mut |j| {
        let key = total_order_key(scores[j]);
        if cut.is_none_or(|c| key >= c) {
            keys.push((u128::from(!key) << 32) | j as u128);
        }
    });
    if keys.len() > k {
        keys.select_nth_unstable(k - 1);
        keys.truncate(k);
    }
    keys.sort_unstable();
    keys.into_iter().map(|key| key as u32).collect()
}

/// An integer that orders like `f64::total_cmp`: `total_order_key(a) < total_order_key(b)` iff
/// `a.total_cmp(&b)` is `Less`. Sorting such keys (with an index in the low bits to break ties)
/// compares integers instead of following indices into the values.
#[inline]
pub fn total_order_key(x: f64) -> u64 {
    let b = x.to_bits();
    b ^ ((((b as i64) >> 63) as u64) | (1 << 63))
}
