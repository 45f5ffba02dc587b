//! The release a fit publishes (docs/deployment.md, "The release artifact"): how it is calibrated
//! ([`ReleaseOptions`], resolved once into a [`ReleasePlan`]) and [`write_release`], the one
//! function that turns a fitted model and its options into a model directory with its release —
//! `recsel fit --out` and Python's `Model.save_release` both call it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::release::{calibrate, Release, Statistics, DEFAULT_CALIBRATION_USERS};
use super::release_statistics::{
    DEFAULT_COUNT_CAP, DEFAULT_COUNT_EPSILON, DEFAULT_HISTORY_CAP, STATISTICS_CHOICES,
};
use crate::data::{DataSource, Dataset, LoadOptions, ValidationUsers};
use crate::error::{Error, Result};
use crate::model::options::TrainedModel;
use crate::model::{self, Model, ModelParams};
use crate::options::option_table;
use crate::privacy::PopulationPrivacy;
use crate::scoring::SensitivityConfig;

option_table! {
    /// How a release artifact is calibrated (`recsel fit --out`; docs/deployment.md).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct ReleaseOptions {
        /// Calibration users of the release artifact at most: the validation users, or the
        /// training users when the split has none — never the test users.
        #[option(group = "Release")]
        pub calibration_users: usize = DEFAULT_CALIBRATION_USERS,
        /// Percentiles of the clip range of an exact-leaky release, LO,HI (the paper's p1/p99
        /// by default). A narrower range shrinks each Δ_j at the cost of clipping more scores
        /// (docs/utility.md). A private release derives its ranges from the model and refuses
        /// another range.
        #[option(value_name = "LO,HI", group = "Release")]
        pub clip_range: Vec<f64> = vec![1.0, 99.0],
        /// How the release's statistics are made: private (no exact user statistic: clip
        /// ranges derived from the model for histories of at most history_cap items, popularity
        /// and held-out counts with discrete Laplace noise at count_epsilon) or exact-leaky
        /// (exact percentiles of the calibration users' scores at clip_range and exact counts:
        /// calibration and training users NOT protected, and every report says so).
        #[option(value_name = "KIND", choices = STATISTICS_CHOICES, group = "Release")]
        pub release_statistics: String = "private".to_string(),
        /// The declared cap on history length the private clip ranges are derived for (a
        /// longer history's scores are clipped to them).
        #[option(group = "Release")]
        pub history_cap: usize = DEFAULT_HISTORY_CAP,
        /// Items of one user each private count counts (its L1 sensitivity).
        #[option(group = "Release")]
        pub count_cap: usize = DEFAULT_COUNT_CAP,
        /// ε of each private count vector (popularity; held-out), per training user.
        #[option(group = "Release")]
        pub count_epsilon: f64 = DEFAULT_COUNT_EPSILON,
    }
}

impl ReleaseOptions {
    /// How the release's statistics are made; an error names a bad choice.
    pub fn statistics(&self) -> Result<Statistics> {
        match self.release_statistics().as_str() {
            "private" => Ok(Statistics::Private {
                history_cap: self.history_cap(),
                count_cap: self.count_cap(),
                count_epsilon: self.count_epsilon(),
                popularity_from_fit: false,
            }),
            "exact-leaky" => Ok(Statistics::ExactLeaky),
            other => Err(Error::UnknownName {
                kind: "release statistics",
                name: other.to_string(),
                valid: STATISTICS_CHOICES.join(", "),
            }),
        }
    }

    /// The clip range as a sensitivity configuration; an error names a bad range.
    pub fn sensitivity(&self) -> Result<SensitivityConfig> {
        let r = self.clip_range();
        let [lo, hi] = r[..] else {
            return Err(Error::Invalid(format!(
                "clip_range (--clip-range) takes two percentiles LO,HI, got {r:?}"
            )));
        };
        SensitivityConfig::new(lo, hi, SensitivityConfig::default().floor)
            .map_err(|e| Error::Invalid(format!("clip_range (--clip-range): {e}")))
    }

    /// The options checked and resolved, before any data is read (errors name the option). A
    /// clip range other than the default with private statistics is refused: the private ranges
    /// come from the model, so the percentiles would be recorded in the release but never used.
    pub fn plan(&self) -> Result<ReleasePlan> {
        let statistics = self.statistics()?;
        let sensitivity = self.sensitivity()?;
        let default = Self::default().sensitivity()?;
        if matches!(statistics, Statistics::Private { .. })
            && (sensitivity.lower, sensitivity.upper) != (default.lower, default.upper)
        {
            return Err(Error::Invalid(format!(
                "clip_range (--clip-range) {},{}: percentiles of the calibration users' scores, \
                 which only exact-leaky release statistics (--release-statistics exact-leaky, \
                 NOT private for the calibration and training users) read; a private release \
                 derives its clip ranges from the model for histories of at most history_cap \
                 (--history-cap) items: drop the clip range",
                sensitivity.lower, sensitivity.upper
            )));
        }
        Ok(ReleasePlan {
            calibration_users: self.calibration_users(),
            sensitivity,
            statistics,
        })
    }
}

/// Makes the load options of the data a release is published from calibrate on users the model
/// neither fits nor serves (docs/utility.md, "Protocols"): on LightGCN files, where every user's
/// train row is fitted on, that needs users held out of the fit, so no `validation_users` becomes
/// `auto` (returns `true`: the caller says so) and `0` is refused.
pub fn hold_out_calibration_users(source: &DataSource, opts: &mut LoadOptions) -> Result<bool> {
    if !source.is_lightgcn() {
        return Ok(false);
    }
    match opts.validation_users {
        None => {
            opts.validation_users = Some(ValidationUsers::Auto);
            Ok(true)
        }
        Some(ValidationUsers::Share(0.0)) => Err(Error::Invalid(
            "--out with --validation-users 0 on LightGCN files would calibrate the release on \
             users it serves (every user's train row is fitted on): give --validation-users auto \
             or a share"
                .into(),
        )),
        Some(_) => Ok(false),
    }
}

/// [`ReleaseOptions`] resolved: what [`write_release`] calibrates with.
#[derive(Debug, Clone)]
pub struct ReleasePlan {
    /// Calibration users at most.
    pub calibration_users: usize,
    /// The clip range's percentiles (exact statistics only).
    pub sensitivity: SensitivityConfig,
    /// How the statistics are made.
    pub statistics: Statistics,
}

/// A fitted model and what its release records of the fit.
#[derive(Debug, Clone, Copy)]
pub struct Fitted<'a> {
    /// The model.
    pub model: &'a Model,
    /// Its method, λ and density.
    pub params: &'a ModelParams,
    /// The training users' entry of a DP fit (`None`: the training data are treated as public).
    pub training_privacy: Option<&'a PopulationPrivacy>,
    /// A DP fit on an item set (`--dp-items`): every item's noisy count its first stage
    /// released, which the release publishes as its popularity (no ε of its own).
    pub item_counts: Option<&'a [f64]>,
    /// What the item universe is (a declared catalogue, a DP output, or data-derived), recorded
    /// in `model.json` for the privacy report (`None`: the caller's columns).
    pub item_universe: Option<&'a PopulationPrivacy>,
    /// The private choice of the DP fit's shift, recorded in `model.json` (`None`: no grid).
    pub shift_choice: Option<&'a crate::model::options::ShiftChoice>,
}

impl<'a> Fitted<'a> {
    /// The fit of [`TrainingPrivacyOptions::fit`](crate::model::options::TrainingPrivacyOptions::fit)
    /// with its `params`.
    pub fn of(trained: &'a TrainedModel, params: &'a ModelParams) -> Self {
        Fitted {
            model: &trained.model,
            params,
            training_privacy: trained.training_privacy.as_ref(),
            item_counts: trained.selection.as_ref().map(|s| &s.noisy_counts[..]),
            item_universe: trained.item_universe.as_ref(),
            shift_choice: trained.shift_choice.as_ref(),
        }
    }
}

/// Writes the model directory `dir`: the model files with the training users' entry
/// (`model.json`, the weights), then the release calibrated on `data` as `plan` says
/// (`calibration.npz`, `privacy.json`, and `release.json` last, naming the others with their
/// checksums). `data` is the data the model was fitted on (its training rows, its validation
/// users, its item ids). `progress` is told each stage. Returns the release as written.
pub fn write_release(
    dir: &Path,
    fitted: Fitted<'_>,
    data: &Dataset,
    plan: &ReleasePlan,
    progress: &dyn Fn(&str),
) -> Result<Release> {
    if fitted.model.n_items() != data.n_items() {
        return Err(Error::Invalid(format!(
            "the model has {} items and the data '{}' {}: a release is calibrated on the data the \
             model was fitted on",
            fitted.model.n_items(),
            data.name(),
            data.n_items()
        )));
    }
    progress("saving the model");
    model::io::save_with_training_privacy(
        dir,
        fitted.model,
        fitted.params,
        data.name(),
        &data.item_ids,
        fitted.training_privacy.cloned(),
    )?;
    if let Some(u) = fitted.item_universe {
        model::io::record_item_universe(dir, u.clone())?;
    }
    if let Some(c) = fitted.shift_choice {
        model::io::record_shift_choice(dir, c.clone())?;
    }
    progress("calibrating the release artifact");
    let mut release = calibrate(
        fitted.model,
        fitted.params,
        data,
        plan.calibration_users,
        &plan.sensitivity,
        &plan.statistics,
        &|_| {},
    )?;
    if let Some(counts) = fitted.item_counts {
        // The DP fit's item counts are the popularity the release publishes.
        release.use_fit_popularity(counts)?;
    }
    release.write(dir)?;
    Ok(release)
}

impl Release {
    /// What the release's statistics are, in one line for a person (`recsel fit --out` prints
    /// it).
    pub fn summary(&self) -> String {
        let c = &self.manifest.calibration;
        match self.manifest.statistics() {
            Statistics::Private { history_cap, .. } => format!(
                "release artifact: clip ranges and Δ of {} items derived from the model for \
                 histories of at most {history_cap} items (no calibration user read), popularity \
                 and held-out counts with DP noise",
                self.manifest.n_items
            ),
            Statistics::ExactLeaky => format!(
                "release artifact (LEAKY): exact p1, p99 and Δ of {} items on {} {} users (not \
                 the test users) and exact counts: calibration and training users are not \
                 protected",
                self.manifest.n_items,
                c.users.map_or_else(|| "the".into(), |n| n.to_string()),
                c.population
            ),
        }
    }
}
