//! Theorem 5.2's family (Liu & Talwar §5.3; docs/private-candidates.md, "Theorem 5.2's family"):
//! the margin mechanism (`rs-margin`) and the smooth-sensitivity exponential mechanism
//! (`column_statistic::SmoothSelection`), each against its exact law with power, and its guarantee
//! against the audit or a worst-case search over neighbouring tables, with power.
//!
//! The references are computed here from the definitions: the truncated Laplace and Cauchy
//! densities, the generating function of the number of runs and the quadrature. Chi-square tests
//! at p < 1e-6 on fixed seeds. `cargo test --release --locked --test tests -- theorem52
//! --nocapture` prints every p-value and loss.

use rayon::prelude::*;
use recsel::audit::{self, builtin_pairs, AuditConfig};
use recsel::column_statistic::smooth::smooth_sensitivity;
use recsel::column_statistic::{rank, SmoothNoise, SmoothSelection};
use recsel::mechanisms::private_candidates::margin::MarginSelection;
use recsel::mechanisms::private_candidates::Stopping;
use recsel::mechanisms::{self, Guarantee, MechParams, Mechanism, Prepared, Problem};
use recsel::rng::Streams;

use crate::laws::{fits, integrate, rejects};
use crate::util::counts;

/// φ'(z) of min(K, T), K ~ Geometric(γ) on {1, 2, …} (T = u64::MAX: no cap): Σ_j j P(M = j) z^{j−1}
/// with P(M = j) = γ(1−γ)^{j−1} below T and (1−γ)^{T−1} at T.
fn dphi(gamma: f64, t: u64, z: f64) -> f64 {
    if t == u64::MAX {
        return gamma / (1.0 - (1.0 - gamma) * z).powi(2);
    }
    let mut s = 0.0;
    for j in 1..t {
        s += j as f64 * gamma * (1.0 - gamma).powi(j as i32 - 1) * z.powi(j as i32 - 1);
    }
    s + t as f64 * (1.0 - gamma).powi(t as i32 - 1) * z.powi(t as i32 - 1)
}

// ---------------------------------------------------------------------------------------------
// The margin mechanism
// ---------------------------------------------------------------------------------------------

const Q: [f64; 5] = [0.0, 0.5, 1.0, 1.2, 2.0];
const D: [f64; 5] = [1.0, 2.0, 0.5, 1.0, 1.5];

/// The law of `rs-margin`: one run scores candidate a `q_a + Z`, Z Laplace of scale b_a
/// conditioned on |Z| ≤ w·b_a; the best of min(K, T) runs is a with probability
/// `(1/k) ∫ f_a(x) φ'(G(x)) dx`, G the cdf of one run's score (docs/private-candidates.md, "The
/// one lemma", for continuous scores).
fn margin_exact(eps0: f64, w: f64, gamma: f64, t: u64) -> Vec<f64> {
    let k = Q.len();
    let b: Vec<f64> = D.iter().map(|d| d / eps0).collect();
    let norm = 1.0 - (-w).exp();
    let pdf = |a: usize, x: f64| {
        let z = (x - Q[a]) / b[a];
        if z.abs() > w {
            0.0
        } else {
            (-z.abs()).exp() / (2.0 * b[a] * norm)
        }
    };
    let cdf = |a: usize, x: f64| {
        let z = ((x - Q[a]) / b[a]).clamp(-w, w);
        if z < 0.0 {
            ((z).exp() - (-w).exp()) / (2.0 * norm)
        } else {
            0.5 + (1.0 - (-z).exp()) / (2.0 * norm)
        }
    };
    let mut knots: Vec<f64> = (0..k)
        .flat_map(|a| [Q[a] - w * b[a], Q[a], Q[a] + w * b[a]])
        .collect();
    knots.sort_by(f64::total_cmp);
    let g = |x: f64| (0..k).map(|a| cdf(a, x)).sum::<f64>() / k as f64;
    let p: Vec<f64> = (0..k)
        .map(|a| {
            integrate(&knots, 4000, |x| {
                let f = pdf(a, x);
                if f == 0.0 {
                    0.0
                } else {
                    f * dphi(gamma, t, g(x)) / k as f64
                }
            })
        })
        .collect();
    let total: f64 = p.iter().sum();
    assert!((total - 1.0).abs() < 1e-9, "quadrature: {total}");
    p
}

/// `rs-margin` against its exact law (truncation, ε₀ = ε/3, min(K, T)); the laws with ε × 1.3,
/// the half-width w × 1.3 (δ₀ mis-stated) and γ × 1.3 are rejected by the same counts.
#[test]
fn margin_mechanism_follows_the_exact_law() {
    let (eps, gamma, t, delta0) = (3.0, 0.1, 30u64, 0.05);
    let params = MechParams::default()
        .with_epsilon(eps)
        .with_param("gamma", gamma)
        .with_param("max_runs", t as f64)
        .with_param("delta0", delta0);
    let m = mechanisms::build("rs-margin", &params).unwrap();
    let eps0: f64 = eps / 3.0;
    let w = (eps0.exp_m1() / (2.0 * delta0)).ln_1p();
    let c = counts(&*m, &Q, &D, 200_000, 52);
    fits(&c, &margin_exact(eps0, w, gamma, t), "rs-margin");
    rejects(
        &c,
        &margin_exact(1.3 * eps0, w, gamma, t),
        "rs-margin, eps x 1.3",
    );
    rejects(
        &c,
        &margin_exact(eps0, 1.3 * w, gamma, t),
        "rs-margin, half-width x 1.3",
    );
    rejects(
        &c,
        &margin_exact(eps0, w, 1.3 * gamma, t),
        "rs-margin, gamma x 1.3",
    );
    // Without truncation (plain Laplace, w → ∞) the law is rs-hard-delta's: rejected too.
    rejects(
        &c,
        &margin_exact(eps0, 60.0, gamma, t),
        "rs-margin, untruncated",
    );
}

/// Theorem 5.2's margin statement, exactly: when the leader beats every other candidate by more
/// than the two half-widths, the release is the leader unless it is never drawn, with probability
/// `E[(1 − 1/k)^{min(K,T)}]` (computed here by summing the cut law); γ × 1.3 is rejected.
#[test]
fn margin_mechanism_releases_the_leader_unless_it_is_never_drawn() {
    let (eps, gamma, t) = (3.0, 0.05, 60u64);
    let m = MarginSelection::new(eps, gamma, t, 1e-6).unwrap();
    let d = [1.0, 1.0, 2.0, 0.5];
    // Half-widths 13.66·Δ_a at ε₀ = 1: the leader (index 0) leads by more than A_0 + A_b.
    let a: Vec<f64> = d.iter().map(|&x| m.half_width(x)).collect();
    let q = [a[0] + a[2] + 1.0, 0.0, -0.5, 0.3];
    assert!((1..4).all(|b| q[0] - q[b] > a[0] + a[b]));
    let miss = |gamma: f64| -> f64 {
        let z = 0.75f64;
        (1..t)
            .map(|j| gamma * (1.0 - gamma).powi(j as i32 - 1) * z.powi(j as i32))
            .sum::<f64>()
            + (1.0 - gamma).powi(t as i32 - 1) * z.powi(t as i32)
    };
    assert!((m.miss_probability(4) - miss(gamma)).abs() < 1e-14);
    let c = counts(&m, &q, &d, 200_000, 53);
    let two = [c[0], c[1..].iter().sum()];
    eprintln!(
        "rs-margin with a clear leader: {c:?}, miss probability {:.5}",
        miss(gamma)
    );
    fits(&two, &[1.0 - miss(gamma), miss(gamma)], "rs-margin leader");
    rejects(
        &two,
        &[1.0 - miss(1.3 * gamma), miss(1.3 * gamma)],
        "rs-margin leader, gamma x 1.3",
    );
}

/// `rs-margin` with a claim of its own choosing (a deliberately understated one).
#[derive(Debug)]
struct Claiming {
    inner: MarginSelection,
    claim: Guarantee,
}

impl Mechanism for Claiming {
    fn name(&self) -> &'static str {
        "rs-margin-understated"
    }
    fn epsilon(&self) -> f64 {
        self.claim.epsilon_for(2).unwrap()
    }
    fn guarantee(&self) -> Guarantee {
        self.claim
    }
    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        self.inner.prepare(problem)
    }
}

/// The audit at `rs-margin`'s reported (ε, δ): consistent; the same selection claiming ε₀ = ε/3
/// (the guarantee of one run) with the same δ is a violation.
#[test]
fn margin_mechanism_audit_is_consistent_and_an_understated_claim_is_flagged() {
    let pairs = builtin_pairs(&[0.0, 0.25, 0.5, 0.75, 1.0], &[0.2, 1.0, 0.5, 2.0, 1.0], 5).unwrap();
    let config = AuditConfig::new(100_000, 1e-4, 54).unwrap();
    let eps = 3.0;
    let m = MarginSelection::new(eps, 0.05, 200, 1e-6).unwrap();
    let Guarantee::Approx { epsilon, delta } = m.guarantee() else {
        panic!("rs-margin is (eps, delta)-DP")
    };
    assert_eq!(epsilon, eps);
    let r = audit::audit(&m, &pairs, &config, &|_| {}).unwrap();
    eprintln!(
        "audit rs-margin: claims {}, max eps_LB {:.4}, verdict {}",
        r.guarantee,
        r.max_eps_lb,
        r.verdict()
    );
    assert!(!r.violation, "eps_LB {}", r.max_eps_lb);
    let under = Claiming {
        inner: m.clone(),
        claim: Guarantee::Approx {
            epsilon: eps / 3.0,
            delta,
        },
    };
    let r = audit::audit(&under, &pairs, &config, &|_| {}).unwrap();
    eprintln!(
        "audit rs-margin claiming eps0: claims {}, max eps_LB {:.4}, verdict {}",
        r.guarantee,
        r.max_eps_lb,
        r.verdict()
    );
    assert!(r.violation, "eps_LB {}", r.max_eps_lb);
}

// ---------------------------------------------------------------------------------------------
// The smooth-sensitivity exponential mechanism
// ---------------------------------------------------------------------------------------------

fn cauchy_cdf(z: f64) -> f64 {
    0.5 + z.atan() / std::f64::consts::PI
}

fn cauchy_pdf(z: f64) -> f64 {
    1.0 / (std::f64::consts::PI * (1.0 + z * z))
}

/// (median, S_β/α) of a column on [0, 1], from the definitions' pieces.
fn center_scale(col: &[f64], alpha: f64, beta: f64) -> (f64, f64) {
    let mut v = col.to_vec();
    v.sort_by(f64::total_cmp);
    let m = rank(0.5, v.len());
    (v[m - 1], smooth_sensitivity(&v, m, 0.0, 1.0, beta) / alpha)
}

/// The law of the released column: `P(a) = (1/k) ∫ f_a(y) φ'(G(y)) dy`, with y = c_a + s_a·tan(π(u −
/// ½)) so that f_a(y) dy = du over u in (0, 1).
fn smooth_exact(cs: &[(f64, f64)], gamma: f64) -> Vec<f64> {
    let k = cs.len();
    let g = |y: f64| {
        cs.iter()
            .map(|&(c, s)| cauchy_cdf((y - c) / s))
            .sum::<f64>()
            / k as f64
    };
    let p: Vec<f64> = cs
        .iter()
        .map(|&(c, s)| {
            integrate(&[0.0, 1.0], 20_000, |u| {
                let y = c + s * (std::f64::consts::PI * (u - 0.5)).tan();
                dphi(gamma, u64::MAX, g(y)) / k as f64
            })
        })
        .collect();
    let total: f64 = p.iter().sum();
    assert!((total - 1.0).abs() < 1e-6, "quadrature: {total}");
    p
}

/// The smooth-sensitivity selection of the column with the largest median against its exact law;
/// the laws with α × 1.3 (noise / 1.3) and γ × 1.3 are rejected.
#[test]
fn smooth_selection_follows_the_exact_law() {
    let (eps, gamma) = (1.5, 0.1);
    let sel = SmoothSelection::new(
        eps,
        Stopping::Geometric { gamma },
        SmoothNoise::Cauchy,
        0.5,
        0.0,
        1.0,
    )
    .unwrap();
    assert_eq!(sel.guarantee().epsilon, eps);
    let cols: Vec<Vec<f64>> = vec![
        (0..41).map(|i| (i as f64 / 40.0).powi(2)).collect(),
        (0..41).map(|i| i as f64 / 40.0).collect(),
        (0..41).map(|i| 0.3 + 0.4 * (i as f64 / 40.0)).collect(),
        (0..41).map(|i| (i as f64 / 40.0).sqrt()).collect(),
    ];
    let refs: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
    let (alpha, beta) = (sel.run_mechanism().alpha(), sel.run_mechanism().beta());
    let cs: Vec<(f64, f64)> = cols.iter().map(|c| center_scale(c, alpha, beta)).collect();
    assert_eq!(sel.centers_and_scales(&refs).unwrap(), cs);
    eprintln!("smooth selection: (median, scale) per column {cs:?}");
    let streams = Streams::new(55);
    let n = 200_000u64;
    let c = (0..n)
        .into_par_iter()
        .fold(
            || vec![0u64; cs.len()],
            |mut acc, i| {
                let mut rng = streams.stream(0, 0, 0, i as u32);
                acc[sel.run_at(&cs, &mut rng).best.unwrap().0] += 1;
                acc
            },
        )
        .reduce(
            || vec![0u64; cs.len()],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    fits(&c, &smooth_exact(&cs, gamma), "smooth selection");
    let tighter: Vec<(f64, f64)> = cs.iter().map(|&(m, s)| (m, s / 1.3)).collect();
    rejects(
        &c,
        &smooth_exact(&tighter, gamma),
        "smooth selection, alpha x 1.3",
    );
    rejects(
        &c,
        &smooth_exact(&cs, 1.3 * gamma),
        "smooth selection, gamma x 1.3",
    );
    // A run of the library end to end gives one of the columns.
    let mut rng = streams.stream(1, 0, 0, 0);
    assert!(sel.run(&refs, &mut rng).unwrap().best.unwrap().0 < 4);
}

/// Every replacement of one value in a column of n ∈ {3, 4} values on the grid {0, ¼, ½, ¾, 1}:
/// (c, s) before and after, deduplicated.
fn transitions(alpha: f64, beta: f64) -> Vec<[(f64, f64); 2]> {
    let g: Vec<f64> = (0..5).map(|i| i as f64 / 4.0).collect();
    let mut out: Vec<[(f64, f64); 2]> = Vec::new();
    for n in [3usize, 4] {
        let mut idx = vec![0usize; n];
        loop {
            let x: Vec<f64> = idx.iter().map(|&i| g[i]).collect();
            let cx = center_scale(&x, alpha, beta);
            for j in 0..n {
                for &v in &g {
                    let mut y = x.clone();
                    y[j] = v;
                    let t = [cx, center_scale(&y, alpha, beta)];
                    if !out.contains(&t) {
                        out.push(t);
                    }
                }
            }
            // Next non-decreasing index vector (multisets).
            let mut p = n;
            while p > 0 && idx[p - 1] == 4 {
                p -= 1;
            }
            if p == 0 {
                break;
            }
            let v = idx[p - 1] + 1;
            idx[p - 1..].iter_mut().for_each(|i| *i = v);
        }
    }
    out
}

/// sup over the column a and the released score y of |ln p_x(a, y) / p_y(a, y)|, the density of
/// the best run `(1/k) f_a(y) φ'(G(y))`, on a grid of y dense in each column's noise quantiles on
/// both tables, plus the tails (where the ratio tends to s_x/s_y).
fn selection_loss(x: &[(f64, f64)], y: &[(f64, f64)], gamma: f64) -> f64 {
    let g = |cs: &[(f64, f64)], v: f64| {
        cs.iter()
            .map(|&(c, s)| cauchy_cdf((v - c) / s))
            .sum::<f64>()
            / cs.len() as f64
    };
    let dens = |cs: &[(f64, f64)], a: usize, v: f64| {
        let (c, s) = cs[a];
        cauchy_pdf((v - c) / s) / s * dphi(gamma, u64::MAX, g(cs, v))
    };
    let mut points = Vec::new();
    for &(c, s) in x.iter().chain(y) {
        for i in 1..400 {
            points.push(c + s * (std::f64::consts::PI * (i as f64 / 400.0 - 0.5)).tan());
        }
    }
    let mut worst = 0.0f64;
    for a in 0..x.len() {
        worst = worst.max((x[a].1 / y[a].1).ln().abs());
        for &v in &points {
            worst = worst.max((dens(x, a, v) / dens(y, a, v)).ln().abs());
        }
    }
    worst
}

/// The worst case over neighbouring two-column tables (one row replaced: any transition of the
/// first column with any of the most moving transitions of the second): the density of the
/// release moves by at most the reported 3ε₀; the search exceeds ε₀ (a claim of one run's ε₀ is
/// refuted), and β × 5 — a smooth bound that is not smooth enough — exceeds 3ε₀.
#[test]
fn smooth_selection_privacy_holds_and_understated_claims_are_flagged() {
    let (eps, gamma) = (1.5, 0.1);
    let sel = SmoothSelection::new(
        eps,
        Stopping::Geometric { gamma },
        SmoothNoise::Cauchy,
        0.5,
        0.0,
        1.0,
    )
    .unwrap();
    let eps0 = sel.selection().params().eps0;
    let (alpha, beta) = (sel.run_mechanism().alpha(), sel.run_mechanism().beta());
    let worst = |beta: f64| -> f64 {
        let t = transitions(alpha, beta);
        let mut ranked: Vec<(f64, usize)> = t
            .iter()
            .enumerate()
            .map(|(i, [(cx, sx), (cy, sy)])| {
                ((sx / sy).ln().abs() + (cx - cy).abs() / sx.min(*sy), i)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let second: Vec<usize> = ranked.iter().take(12).map(|r| r.1).collect();
        t.par_iter()
            .map(|[x0, y0]| {
                second
                    .iter()
                    .map(|&j| {
                        let [x1, y1] = t[j];
                        selection_loss(&[*x0, x1], &[*y0, y1], gamma)
                    })
                    .fold(0.0f64, f64::max)
            })
            .reduce(|| 0.0, f64::max)
    };
    let ok = worst(beta);
    let leak = worst(5.0 * beta);
    eprintln!(
        "smooth selection: worst density loss {ok:.4} (eps0 {eps0:.4}, reported {:.4}); \
         beta x5: {leak:.4}",
        sel.guarantee().epsilon
    );
    assert!(ok <= sel.guarantee().epsilon * (1.0 + 1e-9), "loss {ok}");
    assert!(
        ok > eps0,
        "the search found only {ok}: a claim of eps0 is not refuted"
    );
    assert!(leak > sel.guarantee().epsilon, "beta x5 loses only {leak}");
    // The seeded runs of one table are reproducible.
    let mut r1 = Streams::new(3).stream(0, 0, 0, 0);
    let mut r2 = Streams::new(3).stream(0, 0, 0, 0);
    let cs = [(0.5, 0.1), (0.4, 0.2)];
    assert_eq!(sel.run_at(&cs, &mut r1), sel.run_at(&cs, &mut r2));
}
