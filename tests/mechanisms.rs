//! Output distributions of the mechanisms against exact ones (docs/mechanisms.md, "Facts a correct
//! implementation must reproduce"), each with a power check.

use recsel::mechanisms::{self, MechParams, Problem, REGISTRY};
use recsel::rng::Streams;

use crate::util::*;

const Q: [f64; 5] = [0.0, 0.5, 1.0, 1.2, 2.0];
const D: [f64; 5] = [1.0, 2.0, 0.5, 1.0, 1.5];
const N: u64 = 200_000;

fn mech(name: &str, eps: f64) -> Box<dyn mechanisms::Mechanism> {
    mechanisms::build(name, &MechParams::default().with_epsilon(eps)).unwrap()
}

#[test]
fn em_is_the_softmax() {
    for (i, eps) in [0.3, 1.0, 4.0].into_iter().enumerate() {
        let c = counts(&*mech("em", eps), &Q, &D, N, 10 + i as u64);
        assert_fits(&c, &softmax(&Q, &D, eps), &format!("em eps={eps}"));
        assert_rejects(&c, &softmax(&Q, &D, 1.3 * eps), "em vs softmax at 1.3 eps");
        assert_rejects(&c, &softmax(&Q, &D, 0.7 * eps), "em vs softmax at 0.7 eps");
    }
}

#[test]
fn rnm_matches_its_exact_distribution() {
    for (i, eps) in [0.5, 2.0].into_iter().enumerate() {
        let c = counts(&*mech("rnm", eps), &Q, &D, N, 20 + i as u64);
        assert_fits(&c, &rnm_exact(&Q, &D, eps), &format!("rnm eps={eps}"));
        assert_rejects(&c, &rnm_exact(&Q, &D, 1.3 * eps), "rnm vs exact at 1.3 eps");
        assert_rejects(&c, &rnm_exact(&Q, &D, 0.7 * eps), "rnm vs exact at 0.7 eps");
    }
}

#[test]
fn pf_matches_rnm() {
    let eps = 1.0;
    let pf = counts(&*mech("pf", eps), &Q, &D, N, 30);
    assert_fits(&pf, &rnm_exact(&Q, &D, eps), "pf vs exact rnm");
    assert_rejects(&pf, &rnm_exact(&Q, &D, 1.3 * eps), "pf vs rnm at 1.3 eps");
    assert_rejects(&pf, &rnm_exact(&Q, &D, 0.7 * eps), "pf vs rnm at 0.7 eps");
    // The free cross-check of docs/mechanisms.md: a two-sample test between the two samplers.
    let rnm = counts(&*mech("rnm", eps), &Q, &D, N, 31);
    assert_same(&pf, &rnm, true, "pf vs rnm two-sample");
    let rnm_hi = counts(&*mech("rnm", 1.3 * eps), &Q, &D, N, 32);
    assert_same(&pf, &rnm_hi, false, "pf vs rnm at 1.3 eps two-sample");
    let rnm_lo = counts(&*mech("rnm", 0.7 * eps), &Q, &D, N, 33);
    assert_same(&pf, &rnm_lo, false, "pf vs rnm at 0.7 eps two-sample");
}

#[test]
fn rnm_laplace_matches_its_exact_distribution() {
    let eps = 1.0;
    let scales = |e: f64| vec![2.0 * 2.0 / e; Q.len()]; // Δ = max D = 2
    let c = counts(&*mech("rnm-laplace", eps), &Q, &D, N, 40);
    assert_fits(
        &c,
        &noisy_max_exact(&Q, &scales(eps), NoiseLaw::Laplace),
        "rnm-laplace",
    );
    let hi = noisy_max_exact(&Q, &scales(1.3 * eps), NoiseLaw::Laplace);
    assert_rejects(&c, &hi, "rnm-laplace at 1.3 eps");
    let lo = noisy_max_exact(&Q, &scales(0.7 * eps), NoiseLaw::Laplace);
    assert_rejects(&c, &lo, "rnm-laplace at 0.7 eps");
}

#[test]
fn heterogeneous_noisy_max_matches_exact_distributions() {
    let eps = 1.0;
    for (name, law, mult) in [
        ("rnmh", NoiseLaw::Exponential, 2.0),
        ("rnmh-laplace", NoiseLaw::Laplace, 1.0),
    ] {
        let scales = |e: f64| D.iter().map(|d| mult * d / e).collect::<Vec<_>>();
        let c = counts(&*mech(name, eps), &Q, &D, N, 50);
        assert_fits(&c, &noisy_max_exact(&Q, &scales(eps), law), name);
        assert_rejects(&c, &noisy_max_exact(&Q, &scales(1.3 * eps), law), name);
        assert_rejects(&c, &noisy_max_exact(&Q, &scales(0.7 * eps), law), name);
    }
}

/// docs/mechanisms.md: `P_RNMH(output 1) = 1/(1 + Δ2/Δ1) · exp(−ε(q2 − q1)/(2Δ1))` for q1 < q2.
#[test]
fn rnmh_two_candidates_closed_form() {
    let closed = |eps: f64, q: [f64; 2], d: [f64; 2]| {
        let p1 = 1.0 / (1.0 + d[1] / d[0]) * (-eps * (q[1] - q[0]) / (2.0 * d[0])).exp();
        vec![p1, 1.0 - p1]
    };
    for (i, (q, d, eps)) in [
        ([0.0, 1.0], [1.0, 3.0], 1.0),
        ([0.0, 0.5], [0.2, 1.0], 0.5),
        ([-1.0, 2.0], [4.0, 1.0], 2.0),
    ]
    .into_iter()
    .enumerate()
    {
        let c = counts(&*mech("rnmh", eps), &q, &d, N, 60 + i as u64);
        assert_fits(
            &c,
            &closed(eps, q, d),
            &format!("rnmh closed form {q:?} {d:?}"),
        );
        assert_rejects(&c, &closed(1.3 * eps, q, d), "rnmh at 1.3 eps");
        assert_rejects(&c, &closed(0.7 * eps, q, d), "rnmh at 0.7 eps");
    }
}

/// docs/mechanisms.md: with equal sensitivities GEM and mGEM select like `rnm` at ε/2; so does `cgem`, which
/// runs one of them at (1 − c)ε.
#[test]
fn gem_family_with_equal_sensitivities_is_rnm_at_half_epsilon() {
    let d = [0.7; 5];
    let eps = 2.0;
    for (name, eff) in [
        ("gem", eps / 2.0),
        ("mgem", eps / 2.0),
        ("cgem", 0.4 * eps / 2.0),
    ] {
        let c = counts(&*mech(name, eps), &Q, &d, N, 70);
        assert_fits(&c, &rnm_exact(&Q, &d, eff), name);
        assert_rejects(
            &c,
            &rnm_exact(&Q, &d, 1.3 * eff),
            &format!("{name} at 1.3 eps"),
        );
        assert_rejects(
            &c,
            &rnm_exact(&Q, &d, 0.7 * eff),
            &format!("{name} at 0.7 eps"),
        );
    }
}

/// `cgem` is the mixture of mGEM and GEM at (1 − c)ε, weighted by randomised response on the sign
/// of the correlation. Its exact distribution follows from the two transformed-score vectors
/// (unequal sensitivities).
#[test]
fn cgem_is_the_randomised_response_mixture() {
    let eps = 2.0;
    let (c, beta) = (0.6, 0.05);
    let mix = |eps: f64| {
        let eps_g = (1.0 - c) * eps;
        let p_truth = 1.0 / (1.0 + (-c * eps).exp());
        let t = 2.0 * (Q.len() as f64 / beta).ln() / eps_g;
        let ones = [1.0; 5];
        // The transform by its O(k²) definition, written out in the test (not the library's).
        let g = crate::laws::gem_transform_by_definition(&Q, &D, t);
        let m = crate::laws::gem_transform_by_definition(&Q, &D, -t);
        let pg = rnm_exact(&g, &ones, eps_g);
        let pm = rnm_exact(&m, &ones, eps_g);
        // Spearman(Q, D) > 0 here, so the true bit is 1 → mgem with probability p_truth.
        assert!(recsel::numerics::spearman(&Q, &D) > 0.0);
        pm.iter()
            .zip(&pg)
            .map(|(a, b)| p_truth * a + (1.0 - p_truth) * b)
            .collect::<Vec<_>>()
    };
    let counts = counts(&*mech("cgem", eps), &Q, &D, N, 75);
    assert_fits(&counts, &mix(eps), "cgem mixture");
    assert_rejects(&counts, &mix(1.3 * eps), "cgem at 1.3 eps");
    assert_rejects(&counts, &mix(0.7 * eps), "cgem at 0.7 eps");
}

#[test]
fn krr_and_random_match_their_formulas() {
    let k = Q.len() as f64;
    let krr = |eps: f64| {
        let top = eps.exp() / (eps.exp() + k - 1.0);
        let other = 1.0 / (eps.exp() + k - 1.0);
        (0..5)
            .map(|a| if a == 4 { top } else { other })
            .collect::<Vec<_>>()
    };
    for (i, eps) in [0.5, 2.0].into_iter().enumerate() {
        let c = counts(&*mech("krr", eps), &Q, &D, N, 80 + i as u64);
        assert_fits(&c, &krr(eps), "krr");
        assert_rejects(&c, &krr(1.3 * eps), "krr at 1.3 eps");
        assert_rejects(&c, &krr(0.7 * eps), "krr at 0.7 eps");
    }
    let c = counts(&*mech("random", 1.0), &Q, &D, N, 85);
    assert_fits(&c, &[0.2; 5], "random");
    assert_rejects(
        &c,
        &[0.22, 0.2, 0.2, 0.2, 0.18],
        "random vs a tilted distribution",
    );
}

/// ε → ∞ returns the argmax; with tied maxima each of them uniformly.
#[test]
fn huge_epsilon_returns_the_argmax() {
    for name in ["rnm", "pf", "em", "gem", "mgem", "cgem", "krr"] {
        let c = counts(&*mech(name, 1e9), &Q, &D, 20_000, 90);
        assert_eq!(c, vec![0, 0, 0, 0, 20_000], "{name}");
        let tied = [1.0, 3.0, 0.0, 3.0, 3.0];
        let c = counts(&*mech(name, 1e9), &tied, &[1.0; 5], 60_000, 91);
        assert_eq!((c[0], c[2]), (0, 0), "{name} ties: {c:?}");
        assert_fits(
            &c,
            &[0.0, 1.0 / 3.0, 0.0, 1.0 / 3.0, 1.0 / 3.0],
            &format!("{name} ties"),
        );
    }
}

/// A huge score gap always wins for every mechanism that looks at all scores.
#[test]
fn huge_gap_always_wins() {
    let q = [0.0, 0.3, 1e7, -2.0, 0.1];
    for name in [
        "rnm",
        "pf",
        "em",
        "rnm-laplace",
        "rnmh",
        "rnmh-laplace",
        "gem",
        "mgem",
        "cgem",
    ] {
        let c = counts(&*mech(name, 0.5), &q, &D, 20_000, 95);
        assert_eq!(c, vec![0, 0, 20_000, 0, 0], "{name}");
    }
}

#[test]
fn one_candidate_is_returned() {
    for spec in REGISTRY {
        let m = spec.build(&MechParams::default()).unwrap();
        let c = counts(&*m, &[3.5], &[0.1], 100, 99);
        assert_eq!(c, vec![100], "{}", spec.name);
    }
}

#[test]
fn guarantees_are_reported() {
    use recsel::mechanisms::Guarantee;
    for spec in REGISTRY {
        let m = spec
            .build(&MechParams::default().with_epsilon(0.5))
            .unwrap();
        let g = m.guarantee();
        // An audit reference may claim a guarantee it does not have (`rs-exp-m1`): that false
        // claim is what the audit must refute, and the registry marks it not private.
        if !spec.audit_reference {
            assert_eq!(g.is_private(), spec.private, "{}", spec.name);
        }
        assert_eq!(m.name(), spec.name);
        match spec.name {
            "rnmh" | "bot-exp" => assert_eq!(g, Guarantee::NotPrivate),
            "rs-exp-m1" => assert!(!spec.private && g.epsilon_for(5) == Some(0.5)),
            "rnmh-laplace" => assert_eq!(g.epsilon_for(5), Some(2.0)),
            "random" => assert_eq!(g.epsilon_for(5), Some(0.0)),
            _ => assert_eq!(g.epsilon_for(5), Some(0.5), "{}", spec.name),
        }
    }
}

#[test]
fn same_seed_same_output_and_streams_independent_of_threads() {
    let streams = Streams::new(5);
    for spec in REGISTRY {
        let m = spec.build(&MechParams::default()).unwrap();
        let p = Problem::new(&Q, &D).unwrap();
        let run = || -> Vec<usize> {
            (0..200)
                .map(|i| m.select(&p, &mut streams.stream(3, 1, 7, i)))
                .collect()
        };
        assert_eq!(run(), run(), "{}", spec.name);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let c1 = one.install(|| counts(&*m, &Q, &D, 5_000, 1));
        let c2 = two.install(|| counts(&*m, &Q, &D, 5_000, 1));
        assert_eq!(c1, c2, "{}", spec.name);
    }
}

/// After `prepare_many`, the noisy-max family and GEM sample by thinning in descending score order
/// (no k noise draws); `prepare` runs the literal `argmax q_a + noise` loop. On many
/// candidates with ties and clusters the two must agree.
#[test]
fn thinning_sampler_equals_the_literal_argmax_loop() {
    let q: Vec<f64> = (0..60)
        .map(|i| match i % 4 {
            0 => 1.0,
            1 => 0.9 - 0.001 * i as f64,
            2 => -0.5 + 0.01 * i as f64,
            _ => (i as f64 * 0.37).sin(),
        })
        .collect();
    let d: Vec<f64> = (0..60).map(|i| 0.5 + (i % 3) as f64 * 0.4).collect();
    for name in [
        "rnm",
        "rnm-laplace",
        "rnmh",
        "rnmh-laplace",
        "gem",
        "mgem",
        "cgem",
    ] {
        for (i, eps) in [0.5, 4.0, 40.0].into_iter().enumerate() {
            let seed = 120 + 10 * i as u64;
            let fast = counts_with(&*mech(name, eps), &q, &d, 300_000, seed, true);
            let literal = counts_with(&*mech(name, eps), &q, &d, 300_000, seed + 1, false);
            assert_same(
                &fast,
                &literal,
                true,
                &format!("{name} thinning vs loop, eps={eps}"),
            );
            // Power: the same comparison tells a misstated ε apart. (For the GEM family at small ε
            // the sensitivity shift t dominates and ε barely moves the distribution, so the power
            // check is made on the noisy-max family, whose shape depends on ε directly.)
            if name == "rnm" {
                let hi = counts_with(&*mech(name, 1.3 * eps), &q, &d, 300_000, seed + 2, false);
                assert_same(
                    &fast,
                    &hi,
                    false,
                    &format!("rnm thinning vs loop at 1.3 eps={eps}"),
                );
            }
        }
    }
}

/// `Selector::sample_trials` (the stream key set up once per mechanism, ε and user) makes the
/// selections `Selector::sample` makes trial by trial, for every mechanism of `all`.
#[test]
fn sampling_the_trials_together_selects_what_each_trial_selects() {
    use recsel::mechanisms::Selector;
    use recsel::rng::{Draws, NoiseMode};
    let q: Vec<f64> = (0..40).map(|i| 1.0 / (1.0 + i as f64)).collect();
    let d: Vec<f64> = (0..40).map(|i| 0.05 + 0.01 * (i % 7) as f64).collect();
    let problem = Problem::new(&q, &d).unwrap();
    let mut draws = Draws::Seeded(Streams::new(5));
    for spec in mechanisms::parse_list("all").unwrap() {
        let params = MechParams::default()
            .with_param("gamma", 0.01)
            .with_epsilon(0.7);
        let m = spec.build(&params).unwrap();
        let sel = Selector::new(&*m, &problem, NoiseMode::Fast).unwrap();
        let one: Vec<usize> = (3..60)
            .map(|t| sel.sample(&mut draws, 9, 2, 77, t))
            .collect();
        let mut together = Vec::new();
        sel.sample_trials(&mut draws, 9, 2, 77, 3..60, |t, a| together.push((t, a)));
        let trials: Vec<u32> = together.iter().map(|p| p.0).collect();
        assert_eq!(trials, (3..60).collect::<Vec<u32>>(), "{}", spec.name);
        let picks: Vec<usize> = together.iter().map(|p| p.1).collect();
        assert_eq!(picks, one, "{}", spec.name);
    }
}
