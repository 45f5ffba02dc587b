//! Seed 003's worked examples (docs/statistics.md, "Worked examples"): the lecture's numbers,
//! computed from the exact output law of `em` in `examples/heavy_hitters.rs` and
//! `examples/pricing.rs`, against Proposition 1.4.

use crate::heavy_hitters;
use crate::pricing;

/// Example 1.5: the margin at d = 100, ε = 0.5, t = ln 100 is 8 ln 100 = 36.84; em's exact
/// probability of an output at or below q_max − 36.84 stays under e^{−t} = 0.01 even on the worst
/// case for the bound, where it comes within 2% of it; a winner by 39 votes is named with
/// probability above 0.99.
#[test]
fn heavy_hitters_reproduce_the_lecture_numbers_from_the_exact_law() {
    let h = heavy_hitters::run();
    eprintln!("{h:?}");
    assert!((h.margin - 36.84).abs() < 0.005, "{}", h.margin);
    assert!((h.margin - 8.0 * 100f64.ln()).abs() < 1e-12);
    assert!((h.bound - 0.01).abs() < 1e-12);
    assert!(h.p_bad_worst <= h.bound, "{}", h.p_bad_worst);
    // The worst case is tight: 99·e^{−(ln d + t)} / (1 + 99·e^{−(ln d + t)}) = 0.0098.
    assert!(h.p_bad_worst > 0.98 * h.bound, "{}", h.p_bad_worst);
    assert!(h.p_bad_votes < h.p_bad_worst);
    assert!(h.p_winner_by_39 > 0.99, "{}", h.p_winner_by_39);
    assert!(h.p_bad_zipf <= h.bound);
    let expectation_bound = 2.0 / heavy_hitters::EPS * (100f64.ln() + 1.0);
    assert!(h.expected_shortfall_zipf <= expectation_bound);
}

/// Example 1.6: the exact expected revenue loss of em, times ε, stays below the bound
/// 2Δ(ln d + 1) = 25.05 of Proposition 1.4 (6), itself below the lecture's 31 (= 2·1.999·log₂ 200 = 30.56),
/// for every population and ε; the loss shrinks like 1/ε, so ε·E[loss] stays bounded while
/// E[loss] grows as ε falls.
#[test]
fn pricing_loss_from_the_exact_law_is_within_the_lecture_bound() {
    let b = pricing::bound_times_eps();
    assert!((b - 25.05).abs() < 0.01, "{b}");
    assert!((pricing::lecture_constant() - 30.56).abs() < 0.005);
    let rows = pricing::table(1000, &[0.1, 0.5, 1.0, 2.0]);
    for &(name, eps, v) in &rows {
        eprintln!("{name:<28} eps {eps:<4} eps*E[loss] {v:.3}");
        assert!(v > 0.0 && v <= b, "{name} eps {eps}: {v}");
    }
    // The lecture's case (everyone at $0.70): the loss comes from the cheaper prices, which em
    // keeps choosing at small ε — E[loss] at ε = 0.1 is more than at ε = 2.
    let x = vec![0.70; 1000];
    assert!(pricing::expected_loss(&x, 0.1) > pricing::expected_loss(&x, 2.0));
}
