//! Percentiles with numpy's default ("linear") interpolation (docs/experiments.md, §5.6).

/// The `p`-th percentile (0 ≤ p ≤ 100) of ascending-sorted `sorted`, numpy's `linear` method:
/// position `h = (n − 1)·p/100`, interpolating between the order statistics around it.
///
/// # Panics
/// If `sorted` is empty or `p` is outside [0, 100] (contract violations of the caller).
pub fn percentile_linear(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of an empty sample");
    assert!(
        (0.0..=100.0).contains(&p),
        "percentile {p} outside [0, 100]"
    );
    let h = (sorted.len() - 1) as f64 * p / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    // numpy's lerp form: exact at the end points and monotone.
    let (a, b) = (sorted[lo], sorted[hi]);
    if frac == 0.0 {
        a
    } else {
        a + (b - a) * frac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy() {
        // numpy.percentile([1, 2, 3, 4, 10], [0, 10, 50, 90, 99, 100])
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        let want = [1.0, 1.4, 3.0, 7.6, 9.76, 10.0];
        for (p, w) in [0.0, 10.0, 50.0, 90.0, 99.0, 100.0].iter().zip(want) {
            assert!((percentile_linear(&x, *p) - w).abs() < 1e-12, "p{p}");
        }
        assert_eq!(percentile_linear(&[5.0], 37.0), 5.0);
    }
}
