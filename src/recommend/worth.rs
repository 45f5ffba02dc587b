//! What the served configuration is worth (docs/utility.md, "What a served configuration is
//! worth"): its hit@1 on the calibration users beside the best free option's (showing everyone
//! the most popular training item or the item the fitted users held out most, whichever the
//! tuning chose), both estimated on calibration users the tuning's choice did not read, read
//! from `tuning.json`; and which configuration a recommender serves for a named mechanism — its
//! tuned row by default, or what was given.
//!
//! The fact is decided once here; `recsel recommend`, `recsel serve` and the Python
//! `Recommender` only print [`Worth::text`]. A configuration that does not beat the best free
//! option by the tuning's margin (paired standard errors) is flagged with a WARNING naming that
//! option, and a better configuration is named.

use std::path::Path;

use serde::Serialize;

use super::release::Release;
use super::tuned::lists::ListRow;
use super::tuned::{
    self, beats, free_name, same_epsilon, Estimate, MechRow, TunedChoice, Tuning, TUNED, TUNING,
};
use super::RecommendConfig;
use crate::error::{Error, Result};
use crate::scoring::{CandidatePolicy, Prior, Sensitivities};

/// Paired standard errors below the free baseline at which a row of `recsel tune`'s table is
/// marked `<free` (clearly below it; a served configuration is flagged unless it beats the
/// free option by the tuning's margin).
pub const WORTH_MARGIN: f64 = 2.0;

/// How the served configuration came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// A row of `tuning.json`: the tuned configuration (`tuned`), or a named mechanism's tuned
    /// row.
    Tuned,
    /// The model directory has a `tuning.json`, but what is served is not its row: candidates,
    /// a clip range or a prior were given, or there is no row for this mechanism and ε.
    Untuned,
    /// There is no `tuning.json`.
    NotTuned,
}

impl Standing {
    /// `tuned`, `untuned` or `not tuned`.
    pub fn name(self) -> &'static str {
        match self {
            Standing::Tuned => "tuned",
            Standing::Untuned => "untuned",
            Standing::NotTuned => "not tuned",
        }
    }
}

/// What the served configuration is worth on the calibration users.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Worth {
    /// The configuration served, for people.
    pub configuration: String,
    /// Tuned, untuned or not tuned.
    pub standing: Standing,
    /// Its calibration hit@1 (`None`: not measured).
    pub hit: Option<Estimate>,
    /// The best free option's calibration hit@1 (`None`: no `tuning.json`).
    pub free: Option<Estimate>,
    /// The best free option, for people (`None`: no `tuning.json`).
    pub free_option: Option<String>,
    /// How the estimates were made (which calibration users chose and which estimated).
    pub estimated: Option<String>,
    /// The margin, in paired standard errors, a configuration must beat the free option by.
    pub margin: Option<f64>,
    /// The paired difference of the two (`None`: not measured).
    pub gain: Option<Estimate>,
    /// Calibration users they were measured on.
    pub calibration_users: Option<u64>,
    /// Whether it fails to beat the best free option by the margin (never for the free option
    /// itself).
    pub below_free: bool,
    /// A better configuration when it is below (another row of `tuning.json`, or the free item).
    pub better: Option<String>,
    /// Why it is not measured, when it is not.
    pub note: Option<String>,
    /// What is measured: `hit@1`, or `Recall@k` of a list of k.
    pub metric: String,
}

impl Worth {
    /// One line for people; it starts with `WARNING:` when the configuration does not beat the
    /// best free option by the margin.
    pub fn text(&self) -> String {
        let what = format!("{} [{}]", self.configuration, self.standing.name());
        let free = self
            .free
            .map(|f| format!("{}", Shown(f)))
            .unwrap_or_else(|| "?".into());
        let option = self.free_option.as_deref().unwrap_or("the free option");
        let margin = self.margin.unwrap_or(WORTH_MARGIN);
        let how = self.estimated.as_deref().unwrap_or("?");
        let metric = &self.metric;
        let rival = if metric == "hit@1" {
            "no pool"
        } else {
            "no private list"
        };
        match (self.hit, self.gain) {
            (Some(h), Some(g)) if self.below_free => format!(
                "WARNING: {what} does not beat the best free option, {option}, by {margin} \
                 paired s.e.: calibration {metric} {} against {free} (paired difference {}; {how}); \
                 better: {}",
                Shown(h),
                Shown(g),
                self.better.as_deref().unwrap_or(option)
            ),
            (Some(h), Some(g)) if g.mean == 0.0 && g.se == 0.0 => format!(
                "worth: {what}: calibration {metric} {}: the best free option, which {rival} beat \
                 by {margin} paired s.e. ({how})",
                Shown(h)
            ),
            (Some(h), Some(g)) => format!(
                "worth: {what}: calibration {metric} {} against {free} for the best free option, \
                 {option} (paired difference {}, more than {margin} s.e.; {how})",
                Shown(h),
                Shown(g)
            ),
            _ => format!(
                "worth: {what}: calibration {metric} not measured ({})",
                self.note.as_deref().unwrap_or("no measurement")
            ),
        }
    }

    /// A configuration built in memory (no model directory, so no `tuning.json`).
    pub(crate) fn in_memory(cfg: &RecommendConfig) -> Self {
        Worth {
            configuration: describe(&cfg.mechanism, &cfg.candidates, None, &cfg.prior),
            standing: Standing::NotTuned,
            hit: None,
            free: None,
            free_option: None,
            estimated: None,
            margin: None,
            gain: None,
            calibration_users: None,
            below_free: false,
            better: None,
            note: Some("built in memory, without a model directory's tuning.json".into()),
            metric: "hit@1".into(),
        }
    }
}

/// An estimate whose standard error may be unknown (tunings before version 3 have no s.e. of the
/// free baseline).
struct Shown(Estimate);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.se.is_nan() {
            write!(f, "{:.4}", self.0.mean)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A configuration for people: `mgem over popular:30, clip p25/p99 of the calibration users,
/// prior popularity:4`.
fn describe(
    mechanism: &str,
    candidates: &CandidatePolicy,
    clip: Option<(f64, f64)>,
    prior: &Prior,
) -> String {
    let clip = match clip {
        Some((lo, hi)) => format!("clip p{lo}/p{hi} of the calibration users"),
        None => "the release's clip range".into(),
    };
    let prior = match prior {
        Prior::None => String::new(),
        p => format!(", prior {p}"),
    };
    let candidates = match candidates {
        CandidatePolicy::All => "every item".to_string(),
        c => c.to_string(),
    };
    format!("{mechanism} over {candidates}, {clip}{prior}")
}

/// The best free option of `t`, as a candidate policy (before version 5: `popular:1`).
fn free_policy(t: &Tuning) -> CandidatePolicy {
    t.free_option.clone().unwrap_or(CandidatePolicy::Popular(1))
}

/// The free baseline of `t`: its recorded estimate, or the first row's mean without an s.e.
fn free_of(t: &Tuning) -> Estimate {
    t.free.unwrap_or_else(|| Estimate {
        mean: t.rows.first().and_then(|r| r.fixed_hit).unwrap_or(f64::NAN),
        se: f64::NAN,
    })
}

/// What the tuned configuration (`tuned`) of `choice` is worth: its description, estimate,
/// gain over the best free option, that option and its estimate (a row of a private tuning
/// carries its own, noisy).
fn tuned_worth(t: &Tuning, choice: &TunedChoice) -> (String, Estimate, Estimate, String, Estimate) {
    let row = choice.row.as_ref();
    let policy = row
        .and_then(|r| r.free_option.clone())
        .unwrap_or_else(|| free_policy(t));
    let free = row.and_then(|r| r.free_hit).unwrap_or_else(|| free_of(t));
    let option = free_name(&policy);
    match row {
        Some(r) if r.mechanism == "krr" => (
            describe("krr", &r.candidates, None, &r.prior),
            Estimate {
                mean: r.calibration_hit,
                se: r.calibration_se,
            },
            r.private.as_ref().and_then(|p| p.gain).unwrap_or(Estimate {
                mean: r.best_pool_gain.unwrap_or(f64::NAN),
                se: r.best_pool_gain_se.unwrap_or(f64::NAN),
            }),
            option,
            free,
        ),
        Some(r) => (
            free_name(&r.candidates),
            Estimate {
                mean: r.calibration_hit,
                se: r.calibration_se,
            },
            Estimate { mean: 0.0, se: 0.0 },
            option,
            free,
        ),
        None => (
            free_name(&choice.candidates),
            free_of(t),
            Estimate { mean: 0.0, se: 0.0 },
            option,
            free,
        ),
    }
}

/// A configuration at `epsilon` that `t` measured beating the best free option by the margin
/// and above `hit`: the tuned configuration when it is, else the mechanism row with the best
/// estimate; else the free option itself and how to serve it.
fn better(t: &Tuning, epsilon: f64, hit: f64) -> String {
    let margin = t.config.margin;
    let mut options: Vec<(String, Estimate)> = Vec::new();
    if let Ok(choice) = t.choice(epsilon) {
        let (what, h, g, _, _) = tuned_worth(t, &choice);
        if beats(&g, margin) && h.mean > hit {
            return format!("--mech {TUNED} ({what}), calibration hit@1 {}", Shown(h));
        }
    }
    for r in t
        .mechanisms
        .iter()
        .filter(|r| same_epsilon(r.epsilon, epsilon))
    {
        if beats(&r.gain, margin) {
            options.push((
                format!(
                    "--mech {} without --candidates/--clip-range/--prior ({})",
                    r.mechanism,
                    describe(&r.mechanism, &r.candidates, r.clip, &r.prior)
                ),
                r.hit,
            ));
        }
    }
    let policy = free_policy(t);
    options
        .into_iter()
        .filter(|(_, h)| h.mean > hit)
        .max_by(|a, b| a.1.mean.total_cmp(&b.1.mean))
        .map(|(what, h)| format!("{what}, calibration hit@1 {}", Shown(h)))
        .unwrap_or_else(|| {
            format!(
                "{} (calibration hit@1 {}; served by `--mech random --candidates {policy}`, and by \
                 `--mech {TUNED}` where no pool beats it)",
                free_name(&policy),
                Shown(free_of(t))
            )
        })
}

/// The worth of a measured configuration (`free_itself`: it is the free option, which is never
/// flagged).
#[allow(clippy::too_many_arguments)]
fn measured(
    t: &Tuning,
    configuration: String,
    standing: Standing,
    epsilon: f64,
    hit: Estimate,
    gain: Estimate,
    free: (String, Estimate),
    free_itself: bool,
) -> Worth {
    let below_free = !free_itself && !beats(&gain, t.config.margin);
    Worth {
        configuration,
        standing,
        hit: Some(hit),
        free: Some(free.1),
        free_option: Some(free.0),
        estimated: Some(t.estimated()),
        margin: Some(t.config.margin),
        gain: Some(gain),
        calibration_users: t.calibration.users,
        below_free,
        better: below_free.then(|| better(t, epsilon, hit.mean)),
        note: None,
        metric: "hit@1".into(),
    }
}

/// The best free option of `t` for people, with its estimate.
fn free_pair(t: &Tuning) -> (String, Estimate) {
    (free_name(&free_policy(t)), free_of(t))
}

/// A clip range of `tuning.json` (its percentiles of the calibration users' scores) with its
/// per-item bounds from `tuning.npz`.
pub(crate) type ClipBounds = ((f64, f64), Sensitivities);

/// What [`resolve`] returns: the configuration served, the clip bounds, the tuned choice, what it
/// is worth and the tuned list row (a tuned list).
pub(crate) type Resolved = (
    RecommendConfig,
    Option<ClipBounds>,
    Option<TunedChoice>,
    Worth,
    Option<ListRow>,
);

/// What a recommender loaded from `dir` with `cfg` serves, given the `release` there: the
/// configuration (a named mechanism's tuned row when `cfg.tuned_row` and `tuning.json` has one
/// at its ε; the tuned choice for [`TUNED`]), the clip bounds to use instead of the release's,
/// (with the clip range they are the bounds of), the tuned choice, and what it is worth.
/// `tuning` is the directory's `tuning.json` as read once when the recommender was loaded
/// (`None` without one): nothing here reads it again.
pub(crate) fn resolve(
    dir: &Path,
    cfg: &RecommendConfig,
    release: &Release,
    tuning: Option<&Tuning>,
) -> Result<Resolved> {
    if cfg.mechanism == TUNED {
        if cfg.clip_range.is_some() {
            return Err(Error::Invalid(
                "a clip range with the tuned configuration: the tuning chooses it; name a \
                 mechanism (--mech) to choose it yourself"
                    .into(),
            ));
        }
        let t = tuning.ok_or_else(|| Tuning::not_found(dir))?;
        if cfg.list_k > 1 {
            let (c, row) = tuned::lists::resolve_list(t, cfg)?;
            let w = list_worth(t, &row);
            return Ok((c, None, None, w, Some(row)));
        }
        let (c, choice) = tuned::resolve(t, cfg)?;
        let (what, hit, gain, option, free) = tuned_worth(t, &choice);
        let free_itself = choice.mechanism != "krr";
        let w = measured(
            t,
            what,
            Standing::Tuned,
            cfg.params.epsilon,
            hit,
            gain,
            (option, free),
            free_itself,
        );
        return Ok((c, None, Some(choice), w, None));
    }
    let mut out = cfg.clone();
    out.clip_range = None;
    let eps = cfg.params.epsilon;
    let Some(t) = tuning else {
        if let Some(c) = cfg.clip_range.filter(|&c| !is_release_range(release, c)) {
            return Err(Error::Invalid(format!(
                "clip range {},{}: the bounds of a clip range other than the release's ({},{}) \
                 come from {TUNING}, which {} does not have: run `recsel tune`",
                c.0,
                c.1,
                release.manifest.calibration.lower_percentile,
                release.manifest.calibration.upper_percentile,
                dir.display()
            )));
        }
        let w = Worth {
            note: Some(format!(
                "no {TUNING} in {}: `recsel tune` measures it",
                dir.display()
            )),
            configuration: describe(&cfg.mechanism, &cfg.candidates, None, &cfg.prior),
            ..Worth::in_memory(cfg)
        };
        return Ok((out, None, None, w, None));
    };
    // The rows were tuned and measured with the mechanisms' default parameters: with others
    // (e.g. gem's beta) a row neither applies nor measures what is served.
    let default_params = cfg.params == crate::mechanisms::MechParams::default().with_epsilon(eps);
    let row = t
        .mechanism_row(&cfg.mechanism, eps)
        .filter(|_| default_params)
        .cloned();
    if cfg.tuned_row {
        if let Some(r) = &row {
            out.candidates = r.candidates.clone();
            out.prior = r.prior.clone();
            let bounds = r
                .clip
                .map(|c| t.bounds(dir, c).map(|b| (c, b)))
                .transpose()?;
            let what = describe(&r.mechanism, &r.candidates, r.clip, &r.prior);
            let w = measured(
                t,
                what,
                Standing::Tuned,
                eps,
                r.hit,
                r.gain,
                free_pair(t),
                false,
            );
            return Ok((out, bounds, None, w, None));
        }
    }
    // What was given (or the default, with no row to serve).
    let clip = cfg.clip_range.filter(|&c| !is_release_range(release, c));
    let bounds = clip.map(|c| t.bounds(dir, c).map(|b| (c, b))).transpose()?;
    let what = describe(&cfg.mechanism, &cfg.candidates, clip, &cfg.prior);
    let same =
        |r: &MechRow| r.candidates == cfg.candidates && r.clip == clip && r.prior == cfg.prior;
    let untuned_default =
        cfg.candidates == CandidatePolicy::All && clip.is_none() && cfg.prior.weight() == 0.0;
    let w = match &row {
        Some(r) if same(r) => measured(
            t,
            what,
            Standing::Untuned,
            eps,
            r.hit,
            r.gain,
            free_pair(t),
            false,
        ),
        Some(r) if untuned_default => measured(
            t,
            what,
            Standing::Untuned,
            eps,
            r.untuned_hit,
            r.untuned_gain,
            free_pair(t),
            false,
        ),
        _ => {
            let tuned_eps: Vec<String> = t
                .mechanisms
                .iter()
                .filter(|r| r.mechanism == cfg.mechanism)
                .map(|r| r.epsilon.to_string())
                .collect();
            Worth {
                note: Some(match &row {
                    Some(_) => format!(
                        "a configuration {TUNING} did not measure; without --candidates, \
                         --clip-range and --prior {} serves its tuned row",
                        cfg.mechanism
                    ),
                    None if !default_params => format!(
                        "{TUNING} measured {} with its default parameters only",
                        cfg.mechanism
                    ),
                    None if tuned_eps.is_empty() => format!(
                        "{TUNING} has no row for {}: run `recsel tune` again",
                        cfg.mechanism
                    ),
                    None => format!(
                        "{TUNING} has rows for {} at eps {} only",
                        cfg.mechanism,
                        tuned_eps.join(", ")
                    ),
                }),
                standing: Standing::Untuned,
                free: Some(free_of(t)),
                free_option: Some(free_pair(t).0),
                estimated: Some(t.estimated()),
                margin: Some(t.config.margin),
                calibration_users: t.calibration.users,
                configuration: what,
                ..Worth::in_memory(cfg)
            }
        }
    };
    Ok((out, bounds, None, w, None))
}

/// What the tuned list `row` of `t` is worth: its Recall@k on the calibration users the choice
/// did not read beside the best free list's (a served free list is that list itself, never
/// flagged).
pub(crate) fn list_worth(t: &Tuning, row: &ListRow) -> Worth {
    let k = row.k;
    let free_itself = row.serves.is_public();
    let gain = if free_itself {
        Estimate { mean: 0.0, se: 0.0 }
    } else {
        row.gain
    };
    let below_free = !free_itself && !beats(&gain, row.margin);
    Worth {
        configuration: format!("{} at eps {}", row.serves.describe(k), row.epsilon),
        standing: Standing::Tuned,
        hit: Some(row.recall),
        free: Some(row.free_recall),
        free_option: Some(row.free.describe(k)),
        estimated: Some(t.estimated()),
        margin: Some(row.margin),
        gain: Some(gain),
        calibration_users: t.calibration.users,
        below_free,
        better: below_free.then(|| row.free.describe(k)),
        note: None,
        metric: format!("Recall@{k}"),
    }
}

/// What a list of `k` served with `served` (the worth of its top-1 configuration) is worth,
/// when it is not a tuned list: not measured, with what the tuned list of `k` at `epsilon`
/// (rows `rows` of `tuning.json`) is worth, or how to measure it.
pub(crate) fn untuned_list_worth(
    served: &Worth,
    rows: &[ListRow],
    k: usize,
    epsilon: f64,
) -> Worth {
    let note = match tuned::lists::list_choice(rows, k, epsilon) {
        Ok(r) => format!(
            "lists of {k} of this configuration are not measured; the tuned list of {k} \
             (`--k {k}` without --mech) serves {}: calibration Recall@{k} {} against {} for the \
             best free list, {}",
            r.serves.describe(k),
            Shown(r.recall),
            Shown(r.free_recall),
            r.free.describe(k)
        ),
        Err(_) => format!(
            "lists of {k} of this configuration are not measured; `recsel tune --k {k}` \
             measures the tuned list of {k} against the best free list"
        ),
    };
    Worth {
        hit: None,
        gain: None,
        below_free: false,
        better: None,
        note: Some(note),
        metric: format!("Recall@{k}"),
        ..served.clone()
    }
}

/// Whether `clip` is the release's own clip range.
fn is_release_range(release: &Release, clip: (f64, f64)) -> bool {
    let c = &release.manifest.calibration;
    clip == (c.lower_percentile, c.upper_percentile)
}
