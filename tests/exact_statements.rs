//! Exact statements of the seeds, asserted as numbers: seed 001's eq. (5) (the expected gap of
//! RNMH's two halves, H_{k/2}(Δ₁ − Δ₂)) and its Appendix A (Report Noisy Max with Laplace noise
//! and heterogeneous sensitivities spends exactly (k − 1)ε), and seed 003's Example 1.5 (the
//! Laplace mechanism on the heavy hitters' counts perturbs them by about d/ε = 200) and §1.3 (the
//! Laplace mechanism and randomised response are the exponential mechanism with its factor 2
//! saved).
//!
//! Each reference is computed here from its definition (densities, distribution functions and
//! quadrature), and each assertion names the value a wrong formula would give, so the test can
//! fail. Where the library's sampler enters, its counts are checked against the exact law with the
//! chi-square test of `util.rs` (p ≥ 1e-6) and a power check at ε × 1.3.

use recsel::audit::pairs::TINY;
use recsel::mechanisms::{
    ExponentialMechanism, KRandomizedResponse, Mechanism, Noise, NoisyMax, Problem,
};
use recsel::numerics::distributions::laplace1;
use recsel::rng::Streams;

use crate::heavy_hitters;
use crate::util::{assert_fits, assert_rejects, counts, rnm_exact};

/// Composite Simpson's rule of `f` on [a, b] with `n` (even) subintervals.
fn simpson(f: &dyn Fn(f64) -> f64, a: f64, b: f64, n: usize) -> f64 {
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        s += if i % 2 == 1 { 4.0 } else { 2.0 } * f(a + i as f64 * h);
    }
    s * h / 3.0
}

/// The k-th harmonic number.
fn harmonic(k: usize) -> f64 {
    (1..=k).map(|i| 1.0 / i as f64).sum()
}

/// `E[max of n iid Exp(mean μ)] = ∫₀^∞ 1 − (1 − e^{−x/μ})ⁿ dx`, by quadrature.
fn expected_max_exp(n: usize, mu: f64) -> f64 {
    simpson(
        &|x| 1.0 - (-(-x / mu).exp_m1()).powi(n as i32),
        0.0,
        80.0 * mu,
        400_000,
    )
}

/// Seed 001, eq. (5) and its footnote: with k candidates, the first half at score q₁ and
/// sensitivity Δ₁, the second at q₂ > q₁ and Δ₂, RNMH (exponential noise of mean 2Δ_a/ε) outputs
/// a higher-scoring candidate when `max_{i ≤ k/2} z_i − max_{i > k/2} z_i ≤ q₂ − q₁`, and the
/// expectation of the left side is `H_{k/2}(Δ₁ − Δ₂)` in units of the noise's mean per unit of
/// sensitivity, 2/ε (the footnote's formula is the case ε = 2). Computed here by quadrature from
/// `E[max of n Exp(μ)] = ∫ 1 − (1 − e^{−x/μ})ⁿ`: equal to (2/ε)·H_{k/2}(Δ₁ − Δ₂) to 1e-7, and
/// not to (2/ε)·ln(k/2)(Δ₁ − Δ₂) or (2/ε)·H_k(Δ₁ − Δ₂).
///
/// Then the consequence on the library's `rnmh`: its probability of a higher-scoring output is
/// `P(LHS ≤ q₂ − q₁)`, computed from the two maxima's laws, and below 1/2 at k = 10, Δ₁ = 2,
/// Δ₂ = 0.5, q₂ − q₁ = 1, ε = 2 ("may be less than 50%"), where `rnm` stays above 1/2; the
/// sampler's counts fit it and reject the same probability at ε × 1.3.
#[test]
fn seed_001_eq_5_expected_gap_is_the_harmonic_number_times_the_sensitivity_gap() {
    for (k, d1, d2, eps) in [
        (10usize, 2.0, 0.5, 2.0),
        (10, 2.0, 0.5, 1.0),
        (4, 1.0, 0.25, 2.0),
        (40, 3.0, 1.0, 0.5),
    ] {
        let half = k / 2;
        let e = expected_max_exp(half, 2.0 * d1 / eps) - expected_max_exp(half, 2.0 * d2 / eps);
        let claim = 2.0 / eps * harmonic(half) * (d1 - d2);
        let log_form = 2.0 / eps * (half as f64).ln() * (d1 - d2);
        let h_k = 2.0 / eps * harmonic(k) * (d1 - d2);
        eprintln!(
            "eq. (5): k {k}, d1 {d1}, d2 {d2}, eps {eps}: E[LHS] {e:.8} = (2/eps) H_{half} (d1 - d2) \
             {claim:.8}; (2/eps) ln(k/2)(d1 - d2) would be {log_form:.4}, (2/eps) H_k (d1 - d2) \
             {h_k:.4}"
        );
        assert!((e - claim).abs() < 1e-7 * claim, "{e} vs {claim}");
        assert!((e - log_form).abs() > 0.1 && (e - h_k).abs() > 0.1);
        if eps == 2.0 {
            // The footnote's formula as printed.
            assert!((e - harmonic(half) * (d1 - d2)).abs() < 1e-7 * claim);
        }
    }

    // RNMH on the eq. (5) problem: P(a higher-scoring output) = P(M_low − M_high < g), M_low the
    // max of k/2 Exp(2Δ₁/ε), M_high of k/2 Exp(2Δ₂/ε).
    let (k, d1, d2, g, eps) = (10usize, 2.0, 0.5, 1.0, 2.0);
    let half = k / 2;
    let p_high = |eps: f64| {
        let (mu1, mu2) = (2.0 * d1 / eps, 2.0 * d2 / eps);
        let n = half as i32;
        let f_high =
            |y: f64| n as f64 * (-(-y / mu2).exp_m1()).powi(n - 1) * (-y / mu2).exp() / mu2;
        let cdf_low = |x: f64| (-(-x / mu1).exp_m1()).powi(n);
        simpson(&|y| f_high(y) * cdf_low(y + g), 0.0, 80.0 * mu2, 400_000)
    };
    let p = p_high(eps);
    let q: Vec<f64> = (0..k).map(|i| if i < half { 0.0 } else { g }).collect();
    let d: Vec<f64> = (0..k).map(|i| if i < half { d1 } else { d2 }).collect();
    let rnm_high: f64 = rnm_exact(&q, &d, eps)[half..].iter().sum();
    eprintln!(
        "eq. (5) on rnmh: k {k}, d1 {d1}, d2 {d2}, q2 - q1 {g}, eps {eps}: P(higher-scoring output) \
         {p:.4} (rnm: {rnm_high:.4}; at 1.3 eps {:.4})",
        p_high(1.3 * eps)
    );
    assert!(p < 0.5, "{p}");
    assert!(rnm_high > 0.5, "{rnm_high}");
    let rnmh = NoisyMax::new(Noise::Exponential, true, eps).unwrap();
    assert_eq!(rnmh.name(), "rnmh");
    let c = counts(&rnmh, &q, &d, 200_000, 51);
    let (low, high) = (c[..half].iter().sum::<u64>(), c[half..].iter().sum::<u64>());
    assert_fits(&[low, high], &[1.0 - p, p], "rnmh's higher-scoring share");
    let wrong = p_high(1.3 * eps);
    assert_rejects(
        &[low, high],
        &[1.0 - wrong, wrong],
        "rnmh's higher-scoring share at 1.3 eps",
    );
}

/// The exact output law of `argmax_a q_a + s_a·Z_a` with Laplace noise Z_a; a scale of 0 is no
/// noise. `P(o) = ∫ f(z; s_o) Π_{b≠o} F(z + q_o − q_b; s_b) dz` by Simpson's rule on the pieces
/// between the kinks, over ±50 s_o; a noiseless o gets the product of the others' cdfs at q_o.
fn laplace_noisy_max_law(q: &[f64], s: &[f64]) -> Vec<f64> {
    let cdf = |z: f64, b: f64| {
        if b == 0.0 {
            f64::from(u8::from(z >= 0.0))
        } else if z < 0.0 {
            0.5 * (z / b).exp()
        } else {
            1.0 - 0.5 * (-z / b).exp()
        }
    };
    let k = q.len();
    (0..k)
        .map(|o| {
            let others = |z: f64| -> f64 {
                (0..k)
                    .filter(|&b| b != o)
                    .map(|b| cdf(z + q[o] - q[b], s[b]))
                    .product()
            };
            if s[o] == 0.0 {
                return others(0.0);
            }
            let (lo, hi) = (-50.0 * s[o], 50.0 * s[o]);
            let mut knots: Vec<f64> = vec![lo, 0.0, hi];
            knots.extend((0..k).map(|b| q[b] - q[o]).filter(|z| *z > lo && *z < hi));
            knots.sort_by(f64::total_cmp);
            knots.dedup();
            let f = |z: f64| (-z.abs() / s[o]).exp() / (2.0 * s[o]) * others(z);
            knots
                .windows(2)
                .map(|w| {
                    // The ends a relative 1e-12 inside, so a jump at a knot enters with its
                    // one-sided limit.
                    let e = 1e-12 * (w[1] - w[0]);
                    simpson(&f, w[0] + e, w[1] - e, 4000)
                })
                .sum()
        })
        .collect()
}

/// The privacy loss of a pair of output laws: the largest |ln P(o)/P′(o)|.
fn privacy_loss(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x / y).ln().abs())
        .fold(0.0, f64::max)
}

/// Seed 001, Appendix A: RNMH with Laplace noise Lap(Δ_a/ε) is (k − 1)ε-DP and no better. On the
/// appendix's pair (all scores 0 against candidate 1 at 0 and the others at 1; Δ₁ = 0 and the
/// others 1) the exact privacy loss, computed by quadrature, equals (k − 1)ε to 1e-9 for
/// k = 2..6 and ε = 0.5, 1 — not kε ("easy to see") and not ε; a random search over other
/// neighbouring pairs never exceeds (k − 1)ε. The library reports (k − 1)ε for `rnmh-laplace`,
/// and its sampler follows the appendix's law at k = 5 (the law at ε × 1.3 is rejected).
#[test]
fn seed_001_app_a_rnmh_laplace_spends_exactly_k_minus_1_eps() {
    for eps in [0.5, 1.0] {
        for k in 2..=6usize {
            let mut s = vec![1.0 / eps; k];
            s[0] = 0.0;
            let d1 = vec![0.0; k];
            let mut d2 = vec![1.0; k];
            d2[0] = 0.0;
            let loss = privacy_loss(
                &laplace_noisy_max_law(&d1, &s),
                &laplace_noisy_max_law(&d2, &s),
            );
            let claim = (k - 1) as f64 * eps;
            eprintln!(
                "app. A, rnmh-laplace, k {k}, eps {eps}: exact privacy loss {loss:.10}, (k - 1) eps \
                 {claim}, k eps would be {}",
                k as f64 * eps
            );
            assert!(
                (loss - claim).abs() < 1e-9,
                "k {k}, eps {eps}: {loss} vs {claim}"
            );
            let reported = NoisyMax::new(Noise::Laplace, true, eps)
                .unwrap()
                .guarantee()
                .epsilon_for(k)
                .unwrap();
            assert!((reported - claim).abs() < 1e-12, "{reported}");
        }
    }
    // No neighbouring pair spends more: random scores, sensitivities (one of them 0) and moves of
    // each score within its sensitivity, at the extremes half of the time.
    let eps = 1.0;
    let mut worst = [0.0f64; 2];
    for (w, k) in worst.iter_mut().zip([3usize, 4]) {
        for i in 0..300u32 {
            let mut rng = Streams::new(61).stream(0, 0, k as u64, i);
            let uniform = |r: &mut recsel::rng::Rng| {
                use rand::Rng as _;
                r.random::<f64>()
            };
            let sens: Vec<f64> = (0..k)
                .map(|a| {
                    if a == 0 {
                        0.0
                    } else {
                        0.05 + uniform(&mut rng)
                    }
                })
                .collect();
            let q: Vec<f64> = (0..k).map(|_| 2.0 * uniform(&mut rng) - 1.0).collect();
            let q2: Vec<f64> = (0..k)
                .map(|a| {
                    let u = uniform(&mut rng);
                    let m = if u < 0.25 {
                        -1.0
                    } else if u < 0.5 {
                        1.0
                    } else {
                        2.0 * uniform(&mut rng) - 1.0
                    };
                    q[a] + m * sens[a]
                })
                .collect();
            let s: Vec<f64> = sens.iter().map(|d| d / eps).collect();
            let loss = privacy_loss(
                &laplace_noisy_max_law(&q, &s),
                &laplace_noisy_max_law(&q2, &s),
            );
            *w = w.max(loss);
        }
        eprintln!(
            "app. A, rnmh-laplace, k {k}, eps {eps}: largest privacy loss over 300 random pairs \
             {:.4} <= (k - 1) eps = {}",
            *w,
            (k - 1) as f64 * eps
        );
        assert!(*w <= (k - 1) as f64 * eps + 1e-9, "k {k}: {}", *w);
    }
    // The library's sampler on the appendix's second data set (Δ₁ the audit's TINY).
    let (k, eps) = (5usize, 0.5);
    let mut sens = vec![1.0; k];
    sens[0] = TINY;
    let mut q = vec![1.0; k];
    q[0] = 0.0;
    // The exact law at Δ₁ = 0 (TINY moves it by about 1e-6, far below the sampling error).
    let law = |eps: f64| {
        let s: Vec<f64> = (0..k)
            .map(|a| if a == 0 { 0.0 } else { sens[a] / eps })
            .collect();
        laplace_noisy_max_law(&q, &s)
    };
    let m = NoisyMax::new(Noise::Laplace, true, eps).unwrap();
    assert_eq!(m.name(), "rnmh-laplace");
    let c = counts(&m, &q, &sens, 400_000, 62);
    eprintln!(
        "app. A, rnmh-laplace at k {k}: counts {c:?}, law {:?}",
        law(eps)
    );
    assert_fits(&c, &law(eps), "rnmh-laplace on the appendix's pair");
    assert_rejects(
        &c,
        &law(1.3 * eps),
        "rnmh-laplace against the law at 1.3 eps",
    );
}

/// Seed 003, Example 1.5: releasing the d = 100 counts with the Laplace mechanism needs noise of
/// scale d/ε = 200 (one user names any subset of the sites, so the vector moves by up to d in ℓ₁),
/// which perturbs each count by 200 on average (E|Lap(b)| = b) and the largest of the d by
/// b·H_d = 1037 on average, measured on the library's Laplace sampler; a count-by-count scale of
/// 1/ε = 2 would be too small for privacy. Its noisy argmax names a winner leading by 39 votes
/// with probability 0.012 (exact, by quadrature), where the exponential mechanism's margin of
/// 36.8 names it with probability above 0.99 (`heavy_hitters`): the lecture's comparison. At the
/// wrong scale 2 the noisy argmax would name it with probability above 0.99 too, so the numbers
/// tell the two scales apart.
#[test]
fn seed_003_example_1_5_laplace_perturbs_the_counts_by_d_over_eps() {
    let (d, eps) = (heavy_hitters::D, heavy_hitters::EPS);
    // ℓ₁ sensitivity of the count vector: the user who names every site.
    let with: Vec<f64> = vec![1.0; d];
    let l1: f64 = with.iter().map(|x| x.abs()).sum();
    let b = l1 / eps;
    assert_eq!(b, 200.0);
    let n = 20_000u32;
    let (mut sum_abs, mut sum_abs2, mut sum_max, mut sum_max2) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        let mut rng = Streams::new(71).stream(0, 0, 0, i);
        let mut max = 0.0f64;
        for _ in 0..d {
            let z = (b * laplace1(&mut rng)).abs();
            sum_abs += z;
            sum_abs2 += z * z;
            max = max.max(z);
        }
        sum_max += max;
        sum_max2 += max * max;
    }
    let draws = (n as usize * d) as f64;
    let mean_abs = sum_abs / draws;
    let se_abs = ((sum_abs2 / draws - mean_abs * mean_abs) / draws).sqrt();
    let mean_max = sum_max / n as f64;
    let se_max = ((sum_max2 / n as f64 - mean_max * mean_max) / n as f64).sqrt();
    let expected_max = b * harmonic(d);
    eprintln!(
        "example 1.5: Laplace scale d/eps = {b}; mean |perturbation| {mean_abs:.2} ± {se_abs:.2} \
         (b = {b}); mean largest of {d} {mean_max:.1} ± {se_max:.1} (b H_d = {expected_max:.1}; \
         b ln d would be {:.1})",
        b * (d as f64).ln()
    );
    assert!((mean_abs - b).abs() < 5.0 * se_abs);
    assert!((mean_max - expected_max).abs() < 5.0 * se_max);
    assert!((mean_max - b * (d as f64).ln()).abs() > 20.0 * se_max);

    // The winner by 39 votes under the Laplace mechanism's noisy counts, against em.
    let lead = 39.0;
    let p_winner = |b: f64| {
        let f = |x: f64| {
            let cdf = |z: f64| {
                if z < 0.0 {
                    0.5 * (z / b).exp()
                } else {
                    1.0 - 0.5 * (-z / b).exp()
                }
            };
            (-x.abs() / b).exp() / (2.0 * b) * cdf(x + lead).powi(d as i32 - 1)
        };
        simpson(&f, -50.0 * b, -lead, 20_000)
            + simpson(&f, -lead, 0.0, 20_000)
            + simpson(&f, 0.0, 50.0 * b, 20_000)
    };
    let lap = p_winner(b);
    let wrong = p_winner(1.0 / eps);
    let em = heavy_hitters::run().p_winner_by_39;
    eprintln!(
        "example 1.5: a winner by {lead} votes is named with probability {lap:.4} by the Laplace \
         mechanism's argmax (scale {b}), {em:.4} by em; {wrong:.4} at the count-by-count scale {}",
        1.0 / eps
    );
    assert!(lap < 0.05, "{lap}");
    assert!(em > 0.99 && wrong > 0.99, "{em} {wrong}");
}

/// Seed 003, §1.3: the exponential mechanism with score −|y − f(x)| (Δ = 1) samples
/// ∝ exp(−ε|y − f|/2), the Laplace mechanism ∝ exp(−ε|y − f|): em(ε) spends only ε/2 on this
/// problem (its normalising constant does not depend on x), em(2ε) is the Laplace mechanism (on
/// the integers) and spends ε. The same for randomised response: em(2ε) on the indicator score of
/// the truth is `krr` at ε (k = 2 and k = 5), and em(ε) spends ε/2. The factor 2 is needed in
/// general: on q = (1, 0, …, 0) against (0, 1, …, 1) with 10,000 candidates em(ε) spends more
/// than 0.99ε. A wrong factor shows: without it em(ε) would spend ε on the Laplace problem, and
/// krr would equal em(ε).
#[test]
fn seed_003_section_1_3_laplace_and_randomised_response_are_em_with_the_factor_2_saved() {
    let eps = 1.0;
    let em_law = |e: f64, q: &[f64]| {
        let sens = vec![1.0; q.len()];
        ExponentialMechanism::new(e)
            .unwrap()
            .probabilities(&Problem::new(q, &sens).unwrap())
    };
    // Outputs y = −300..=300, f(x) = 0 or 1.
    let ys: Vec<f64> = (-300..=300).map(f64::from).collect();
    let score = |f: f64| ys.iter().map(|y| -(y - f).abs()).collect::<Vec<f64>>();
    let (q0, q1) = (score(0.0), score(1.0));
    let half = privacy_loss(&em_law(eps, &q0), &em_law(eps, &q1));
    let full = privacy_loss(&em_law(2.0 * eps, &q0), &em_law(2.0 * eps, &q1));
    // The Laplace mechanism on the integers: ∝ exp(−ε|y − f|).
    let laplace = |f: f64| {
        let w: Vec<f64> = ys.iter().map(|y| (-eps * (y - f).abs()).exp()).collect();
        let t: f64 = w.iter().sum();
        w.into_iter().map(|x| x / t).collect::<Vec<f64>>()
    };
    let diff = em_law(2.0 * eps, &q0)
        .iter()
        .zip(laplace(0.0))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "section 1.3, Laplace: em(eps) spends {half:.12} (eps/2 = {}), em(2 eps) spends {full:.12} \
         (eps = {eps}) and differs from the Laplace mechanism by at most {diff:.2e}",
        eps / 2.0
    );
    assert!((half - eps / 2.0).abs() < 1e-9, "{half}");
    assert!((full - eps).abs() < 1e-9, "{full}");
    assert!(diff < 1e-12, "{diff}");
    // Where the normalising constant moves, em needs the factor 2.
    let k = 10_000;
    let mut a = vec![0.0; k];
    a[0] = 1.0;
    let mut b = vec![1.0; k];
    b[0] = 0.0;
    let general = privacy_loss(&em_law(eps, &a), &em_law(eps, &b));
    eprintln!("section 1.3: em(eps) on (1, 0, ..., 0) against (0, 1, ..., 1), k {k}: {general:.4}");
    assert!(
        general > 0.99 * eps && general <= eps * (1.0 + 1e-12),
        "{general}"
    );

    // Randomised response: the truth x scores 1, the rest 0.
    for k in [2usize, 5] {
        let truth = |x: usize| {
            (0..k)
                .map(|y| f64::from(u8::from(y == x)))
                .collect::<Vec<f64>>()
        };
        let krr = KRandomizedResponse::new(eps).unwrap();
        let p_true = krr.p_true(k);
        let em2 = em_law(2.0 * eps, &truth(0));
        let em1 = em_law(eps, &truth(0));
        let rr_loss = privacy_loss(&em2, &em_law(2.0 * eps, &truth(1)));
        let em1_loss = privacy_loss(&em1, &em_law(eps, &truth(1)));
        eprintln!(
            "section 1.3, randomised response, k {k}: krr(eps) P(truth) {p_true:.12}, em(2 eps) \
             {:.12}, em(eps) {:.12}; em(2 eps) spends {rr_loss:.12}, em(eps) {em1_loss:.12}",
            em2[0], em1[0]
        );
        assert!((em2[0] - p_true).abs() < 1e-12);
        assert!((em1[0] - p_true).abs() > 0.05);
        assert!((rr_loss - eps).abs() < 1e-12, "{rr_loss}");
        assert!((em1_loss - eps / 2.0).abs() < 1e-12, "{em1_loss}");
    }
}
