//! A select run prepared from its options: the data loaded, the model fitted (or reused), the
//! configuration resolved and checked. The command line, the Python package and the Ray runner
//! all start here, so they run the same data, model and configuration for the same options.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::options::SelectOptions;
use super::{model_for, source_fingerprint, ChunkStore, SelectConfig};
use crate::data::options::absolute;
use crate::data::{load_dataset_with, DataOptions, Dataset};
use crate::error::{Error, Result};
use crate::mechanisms::{MechValues, NoiseOptions, Registry, BETA, GAMMA};
use crate::model::{Model, ModelOptions, ModelParams};
use crate::rng::Streams;
use crate::scoring::{CandidatePolicy, PercentileUsers, ResolvedPolicy, ResolvedPrior};

/// Where a prepared run writes and whether it continues an earlier one.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Output folder (default `out/select-<data set>`).
    pub out: Option<PathBuf>,
    /// Without a seed, take the one of a run stored in the output folder (so that rerunning a
    /// command continues it) instead of drawing one.
    pub resume: bool,
}

/// A select run, ready to compute: what [`SelectJob::prepare`] made of the options.
#[derive(Debug)]
pub struct SelectJob {
    /// The data (training rows released once the model exists).
    pub data: Dataset,
    /// The fitted or loaded model.
    pub model: Arc<Model>,
    /// Its hyperparameters.
    pub model_params: ModelParams,
    /// The resolved configuration of the selection.
    pub config: SelectConfig,
    /// Seed of the split and of synthetic data.
    pub split_seed: u64,
    /// ε of the per-user scatter plot.
    pub scatter_eps: f64,
    /// Output folder.
    pub out: PathBuf,
    /// Model folder.
    pub model_dir: PathBuf,
    /// Where the data came from and how it was loaded, as options.
    data_options: DataOptions,
    /// Training popularity (interactions per item column): the public baselines' ranking.
    pub popularity: Vec<u64>,
    /// How often the calibration users hold each item out, when the split has calibration
    /// users: the best fixed item's ranking (docs/utility.md, "The baselines").
    pub calibration_heldout: Option<Vec<u64>>,
}

impl SelectJob {
    /// Resolves `options`: checks them, loads the data, fits the model or reuses the one saved
    /// in the model folder, and builds and validates the configuration (the data set's
    /// descriptor gives the defaults the options leave open). `log` receives one line per
    /// decision (the model's settings, the model reused or fitted, γ, the seed).
    pub fn prepare(
        options: &SelectOptions,
        placement: &Placement,
        registry: &Registry,
        log: &dyn Fn(&str),
    ) -> Result<Self> {
        options.check_with(registry)?;
        let o = options;
        let source = o.data.source()?;
        let load = o.data.load_options()?;
        let names = o.mechanism_names(registry)?;
        let split_seed = o.split_seed()?;
        log("loading data");
        let mut data = load_dataset_with(&source, split_seed, &load)
            .map_err(|e| Error::Invalid(format!("loading the data: {e}")))?;
        let (model_params, line) = o.model.params(&data.descriptor)?;
        log(&line);
        let out = placement
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("out/select-{}", data.name())));
        crate::io::ensure_dir(&out)?;
        let model_dir = o.model_dir.clone().unwrap_or_else(|| out.join("model"));
        let model = model_for(&model_dir, &data, &model_params, log).map_err(|e| {
            Error::Invalid(format!(
                "preparing the model in {}: {e}",
                model_dir.display()
            ))
        })?;
        // The paper's γ for this data set (its descriptor; docs/protocol.md, "Data sets").
        let given = MechValues::new()
            .with("gamma", data.descriptor.gamma())
            .merged(&o.params);
        let params = registry.resolve(&given)?;
        let origin = if o.params.get("gamma").is_some() {
            "given"
        } else {
            "the paper's for this data set"
        };
        log(&format!(
            "random stopping γ = {} ({origin}), GEM β = {}",
            params.number(&GAMMA),
            params.number(&BETA)
        ));
        let seed = o.noise.seed_or(|| {
            match ChunkStore::stored_seed(&out).filter(|_| placement.resume) {
                Some(s) => {
                    log(&format!("resuming with seed {s} from {}", out.display()));
                    s
                }
                None => {
                    let s = Streams::from_entropy().seed();
                    log(&format!("no seed given; using seed {s} (from OS entropy)"));
                    s
                }
            }
        })?;
        // Training popularity: the ranking of `popular:N`, a prior's counts and the `popular`
        // baseline.
        let popularity = crate::scoring::policy::popularity(&data.train);
        let (top, candidates) = candidates(o, &data, &popularity, log)?;
        let prior = prior(o, &data, &popularity, log)?;
        let config = SelectConfig {
            mechanisms: names,
            params,
            epsilons: o.epsilons(),
            trials: o.trials(),
            top,
            candidates,
            prior,
            clip: o.clip(),
            percentile_users: PercentileUsers::from_name(&o.percentile_users())?,
            seed,
            source_fingerprint: source_fingerprint(&data, &model_params),
            noise: o.noise.mode(),
            registry: registry.clone(),
        };
        // The public baselines' other input: the calibration users' held-out items when the
        // split has calibration users.
        let calibration_heldout = crate::data::calibration_users(&data, split_seed)
            .map(|c| crate::scoring::policy::popularity(&c.heldout));
        data.release_training_rows(); // the model and the fingerprints are made
        config.build()?; // validate before the long work
        Ok(SelectJob {
            model: Arc::new(model),
            model_params,
            config,
            split_seed,
            scatter_eps: o.scatter_eps(),
            out,
            data_options: DataOptions::recorded(&source, &load, split_seed),
            model_dir,
            data,
            popularity,
            calibration_heldout,
        })
    }

    /// The options that rerun this job's run of `cfg` (the job's configuration, or the one a
    /// run with added mechanisms ends with), every value written out — nothing left to a
    /// default that could change — with absolute paths, so that the table runs from any
    /// working directory. A secure run's table runs the float path (a secure run has no seed
    /// to reproduce).
    pub fn rerun_options(&self, cfg: &SelectConfig) -> SelectOptions {
        SelectOptions {
            data: self.data_options.clone(),
            model_dir: Some(absolute(&self.model_dir)),
            data_seed: None,
            model: ModelOptions::recorded(&self.model_params),
            mechanisms: Some(cfg.mechanisms.join(",")),
            epsilons: Some(cfg.epsilons.clone()),
            trials: Some(cfg.trials),
            // A policy's run records the policy (its `top` is the policy's count).
            top: cfg.candidates.is_none().then_some(cfg.top),
            candidates: cfg.candidates.as_ref().map(|c| c.policy.clone()),
            prior: cfg.prior.as_ref().map(|p| p.prior.clone()),
            clip: Some(cfg.clip),
            percentile_users: Some(cfg.percentile_users.name().to_string()),
            params: cfg.registry.table_values(&cfg.mechanisms, &cfg.params),
            noise: NoiseOptions {
                seed: Some(cfg.seed),
                secure: Some(false),
            },
            scatter_eps: Some(self.scatter_eps),
        }
    }

    /// The output folder.
    pub fn out(&self) -> &Path {
        &self.out
    }
}

/// The candidates of a run of `o` on `data`: the paper's (`top` alone, so its runs keep their
/// configuration and outputs; `history-top:N` is `top` N), or another policy resolved against
/// the data's items and training popularity, with its number of candidates.
fn candidates(
    o: &SelectOptions,
    data: &Dataset,
    pop: &[u64],
    log: &dyn Fn(&str),
) -> Result<(usize, Option<ResolvedPolicy>)> {
    let top = o.top();
    let Some(policy) = o.candidates.clone() else {
        return Ok((top, None));
    };
    if let CandidatePolicy::HistoryTop(n) = policy {
        return Ok((n, None));
    }
    let index = item_index(data);
    let list = policy
        .resolve_with(
            data.n_items(),
            Some(pop),
            data.heldout_popularity.as_deref(),
            &|id| index.get(id).copied(),
        )
        .map_err(|e| Error::Invalid(format!("candidates: {e}")))?;
    let k = list.k(data.n_items());
    log(&format!(
        "candidates: {policy} ({k} items, the same for every user, the user's own included)"
    ));
    Ok((k, Some(ResolvedPolicy { policy, list })))
}

/// Item id → column of `data`, for a policy or prior that names items.
fn item_index(data: &Dataset) -> HashMap<&str, u32> {
    data.item_ids
        .iter()
        .enumerate()
        .map(|(j, id)| (id.as_str(), j as u32))
        .collect()
}

/// The prior of a run of `o` on `data`, resolved against the data's items and training
/// popularity; `None` for none (the paper's) or weight 0. `own-history:W`, the serving path's
/// audit reference, is refused: a select run compares private mechanisms.
fn prior(
    o: &SelectOptions,
    data: &Dataset,
    pop: &[u64],
    log: &dyn Fn(&str),
) -> Result<Option<ResolvedPrior>> {
    let Some(prior) = o.prior.clone() else {
        return Ok(None);
    };
    if !prior.history_independent() {
        return Err(Error::Invalid(format!(
            "prior '{prior}' depends on the user's history: select takes a public prior \
             (popularity:W, heldout:W, file:PATH:W) or none"
        )));
    }
    let index = item_index(data);
    let heldout = data.heldout_popularity.as_deref();
    let resolved = prior.resolve(data.n_items(), Some(pop), heldout, &|id| {
        index.get(id).copied()
    })?;
    if resolved.is_some() {
        log(&format!(
            "prior: {prior} (public, added to the candidates' scores before the mechanisms)"
        ));
    }
    Ok(resolved)
}
