//! What a finished run reports beyond its rows (docs/protocol.md, step 9; docs/real-data.md): the
//! MSE table, the Spearman summary, the diagnostics, the rule table, the advice and the paired
//! differences of added mechanisms.

use serde::Serialize;

use super::{candidate_pass, random_sample, CandidateSample, ItemCounts, SelectConfig, UserRow};
use crate::mechanisms::{self, MechParams};
use crate::numerics::mean_se;
use crate::scoring::{Sensitivities, UserScorer};

/// Users of the fig 13 d–f scatter sample and of the diagnostics' quantiles (seed 001 fig 13
/// shows 10,000 random test users).
pub const SCATTER_USERS: usize = 10_000;

/// Everything a `select` run reports beyond its per-user rows (docs/protocol.md, step 9;
/// docs/real-data.md): the MSE table, the Spearman summary, per-item candidate counts, the
/// diagnostics and the rule table.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// MSE ± s.e. per mechanism and ε.
    pub mse: Vec<MseRow>,
    /// Distribution of the per-user Spearman correlations.
    pub spearman: SpearmanSummary,
    /// Per-item candidate counts (and the bound rule's bits per user).
    pub counts: ItemCounts,
    /// The run's diagnostics.
    pub diagnostics: Diagnostics,
    /// The Spearman and bound rules against the per-user winner of GEM and mGEM, per ε.
    pub rules: Vec<RuleRow>,
    /// Which mechanism for this data, one line each ([`advice`]).
    pub advice: Vec<String>,
}

/// Analyses the rows of a finished run: one more scoring pass over every user for the per-item
/// candidate counts and the diagnostics (quantiles over [`SCATTER_USERS`] users drawn with the
/// run's seed), then the MSE table, the Spearman summary and the rule table. `floor` is the
/// sensitivity floor the run used. Every front end (CLI, Python, distributed runners) calls this.
pub fn analyse<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    floor: f64,
    cfg: &SelectConfig,
    rows: &[UserRow],
) -> Analysis {
    let sample = random_sample(scorer.n_users(), SCATTER_USERS, cfg.seed);
    let (counts, candidates) = candidate_pass(scorer, sens, cfg, &sample);
    analysis_from(cfg, sens, floor, counts, candidates, rows)
}

/// The [`Analysis`] from a finished candidate pass (whole, or merged from partitions) and the
/// rows of every user in user order: the last step of [`analyse`], shared with the distributed
/// runners.
pub fn analysis_from(
    cfg: &SelectConfig,
    sens: &Sensitivities,
    floor: f64,
    counts: ItemCounts,
    candidates: CandidateSample,
    rows: &[UserRow],
) -> Analysis {
    let diagnostics = diagnostics(cfg, sens, floor, &counts, candidates, rows);
    let rules = rule_table(cfg, rows, &counts);
    let mse = mse_table(cfg, rows);
    let spearman = spearman_summary(rows);
    let advice = advice(cfg, &spearman, &mse);
    Analysis {
        mse,
        spearman,
        counts,
        diagnostics,
        rules,
        advice,
    }
}

/// MSE ± standard error of one (mechanism, ε) over users.
#[derive(Debug, Clone, Serialize)]
pub struct MseRow {
    /// Mechanism name.
    pub mechanism: String,
    /// Whether it is ε-DP at this row's ε for the run's k (= `top`): false for `rnmh` and for
    /// `rnmh-laplace` at k > 2, which is only (k − 1)ε-DP.
    pub private: bool,
    /// The guarantee it actually has at the run's k, in words (`1-DP`, `499-DP`, `not private`).
    pub guarantee: String,
    /// The ε of that guarantee (NaN, `null` in JSON, when not private).
    pub guarantee_epsilon: f64,
    /// ε.
    pub epsilon: f64,
    /// Mean over users of each user's mean squared error.
    pub mse: f64,
    /// Standard error of that mean (users are independent; trials within a user are not
    /// separated).
    pub se: f64,
    /// Users.
    pub users: u64,
    /// Trials per user.
    pub trials: u32,
    /// Hit@1: mean over users of the share of trials whose pick is a held-out item of the user.
    pub hit1: f64,
    /// Standard error of hit@1 over users.
    pub hit1_se: f64,
    /// Share of picks that are already in the user's history, with its standard error over
    /// users; only for a candidate policy that keeps the history (`None` for the paper's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_history: Option<(f64, f64)>,
    /// Share of the trials whose selection was ⊥ (the pick then is the mechanism's uniform
    /// stand-in), with its standard error over users; only when a mechanism of the run can
    /// release ⊥ ([`SelectConfig::reports_bottom`]; 0 for the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottom: Option<(f64, f64)>,
    /// MSE relative to a uniformly random choice among the same candidates: `mse` over the mean of
    /// the users' expected random-choice MSE (1 = no better than random, 0 = always the best).
    pub relative_mse: f64,
}

/// The guarantee `spec` has at `epsilon` for k candidates: (ε of the guarantee or NaN, words).
pub fn actual_guarantee(
    spec: &mechanisms::MechanismSpec,
    params: &MechParams,
    k: usize,
) -> (f64, String) {
    match spec.build(params).map(|m| m.guarantee().epsilon_for(k)) {
        Ok(Some(e)) => (e, format!("{}-DP", (e * 1e9).round() / 1e9)),
        Ok(None) => (f64::NAN, "not private".into()),
        Err(e) => (f64::NAN, format!("invalid: {e}")),
    }
}

/// The MSE table of docs/protocol.md, step 9 (fig 13 g–i).
pub fn mse_table(cfg: &SelectConfig, rows: &[UserRow]) -> Vec<MseRow> {
    let mut out = Vec::new();
    let ne = cfg.epsilons.len();
    let random: f64 = rows.iter().map(|r| r.random_mse).sum::<f64>() / rows.len().max(1) as f64;
    let reports_bottom = rows.first().is_some_and(|r| !r.bottom.is_empty());
    for (m, name) in cfg.mechanisms.iter().enumerate() {
        let spec = cfg.registry.get(name);
        for (e, &eps) in cfg.epsilons.iter().enumerate() {
            let vals: Vec<f64> = rows.iter().map(|r| r.mse[m * ne + e]).collect();
            let (mean, se) = mean_se(&vals);
            let hits: Vec<f64> = rows.iter().map(|r| r.hit[m * ne + e]).collect();
            let (hit1, hit1_se) = mean_se(&hits);
            let in_history = cfg.candidates.as_ref().map(|_| {
                let own: Vec<f64> = rows
                    .iter()
                    .map(|r| r.in_history.get(m * ne + e).copied().unwrap_or(0.0))
                    .collect();
                mean_se(&own)
            });
            let bottom = reports_bottom.then(|| {
                let b: Vec<f64> = rows
                    .iter()
                    .map(|r| r.bottom.get(m * ne + e).copied().unwrap_or(0.0))
                    .collect();
                mean_se(&b)
            });
            let (g_eps, guarantee) = match spec {
                Ok(s) => actual_guarantee(s, &cfg.params.with_epsilon(eps), cfg.top),
                Err(_) => (f64::NAN, "unknown".into()),
            };
            out.push(MseRow {
                mechanism: name.clone(),
                private: g_eps <= eps * (1.0 + 1e-12),
                guarantee,
                guarantee_epsilon: g_eps,
                epsilon: eps,
                mse: mean,
                se,
                users: vals.len() as u64,
                trials: cfg.trials,
                hit1,
                hit1_se,
                in_history,
                bottom,
                relative_mse: mean / random,
            });
        }
    }
    out
}

/// A guarantee relative to the nominal ε, for tables: `eps`, `499*eps`, `0`, `not DP`.
pub fn guarantee_label(row: &MseRow) -> String {
    let g = row.guarantee_epsilon;
    if g.is_nan() {
        "not DP".into()
    } else if g == 0.0 {
        "0".into()
    } else {
        let r = g / row.epsilon;
        if (r - 1.0).abs() < 1e-9 {
            "eps".into()
        } else {
            format!("{}*eps", (r * 1e6).round() / 1e6)
        }
    }
}

/// Which mechanism to use on this data (docs/deployment.md, "Which mechanism for my data"): the
/// Spearman rule applied to the per-user Spearman distribution, then what the run measured — per
/// ε the ε-DP mechanism with the lowest MSE and its MSE relative to random choice — whether the
/// rule's pick is within two standard errors of it, where randomised response applies
/// (`e^ε ≥ 10k`), and any mechanism that measured better without being ε-DP. One line each.
pub fn advice(cfg: &SelectConfig, spearman: &SpearmanSummary, mse: &[MseRow]) -> Vec<String> {
    let mut out = Vec::new();
    let share = spearman.share_positive;
    let (pick, why) = if share >= 0.8 {
        (
            "mgem",
            "mostly positive: high scores come with high sensitivities",
        )
    } else if share <= 0.2 {
        (
            "gem",
            "mostly negative: high scores come with low sensitivities",
        )
    } else {
        (
            "cgem",
            "mixed across users: a private bit picks gem or mgem per user",
        )
    };
    out.push(format!(
        "Spearman(scores, sensitivities) is positive for {:.0}% of users ({why}) -> {pick}",
        100.0 * share
    ));
    let mut best_line = Vec::new();
    let (mut near, mut compared) = (0, 0);
    let mut unsafe_wins = Vec::new();
    for &eps in &cfg.epsilons {
        let at: Vec<&MseRow> = mse.iter().filter(|r| r.epsilon == eps).collect();
        let Some(best) = at
            .iter()
            .filter(|r| r.private)
            .min_by(|a, b| a.mse.total_cmp(&b.mse))
        else {
            continue;
        };
        best_line.push(format!(
            "eps={eps} {} ({:.2} of random)",
            best.mechanism, best.relative_mse
        ));
        if let Some(r) = at.iter().find(|r| r.mechanism == pick) {
            compared += 1;
            if r.mse <= best.mse + 2.0 * (r.se.hypot(best.se)) {
                near += 1;
            }
        }
        for r in at.iter().filter(|r| !r.private && r.mse < best.mse) {
            unsafe_wins.push(format!("{} at eps={eps} ({})", r.mechanism, r.guarantee));
        }
    }
    if !best_line.is_empty() {
        out.push(format!(
            "measured, lowest MSE among the eps-DP mechanisms: {}",
            best_line.join(", ")
        ));
    }
    if compared > 0 {
        out.push(format!(
            "{pick} is within 2 s.e. of that best at {near} of {compared} eps"
        ));
    }
    let k = cfg.top as f64;
    let krr_from = (10.0 * k).ln();
    let krr_eps: Vec<String> = cfg
        .epsilons
        .iter()
        .filter(|&&e| e >= krr_from)
        .map(|e| e.to_string())
        .collect();
    out.push(if krr_eps.is_empty() {
        format!(
            "krr needs e^eps >> k: eps >= ln(10k) = {krr_from:.1} at k = {}; no eps of this run \
             (fewer candidates, --top, lower that threshold)",
            cfg.top
        )
    } else {
        format!(
            "e^eps >> k = {} at eps = {}: krr (the argmax with probability e^eps/(e^eps+k-1)) \
             is worth comparing there",
            cfg.top,
            krr_eps.join(", ")
        )
    });
    if !unsafe_wins.is_empty() {
        out.push(format!(
            "lower MSE but NOT eps-DP at k = {} (never deploy): {}",
            cfg.top,
            unsafe_wins.join(", ")
        ));
    }
    out
}

/// Summary of the per-user Spearman correlations (fig 13 a–c).
#[derive(Debug, Clone, Serialize)]
pub struct SpearmanSummary {
    /// Users.
    pub users: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Share of users with a positive correlation.
    pub share_positive: f64,
}

/// Mean, median and share positive of the users' Spearman correlations.
pub fn spearman_summary(rows: &[UserRow]) -> SpearmanSummary {
    let mut v: Vec<f64> = rows.iter().map(|r| r.spearman).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    SpearmanSummary {
        users: n as u64,
        mean: v.iter().sum::<f64>() / n.max(1) as f64,
        median: if n == 0 {
            f64::NAN
        } else {
            crate::numerics::percentile_linear(&v, 50.0)
        },
        share_positive: v.iter().filter(|&&x| x > 0.0).count() as f64 / n.max(1) as f64,
    }
}

/// Quantile levels of the diagnostics: minimum, 1%, 25%, median, 75%, 99%, maximum.
pub const DIAGNOSTIC_LEVELS: [f64; 7] = [0.0, 1.0, 25.0, 50.0, 75.0, 99.0, 100.0];

/// Per-run diagnostics of the real-data protocol (`docs/real-data.md`): how much clipping and the
/// sensitivity floor shape the selection problems.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnostics {
    /// Whether scores were clipped to `[p1_j, p99_j]` (only a clipped run is a DP release).
    pub clip: bool,
    /// `all` or `without-item`: whose scores the percentiles were taken over.
    pub percentile_users: String,
    /// Candidate scores over all users (each user's top candidates).
    pub candidate_scores: u64,
    /// Share of them outside their item's `[p1, p99]` (clipped in a clipped run; would have been
    /// otherwise).
    pub share_clipped: f64,
    /// Share of the items with any score whose sensitivity is at the floor (zero spread).
    pub share_items_at_floor: f64,
    /// Share of the candidate appearances whose item is at the floor.
    pub share_candidates_at_floor: f64,
    /// Users whose Spearman correlation of candidate scores and sensitivities is negative.
    pub users_negative_spearman: u64,
    /// Users with any candidate.
    pub users: u64,
    /// The quantile levels (percent) of the three lists below.
    pub levels: Vec<f64>,
    /// Quantiles of the candidate scores before clipping, over the users of the scatter sample.
    pub score_quantiles: Vec<f64>,
    /// Quantiles of the candidates' sensitivities, over the users of the scatter sample.
    pub candidate_sensitivity_quantiles: Vec<f64>,
    /// Quantiles of the items' sensitivities (items with any score).
    pub item_sensitivity_quantiles: Vec<f64>,
    /// Users the score and candidate-sensitivity quantiles were taken over.
    pub quantile_users: u64,
}

fn quantiles(mut v: Vec<f64>) -> Vec<f64> {
    if v.is_empty() {
        return vec![f64::NAN; DIAGNOSTIC_LEVELS.len()];
    }
    v.sort_by(f64::total_cmp);
    DIAGNOSTIC_LEVELS
        .iter()
        .map(|&p| crate::numerics::percentile_linear(&v, p))
        .collect()
}

/// The run's [`Diagnostics`] from the candidate pass, the sensitivities and the user rows.
pub fn diagnostics(
    cfg: &SelectConfig,
    sens: &Sensitivities,
    floor: f64,
    counts: &ItemCounts,
    sample: CandidateSample,
    rows: &[UserRow],
) -> Diagnostics {
    let total: u64 = counts.appearances.iter().sum();
    let outside: u64 = counts.outside.iter().sum();
    let scored: Vec<usize> = (0..sens.delta.len())
        .filter(|&j| sens.counts[j] > 0)
        .collect();
    let at_floor = |j: usize| sens.delta[j] <= floor;
    let floor_items = scored.iter().filter(|&&j| at_floor(j)).count();
    let floor_cands: u64 = (0..sens.delta.len())
        .filter(|&j| at_floor(j))
        .map(|j| counts.appearances[j])
        .sum();
    Diagnostics {
        clip: cfg.clip,
        percentile_users: cfg.percentile_users.name().into(),
        candidate_scores: total,
        share_clipped: outside as f64 / total.max(1) as f64,
        share_items_at_floor: floor_items as f64 / scored.len().max(1) as f64,
        share_candidates_at_floor: floor_cands as f64 / total.max(1) as f64,
        users_negative_spearman: rows.iter().filter(|r| r.spearman < 0.0).count() as u64,
        users: rows.len() as u64,
        levels: DIAGNOSTIC_LEVELS.to_vec(),
        score_quantiles: quantiles(sample.scores),
        candidate_sensitivity_quantiles: quantiles(sample.deltas),
        item_sensitivity_quantiles: quantiles(scored.iter().map(|&j| sens.delta[j]).collect()),
        quantile_users: sample.users,
    }
}

/// The Spearman rule and the bound rule against the per-user MSE winner of GEM and mGEM, at one ε
/// (an extension; see `crate::experiments::winners` for the synthetic version).
#[derive(Debug, Clone, Serialize)]
pub struct RuleRow {
    /// ε.
    pub epsilon: f64,
    /// Users whose GEM and mGEM MSEs differ.
    pub users: u64,
    /// Share of them where mGEM has the lower MSE.
    pub share_mgem_better: f64,
    /// Share where the Spearman rule (`spearman ≥ 0` → mGEM) picks the lower MSE.
    pub spearman_right: f64,
    /// Share where the bound rule picks the lower MSE.
    pub bound_right: f64,
    /// Share of users for whom the bound rule picks mGEM.
    pub bound_share_mgem: f64,
}

/// Per ε, how often each rule picks the per-user better of GEM and mGEM (each user's MSE over the
/// run's trials); empty when the run lacks `gem` or `mgem`.
pub fn rule_table(cfg: &SelectConfig, rows: &[UserRow], counts: &ItemCounts) -> Vec<RuleRow> {
    let pos = |n: &str| cfg.mechanisms.iter().position(|m| m == n);
    let (Some(g), Some(m)) = (pos("gem"), pos("mgem")) else {
        return Vec::new();
    };
    let ne = cfg.epsilons.len();
    cfg.epsilons
        .iter()
        .enumerate()
        .take(64)
        .map(|(e, &eps)| {
            let (mut n, mut mg, mut sp, mut bd, mut bm) = (0u64, 0u64, 0u64, 0u64, 0u64);
            for r in rows {
                let (eg, em) = (r.mse[g * ne + e], r.mse[m * ne + e]);
                let bound_m = counts
                    .bound_mgem
                    .get(r.user as usize)
                    .is_some_and(|mask| mask & (1 << e) != 0);
                bm += u64::from(bound_m);
                if eg == em {
                    continue;
                }
                n += 1;
                let mgem_better = em < eg;
                mg += u64::from(mgem_better);
                sp += u64::from((r.spearman >= 0.0) == mgem_better);
                bd += u64::from(bound_m == mgem_better);
            }
            let share = |x: u64| x as f64 / n.max(1) as f64;
            RuleRow {
                epsilon: eps,
                users: n,
                share_mgem_better: share(mg),
                spearman_right: share(sp),
                bound_right: share(bd),
                bound_share_mgem: bm as f64 / rows.len().max(1) as f64,
            }
        })
        .collect()
}

/// Paired per-user difference of one added mechanism against one existing mechanism at one ε.
#[derive(Debug, Clone, Serialize)]
pub struct PairedRow {
    /// The added mechanism.
    pub mechanism: String,
    /// The mechanism it is compared with.
    pub reference: String,
    /// ε.
    pub epsilon: f64,
    /// Mean over users of (MSE of `mechanism` − MSE of `reference`); negative: `mechanism` is
    /// better.
    pub mean_difference: f64,
    /// Standard error of that mean (users independent; the pairing removes the between-user
    /// spread of the problems).
    pub se: f64,
    /// Users.
    pub users: u64,
}

/// Per-user MSE differences of every mechanism in `added` against every other mechanism of
/// `cfg`, per ε.
pub fn paired_differences(
    cfg: &SelectConfig,
    rows: &[UserRow],
    added: &[String],
) -> Vec<PairedRow> {
    let ne = cfg.epsilons.len();
    let index = |m: &String| cfg.mechanisms.iter().position(|x| x == m);
    let mut out = Vec::new();
    for a in added {
        let Some(ia) = index(a) else { continue };
        for (ib, b) in cfg.mechanisms.iter().enumerate() {
            if added.contains(b) {
                continue;
            }
            for (e, &eps) in cfg.epsilons.iter().enumerate() {
                let d: Vec<f64> = rows
                    .iter()
                    .map(|r| r.mse[ia * ne + e] - r.mse[ib * ne + e])
                    .collect();
                let (mean, se) = mean_se(&d);
                out.push(PairedRow {
                    mechanism: a.clone(),
                    reference: b.clone(),
                    epsilon: eps,
                    mean_difference: mean,
                    se,
                    users: d.len() as u64,
                });
            }
        }
    }
    out
}
