//! Shared numerics: samplers (floating-point in [`distributions`], exact in [`exact`]),
//! percentiles, correlations, utility bounds and the hypothesis tests used to check them.

pub mod bounds;
pub mod correlation;
pub mod distributions;
pub mod exact;
pub mod hypothesis;
pub mod percentile;

pub use bounds::{utility_bounds, GemBoundReading, UtilityBounds};
pub use correlation::{pearson, spearman, weighted_correlation, Chooser};
pub use percentile::percentile_linear;

/// An integer that orders like `f64::total_cmp`: `total_order_key(a) < total_order_key(b)` iff
/// `a.total_cmp(&b)` is `Less`. Sorting such keys (with an index in the low bits to break ties)
/// compares integers instead of following indices into the values.
#[inline]
pub fn total_order_key(x: f64) -> u64 {
    let b = x.to_bits();
    b ^ ((((b as i64) >> 63) as u64) | (1 << 63))
}
