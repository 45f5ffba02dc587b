//! The options of what a private recommendation is worth (docs/utility.md), declared once:
//! [`TuneOptions`] (`recsel tune`) and [`EvaluateOptions`] (`recsel evaluate`); how `recsel fit
//! --out` calibrates the release is `recommend::publish::ReleaseOptions`, beside the release.
//! Each resolves into the library's configuration ([`TuneConfig`], [`UtilityConfig`]); the
//! command line's flags and the tables' keys derive from them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::tuning::{
    tune, DEFAULT_EPSILONS, DEFAULT_MARGIN, DEFAULT_POOL_SIZES, DEFAULT_PRIOR_WEIGHTS,
};
use super::utility::{measure, table, UtilityConfig, UtilityTable};
use crate::data::{
    calibration_users, load_dataset_with, DataOptions, DataSource, Dataset, HeldOutRows,
    LoadOptions, ValidationUsers,
};
use crate::error::{Error, Result};
use crate::mechanisms::{MechValues, Registry};
use crate::model::ModelOptions;
use crate::options::option_table;
use crate::recommend::release::{calibrate, DEFAULT_CALIBRATION_USERS};
use crate::recommend::release_statistics::Statistics;
use crate::recommend::tuned::{self, PoolSource, TuneConfig, Tuning, TUNING};
use crate::scoring::SensitivityConfig;

option_table! {
    /// The options of `recsel tune` (docs/utility.md, "Tuning").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct TuneOptions {
        /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
        #[option(value_name = "DIR", group = "Model")]
        pub model: PathBuf,
        /// The data the model was fitted on (the same options as `recsel fit`).
        #[flatten]
        pub data: DataOptions,
        /// Replaced by split_seed (the seed of the split; also of the calibration users' 80/20
        /// split when their rows are full): an error that says so.
        #[option(hidden = true, group = "Data")]
        pub seed: u64,
        /// ε values to tune, comma separated.
        #[option(flag = "eps", value_name = "LIST", group = "Tuning")]
        pub epsilons: Vec<f64> = DEFAULT_EPSILONS.to_vec(),
        /// Public rankings a pool is the top of: popularity, heldout (those the release
        /// carries).
        #[option(value_name = "LIST", group = "Tuning")]
        pub sources: String = "popularity,heldout".to_string(),
        /// Pool sizes tried, comma separated (1 is the most popular item).
        #[option(value_name = "LIST", group = "Tuning")]
        pub pool_sizes: String = DEFAULT_POOL_SIZES.map(|n| n.to_string()).join(","),
        /// Paired standard errors of calibration gain a pool needs over the best free option.
        #[option(group = "Tuning")]
        pub margin: f64 = DEFAULT_MARGIN,
        /// Weights W of the public popularity prior (popularity:W) tried for krr's argmax,
        /// comma separated; no prior (0) is always tried and wins ties.
        #[option(value_name = "LIST", group = "Tuning")]
        pub prior_weights: Vec<f64> = DEFAULT_PRIOR_WEIGHTS.to_vec(),
        /// Registry mechanisms whose own configuration (a popular:N pool, a clip range, a
        /// popularity prior; the grid of `recsel evaluate`) is tuned per ε too, for `recommend
        /// --mech M`: all (every ε-DP one), none, or a comma-separated list.
        #[option(flag = "mech", value_name = "LIST", group = "Tuning")]
        pub mechanisms: String = "all".to_string(),
        /// List length: with K > 1, also choose per eps the list of K served by `recommend
        /// --k K` — a private list (each of --list-mech over a popular:N pool, K to 3K items
        /// released, more than K filtered on the device) or the best free list (a public
        /// ranking, shown or filtered on the device) — by Recall@K on half of the calibration
        /// users, estimated on the other half (docs/utility.md, "Tuning lists").
        #[option(value_name = "K", group = "Tuning")]
        pub k: usize = 1,
        /// Registry mechanisms whose lists are tried with --k, comma separated.
        #[option(value_name = "LIST", group = "Tuning")]
        pub list_mech: String = tuned::lists::DEFAULT_LIST_MECHANISMS.join(","),
        /// Choose privately, protecting the calibration users: each configuration's
        /// calibration hit@1 is released with Laplace noise (eps0 each) and the choice is a
        /// selection from private candidates; the total eps for the calibration users is
        /// printed and written into tuning.json. Registry mechanisms are not tuned then.
        #[option(group = "Private tuning")]
        pub private: bool = false,
        /// eps0 of one configuration's noisy calibration score (with --private).
        #[option(value_name = "E0", group = "Private tuning")]
        pub private_epsilon: f64 = tuned::DEFAULT_EPS0,
        /// How the configuration is selected (with --private): random-stopping (3*eps0 per
        /// tuned eps) or threshold (a private threshold search, then the first configuration
        /// above it: eps_search + 2*eps0, with a delta).
        #[option(value_name = "RULE", group = "Private tuning")]
        pub private_selection: String = "random-stopping".to_string(),
        /// Stopping probability gamma of the selection: about 1/gamma noisy scores drawn.
        #[option(value_name = "GAMMA", group = "Private tuning")]
        pub private_gamma: f64 = tuned::DEFAULT_GAMMA,
        /// eps of the threshold search (--private-selection threshold).
        #[option(value_name = "E", group = "Private tuning")]
        pub private_search_epsilon: f64 = tuned::DEFAULT_SEARCH_EPSILON,
        /// Target percentile of the threshold search.
        #[option(value_name = "T", group = "Private tuning")]
        pub private_percentile: f64 = tuned::DEFAULT_PERCENTILE,
        /// Noisy scores the threshold search estimates percentiles from.
        #[option(value_name = "M", group = "Private tuning")]
        pub private_samples: u64 = tuned::DEFAULT_SAMPLES,
        /// Seed of the private selection's noise (default: from the operating system; a
        /// published seed makes the noise reproducible, so it is never written to tuning.json).
        #[option(value_name = "SEED", group = "Private tuning")]
        pub private_seed: u64,
        /// With --private: the secure path, exact discrete Laplace noise and an exact stopping
        /// law from an OS-seeded generator instead of floating-point noise (random-stopping
        /// only; no --private-seed; docs/secure.md).
        #[option(group = "Private tuning")]
        pub secure: bool = false,
    }
}

/// The mechanisms `recsel tune` tunes: `all` (every ε-DP registry mechanism), `none`, or a list
/// of registry names; an error names an unknown one.
fn tuned_mechanisms(text: &str) -> Result<Vec<String>> {
    let registry = Registry::builtin();
    match text.trim() {
        "all" => Ok(super::tuning::pure_mechanisms(&registry)),
        "none" | "" => Ok(Vec::new()),
        list => list
            .split(',')
            .map(|s| registry.get(s.trim()).map(|spec| spec.name.to_string()))
            .collect(),
    }
}

/// The registry mechanisms of `recsel tune --list-mech`; an error names an unknown one.
fn list_mechanisms(text: &str) -> Result<Vec<String>> {
    let registry = Registry::builtin();
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| registry.get(s).map(|spec| spec.name.to_string()))
        .collect()
}

/// A comma-separated list of counts; the error names the option.
fn counts(what: &str, text: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| Error::Invalid(format!("{what}: '{s}' is not a whole number")))
        })
        .collect()
}

/// The error of `seed` where it once named the seed of the split (`tune`, `evaluate`).
fn refuse_renamed_seed(seed: Option<u64>) -> Result<()> {
    match seed {
        Some(s) => Err(Error::Invalid(format!(
            "seed (--seed, the seed of the split) is now split_seed: write --split-seed {s} \
             (Python: split_seed={s})"
        ))),
        None => Ok(()),
    }
}

impl TuneOptions {
    /// The tuner's configuration, checked.
    pub fn config(&self) -> Result<TuneConfig> {
        refuse_renamed_seed(self.seed)?;
        let private = match self.private() {
            false if self.secure() => {
                return Err(Error::Invalid(
                    "secure (--secure) is the secure path of private tuning: give it with \
                     private (--private)"
                        .into(),
                ))
            }
            false => None,
            true => {
                let p = tuned::PrivateTuneParams {
                    rule: tuned::PrivateRule::parse(&self.private_selection())?,
                    eps0: self.private_epsilon(),
                    gamma: self.private_gamma(),
                    search_epsilon: self.private_search_epsilon(),
                    percentile: self.private_percentile(),
                    samples: self.private_samples(),
                    seed: self.private_seed,
                    secure: self.secure(),
                    ..Default::default()
                };
                p.check()?;
                Some(p)
            }
        };
        let cfg = TuneConfig {
            epsilons: self.epsilons(),
            sources: self
                .sources()
                .split(',')
                .map(PoolSource::parse)
                .collect::<Result<_>>()?,
            pool_sizes: counts("pool_sizes (--pool-sizes)", &self.pool_sizes())?,
            margin: self.margin(),
            prior_weights: self.prior_weights(),
            mechanisms: if self.private() {
                Vec::new()
            } else {
                tuned_mechanisms(&self.mechanisms())?
            },
            grid: Default::default(),
            private,
            lists: tuned::lists::ListGrid {
                k: match self.k() {
                    0 => {
                        return Err(Error::Invalid(
                            "k (--k) is a list length >= 1 (1: no lists)".into(),
                        ))
                    }
                    1 => Vec::new(),
                    k => vec![k],
                },
                mechanisms: list_mechanisms(&self.list_mech())?,
                ..Default::default()
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

option_table! {
    /// The options of `recsel evaluate` (docs/utility.md, "Evaluating").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct EvaluateOptions {
        /// Model directory written by `recsel fit --out DIR`.
        #[option(value_name = "DIR", conflicts = &["folds"], group = "Model")]
        pub model: PathBuf,
        /// Cross-fitting on LightGCN files instead of a model directory: K folds of the users
        /// with a train and a test item; fold f is evaluated with fold f + 1 as calibration
        /// users and a model fitted on the others (with --method, --l2, --density), so every
        /// such user is evaluated once.
        #[option(value_name = "K", conflicts = &["model"], group = "Model")]
        pub folds: usize,
        /// The data the model was fitted on (the same options as `recsel fit`).
        #[flatten]
        pub data: DataOptions,
        /// The model fitted per fold with --folds.
        #[flatten]
        pub fit: ModelOptions,
        /// Replaced by split_seed (the seed of the split): an error that says so.
        #[option(hidden = true, group = "Data")]
        pub seed: u64,
        /// ε grid, comma separated.
        #[option(flag = "eps", value_name = "LIST", group = "Evaluation")]
        pub epsilons: Vec<f64> = DEFAULT_EPSILONS.to_vec(),
        /// ε-DP registry mechanisms measured over every item and over a tuned pool and clip
        /// range (krr is always measured).
        #[option(flag = "mech", value_name = "LIST", group = "Evaluation")]
        pub mechanisms: String = "em,rnm,gem,mgem".to_string(),
        /// popular:N pool sizes tried for the registry mechanisms.
        #[option(value_name = "LIST", group = "Evaluation")]
        pub pools: String = "3,10,30,100,300,1000".to_string(),
        /// Clip ranges tried for them: LO/HI percentile pairs, comma separated.
        #[option(value_name = "LIST", group = "Evaluation")]
        pub clips: String = "1/99,5/95,25/99,50/99".to_string(),
        /// Weights W of the public popularity prior (popularity:W) tried for them beside no
        /// prior, comma separated: each gets a row tuned with the prior too (0 alone: no such
        /// rows).
        #[option(value_name = "LIST", group = "Evaluation")]
        pub prior_weights: Vec<f64> = tuned::DEFAULT_MECHANISM_PRIOR_WEIGHTS.to_vec(),
        /// Selections per evaluated user for a simulated mechanism.
        #[option(group = "Evaluation")]
        pub trials: u32 = 10,
        /// Selections per calibration user when tuning a simulated mechanism.
        #[option(group = "Evaluation")]
        pub tune_trials: u32 = 2,
        /// Seed of the simulations.
        #[option(group = "Evaluation")]
        pub sim_seed: u64 = 1,
        /// List length: with K > 1, Recall@K, nDCG@K and hit@K of private lists of K (one
        /// release at each eps, peeling) beside the free lists, the non-private top-K and the
        /// limit (docs/utility.md, "Lists"), with a model directory (--model).
        #[option(value_name = "K", group = "Evaluation")]
        pub k: usize = 1,
        /// Parameters of the mechanisms.
        #[flatten]
        pub params: MechValues,
    }
}

impl EvaluateOptions {
    /// `recsel evaluate --k K` (K > 1): the list table of a model directory (its data's test
    /// users evaluated, its calibration users tuning). Returns the data set's name and the table.
    pub fn run_lists(
        &self,
        registry: &Registry,
        log: &dyn Fn(&str),
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(String, super::lists::ListTable)> {
        let cfg = self.config(registry)?;
        let dir = self.model.as_deref().ok_or_else(|| {
            Error::Invalid("k (--k) > 1 evaluates lists of a model directory (--model)".into())
        })?;
        let seed = self.data.split_seed();
        log("loading data");
        let (data, release) = release_data(dir, &self.data, seed)?;
        let name = data.name().to_string();
        let cal = calibration(&data, seed)?;
        let eval = HeldOutRows::test_users(&data);
        drop(data);
        let (model, _) = crate::model::io::load(dir)?;
        let lc = super::lists::ListConfig {
            k: self.k(),
            epsilons: cfg.epsilons,
            mechanisms: cfg.mechanisms,
            params: cfg.params,
            pools: cfg.pools,
            seed: cfg.seed,
        };
        log(&format!(
            "lists of {}: {} calibration users tune, {} evaluated",
            lc.k,
            cal.rows(),
            eval.rows()
        ));
        let tuning = if dir.join(TUNING).exists() {
            Some(Tuning::read(dir)?)
        } else {
            log(&format!(
                "no {TUNING} in {}: no tuned list and no top-1 calls measured (`recsel tune --k \
                 {}` first)",
                dir.display(),
                lc.k
            ));
            None
        };
        let t = super::lists::measure_lists(
            &model,
            &release,
            tuning.as_ref(),
            &cal,
            &eval,
            &lc,
            progress,
        )?;
        Ok((name, t))
    }

    /// The evaluation's configuration, its mechanism parameters resolved against `registry`.
    pub fn config(&self, registry: &Registry) -> Result<UtilityConfig> {
        refuse_renamed_seed(self.seed)?;
        let mut clips = Vec::new();
        for c in self.clips().split(',') {
            let bad = || Error::Invalid(format!("clips (--clips): '{c}' is not LO/HI"));
            let (lo, hi) = c.split_once('/').ok_or_else(bad)?;
            let lo: f64 = lo.trim().parse().map_err(|_| bad())?;
            let hi: f64 = hi.trim().parse().map_err(|_| bad())?;
            clips.push((lo, hi));
        }
        Ok(UtilityConfig {
            epsilons: self.epsilons(),
            mechanisms: self
                .mechanisms()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            params: registry.resolve(&self.params)?,
            pools: counts("pools (--pools)", &self.pools())?,
            clips,
            prior_weights: self.prior_weights(),
            trials: self.trials(),
            tune_trials: self.tune_trials(),
            seed: self.sim_seed(),
        })
    }
}

/// The load options of a release's data: on LightGCN files users are held out of the fit
/// (`validation_users = auto`) unless the options say otherwise, so that the release
/// calibrates on users it neither fits nor serves (docs/utility.md, "Protocols").
pub fn release_load_options(src: &DataSource, mut opts: LoadOptions) -> LoadOptions {
    if src.is_lightgcn() && opts.validation_users.is_none() {
        opts.validation_users = Some(ValidationUsers::Auto);
    }
    opts
}

/// The data of the release in `model` loaded with `data`'s options and `seed` (on LightGCN
/// files with users held out, as `recsel fit --out` loads them), checked against the release as
/// far as a release allows: its item ids must be the data's. A release stores no hash of its
/// training data (docs/privacy-report.md, "What a release holds"), so data with the same items
/// but other users cannot be told apart: give the data options and seed `recsel fit` was given.
pub fn release_data(
    model: &Path,
    data: &DataOptions,
    seed: u64,
) -> Result<(Dataset, crate::recommend::release::Release)> {
    let src = data.source()?;
    let opts = release_load_options(&src, data.load_options()?);
    let ds = load_dataset_with(&src, seed, &opts)
        .map_err(|e| Error::Invalid(format!("loading the data: {e}")))?;
    let release = crate::recommend::release::Release::read(model)?;
    // The release's items are its universe (a catalogue, or a DP fit's partition selection):
    // the data on them is the data the model was fitted on.
    let ds = if ds.item_ids == release.manifest.item_ids {
        ds
    } else {
        ds.on_catalogue(&release.manifest.item_ids).0
    };
    if ds.item_ids != release.manifest.item_ids {
        return Err(Error::Invalid(format!(
            "the model in {} was fitted on other data ({} items, this data {}, or other item \
             ids): give the data options and seed that `recsel fit` was given (on LightGCN files \
             also the same validation users)",
            model.display(),
            release.manifest.n_items,
            ds.item_ids.len()
        )));
    }
    Ok((ds, release))
}

/// The calibration users of `data`, or an error saying how to get some.
fn calibration(data: &Dataset, seed: u64) -> Result<HeldOutRows> {
    calibration_users(data, seed).ok_or_else(|| {
        Error::Invalid(format!(
            "data set '{}' has no validation users (held out of the fit, never served) to tune \
             on: fit again with validation users (--validation-users N or auto)",
            data.name()
        ))
    })
}

impl TuneOptions {
    /// `recsel tune`: loads the model's data, tunes on its calibration users only and writes
    /// `tuning.json` into the model folder. `progress` counts calibration users.
    pub fn run(&self, log: &dyn Fn(&str), progress: &(dyn Fn(u64) + Sync)) -> Result<Tuning> {
        let cfg = self.config()?;
        let dir = self
            .model
            .as_deref()
            .ok_or_else(|| Error::Invalid("model (--model) is required".into()))?;
        let seed = self.data.split_seed();
        log("loading data");
        let (data, release) = release_data(dir, &self.data, seed)?;
        let cal = calibration(&data, seed)?;
        drop(data);
        let (model, _) = crate::model::io::load(dir)?;
        log(&format!("tuning on {} calibration users", cal.rows()));
        let mut tuning = tune(&model, &release, &cal, &cfg, progress)?;
        tuning.write(dir)?;
        Ok(tuning)
    }
}

impl EvaluateOptions {
    /// `recsel evaluate`: the utility table of a model folder (its data's test users evaluated,
    /// its calibration users tuning; `tuning.json` when there is one), or cross-fitted over
    /// `folds` on LightGCN files. Returns the data set's name and the table. `progress` counts
    /// users scored.
    pub fn run(
        &self,
        registry: &Registry,
        log: &dyn Fn(&str),
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(String, UtilityTable)> {
        let cfg = self.config(registry)?;
        let seed = self.data.split_seed();
        let (name, parts) = match (&self.model, self.folds) {
            (Some(dir), None) => {
                if self.fit.method.is_some() || self.fit.l2.is_some() || self.fit.density.is_some()
                {
                    return Err(Error::Invalid(format!(
                        "method, l2 and density (--method, --l2, --density) choose the model \
                         fitted per fold with folds (--folds); the model directory {} has its \
                         own: drop them, or use --folds instead of --model",
                        dir.display()
                    )));
                }
                log("loading data");
                let (data, release) = release_data(dir, &self.data, seed)?;
                let name = data.name().to_string();
                let cal = calibration(&data, seed)?;
                let eval = HeldOutRows::test_users(&data);
                drop(data);
                let tuning = if dir.join(TUNING).exists() {
                    Some(Tuning::read(dir)?)
                } else {
                    log(&format!(
                        "no {TUNING} in {}: tuning krr's pool here on the calibration users",
                        dir.display()
                    ));
                    None
                };
                let (model, _) = crate::model::io::load(dir)?;
                let m = measure(
                    &model,
                    &release,
                    tuning.as_ref(),
                    &cal,
                    &eval,
                    &cfg,
                    progress,
                )?;
                (name, vec![m])
            }
            (None, Some(k)) => {
                let src = self.data.source()?;
                if !src.is_lightgcn() {
                    return Err(Error::Invalid(
                        "folds (--folds) cross-fits LightGCN files (--format lightgcn or \
                         --dataset amazon-book)"
                            .into(),
                    ));
                }
                let (mut parts, mut name) = (Vec::new(), String::new());
                for f in 0..k {
                    let mut opts = self.data.load_options()?;
                    opts.validation_users = Some(ValidationUsers::Fold { folds: k, index: f });
                    let data = load_dataset_with(&src, seed, &opts)
                        .map_err(|e| Error::Invalid(format!("loading the data: {e}")))?;
                    name = data.name().to_string();
                    let (params, line) = self.fit.params(&data.descriptor)?;
                    log(&line);
                    let (model, _) = crate::model::fit(&data.train, &params, &|_| {})?;
                    let release = calibrate(
                        &model,
                        &params,
                        &data,
                        DEFAULT_CALIBRATION_USERS,
                        &SensitivityConfig::default(),
                        // Exact statistics: cross-fitting measures the model and the mechanisms
                        // (the noise of private counts would make runs differ); a release that
                        // `recsel fit` wrote is measured with --model.
                        &Statistics::ExactLeaky,
                        &|_| {},
                    )?;
                    let cal = calibration(&data, seed)?;
                    let eval = HeldOutRows::test_users(&data);
                    log(&format!(
                        "fold {f} of {k}: {} fitted, {} calibration, {} evaluated users",
                        data.train.rows(),
                        cal.rows(),
                        eval.rows()
                    ));
                    parts.push(measure(
                        &model, &release, None, &cal, &eval, &cfg, progress,
                    )?);
                }
                (name, parts)
            }
            _ => {
                return Err(Error::Invalid(
                    "give model (--model DIR) or folds (--folds K), not both".into(),
                ))
            }
        };
        Ok((name, table(parts)?))
    }
}
