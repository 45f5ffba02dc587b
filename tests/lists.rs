//! Ordered lists of k (docs/lists.md): the exact law of the ordered list for k = 2 and 3 by
//! peeling every kind of registry mechanism and by each one-shot form, with power.
//!
//! Every reference is computed here from the definitions: peeling's law is the product over the
//! rounds of the top-1 mechanism's exact law on the candidates left (the top-1 laws of
//! `tests/laws.rs` and `tests/util`); the one-shot laws are integrals of the noise densities
//! (`ordered_law`). The cells are all n^k tuples, so a list with a repeated item is a cell the
//! true law gives probability 0. Each law is also shown to *reject* the same counts under wrong
//! variants: the rounds at the list's ε instead of ε/k, rounds that may repeat an item, and the
//! list's ε × 1.3 and × 0.7. Run with `cargo test --release --locked -- lists --nocapture` to
//! see every p-value.

use rayon::prelude::*;
use recsel::audit::list::{audit_list, audit_list_claim};
use recsel::audit::{builtin_pairs, AuditConfig, NeighbourPair};
use recsel::mechanisms::{self, Guarantee, ListForm, MechParams, Problem, TopK};
use recsel::rng::{Draws, SecureRng, Streams};

use crate::laws::{fits, gem_exact, rejects, rs_exact, Noise, Stopping};
use crate::util::{noisy_max_exact, NoiseLaw};

/// Scores and (unequal) sensitivities of the small problem.
const Q: [f64; 5] = [0.0, 0.6, 1.0, 1.4, 2.0];
const D: [f64; 5] = [1.0, 2.0, 0.5, 1.0, 1.5];
const N: u64 = 200_000;

/// The cell of an ordered tuple: `l_0 n^{k−1} + … + l_{k−1}`.
fn cell(list: &[usize], n: usize) -> usize {
    list.iter().fold(0, |c, &a| c * n + a)
}

/// The tuple of a cell.
fn tuple(mut c: usize, n: usize, k: usize) -> Vec<usize> {
    let mut t = vec![0; k];
    for j in (0..k).rev() {
        t[j] = c % n;
        c /= n;
    }
    t
}

/// Counts of `samples` lists over the n^k cells, list i from stream i of `seed`.
fn list_counts(list: &TopK, q: &[f64], d: &[f64], samples: u64, seed: u64) -> Vec<u64> {
    let problem = Problem::new(q, d).unwrap();
    let n = q.len();
    let cells = n.pow(list.k() as u32);
    let streams = Streams::new(seed);
    (0..samples)
        .into_par_iter()
        .fold(
            || vec![0u64; cells],
            |mut c, i| {
                let mut rng = streams.stream(0, 0, 0, i as u32);
                let l = list.select(&problem, &mut rng);
                assert_eq!(l.len(), list.k().min(n));
                c[cell(&l, n)] += 1;
                c
            },
        )
        .reduce(
            || vec![0u64; cells],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// A round's exact top-1 law on the candidates it sees: (scores, sensitivities) → probabilities.
type RoundLaw<'a> = dyn Fn(&[f64], &[f64]) -> Vec<f64> + 'a;

/// The law of peeling over the n^k cells: the product over the rounds of `top1` (the round's
/// exact law on the candidates it sees, given their scores and sensitivities). `repeats`: each
/// round sees every candidate (the wrong variant of a list that may repeat an item).
fn peeling_law(q: &[f64], d: &[f64], k: usize, repeats: bool, top1: &RoundLaw<'_>) -> Vec<f64> {
    let n = q.len();
    let mut cache: std::collections::HashMap<u32, Vec<f64>> = std::collections::HashMap::new();
    let mut law = |mask: u32| -> Vec<f64> {
        cache
            .entry(mask)
            .or_insert_with(|| {
                let idx: Vec<usize> = (0..n).filter(|&a| mask & (1 << a) != 0).collect();
                let qs: Vec<f64> = idx.iter().map(|&a| q[a]).collect();
                let ds: Vec<f64> = idx.iter().map(|&a| d[a]).collect();
                let p = top1(&qs, &ds);
                // The quadrature of the integral laws is good to ~1e-6; normalise it away.
                let total: f64 = p.iter().sum();
                assert!((total - 1.0).abs() < 1e-4, "a round's law sums to {total}");
                let mut full = vec![0.0; n];
                for (i, &a) in idx.iter().enumerate() {
                    full[a] = p[i] / total;
                }
                full
            })
            .clone()
    };
    let all = (1u32 << n) - 1;
    let probs: Vec<f64> = (0..n.pow(k as u32))
        .map(|c| {
            let t = tuple(c, n, k);
            let mut mask = all;
            let mut p = 1.0;
            for &a in &t {
                if mask & (1 << a) == 0 {
                    return 0.0;
                }
                p *= law(mask)[a];
                if !repeats {
                    mask &= !(1 << a);
                }
            }
            p
        })
        .collect();
    let total: f64 = probs.iter().sum();
    assert!(
        (total - 1.0).abs() < 1e-9,
        "the peeling law sums to {total}"
    );
    probs
}

/// The exact top-1 law of the registry mechanism `name` at `eps` on (q, d), from its definition.
fn top1_law(name: &str, q: &[f64], d: &[f64], eps: f64) -> Vec<f64> {
    let dmax = d.iter().cloned().fold(0.0, f64::max);
    let n = q.len();
    match name {
        // P(a) ∝ exp(ε q_a / (2Δ)), Δ = the largest sensitivity of the candidates seen.
        "em" => softmax(q, eps / (2.0 * dmax)),
        // argmax q_a + Exp(mean 2Δ/ε), and + Lap(2Δ/ε).
        "rnm" => noisy_max_exact(q, &vec![2.0 * dmax / eps; n], NoiseLaw::Exponential),
        "rnm-laplace" => noisy_max_exact(q, &vec![2.0 * dmax / eps; n], NoiseLaw::Laplace),
        "gem" => gem_exact(q, d, eps, 0.05, 1.0, 2.0),
        "mgem" => gem_exact(q, d, eps, 0.05, -1.0, 2.0),
        // K ~ Geometric(0.05) uniform draws, each q_a + Lap(3Δ_a/ε).
        "rs" => rs_exact(
            q,
            d,
            eps,
            3.0,
            Noise::Laplace,
            Stopping::Geometric { gamma: 0.05 },
        ),
        // The argmax with probability e^ε / (e^ε + n − 1) (no ties in these scores).
        "krr" => {
            let top = (0..n).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap();
            let z = eps.exp() + (n - 1) as f64;
            (0..n)
                .map(|a| if a == top { eps.exp() / z } else { 1.0 / z })
                .collect()
        }
        _ => panic!("no exact law for {name}"),
    }
}

fn softmax(q: &[f64], c: f64) -> Vec<f64> {
    let qmax = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = q.iter().map(|&x| (c * (x - qmax)).exp()).collect();
    let z: f64 = w.iter().sum();
    w.iter().map(|x| x / z).collect()
}

fn topk(name: &str, eps: f64, k: usize, form: ListForm) -> TopK {
    let params = MechParams::default().with_epsilon(eps);
    TopK::new(mechanisms::spec(name).unwrap(), &params, k, form).unwrap()
}

/// Peeling every kind of registry mechanism — the exponential mechanism, report noisy max with
/// exponential and Laplace noise, GEM and mGEM with unequal sensitivities, random stopping, and
/// randomised response — gives the ordered list the product of its rounds' exact laws at ε/k, for
/// k = 2 and 3. Power: the rounds at ε (the list would spend kε), repeats allowed, ε × 1.3 and
/// × 0.7.
#[test]
fn peeling_lists_follow_the_product_of_the_round_laws() {
    let cases: [(&str, f64); 7] = [
        ("em", 4.0),
        ("rnm", 4.0),
        ("rnm-laplace", 6.0),
        ("gem", 8.0),
        ("mgem", 8.0),
        ("rs", 8.0),
        ("krr", 4.0),
    ];
    let mut seed = 4700;
    for (name, eps) in cases {
        for k in [2, 3] {
            seed += 1;
            let list = topk(name, eps, k, ListForm::Peeling);
            let c = list_counts(&list, &Q, &D, N, seed);
            let what = format!("peeling {name} k={k} eps={eps}");
            let law = |eps_round: f64, repeats: bool| {
                peeling_law(&Q, &D, k, repeats, &|q, d| top1_law(name, q, d, eps_round))
            };
            let kf = k as f64;
            fits(&c, &law(eps / kf, false), &format!("{what}: exact law"));
            rejects(
                &c,
                &law(eps, false),
                &format!("{what}: power vs rounds at eps"),
            );
            rejects(
                &c,
                &law(eps / kf, true),
                &format!("{what}: power vs repeats"),
            );
            for f in [1.3, 0.7] {
                rejects(
                    &c,
                    &law(f * eps / kf, false),
                    &format!("{what}: power vs eps x{f}"),
                );
            }
        }
    }
}

/// The secure path peels too: `em`'s list drawn with exact noise on the grid follows the same
/// product of softmaxes (the grid's rounding is far below what 100,000 lists can see), and
/// rejects the rounds at ε.
#[test]
fn secure_peeling_follows_the_product_of_the_round_laws() {
    let (eps, k, samples) = (4.0, 3, 100_000u64);
    let list = topk("em", eps, k, ListForm::Peeling);
    let problem = Problem::new(&Q, &D).unwrap();
    let n = Q.len();
    let mut c = vec![0u64; n.pow(k as u32)];
    let mut rng = SecureRng::from_seed_insecure(47);
    for _ in 0..samples {
        c[cell(&list.select_secure(&problem, &mut rng).unwrap(), n)] += 1;
    }
    let law = |e: f64| peeling_law(&Q, &D, k, false, &|q, d| top1_law("em", q, d, e));
    fits(&c, &law(eps / k as f64), "secure peeling em k=3: exact law");
    rejects(
        &c,
        &law(eps),
        "secure peeling em k=3: power vs rounds at eps",
    );
}

/// The law of the ordered top-k of `q_a + Z_a`, Z_a i.i.d. with density `pdf` and cdf `cdf`, over
/// the n^k cells: `P(y_{l_1} > … > y_{l_k} > every other y)`. With `unordered`, the law of the
/// *set* of the top k spread evenly over its k! orders (a list released in random order).
///
/// On a uniform grid, `H_1(x) = P(y_{l_1} > x)` and `H_j(x) = ∫_x^∞ f_{l_j}(u) H_{j−1}(u) du`
/// (cumulative trapezoid from the top); then `P = ∫ f_{l_k}(x) H_{k−1}(x) Π_{others} F(x) dx`.
fn ordered_law(
    q: &[f64],
    k: usize,
    width: f64,
    unordered: bool,
    pdf: &(dyn Fn(f64) -> f64 + Sync),
    cdf: &(dyn Fn(f64) -> f64 + Sync),
) -> Vec<f64> {
    let n = q.len();
    let lo = q.iter().cloned().fold(f64::INFINITY, f64::min) - width;
    let hi = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max) + width;
    let m = 400_000;
    let h = (hi - lo) / m as f64;
    let xs: Vec<f64> = (0..=m).map(|i| lo + i as f64 * h).collect();
    let trapezoid = |v: &[f64]| h * (v.iter().sum::<f64>() - 0.5 * (v[0] + v[m]));
    let ordered = |t: &[usize]| -> f64 {
        // H over the grid for the first k − 1 of the tuple.
        let mut hcur: Vec<f64> = xs.iter().map(|&x| 1.0 - cdf(x - q[t[0]])).collect();
        for &a in &t[1..k - 1] {
            let g: Vec<f64> = xs
                .iter()
                .zip(&hcur)
                .map(|(&x, &hv)| pdf(x - q[a]) * hv)
                .collect();
            let mut acc = vec![0.0; m + 1];
            for i in (0..m).rev() {
                acc[i] = acc[i + 1] + 0.5 * h * (g[i] + g[i + 1]);
            }
            hcur = acc;
        }
        let last = t[k - 1];
        let v: Vec<f64> = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let mut p = pdf(x - q[last]) * hcur[i];
                for b in (0..n).filter(|b| !t.contains(b)) {
                    p *= cdf(x - q[b]);
                }
                p
            })
            .collect();
        trapezoid(&v)
    };
    let cells = n.pow(k as u32);
    let distinct = |t: &[usize]| (0..k).all(|i| (0..i).all(|j| t[i] != t[j]));
    let by_cell: Vec<f64> = (0..cells)
        .into_par_iter()
        .map(|c| {
            let t = tuple(c, n, k);
            if distinct(&t) {
                ordered(&t)
            } else {
                0.0
            }
        })
        .collect();
    let probs: Vec<f64> = if unordered {
        let fact: f64 = (1..=k).map(|i| i as f64).product();
        (0..cells)
            .map(|c| {
                let t = tuple(c, n, k);
                if !distinct(&t) {
                    return 0.0;
                }
                let mut sorted = t.clone();
                sorted.sort_unstable();
                // The set's probability: the sum over its orders, then spread evenly.
                permutations(&sorted)
                    .iter()
                    .map(|p| by_cell[cell(p, n)])
                    .sum::<f64>()
                    / fact
            })
            .collect()
    } else {
        by_cell
    };
    let total: f64 = probs.iter().sum();
    assert!(
        (total - 1.0).abs() < 1e-6,
        "quadrature: the ordered law sums to {total}"
    );
    probs
}

fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let head = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, head);
            out.push(p);
        }
    }
    out
}

fn laplace_law(q: &[f64], k: usize, b: f64, unordered: bool) -> Vec<f64> {
    let pdf = move |z: f64| Noise::Laplace.pdf(z, b);
    let cdf = move |z: f64| Noise::Laplace.cdf(z, b);
    ordered_law(q, k, 45.0 * b, unordered, &pdf, &cdf)
}

/// One-shot Gumbel top-k (`em`, Durfee & Rogers 2019) has the law of peeling the exponential
/// mechanism at ε/k with Δ the largest sensitivity of the whole problem, for k = 2 and 3.
/// Power: the rounds at ε, repeats allowed, ε × 1.3 and × 0.7.
#[test]
fn gumbel_lists_follow_peeling_the_exponential_mechanism() {
    let dmax = D.iter().cloned().fold(0.0, f64::max);
    for (k, eps, seed) in [(2, 4.0, 4801), (3, 6.0, 4802)] {
        let list = topk("em", eps, k, ListForm::Gumbel);
        let c = list_counts(&list, &Q, &D, N, seed);
        let what = format!("gumbel k={k} eps={eps}");
        let law = |eps_round: f64, repeats: bool| {
            peeling_law(&Q, &D, k, repeats, &|q, _| {
                softmax(q, eps_round / (2.0 * dmax))
            })
        };
        let kf = k as f64;
        fits(&c, &law(eps / kf, false), &format!("{what}: exact law"));
        rejects(
            &c,
            &law(eps, false),
            &format!("{what}: power vs rounds at eps"),
        );
        rejects(
            &c,
            &law(eps / kf, true),
            &format!("{what}: power vs repeats"),
        );
        for f in [1.3, 0.7] {
            rejects(
                &c,
                &law(f * eps / kf, false),
                &format!("{what}: power vs eps x{f}"),
            );
        }
    }
}

/// One-shot Laplace top-k, pure form (Qiao, Su & Zhang 2021, Theorem 2.1's scale): the ordered
/// top k of `q_a + Lap(2kΔ/ε)`, for k = 2 and 3. Power: the scale of one round, 2Δ/ε (a list
/// that would spend kε); ε × 1.3 and × 0.7; the order thrown away.
#[test]
fn oneshot_laplace_lists_follow_the_ordered_noisy_top_k() {
    let dmax = D.iter().cloned().fold(0.0, f64::max);
    for (k, eps, seed) in [(2, 8.0, 4811), (3, 12.0, 4812)] {
        let list = topk("rnm-laplace", eps, k, ListForm::Laplace { delta: 0.0 });
        let c = list_counts(&list, &Q, &D, N, seed);
        let what = format!("laplace k={k} eps={eps}");
        let b = |e: f64| 2.0 * k as f64 * dmax / e;
        fits(
            &c,
            &laplace_law(&Q, k, b(eps), false),
            &format!("{what}: exact law"),
        );
        rejects(
            &c,
            &laplace_law(&Q, k, 2.0 * dmax / eps, false),
            &format!("{what}: power vs the scale of one round"),
        );
        for f in [1.3, 0.7] {
            rejects(
                &c,
                &laplace_law(&Q, k, b(f * eps), false),
                &format!("{what}: power vs eps x{f}"),
            );
        }
        rejects(
            &c,
            &laplace_law(&Q, k, b(eps), true),
            &format!("{what}: power vs the order thrown away"),
        );
    }
}

/// One-shot Laplace top-k, approximate form (Theorem 2.2: ε ≤ 0.2, δ ≤ 0.05,
/// λ = 8Δ√(k ln(n/δ))/ε): the set of the top k of `q_a + Lap(λ)` in uniformly random order, for
/// k = 2 and 3. Power: the list in the noisy order (what the theorem does not cover); ε × 1.3 and
/// × 0.7.
#[test]
fn approximate_oneshot_laplace_lists_are_the_noisy_top_set_in_random_order() {
    let (eps, delta) = (0.2, 0.05);
    // Small sensitivities so that λ is of the order of the score gaps.
    let d = [0.01; 5];
    let n = Q.len() as f64;
    for (k, seed) in [(2usize, 4821), (3, 4822)] {
        let list = topk("rnm-laplace", eps, k, ListForm::Laplace { delta });
        let c = list_counts(&list, &Q, &d, N, seed);
        let what = format!("laplace:{delta} k={k} eps={eps}");
        let lambda = |e: f64| 8.0 * 0.01 * (k as f64 * (n / delta).ln()).sqrt() / e;
        assert_eq!(
            lambda(eps),
            mechanisms::list::laplace_scale(eps, delta, k, 5, 0.01)
        );
        fits(
            &c,
            &laplace_law(&Q, k, lambda(eps), true),
            &format!("{what}: exact law"),
        );
        rejects(
            &c,
            &laplace_law(&Q, k, lambda(eps), false),
            &format!("{what}: power vs the noisy order"),
        );
        for f in [1.3, 0.7] {
            rejects(
                &c,
                &laplace_law(&Q, k, lambda(f * eps), true),
                &format!("{what}: power vs eps x{f}"),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The audit on lists
// ---------------------------------------------------------------------------------------------

/// A pair on which an ordered list can spend much of its budget: the list's items (0, 1, 2) go
/// up by Δ while the three others, above them, go down by Δ.
fn list_pair() -> NeighbourPair {
    NeighbourPair::new(
        "list-up",
        vec![1.0; 6],
        vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
        vec![-1.0, -1.0, -1.0, 2.0, 2.0, 2.0],
    )
    .unwrap()
}

/// The audit pairs: the built-in adversarial pairs around a five-candidate problem (the families
/// `up-o`, `down-o`, `high-up`, `low-up`, `random-i`; the counterexamples of other mechanisms
/// have up to 20 candidates, 20³ lists, and are left out) and [`list_pair`].
fn list_pairs() -> Vec<NeighbourPair> {
    let mut pairs: Vec<NeighbourPair> = builtin_pairs(&Q, &D, 47)
        .unwrap()
        .into_iter()
        .filter(|p| p.len() == Q.len())
        .collect();
    pairs.push(list_pair());
    pairs
}

/// Every form of list passes the audit at its total ε — peeling `em`, `rnm` and `gem` (unequal
/// sensitivities), one-shot Gumbel and one-shot Laplace, k = 3 at ε = 1: no pair's lower bound on
/// the ε the list spends exceeds the claim.
#[test]
fn list_audits_are_consistent_for_every_form() {
    let pairs = list_pairs();
    let config = AuditConfig::new(60_000, 1e-4, 47).unwrap();
    for (name, form) in [
        ("em", ListForm::Peeling),
        ("rnm", ListForm::Peeling),
        ("gem", ListForm::Peeling),
        ("em", ListForm::Gumbel),
        ("rnm-laplace", ListForm::Laplace { delta: 0.0 }),
    ] {
        let list = topk(name, 1.0, 3, form);
        let r = audit_list(&list, &pairs, &config, &|_| {}).unwrap();
        eprintln!(
            "audit {}: max eps_LB {:.3} (claimed {}), {}",
            r.mechanism,
            r.max_eps_lb,
            r.guarantee,
            r.verdict()
        );
        assert!(
            !r.violation,
            "{}: false violation {}",
            r.mechanism, r.max_eps_lb
        );
        assert!(r.max_eps_lb <= 1.0, "{}: {}", r.mechanism, r.max_eps_lb);
    }
}

/// Power: the same audit flags a planted over-claim — lists of 3 peeled from `em` with every
/// round at the list's ε (a list that spends up to 3ε) claimed as ε-DP. On [`list_pair`] the
/// list (2, 1, 0) has exact log-ratio 2.41 at ε = 1 (and 0.69 with the rounds at ε/3, as built
/// by `TopK`).
#[test]
fn list_audit_flags_an_over_claimed_list() {
    let eps = 1.0;
    let round = mechanisms::build("em", &MechParams::default().with_epsilon(eps)).unwrap();
    let draw = |p: &Problem<'_>, draws: &mut Draws, family: u32, index: u64| match draws {
        Draws::Seeded(s) => {
            let mut rng = s.stream(9, family, index >> 32, index as u32);
            Ok(round.select_list(p, 3, &mut rng))
        }
        Draws::Secure(rng) => round.select_list_secure(p, 3, rng),
    };
    let config = AuditConfig::new(1_000_000, 1e-4, 48).unwrap();
    let pairs = [list_pair()];
    let claim = |_: usize| Guarantee::Pure { epsilon: eps };
    let r = audit_list_claim(
        "em rounds at eps",
        eps,
        &claim,
        3,
        &draw,
        &pairs,
        &config,
        &|_| {},
    )
    .unwrap();
    eprintln!(
        "audit of the over-claim: max eps_LB {:.3} > claimed {eps}: {}",
        r.max_eps_lb,
        r.verdict()
    );
    assert!(r.violation, "no power: max eps_LB {}", r.max_eps_lb);
    // The honest claim of the same lists, basic composition of the rounds (3ε), stands.
    let honest = |n: usize| round.list_guarantee(3, n).charged;
    let r = audit_list_claim(
        "em rounds at eps",
        eps,
        &honest,
        3,
        &draw,
        &pairs,
        &config,
        &|_| {},
    )
    .unwrap();
    assert!(!r.violation, "false violation {}", r.max_eps_lb);
}

/// Peeling works for every registry mechanism — including the heterogeneous-sensitivity ones,
/// the private-candidates selections and the audit references — on both paths where the
/// mechanism has them: `min(k, n)` distinct candidates, the same list for the same stream, and
/// the list's charge the composition of its rounds. The one-shot forms are offered exactly where
/// their theorems hold (`gumbel`: `em`; `laplace`: `rnm-laplace`) and refused elsewhere.
#[test]
fn every_registry_mechanism_peels_a_list() {
    let problem = Problem::new(&Q, &D).unwrap();
    let params = MechParams::default().with_epsilon(2.0);
    for spec in mechanisms::REGISTRY {
        for k in [1, 3, 7] {
            let list = TopK::new(spec, &params, k, ListForm::Peeling).unwrap();
            let mut rng = Streams::new(5).stream(0, 0, 0, 0);
            let l = list.select(&problem, &mut rng);
            let mut again = Streams::new(5).stream(0, 0, 0, 0);
            assert_eq!(l, list.select(&problem, &mut again), "{}", spec.name);
            let mut sorted = l.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), k.min(Q.len()), "{} k={k}: {l:?}", spec.name);
            if list.round().secure_epsilon().is_ok() {
                let mut srng = SecureRng::from_seed_insecure(3);
                let s = list.select_secure(&problem, &mut srng).unwrap();
                let mut sorted = s.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), k.min(Q.len()), "{} secure: {s:?}", spec.name);
            } else {
                let mut srng = SecureRng::from_seed_insecure(3);
                assert!(
                    list.select_secure(&problem, &mut srng).is_err(),
                    "{}",
                    spec.name
                );
            }
            let round = list.round().guarantee();
            let charged = list.guarantee(Q.len()).charged;
            match round {
                // A round that reads nothing (`random`) makes a 0-DP list, whatever ε.
                Guarantee::Pure { epsilon: 0.0 } => {
                    assert_eq!(charged, Guarantee::Pure { epsilon: 0.0 }, "{}", spec.name)
                }
                Guarantee::Pure { .. } if k <= Q.len() => {
                    assert_eq!(charged, Guarantee::Pure { epsilon: 2.0 }, "{}", spec.name)
                }
                Guarantee::NotPrivate => assert!(!charged.is_private(), "{}", spec.name),
                _ => assert!(charged.is_private(), "{}", spec.name),
            }
        }
        let gumbel = TopK::new(spec, &params, 2, ListForm::Gumbel).is_ok();
        let laplace = TopK::new(spec, &params, 2, ListForm::Laplace { delta: 0.0 }).is_ok();
        assert_eq!(gumbel, spec.name == "em", "{}", spec.name);
        assert_eq!(laplace, spec.name == "rnm-laplace", "{}", spec.name);
    }
}

/// A problem of `n` candidates from `seed` (xorshift): scores spread over a few units, eight
/// tied sensitivity levels; with `concave`, scores concave in the sensitivity, so that GEM's hull
/// has many vertices and the rounds remove some of them.
fn pin_problem(n: usize, seed: u64, concave: bool) -> (Vec<f64>, Vec<f64>) {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let d: Vec<f64> = (0..n)
        .map(|_| 0.25 + (next() * 8.0).floor() / 4.0)
        .collect();
    let q = d
        .iter()
        .map(|&di| {
            let u = next();
            if concave {
                4.0 * di * (2.25 - di) + 0.01 * u
            } else {
                3.0 * u - 0.5 * di
            }
        })
        .collect();
    (q, d)
}

/// The lists peeling draws for a fixed seed are pinned — the fast path's from the seeded
/// streams, the secure path's from a seeded exact generator — for `mgem` and `gem` on both
/// paths and `em` on the secure path (where `gumbel` peels it), on 3,000 candidates: a faster
/// peeling must draw the very same lists. Power: another seed draws other lists.
#[test]
fn peeled_lists_are_pinned_for_a_seed() {
    let mut got = Vec::new();
    for (p, concave) in [(0, false), (1, true)] {
        let (q, d) = pin_problem(3000, 0x9e37_79b9 + p, concave);
        let problem = Problem::new(&q, &d).unwrap();
        for (name, form, secure) in [
            ("mgem", ListForm::Peeling, false),
            ("gem", ListForm::Peeling, false),
            ("mgem", ListForm::Peeling, true),
            ("gem", ListForm::Peeling, true),
            ("em", ListForm::Gumbel, true),
        ] {
            let list = topk(name, 1.0, 10, form);
            for seed in [11u64, 12] {
                let l = if secure {
                    let mut rng = SecureRng::from_seed_insecure(seed);
                    list.select_secure(&problem, &mut rng).unwrap()
                } else {
                    list.select(&problem, &mut Streams::new(seed).stream(0, 0, 0, 0))
                };
                got.push(l);
            }
        }
    }
    let want: Vec<Vec<usize>> = vec![
        vec![130, 1902, 2867, 778, 2328, 2729, 1838, 2322, 1887, 2994],
        vec![2389, 1036, 2994, 2647, 848, 1234, 178, 2679, 2681, 2718],
        vec![745, 820, 2187, 2299, 1442, 509, 2822, 522, 2722, 350],
        vec![235, 1465, 2638, 2038, 849, 1338, 520, 294, 2176, 1024],
        vec![837, 498, 2520, 1373, 1930, 2457, 1050, 2009, 2933, 2212],
        vec![227, 1718, 498, 1087, 492, 1556, 2287, 1071, 2739, 211],
        vec![2845, 1019, 618, 2700, 2661, 1250, 715, 2914, 1210, 2616],
        vec![195, 1524, 226, 893, 170, 615, 2985, 568, 2567, 2527],
        vec![837, 497, 1147, 1804, 2866, 359, 2519, 1084, 135, 2279],
        vec![195, 1524, 1831, 1878, 2051, 1949, 2734, 11, 1079, 223],
        vec![905, 1047, 2523, 1133, 1742, 301, 2560, 2323, 2511, 1832],
        vec![483, 269, 1038, 2450, 850, 1033, 521, 1614, 7, 1953],
        vec![1466, 1396, 28, 778, 1443, 2730, 1841, 1303, 66, 2021],
        vec![2742, 494, 315, 541, 2284, 2940, 1123, 28, 279, 1951],
        vec![837, 1147, 2866, 359, 2280, 2608, 1370, 1928, 1119, 159],
        vec![1524, 1830, 865, 2523, 1091, 2286, 1611, 1221, 2215, 1878],
        vec![2520, 2279, 1183, 160, 1398, 341, 2973, 2103, 2631, 2920],
        vec![195, 15, 1719, 1440, 1003, 1560, 1288, 2995, 317, 2466],
        vec![837, 2722, 238, 89, 499, 1148, 1804, 2867, 361, 2519],
        vec![195, 1524, 1831, 1878, 2051, 1949, 2734, 11, 1079, 223],
    ];
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "list {i}");
    }
    assert_eq!(got.len(), want.len());
    // Power: the two seeds of every case draw different lists.
    for pair in got.chunks(2) {
        assert_ne!(pair[0], pair[1]);
    }
}
