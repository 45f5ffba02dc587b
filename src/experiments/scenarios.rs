//! Synthetic selection problems of seed 001 §VI (docs/experiments.md).
//!
//! A scenario gives every candidate a score distribution `P_a`. We draw `N` scores per candidate (one
//! per trial), set `Δ_a = p90_a − p10_a` of those draws (numpy's linear percentiles; other
//! percentiles with [`generate_with`]), clip every draw to `[p10_a, p90_a]` and floor a zero width
//! at `1e-6`. Trial `i` is the problem `(q^i, Δ)`.
//! Scenarios 7 and 8 use the 5th/95th percentiles over all users of both groups (seed 001 appendix F).
//! Scenarios 1–3 (and the share sweep of fig 18) are fixed: their scores do not vary between trials
//! and their sensitivities are given, not estimated (seed 001 §VI: "there is no variability in the
//! scores and sensitivities in this case" — a point mass would otherwise get `Δ = 1e-6`).
//!
//! All randomness comes from one [`Streams`] family: candidate-level parameters (σ's, μ's, x's) from
//! one stream per scenario, the draws of candidate `a` from their own stream, so the data do not
//! depend on the number of threads.

use std::fmt;
use std::str::FromStr;

use rand::Rng as _;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::numerics::percentile_linear;
use crate::rng::{name_id, Rng, Streams};

/// Floor of a sensitivity whose percentile range is empty (docs/experiments.md).
pub const MIN_SENSITIVITY: f64 = 1e-6;

/// The percentiles that set Δ and the clipping of scenarios 4–6 and the correlation sweep by
/// default (seed 001 §VI; seed 000's text uses 5 and 95, `--percentiles 5,95`).
pub const DEFAULT_PERCENTILES: [f64; 2] = [10.0, 90.0];

/// Checks a `[lower, upper]` percentile pair: two values with `0 ≤ lower < upper ≤ 100`.
pub fn check_percentiles(p: &[f64]) -> Result<()> {
    match p {
        [lo, hi] if lo.is_finite() && hi.is_finite() && 0.0 <= *lo && lo < hi && *hi <= 100.0 => {
            Ok(())
        }
        _ => Err(Error::Invalid(format!(
            "percentiles must be two values LO,HI with 0 <= LO < HI <= 100, got {p:?}"
        ))),
    }
}

/// The t values of the correlation sweep (seed 001 fig 10).
pub const CORR_T: [f64; 7] = [-5.0, -0.8, -0.3, 0.0, 0.3, 0.8, 5.0];

/// One synthetic scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scenario {
    /// Scenarios 1–8 of docs/experiments.md.
    Numbered(u8),
    /// The correlation sweep at this t (seed 001 fig 10).
    Corr(f64),
    /// Fig 18: scenario 1, 2 or 3 with this share of high scores.
    Share {
        /// The base scenario (1, 2 or 3).
        base: u8,
        /// Share of candidates in the high-score group.
        share: f64,
    },
    /// The "exceptional" scenario 1 or 2 of seed 001 fig 6 / fig 24 (appendix I), reconstructed
    /// (see [`exceptional`]).
    Exceptional(u8),
}

impl Scenario {
    /// A short, stable label: `1`..`8`, `corr(t=0.3)`, `share2(0.25)`.
    pub fn label(&self) -> String {
        match *self {
            Scenario::Numbered(n) => n.to_string(),
            Scenario::Corr(t) => format!("corr(t={t})"),
            Scenario::Share { base, share } => format!("share{base}({share})"),
            Scenario::Exceptional(n) => format!("fig6-{n}"),
        }
    }

    /// A file-name friendly label: `scenario-1`, `corr-t0.3`, `share2-0.25`.
    pub fn file_stem(&self) -> String {
        match *self {
            Scenario::Numbered(n) => format!("scenario-{n}"),
            Scenario::Corr(t) => format!("corr-t{t}"),
            Scenario::Share { base, share } => format!("share{base}-{share}"),
            Scenario::Exceptional(n) => format!("fig6-{n}"),
        }
    }

    /// A human title for plots.
    pub fn title(&self) -> String {
        match *self {
            Scenario::Numbered(1) => {
                "Scenario 1: high scores with large sensitivity (positive)".into()
            }
            Scenario::Numbered(2) => {
                "Scenario 2: high scores with small sensitivity (negative)".into()
            }
            Scenario::Numbered(3) => "Scenario 3: mixed sensitivities (no correlation)".into(),
            Scenario::Numbered(4) => "Scenario 4: N(ln a, sigma_a^2), sigma ascending".into(),
            Scenario::Numbered(5) => "Scenario 5: N(0.1a, (2.3-0.02a)^2)".into(),
            Scenario::Numbered(6) => "Scenario 6: N(mu_a, sigma_a^2), random mu, sigma".into(),
            Scenario::Numbered(7) => "Scenario 7: polarised, sigma 0.5".into(),
            Scenario::Numbered(8) => "Scenario 8: noisier, sigma 3".into(),
            Scenario::Numbered(n) => format!("Scenario {n}"),
            Scenario::Corr(t) => format!("t = {t}"),
            Scenario::Share { base, share } => {
                format!("Scenario {base}, share of high scores {share}")
            }
            Scenario::Exceptional(1) => {
                "Fig 6 scenario 1: 18 optimal candidates with small sensitivity".into()
            }
            Scenario::Exceptional(n) => {
                format!("Fig 6 scenario {n}: high-sensitivity best and low-score candidates")
            }
        }
    }

    /// Whether the scores are the same in every trial.
    pub fn is_fixed(&self) -> bool {
        matches!(
            self,
            Scenario::Numbered(1..=3) | Scenario::Share { .. } | Scenario::Exceptional(_)
        )
    }

    /// Whether this is scenario 7 or 8 (users in two groups, N = 5000 by default).
    pub fn is_polarised(&self) -> bool {
        matches!(self, Scenario::Numbered(7 | 8))
    }

    /// Validates the scenario's own parameters.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Scenario::Numbered(1..=8) => Ok(()),
            Scenario::Numbered(n) => Err(Error::Invalid(format!(
                "scenario must be 1..8, corr or all, got {n}"
            ))),
            Scenario::Corr(t) if t.is_finite() => Ok(()),
            Scenario::Corr(t) => Err(Error::InvalidParameter {
                name: "corr t",
                requirement: "finite",
                value: t,
            }),
            Scenario::Share { base: 1..=3, share } if share > 0.0 && share < 1.0 => Ok(()),
            Scenario::Share { base: 1..=3, share } => Err(Error::InvalidParameter {
                name: "share of high scores",
                requirement: "in (0, 1)",
                value: share,
            }),
            Scenario::Share { base, .. } => Err(Error::Invalid(format!(
                "the share sweep is defined for scenarios 1, 2, 3, got {base}"
            ))),
            Scenario::Exceptional(1 | 2) => Ok(()),
            Scenario::Exceptional(n) => Err(Error::Invalid(format!(
                "fig 6 has scenarios 1 and 2, got {n}"
            ))),
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// What `--scenario` accepts: one numbered scenario, the correlation sweep, the share sweep of
/// fig 18, or all of 1–8 plus the correlation sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ScenarioSet {
    /// Scenario 1..8.
    One(u8),
    /// The correlation sweep (seed 001 fig 10).
    Corr,
    /// The share-of-high-scores sweep of scenarios 1–3 (seed 001 fig 18).
    Share,
    /// The two exceptional scenarios of seed 001 fig 6 / fig 24.
    Fig6,
    /// Scenarios 1–8 and the correlation sweep.
    All,
}

impl FromStr for ScenarioSet {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "corr" => Ok(ScenarioSet::Corr),
            "share" => Ok(ScenarioSet::Share),
            "fig6" => Ok(ScenarioSet::Fig6),
            "all" => Ok(ScenarioSet::All),
            t => match t.parse::<u8>() {
                Ok(n @ 1..=8) => Ok(ScenarioSet::One(n)),
                _ => Err(Error::UnknownName {
                    kind: "scenario",
                    name: t.to_string(),
                    valid: "1, 2, 3, 4, 5, 6, 7, 8, corr, share, fig6, all".into(),
                }),
            },
        }
    }
}

impl TryFrom<String> for ScenarioSet {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<ScenarioSet> for String {
    fn from(s: ScenarioSet) -> String {
        s.to_string()
    }
}

impl fmt::Display for ScenarioSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioSet::One(n) => write!(f, "{n}"),
            ScenarioSet::Corr => f.write_str("corr"),
            ScenarioSet::Share => f.write_str("share"),
            ScenarioSet::Fig6 => f.write_str("fig6"),
            ScenarioSet::All => f.write_str("all"),
        }
    }
}

/// `--scenario` / `scenarios`: a comma-separated list on the command line, an array in a table.
impl crate::options::OptionValue for Vec<ScenarioSet> {
    const KIND: crate::options::Kind = crate::options::Kind::Text;
    const VALUE_NAME: &'static str = "LIST";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        text.split(',')
            .map(|t| t.parse::<ScenarioSet>().map_err(|e| e.to_string()))
            .collect()
    }
    fn show(&self) -> String {
        self.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Mean scores of one group of trials, for plots and correlations.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `all`, or `group 0` / `group 1` in scenarios 7 and 8.
    pub name: String,
    /// Mean (clipped) score of every candidate over the group's trials.
    pub mean_scores: Vec<f64>,
}

/// The selection problems of one scenario: `rows` score vectors of length `k` (one per trial, or a
/// single one shared by every trial of a fixed scenario) and one sensitivity vector.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The scenario it was drawn for.
    pub scenario: Scenario,
    /// Number of candidates.
    pub k: usize,
    /// Number of trials (users).
    pub trials: usize,
    /// Row-major scores, `rows × k`; `rows` is 1 (fixed) or `trials`.
    pub scores: Vec<f64>,
    /// Sensitivities Δ_a.
    pub sens: Vec<f64>,
    /// Mean scores per group (one group except in scenarios 7 and 8).
    pub groups: Vec<Group>,
}

impl Dataset {
    /// The scores of trial `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        let r = if self.scores.len() == self.k { 0 } else { i };
        &self.scores[r * self.k..(r + 1) * self.k]
    }

    /// Whether every trial shares one score vector.
    pub fn is_fixed(&self) -> bool {
        self.scores.len() == self.k
    }
}

fn normal(rng: &mut Rng, mean: f64, sd: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    mean + sd * z
}

/// `N(mean, sd²)` truncated to `[lo, hi]` by rejection (acceptance ≈ 27% for N(0.5, 1) on
/// [0.01, 0.7]).
fn truncated_normal(rng: &mut Rng, mean: f64, sd: f64, lo: f64, hi: f64) -> f64 {
    loop {
        let x = normal(rng, mean, sd);
        if (lo..=hi).contains(&x) {
            return x;
        }
    }
}

/// The data-generation streams of a run: independent of the selection streams.
pub fn data_streams(streams: &Streams) -> Streams {
    streams.derive(0x5eed_da7a)
}

fn scenario_id(s: &Scenario) -> u32 {
    name_id(&s.label())
}

/// Scenario 1–3 (or its share variant): `n_high` candidates score 1, the rest −1, with the given
/// sensitivities of docs/experiments.md.
fn bimodal(base: u8, k: usize, n_high: usize) -> (Vec<f64>, Vec<f64>) {
    let scores: Vec<f64> = (0..k)
        .map(|a| if a < n_high { 1.0 } else { -1.0 })
        .collect();
    let sens: Vec<f64> = (0..k)
        .map(|a| {
            let high = a < n_high;
            match base {
                1 => {
                    if high {
                        1.8
                    } else {
                        1.0
                    }
                }
                2 => {
                    if high {
                        1.0
                    } else {
                        1.8
                    }
                }
                // Half of each group small, half large.
                _ => {
                    let (start, len) = if high {
                        (0, n_high)
                    } else {
                        (n_high, k - n_high)
                    };
                    if a - start < len / 2 {
                        1.0
                    } else {
                        1.8
                    }
                }
            }
        })
        .collect();
    (scores, sens)
}

/// `n` evenly spaced values from `a` to `b` (numpy's `linspace`).
fn linspace(a: f64, b: f64, n: usize) -> impl Iterator<Item = f64> {
    (0..n).map(move |i| {
        if n == 1 {
            a
        } else {
            a + (b - a) * i as f64 / (n - 1) as f64
        }
    })
}

/// Candidates of the exceptional scenarios of seed 001 fig 6 / fig 24 (appendix I), k = 100.
///
/// The paper shows them only as scatter plots (which we cannot read) plus a description and the
/// three correlations of fig 24. We rebuilt each set from the description and then chose its free
/// parameters (counts, score ranges, sensitivity levels) on a small grid so that Pearson, Spearman
/// and the weighted correlation come out close to the published values. Many sets do that, so
/// these are one reconstruction, not the paper's data; the MSE curves run on them are ours.
///
/// * Scenario 1 (paper: Pearson 0.22, Spearman 0.12, weighted 0.83): "18 candidates overlaid with
///   score 1 and sensitivity 0.1" — the optimum has a small sensitivity —, 4 near-optimal
///   candidates with a large one (scores 0.90..0.98, Δ 1.7), and 78 low-scoring candidates whose
///   sensitivity rises with the score (scores 0..0.35, Δ 0.1..0.4).
/// * Scenario 2 (paper: 0.44, 0.27, 0.16): the best candidates have a large sensitivity (12 at
///   scores 0.95..1, Δ 1), GEM's favourites are low-scoring with a small one (81 at scores 0..0.5,
///   Δ 0.1), mGEM's are low-scoring with a large one (7 at scores 0..0.3, Δ 1.5).
pub fn exceptional(n: u8) -> (Vec<f64>, Vec<f64>) {
    let (mut q, mut d) = (Vec::with_capacity(100), Vec::with_capacity(100));
    let mut group = |scores: Vec<f64>, sens: Vec<f64>| {
        q.extend(scores);
        d.extend(sens);
    };
    if n == 1 {
        group(vec![1.0; 18], vec![0.1; 18]);
        group(linspace(0.9, 0.98, 4).collect(), vec![1.7; 4]);
        group(
            linspace(0.0, 0.35, 78).collect(),
            linspace(0.1, 0.4, 78).collect(),
        );
    } else {
        group(linspace(0.95, 1.0, 12).collect(), vec![1.0; 12]);
        group(linspace(0.0, 0.3, 7).collect(), vec![1.5; 7]);
        group(linspace(0.0, 0.5, 81).collect(), vec![0.1; 81]);
    }
    (q, d)
}

/// Draws the dataset of `scenario` with `k` candidates and `trials` trials.
pub fn generate(scenario: Scenario, k: usize, trials: usize, data: &Streams) -> Result<Dataset> {
    let [lo, hi] = DEFAULT_PERCENTILES;
    generate_with(scenario, k, trials, data, (lo, hi))
}

/// [`generate`] with the `(lower, upper)` percentiles of scenarios 4–6 and the correlation
/// sweep (the fixed scenarios have given sensitivities; scenarios 7 and 8 keep appendix F's 5/95).
pub fn generate_with(
    scenario: Scenario,
    k: usize,
    trials: usize,
    data: &Streams,
    percentiles: (f64, f64),
) -> Result<Dataset> {
    check_percentiles(&[percentiles.0, percentiles.1])?;
    scenario.validate()?;
    if k < 2 {
        return Err(Error::Invalid(format!(
            "a synthetic scenario needs k >= 2 candidates, got {k}"
        )));
    }
    if trials == 0 {
        return Err(Error::Invalid("trials must be at least 1, got 0".into()));
    }
    let id = scenario_id(&scenario);
    let mut params_rng = data.stream(id, 0, 0, 0);
    if let Scenario::Exceptional(n) = scenario {
        if k != 100 {
            return Err(Error::Invalid(format!(
                "the fig 6 scenarios have k = 100 candidates, got k = {k}"
            )));
        }
        let (scores, sens) = exceptional(n);
        return Ok(Dataset {
            scenario,
            k,
            trials,
            groups: vec![Group {
                name: "all".into(),
                mean_scores: scores.clone(),
            }],
            scores,
            sens,
        });
    }
    if scenario.is_fixed() {
        let (base, n_high) = match scenario {
            Scenario::Numbered(n) => (n, k / 2),
            Scenario::Share { base, share } => {
                (base, ((share * k as f64).round() as usize).clamp(1, k - 1))
            }
            _ => unreachable!("fixed scenarios are 1-3 and shares"),
        };
        let (scores, sens) = bimodal(base, k, n_high);
        return Ok(Dataset {
            scenario,
            k,
            trials,
            groups: vec![Group {
                name: "all".into(),
                mean_scores: scores.clone(),
            }],
            scores,
            sens,
        });
    }
    if scenario.is_polarised() {
        return Ok(polarised(scenario, k, trials, data, id));
    }
    // Per-candidate (mean, sd) of the normal P_a.
    let dists: Vec<(f64, f64)> = match scenario {
        Scenario::Numbered(4) => {
            let mut sigma: Vec<f64> = (0..k)
                .map(|_| truncated_normal(&mut params_rng, 0.5, 1.0, 0.01, 0.7))
                .collect();
            sigma.sort_by(f64::total_cmp);
            (0..k).map(|a| (((a + 1) as f64).ln(), sigma[a])).collect()
        }
        Scenario::Numbered(5) => (0..k)
            .map(|a| {
                let a = (a + 1) as f64;
                (0.1 * a, (2.3 - 0.02 * a).max(0.0))
            })
            .collect(),
        Scenario::Numbered(6) => (0..k)
            .map(|_| {
                let mu = params_rng.random::<f64>();
                let sigma = truncated_normal(&mut params_rng, 0.5, 1.0, 0.01, 0.7);
                (mu, sigma)
            })
            .collect(),
        Scenario::Corr(t) => {
            let xz: Vec<(f64, f64)> = (0..k)
                .map(|_| {
                    (
                        normal(&mut params_rng, 0.0, 1.0),
                        normal(&mut params_rng, 0.0, 1.0),
                    )
                })
                .collect();
            let v: Vec<f64> = xz.iter().map(|(x, z)| (t * x + z) / 5.0).collect();
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            xz.iter()
                .zip(&v)
                .map(|((x, _), vi)| (*x, vi - min + 0.01))
                .collect()
        }
        _ => unreachable!("validated above"),
    };
    // Column per candidate, each from its own stream.
    let columns: Vec<(Vec<f64>, f64)> = dists
        .par_iter()
        .enumerate()
        .map(|(a, &(mean, sd))| {
            let mut rng = data.stream(id, 1, a as u64, 0);
            let mut col: Vec<f64> = (0..trials).map(|_| normal(&mut rng, mean, sd)).collect();
            let d = clip_to_percentiles(&mut col, percentiles.0, percentiles.1);
            (col, d)
        })
        .collect();
    Ok(assemble(scenario, k, trials, columns, None))
}

/// Clips `values` to `[p_lo, p_hi]` of themselves and returns the sensitivity `p_hi − p_lo`
/// (floored at [`MIN_SENSITIVITY`]).
pub fn clip_to_percentiles(values: &mut [f64], p_lo: f64, p_hi: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let lo = percentile_linear(&sorted, p_lo);
    let hi = percentile_linear(&sorted, p_hi);
    for v in values.iter_mut() {
        *v = v.clamp(lo, hi);
    }
    let d = hi - lo;
    if d > 0.0 {
        d
    } else {
        MIN_SENSITIVITY
    }
}

/// Builds the row-major dataset from per-candidate columns; `split` = first index of group 1.
fn assemble(
    scenario: Scenario,
    k: usize,
    trials: usize,
    columns: Vec<(Vec<f64>, f64)>,
    split: Option<usize>,
) -> Dataset {
    let mut scores = vec![0.0; k * trials];
    let sens: Vec<f64> = columns.iter().map(|(_, d)| *d).collect();
    for (a, (col, _)) in columns.iter().enumerate() {
        for (i, v) in col.iter().enumerate() {
            scores[i * k + a] = *v;
        }
    }
    let mean = |range: std::ops::Range<usize>| -> Vec<f64> {
        let n = range.len() as f64;
        columns
            .iter()
            .map(|(col, _)| col[range.clone()].iter().sum::<f64>() / n)
            .collect()
    };
    let groups = match split {
        None => vec![Group {
            name: "all".into(),
            mean_scores: mean(0..trials),
        }],
        Some(s) => vec![
            Group {
                name: "group 0".into(),
                mean_scores: mean(0..s),
            },
            Group {
                name: "group 1".into(),
                mean_scores: mean(s..trials),
            },
        ],
    };
    Dataset {
        scenario,
        k,
        trials,
        scores,
        sens,
        groups,
    }
}

/// Scenarios 7 and 8 (seed 001 appendix F): users 0..n/2 in group 0 with base scores
/// `−8 + 8a/100`, the rest in group 1 with `8 − 8a/100`, plus `N(0, σ²)` noise; Δ and clipping from
/// the 5th/95th percentiles over all users.
fn polarised(scenario: Scenario, k: usize, users: usize, data: &Streams, id: u32) -> Dataset {
    let split = users / 2;
    let columns: Vec<(Vec<f64>, f64)> = (0..k)
        .into_par_iter()
        .map(|a| {
            let mut col = polarised_column(scenario, k, users, data, id, a);
            let d = clip_to_percentiles(&mut col, 5.0, 95.0);
            (col, d)
        })
        .collect();
    assemble(scenario, k, users, columns, Some(split))
}

/// The unclipped scores of candidate `a` for every user of scenario 7 or 8.
fn polarised_column(
    scenario: Scenario,
    k: usize,
    users: usize,
    data: &Streams,
    id: u32,
    a: usize,
) -> Vec<f64> {
    let sigma = if scenario == Scenario::Numbered(7) {
        0.5
    } else {
        3.0
    };
    let split = users / 2;
    let mut rng = data.stream(id, 1, a as u64, 0);
    let step = 8.0 * a as f64 / k as f64;
    (0..users)
        .map(|u| {
            let base = if u < split { -8.0 + step } else { 8.0 - step };
            normal(&mut rng, base, sigma)
        })
        .collect()
}

/// One box of seed 001 figs 19/20: the within-group distribution of one candidate's (unclipped)
/// scores, and the 5th/95th percentiles over all users that define its sensitivity (the red lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupBox {
    /// Scenario label (`7` or `8`).
    pub scenario: String,
    /// Group 0 or 1.
    pub group: u8,
    /// Candidate index.
    pub candidate: usize,
    /// Within-group 5th, 25th, 50th, 75th, 95th percentiles (numpy linear).
    pub p5: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 5th percentile over all users of both groups (the lower clipping bound).
    pub all_p5: f64,
    /// 95th percentile over all users (the upper clipping bound).
    pub all_p95: f64,
}

/// The boxes of figs 19 (scenario 7) and 20 (scenario 8): the same draws as [`generate`] with the
/// same `data` streams, before clipping.
pub fn group_boxes(
    scenario: Scenario,
    k: usize,
    users: usize,
    data: &Streams,
) -> Result<Vec<GroupBox>> {
    if !scenario.is_polarised() {
        return Err(Error::Invalid(format!(
            "group box plots exist for scenarios 7 and 8, got {scenario}"
        )));
    }
    let id = scenario_id(&scenario);
    let split = users / 2;
    let q = |v: &[f64], p: f64| percentile_linear(v, p);
    let boxes: Vec<Vec<GroupBox>> = (0..k)
        .into_par_iter()
        .map(|a| {
            let col = polarised_column(scenario, k, users, data, id, a);
            let mut all = col.clone();
            all.sort_by(f64::total_cmp);
            let (lo, hi) = (q(&all, 5.0), q(&all, 95.0));
            [(0u8, &col[..split]), (1u8, &col[split..])]
                .into_iter()
                .map(|(group, part)| {
                    let mut v = part.to_vec();
                    v.sort_by(f64::total_cmp);
                    GroupBox {
                        scenario: scenario.label(),
                        group,
                        candidate: a,
                        p5: q(&v, 5.0),
                        p25: q(&v, 25.0),
                        p50: q(&v, 50.0),
                        p75: q(&v, 75.0),
                        p95: q(&v, 95.0),
                        all_p5: lo,
                        all_p95: hi,
                    }
                })
                .collect()
        })
        .collect();
    Ok(boxes.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_sets_parse() {
        assert_eq!("3".parse::<ScenarioSet>().unwrap(), ScenarioSet::One(3));
        assert_eq!("corr".parse::<ScenarioSet>().unwrap(), ScenarioSet::Corr);
        assert!("9".parse::<ScenarioSet>().is_err());
    }

    #[test]
    fn bimodal_groups() {
        let (q, d) = bimodal(3, 100, 50);
        assert_eq!(q.iter().filter(|&&v| v == 1.0).count(), 50);
        let high_small = (0..50).filter(|&a| d[a] == 1.0).count();
        let low_small = (50..100).filter(|&a| d[a] == 1.0).count();
        assert_eq!((high_small, low_small), (25, 25));
    }
}
