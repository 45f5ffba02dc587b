//! Duff quantiles (seed 002; docs/bandit.md, "Private sensitivities"): the utility against its
//! definition by brute force, the output law against the exact law (with power), the exact
//! privacy loss on neighbouring data sets (and the slide's scaling `exp(ε·u)` refuted), and the
//! bandit running with `quantile = duff`.

use rayon::prelude::*;
use recsel::column_statistic::DuffQuantile;
use recsel::experiments::bandit::duff::QuantileMethod;
use recsel::experiments::bandit::{self, BanditConfig, BanditOptions};
use recsel::rng::Streams;

use crate::util::{assert_fits, assert_rejects};

/// u(y, D) = −min{d(D, D') : x'_(m) = y} by enumerating every D' on the grid.
fn brute_force_utilities(grid: usize, data: &[usize], q: f64) -> Vec<f64> {
    let n = data.len();
    let m = DuffQuantile::rank(q, n);
    let mut best = vec![usize::MAX; grid];
    let total = grid.pow(n as u32);
    for code in 0..total {
        let mut d2: Vec<usize> = (0..n).map(|i| (code / grid.pow(i as u32)) % grid).collect();
        let dist = d2.iter().zip(data).filter(|(a, b)| a != b).count();
        d2.sort_unstable();
        let y = d2[m - 1];
        best[y] = best[y].min(dist);
    }
    best.iter().map(|&b| -(b as f64)).collect()
}

#[test]
fn duff_utility_is_the_distance_to_the_nearest_data_set_with_that_quantile() {
    let grid = 5;
    let mech = DuffQuantile::new(1.0, 0.0, 1.0, grid).unwrap();
    let mut checked = 0;
    for n in 1..=5usize {
        for code in 0..grid.pow(n as u32) {
            let data: Vec<usize> = (0..n).map(|i| (code / grid.pow(i as u32)) % grid).collect();
            let values: Vec<f64> = data.iter().map(|&g| mech.value(g)).collect();
            for q in [0.1, 0.5, 0.75, 0.9] {
                let want = brute_force_utilities(grid, &data, q);
                assert_eq!(mech.utilities(&values, q), want, "data {data:?} q {q}");
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000);
}

/// Tied data: 40 rewards, a quarter of them at the upper end (the clipped arm of the bandit).
fn tied_window() -> Vec<f64> {
    let mut d: Vec<f64> = (0..30).map(|i| 0.3 + 0.02 * i as f64).collect();
    d.extend([1.0; 10]);
    d
}

/// The output law is exp(ε u/2) normalised over the grid; the law at ε × 1.3 and ε × 0.7 is
/// rejected.
#[test]
fn duff_output_law_matches_the_exact_law() {
    let data = tied_window();
    for (i, (q, eps, points)) in [(0.9, 0.4, 21usize), (0.1, 0.6, 21), (0.5, 0.3, 41)]
        .into_iter()
        .enumerate()
    {
        let mech = DuffQuantile::new(eps, 0.0, 1.0, points).unwrap();
        // The reference from the definition: u by the closed form written out here.
        let law = |e: f64| {
            let n = data.len();
            let m = ((q * n as f64).ceil() as i64).max(1);
            let w: Vec<f64> = (0..points)
                .map(|g| {
                    let y = g as f64 / (points - 1) as f64;
                    let snap = |x: f64| ((x * (points - 1) as f64).round()) as usize;
                    let i = data.iter().filter(|&&x| snap(x) < g).count() as i64;
                    let j = data.iter().filter(|&&x| snap(x) <= g).count() as i64;
                    let _ = y;
                    (-0.5 * e * (i - m + 1).max(m - j).max(0) as f64).exp()
                })
                .collect();
            let t: f64 = w.iter().sum();
            w.into_iter().map(|x| x / t).collect::<Vec<_>>()
        };
        let streams = Streams::new(40 + i as u64);
        let n = 200_000u64;
        let counts = (0..n)
            .into_par_iter()
            .fold(
                || vec![0u64; points],
                |mut c, k| {
                    let mut rng = streams.stream(3, 0, k, 0);
                    c[mech.snap(mech.sample(&data, q, &mut rng))] += 1;
                    c
                },
            )
            .reduce(
                || vec![0u64; points],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        let what = format!("duff q={q} eps={eps} grid={points}");
        assert_fits(&counts, &law(eps), &what);
        assert_rejects(&counts, &law(1.3 * eps), &format!("{what} vs eps x1.3"));
        assert_rejects(&counts, &law(0.7 * eps), &format!("{what} vs eps x0.7"));
        let lib = mech.law(&data, q);
        for (a, b) in lib.iter().zip(law(eps)) {
            assert!((a - b).abs() < 1e-12);
        }
    }
}

/// The exact privacy loss of the Duff quantile, max over neighbouring data sets (one record
/// replaced by any grid value) and outputs of |ln P(y|D)/P(y|D')|: at most ε with the factor 2,
/// and above ε for the slide's `exp(ε·u/Δ_u)` (the law at 2ε) — Duff's utility moves in both
/// directions between neighbours, so the factor 2 of the general exponential mechanism is needed.
#[test]
fn duff_is_eps_dp_and_the_slides_scaling_is_not() {
    let points = 11;
    let eps = 1.0;
    let worst = |e: f64| {
        let mech = DuffQuantile::new(e, 0.0, 1.0, points).unwrap();
        let mut worst = 0.0f64;
        for n in [3usize, 4, 6] {
            for code in 0..points.pow(n as u32).min(20_000) {
                let data: Vec<f64> = (0..n)
                    .map(|i| mech.value((code / points.pow(i as u32)) % points))
                    .collect();
                for q in [0.1, 0.5, 0.9] {
                    let p = mech.law(&data, q);
                    for g in 0..points {
                        let mut d2 = data.clone();
                        d2[0] = mech.value(g);
                        let p2 = mech.law(&d2, q);
                        for (a, b) in p.iter().zip(&p2) {
                            worst = worst.max((a / b).ln().abs());
                        }
                    }
                }
            }
        }
        worst
    };
    let right = worst(eps);
    let slide = worst(2.0 * eps);
    eprintln!("duff exact loss at eps = {eps}: {right:.4}; with exp(eps*u): {slide:.4}");
    assert!(right <= eps * (1.0 + 1e-12), "loss {right}");
    assert!(right > 0.8 * eps, "the search found only {right}");
    assert!(slide > eps * 1.5, "the slide's scaling loses only {slide}");
}

/// On tied data Duff returns the exact quantile with high probability, where the standard
/// mechanism (which weighs the gaps between records by their length) cannot put mass on a value
/// many records share.
#[test]
fn duff_finds_a_tied_quantile_the_standard_mechanism_misses() {
    // A bandit window: 200 rewards, a quarter of them clipped to 1 (p90 = 1).
    let mut data: Vec<f64> = (0..150).map(|i| 0.2 + 0.005 * i as f64).collect();
    data.extend([1.0; 50]);
    let (q, eps) = (0.9, 1.0);
    let duff = DuffQuantile::new(eps, 0.0, 1.0, 1001).unwrap();
    let p = duff.law(&data, q);
    assert!(p[1000] > 0.999, "P(duff = 1.0) = {}", p[1000]);
    let duff_error: f64 = p
        .iter()
        .enumerate()
        .map(|(g, pg)| pg * (duff.value(g) - 1.0).abs())
        .sum();
    let em = recsel::column_statistic::EmQuantile::new(eps, 0.0, 1.0).unwrap();
    let mut rng = Streams::new(5).stream(0, 0, 0, 0);
    let em_error = (0..20_000)
        .map(|_| (em.sample(&data, q, &mut rng) - 1.0).abs())
        .sum::<f64>()
        / 20_000.0;
    eprintln!("tied p90: mean |error| duff {duff_error:.2e}, em {em_error:.4}");
    // The standard mechanism lands uniformly in the last gap, [x_(150), 1] = [0.945, 1].
    assert!(
        em_error > 0.02 && duff_error < 1e-3,
        "{em_error} vs {duff_error}"
    );
}

/// `recsel bandit --quantile duff` (a pipeline's `quantile = "duff"`): the private learners run
/// with Duff quantiles; on the paper's arm 1 (25% of rewards clipped to 1) the released p90 is
/// exactly 1 in most windows.
#[test]
fn the_bandit_runs_with_duff_quantiles() {
    let cfg = BanditConfig {
        horizon: 4_000,
        shift: 2_000,
        runs: 2,
        policies: "mgem".into(),
        points: 20,
        quantile: QuantileMethod::Duff,
        seed: 3,
        ..BanditOptions::default().config(|| 0)
    };
    cfg.validate().unwrap();
    let res = bandit::run(&cfg, &|_| {}).unwrap();
    assert_eq!(res.summaries.len(), 1);
    // Arm 1 before the shift: N(0.8, 0.3²) clipped, true p90 = 1. Run 0's released p90 at the
    // recorded steps before the shift where it has an estimate: exactly 1.0 in most of them.
    let released: Vec<f64> = res
        .arm_points
        .iter()
        .filter(|p| p.arm == 1 && p.t <= cfg.shift && !p.q_hi_run0.is_nan())
        .map(|p| p.q_hi_run0)
        .collect();
    assert!(!released.is_empty());
    let exact = released.iter().filter(|&&v| v == 1.0).count();
    assert!(
        exact * 10 >= released.len() * 8,
        "released p90 of arm 1: {released:?}"
    );
    let toml: BanditOptions = toml::from_str("quantile = \"duff\"\nhorizon = 10").unwrap();
    assert_eq!(toml.quantile, Some(QuantileMethod::Duff));
    let bad = toml::from_str::<BanditOptions>("quantile = \"median\"");
    assert!(bad.is_err());
}

/// Every multiset of `n` indices below `g`, ascending.
fn sorted_data_sets(g: usize, n: usize) -> Vec<Vec<usize>> {
    fn rec(g: usize, n: usize, from: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == n {
            out.push(cur.clone());
            return;
        }
        for i in from..g {
            cur.push(i);
            rec(g, n, i, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    rec(g, n, 0, &mut Vec::new(), &mut out);
    out
}

/// Seed 002's theorem in its smooth-sensitivity form: with probability 1 − δ′ the Duff quantile is
/// within `SS_f(O(ε))·log(1/δ′)/ε` of f(D). recsel's constants (docs/statistics.md, "Duff"): an
/// output at Duff distance j from D is the m-th order statistic of a data set j replacements away,
/// so it lies in [x_(m−j), x_(m+j)] and `|o − f(D)| ≤ A_j(D) ≤ e^{jβ}·S_β(D)` for every β > 0
/// (S_β the β-smooth sensitivity, A_j the largest local sensitivity within j records); the
/// exponential mechanism puts at most `|O|e^{−εj/2}` on distances ≥ j. So with
/// `k = ⌈(2/ε)·ln(|O|/δ′)⌉`, except with probability δ′:
/// `|o − f(D)| ≤ B = min_β e^{β(k−1)}·S_β(D)` — at β = 1/(k−1) ≈ ε/(2 ln(|O|/δ′)) this is
/// e·S_β(D), the theorem's shape with β = O(ε/log(|O|/δ′)). Checked on the exact law for every
/// data set of 3, 5 and 7 records on an 11-point grid and three 200-record windows, at three
/// quantiles, three ε and two δ′. Power: the same check flags the bound with the local
/// sensitivity in place of S_β (`e·LS(D)`, noise "proportional to the local sensitivity") on
/// data sets where the spread grows away from the quantile.
#[test]
fn duff_error_is_within_the_smooth_sensitivity_bound() {
    use recsel::column_statistic::smooth::{local_sensitivity, smooth_sensitivity};
    let mut families: Vec<(usize, Vec<Vec<f64>>)> = Vec::new();
    let g11 = |i: usize| i as f64 / 10.0;
    for n in [3usize, 5, 7] {
        let sets = sorted_data_sets(11, n)
            .into_iter()
            .map(|d| d.into_iter().map(g11).collect())
            .collect();
        families.push((11, sets));
    }
    let g101 = |i: usize| i as f64 / 100.0;
    let spread: Vec<f64> = (0..200).map(|i| g101(i / 2)).collect();
    let mut tied: Vec<f64> = (0..150).map(|i| g101(20 + i / 2)).collect();
    tied.extend([1.0; 50]);
    let mut clusters: Vec<f64> = (0..100).map(|i| g101(10 + i % 3)).collect();
    clusters.extend((0..100).map(|i| g101(85 + i % 3)));
    clusters.sort_by(f64::total_cmp);
    families.push((101, vec![spread, tied, clusters]));
    let (mut checked, mut worst_share, mut ls_flagged) = (0usize, 0.0f64, 0usize);
    let mut tightest = 0.0f64;
    for (points, sets) in &families {
        let points = *points;
        for eps in [0.5, 1.0, 2.0] {
            let mech = DuffQuantile::new(eps, 0.0, 1.0, points).unwrap();
            for delta in [0.1, 0.01] {
                let k = (2.0 / eps * (points as f64 / delta).ln()).ceil();
                for q in [0.1, 0.5, 0.9] {
                    for data in sets {
                        let n = data.len();
                        let m = DuffQuantile::rank(q, n);
                        let f = data[m - 1];
                        let law = mech.law(data, q);
                        let tail = |b: f64| -> f64 {
                            law.iter()
                                .enumerate()
                                .filter(|(g, _)| (mech.value(*g) - f).abs() > b + 1e-12)
                                .map(|(_, p)| p)
                                .sum()
                        };
                        let bound = [1.0 / (k - 1.0), eps / 8.0, eps / 4.0, eps / 2.0, eps]
                            .iter()
                            .map(|&b| {
                                (b * (k - 1.0)).exp() * smooth_sensitivity(data, m, 0.0, 1.0, b)
                            })
                            .fold(f64::INFINITY, f64::min);
                        let share = tail(bound) / delta;
                        assert!(
                            share <= 1.0,
                            "n {n} q {q} eps {eps} delta {delta} {data:?}: P(error > {bound}) = \
                             {} > delta",
                            tail(bound)
                        );
                        worst_share = worst_share.max(share);
                        // How close the bound comes: the (1 − δ′) error quantile over the bound.
                        let mut errs: Vec<(f64, f64)> = law
                            .iter()
                            .enumerate()
                            .map(|(g, p)| ((mech.value(g) - f).abs(), *p))
                            .collect();
                        errs.sort_by(|a, b| b.0.total_cmp(&a.0));
                        let mut mass = 0.0;
                        let mut quantile = 0.0;
                        for (e, p) in errs {
                            mass += p;
                            if mass > delta {
                                quantile = e;
                                break;
                            }
                        }
                        if bound > 0.0 {
                            tightest = tightest.max(quantile / bound);
                        }
                        let ls = std::f64::consts::E * local_sensitivity(data, m, 0.0, 1.0);
                        if tail(ls) > delta {
                            ls_flagged += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    eprintln!(
        "duff, smooth-sensitivity form: {checked} (data set, q, eps, delta') cases; the largest \
         P(error > B)/delta' is {worst_share:.3e}, the largest (1 - delta') error quantile / B is \
         {tightest:.3}; the local-sensitivity bound e*LS(D) fails in {ls_flagged} cases"
    );
    assert!(checked > 100_000, "{checked}");
    assert!(ls_flagged > 100, "the check has no power: {ls_flagged}");
}
