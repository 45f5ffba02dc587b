//! Why the naive selections are not private (Liu & Talwar 2019, Appendix B; docs/private-candidates.md,
//! "Why not the obvious algorithms"), and why the known threshold's factor 2 appears (Appendix D):
//! each a worked counterexample whose exact privacy loss is computed here from its definition and
//! compared with what random stopping or the known threshold achieve on the same candidates.

use recsel::mechanisms::private_candidates::{SelectionParams, Stopping};

/// Appendix B.1: the best of one run of each of k ε₀-DP candidates is only (k−1)ε₀-DP. Candidate
/// 1 always scores 1/2; candidates 2..k score 1 with probability x on D and x′ on D′, else 0, with
/// 1 − x′ = e^{−ε₀}(1 − x) (ε₀-close when x ≥ 1/(1 + e^{ε₀})). Candidate 1 wins when all others
/// score 0: (1 − x)^{k−1} against e^{−(k−1)ε₀}(1 − x)^{k−1}. Random stopping on the same candidates
/// (a uniform candidate per run, Theorem 3.2) stays within its 3ε₀.
#[test]
fn the_best_of_one_run_per_candidate_loses_k_minus_one_eps0() {
    let eps0: f64 = 0.5;
    let x = 0.6; // ≥ 1/(1 + e^{0.5}) = 0.378
    let x2 = 1.0 - (-eps0).exp() * (1.0 - x);
    assert!(x2 <= eps0.exp() * x && 1.0 - x2 <= eps0.exp() * (1.0 - x));
    for k in [2u32, 5, 10] {
        let p = (1.0 - x).powi(k as i32 - 1);
        let p2 = (1.0 - x2).powi(k as i32 - 1);
        let loss = (p / p2).ln();
        assert!(
            (loss - (k - 1) as f64 * eps0).abs() < 1e-12,
            "k {k}: {loss}"
        );
        // Random stopping, geometric γ: one run is a uniform candidate; candidate 1 wins when
        // the best run is candidate 1's 1/2, i.e. φ(G) − φ(F) with F = P(run scores 0) and
        // G = F + 1/k (the law of docs/private-candidates.md, "The one lemma").
        let gamma: f64 = 0.05;
        let phi = |z: f64| gamma * z / (1.0 - (1.0 - gamma) * z);
        let rs = |x: f64| {
            let f = (k - 1) as f64 / k as f64 * (1.0 - x);
            phi(f + 1.0 / k as f64) - phi(f)
        };
        let rs_loss = (rs(x) / rs(x2)).ln().abs();
        let claim = SelectionParams::new(Stopping::Geometric { gamma }, eps0)
            .check()
            .unwrap()
            .guarantee()
            .epsilon;
        eprintln!(
            "k = {k}: best of one run each loses {loss:.3} = {}·eps0; random stopping {rs_loss:.3} \
             (claims {claim})",
            k - 1
        );
        assert!(rs_loss <= claim);
        if k >= 5 {
            assert!(
                loss > claim,
                "the naive loss exceeds random stopping's guarantee"
            );
        }
    }
}

/// Appendix B.2: lowering the threshold instead of stopping. Thresholds τ_1 > … > τ_r = 0; after
/// each run below the current threshold, move to the next one with probability γ. A run scores 1
/// with probability p, else 0; a score-0 run is released only at the last threshold, after r − 1
/// moves, each taken before a success with probability f(p) = (1−p)γ/(p + (1−p)γ). So
/// P(release a 0) = f(p)^{r−1}(1 − p), and with 1 − p′ = e^{−ε₀}(1 − p) the ratio is at least
/// e^{rε₀}: every threshold tried costs ε₀ — unlike the known threshold's
/// fixed 2ε₀.
#[test]
fn decreasing_thresholds_pay_for_every_threshold_tried() {
    let (eps0, gamma): (f64, f64) = (0.5, 0.1);
    let p = 0.99;
    let p2 = 1.0 - (-eps0).exp() * (1.0 - p);
    let f = |p: f64| (1.0 - p) * gamma / (p + (1.0 - p) * gamma);
    let release_zero = |p: f64, r: i32| f(p).powi(r - 1) * (1.0 - p);
    let mut last = 0.0;
    for r in [1, 2, 4, 8] {
        let loss = (release_zero(p, r) / release_zero(p2, r)).ln();
        eprintln!("{r} thresholds: loss {loss:.3} = {:.2} eps0", loss / eps0);
        // At least r·ε₀: f(p)/f(p′) = e^{ε₀}(p′ + (1−p′)γ)/(p + (1−p)γ) ≥ e^{ε₀} as p′ > p.
        let floor = r as f64 * eps0;
        assert!(loss >= floor - 1e-9, "r {r}: {loss} < {floor}");
        assert!(loss > last);
        last = loss;
        if r >= 4 {
            assert!(loss > 2.0 * eps0, "beyond the known threshold's 2 eps0");
        }
    }
}

/// Appendix B.3: the median is not private. Scores 1 with probability 1/2 − a on D and 1/2 + a on
/// D′, else 0, with a = tanh(ε₀/2)/2 (then the two laws are exactly ε₀-close); the median score is
/// 0 on D and 1 on D′, so releasing it is not DP for any ε; the median of n samples (n odd) is 1
/// with probability P(Bin(n, 1/2 ∓ a) > n/2), whose log-ratio grows linearly in n.
#[test]
fn the_median_of_a_private_candidate_is_not_private() {
    let eps0: f64 = 0.5;
    let a = (eps0 / 2.0).tanh() / 2.0;
    let (p, p2) = (0.5 - a, 0.5 + a);
    assert!(((p2 / p).ln() - eps0).abs() < 1e-12);
    assert!((((1.0 - p) / (1.0 - p2)).ln() - eps0).abs() < 1e-12);
    let above_half = |p: f64, n: u64| -> f64 {
        let lnc = |k: u64| {
            statrs::function::gamma::ln_gamma(n as f64 + 1.0)
                - statrs::function::gamma::ln_gamma(k as f64 + 1.0)
                - statrs::function::gamma::ln_gamma((n - k) as f64 + 1.0)
        };
        (n / 2 + 1..=n)
            .map(|k| (lnc(k) + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp())
            .sum()
    };
    let mut last = 0.0;
    for n in [1u64, 11, 51, 201] {
        let loss = (above_half(p2, n) / above_half(p, n)).ln();
        eprintln!(
            "median of {n} samples: loss {loss:.3} = {:.2} eps0",
            loss / eps0
        );
        assert!(loss > last);
        last = loss;
    }
    assert!(last > 10.0 * eps0, "{last}");
}

/// Appendix D's factor 2, on the smallest example: releasing a run drawn from the law of Q
/// conditioned on scoring at least τ — what a known-threshold selection aims at — costs 2ε₀.
/// Outcomes: low (below τ), y and z (above τ); on D′ y is e^{ε₀} times likelier and z e^{−ε₀}
/// times (low takes the rest, within e^{±ε₀}). P(y | above) moves by
/// e^{ε₀}(a + b)/(e^{ε₀}a + e^{−ε₀}b) → e^{2ε₀} as a → 0; Theorem 3.1's algorithm releases y with
/// probability a/(γ + (1−γ)(a + b)), whose ratio is at most e^{2ε₀} too (the statement is tight).
#[test]
fn conditioning_on_the_threshold_costs_twice_eps0() {
    let eps0: f64 = 0.5;
    let b = 0.3;
    let mut worst: f64 = 0.0;
    for a in [1e-2, 1e-4, 1e-6] {
        let (a2, b2) = (eps0.exp() * a, (-eps0).exp() * b);
        let low = 1.0 - a - b;
        let low2 = 1.0 - a2 - b2;
        assert!((low2 / low).ln().abs() <= eps0, "low within e^eps0");
        let loss = ((a2 / (a2 + b2)) / (a / (a + b))).ln();
        worst = worst.max(loss);
        let gamma = 1e-6;
        let released = |a: f64, b: f64| a / (gamma + (1.0 - gamma) * (a + b));
        let thm31 = (released(a2, b2) / released(a, b)).ln();
        eprintln!("a = {a}: conditional law loses {loss:.4}, theorem 3.1's release {thm31:.4}");
        assert!(thm31 <= 2.0 * eps0 + 1e-12);
    }
    assert!(worst > 1.95 * eps0 && worst <= 2.0 * eps0, "{worst}");
}

/// The smallest δ with which the law `p` is (ε, δ)-close to `p2` in both directions: the hockey-
/// stick divergence `max(Σ (p − e^ε p2)₊, Σ (p2 − e^ε p)₊)` over a finite outcome set.
fn hockey_stick(p: &[f64], p2: &[f64], eps: f64) -> f64 {
    let one = |a: &[f64], b: &[f64]| -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - eps.exp() * y).max(0.0))
            .sum()
    };
    one(p, p2).max(one(p2, p))
}

/// Whether `p` and `p2` satisfy (ε, δ)-DP for this pair, exactly (a claim checker: it flags every
/// pair below the exact curve).
fn is_eps_delta_close(p: &[f64], p2: &[f64], eps: f64, delta: f64) -> bool {
    hockey_stick(p, p2, eps) <= delta * (1.0 + 1e-12)
}

/// The smallest ε ≥ 0 with which `p`, `p2` are (ε, δ)-close (bisection on the decreasing
/// hockey-stick curve).
fn exact_epsilon(p: &[f64], p2: &[f64], delta: f64) -> f64 {
    if is_eps_delta_close(p, p2, 0.0, delta) {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0, 60.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if is_eps_delta_close(p, p2, mid, delta) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Appendix B.1's (ε, δ) half: approximate DP does not rescue the best of one run per candidate.
/// Candidate 0 always scores 1/2; candidates 1..m score 1 with probability 1/2 on D and
/// 1 − e^{−ε₀}/2 on D′, else 0 (each ε₀-DP: 1 − x′ = e^{−ε₀}(1 − x), x′ ≤ e^{ε₀}x). The
/// release is the winning candidate; candidate 0 wins iff all others score 0, with probability
/// 2^{−m} on D and e^{−mε₀}2^{−m} on D′; the other outcomes share the rest. So the exact privacy
/// curve is δ(ε′) = 2^{−m}(1 − e^{ε′−mε₀})₊, and at δ = 2^{−(m+1)} the best ε′ is exactly
/// mε₀ − ln 2 = ε₀(log₂(1/δ) − 1) − ln 2: it grows with log(1/δ) (and with the number of
/// candidates, up to log₂(1/δ) − 1 of them), where random stopping on the same candidates is
/// 3ε₀-DP with δ = 0. Power: the exact checker flags the claims (ε′ − 0.01, δ) and (ε′, 0.99δ).
#[test]
fn the_best_of_one_run_per_candidate_is_no_better_with_delta() {
    let eps0: f64 = 0.5;
    let gamma: f64 = 0.05;
    for m in [1usize, 2, 4, 8, 16] {
        let k = m + 1;
        let x = 0.5;
        let x2 = 1.0 - (-eps0).exp() * (1.0 - x);
        assert!(x2 <= eps0.exp() * x + 1e-15 && (1.0 - x2) <= eps0.exp() * (1.0 - x));
        // Outcome 0: candidate 0 wins; outcome j ≥ 1: candidate j wins (ties among the 1s split
        // evenly — any rule gives the same law of outcome 0).
        let law = |x: f64| {
            let p0 = (1.0 - x).powi(m as i32);
            let mut p = vec![p0];
            p.extend(std::iter::repeat_n((1.0 - p0) / m as f64, m));
            p
        };
        let (p, p2) = (law(x), law(x2));
        // The exact curve against its closed form on a grid of ε′.
        for i in 0..=40 {
            let e = i as f64 * m as f64 * eps0 / 40.0;
            let want = 0.5f64.powi(m as i32) * (1.0 - (e - m as f64 * eps0).exp()).max(0.0);
            let got = hockey_stick(&p, &p2, e);
            assert!(
                (got - want).abs() < 1e-14,
                "m {m} eps' {e}: {got} vs {want}"
            );
        }
        let delta = 0.5f64.powi(m as i32 + 1);
        let claim = m as f64 * eps0 - 2f64.ln();
        let naive = exact_epsilon(&p, &p2, delta);
        // Random stopping (geometric γ, one uniform candidate per run) on the same candidates:
        // candidate 0 is released with probability φ(F + 1/k) − φ(F), F = P(a run scores 0).
        let phi = |z: f64| gamma * z / (1.0 - (1.0 - gamma) * z);
        let rs_law = |x: f64| {
            let f = m as f64 / k as f64 * (1.0 - x);
            let p0 = phi(f + 1.0 / k as f64) - phi(f);
            let mut p = vec![p0];
            p.extend(std::iter::repeat_n((1.0 - p0) / m as f64, m));
            p
        };
        let rs = exact_epsilon(&rs_law(x), &rs_law(x2), delta);
        let rs_pure = exact_epsilon(&rs_law(x), &rs_law(x2), 0.0);
        // Advanced composition (Dwork, Rothblum & Vadhan) bounds the naive release from above.
        let advanced = eps0 * (2.0 * m as f64 * (1.0 / delta).ln()).sqrt()
            + m as f64 * eps0 * (eps0.exp() - 1.0);
        eprintln!(
            "m = {m:>2} (delta = 2^-{}): best of one run each is ({naive:.4}, delta)-DP, the \
             statement's m*eps0 - ln 2 = {claim:.4}; basic composition {:.2}, advanced {advanced:.2}; \
             random stopping ({rs:.4}, delta), pure {rs_pure:.4} <= 3 eps0",
            m + 1,
            m as f64 * eps0
        );
        if claim > 0.0 {
            assert!((naive - claim).abs() < 1e-9, "m {m}: {naive} vs {claim}");
            assert!(is_eps_delta_close(&p, &p2, claim, delta));
            assert!(
                !is_eps_delta_close(&p, &p2, claim - 0.01, delta),
                "a smaller eps'"
            );
            assert!(
                !is_eps_delta_close(&p, &p2, claim, 0.99 * delta),
                "a smaller delta"
            );
        }
        assert!(naive <= m as f64 * eps0 + 1e-12 && naive <= advanced);
        assert!(rs_pure <= 3.0 * eps0 + 1e-12 && rs <= rs_pure + 1e-12);
        if m >= 8 {
            assert!(
                naive > 3.0 * eps0,
                "with delta the naive release still loses {naive}"
            );
        }
    }
}
