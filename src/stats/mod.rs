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
