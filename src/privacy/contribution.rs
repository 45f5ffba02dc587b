//! How much of one user a release counts (docs/training-privacy.md, "The unit and the
//! contribution bound"): a user whose whole row would move a release by more than its declared
//! sensitivity is down-weighted, never dropped, by an integer weight on a fixed grid — a
//! function of that user's own row only, so another user's presence never changes it.

/// The contribution weight w (the user counts w/`scale`) of a user whose row, counted whole,
/// moves a release by `√load`, under the bound `√bound`: the largest integer `w ≤ scale` with
/// `(w/scale)² · load ≤ bound`, i.e. `⌊scale · min(1, √(bound/load))⌋` computed on integers, so
/// the weighted user moves the release by `(w/scale)·√load ≤ √bound` exactly (no rounding can
/// push it over).
///
/// The DP fit's Gram matrix weighs a user with n items by `load = n(n+1)`, `bound = C(C+1)`
/// (`model::dp::user_weight`); the item-set fit's counts by `load = n`, `bound = C`
/// (`model::dp_items::count_weight`).
pub fn contribution_weight(scale: u64, load: u128, bound: u128) -> u64 {
    if load <= bound {
        return scale;
    }
    let s = u128::from(scale);
    let rhs = s * s * bound;
    let fits = |w: u128| w * w * load <= rhs;
    let mut w = ((rhs as f64 / load as f64).sqrt() as u128).min(s);
    while w > 0 && !fits(w) {
        w -= 1;
    }
    while w < s && fits(w + 1) {
        w += 1;
    }
    w as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The weight is the largest on the grid that keeps the user inside the bound: w fits and
    /// w + 1 does not, for every row length around the bound.
    #[test]
    fn the_weight_is_the_largest_that_fits() {
        for scale in [256u64, 1 << 14] {
            for cap in [1u128, 3, 20] {
                for n in 0..200u128 {
                    for (load, bound) in [(n, cap), (n * (n + 1), cap * (cap + 1))] {
                        let w = u128::from(contribution_weight(scale, load, bound));
                        let s = u128::from(scale);
                        assert!(w <= s);
                        assert!(w * w * load <= s * s * bound, "n={n} cap={cap}");
                        if w < s {
                            assert!((w + 1) * (w + 1) * load > s * s * bound);
                        }
                    }
                }
            }
        }
        assert_eq!(contribution_weight(256, 0, 5), 256);
        assert_eq!(contribution_weight(256, 4, 1), 128);
    }
}
