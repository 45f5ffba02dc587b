//! Private recommendations for served users (docs/deployment.md): load a release artifact, score a
//! history, keep the top candidates, clip them to the calibrated `[p1_j, p99_j]`, select one item
//! with a mechanism and the calibrated `Δ_j`.
//!
//! The random source is one value, [`Draws`], chosen by the [`NoiseMode`] of the
//! [`RecommendConfig`]: seeded ChaCha8 streams (one per user, for experiments and tests) or an
//! OS-seeded ChaCha20 generator and the mechanisms' exact secure path (for releases). The same
//! mechanism objects serve both; there is no second copy per mode.
//!
//! The README's library example, compiled here as a doc test (a test checks that the README shows
//! exactly these lines, without the hidden setup):
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("model");
//! # recsel::recommend::example_release(&dir)?;
//! use recsel::mechanisms::MechParams;
//! use recsel::recommend::{RecommendConfig, Recommender};
//! use recsel::rng::NoiseMode;
//!
//! // `dir`: a model directory written by `recsel fit ... --out DIR` (model + release artifact).
//! let params = MechParams { epsilon: 1.0, ..Default::default() };
//! let config = RecommendConfig::new("mgem", params, 500, NoiseMode::Secure);
//! let rec = Recommender::load(&dir, &config)?; // refuses mechanisms that are not eps-DP
//! eprintln!("{}", rec.privacy_statement());
//! let history = rec.history(["3", "17", "42"])?; // the user's items, by your item ids
//! let mut draws = rec.draws()?; // secure: OS-seeded ChaCha20, no seed
//! let mut scratch = rec.scratch();
//! if let Some(j) = rec.recommend(&history, 0, &mut draws, &mut scratch)? {
//!     println!("recommend item {}", rec.item_id(j));
//! }
//! # Ok(())
//! # }
//! ```

pub mod input;
pub mod ledgered;
pub mod release;

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::data::Fnv64;
use crate::error::{Error, Result};
use crate::mechanisms::{self, Guarantee, MechParams, Mechanism, Problem, Selector};
use crate::model::{self, Model, Scratch};
use crate::rng::{name_id, Draws, NoiseMode, SecureRng, Streams};
use crate::scoring::Candidates;

pub use release::{calibrate, Release, ReleaseManifest};

/// What to recommend with: the mechanism, its parameters (ε among them), the number of
/// candidates and the random source's mode. Validated when a [`Recommender`] is built.
#[derive(Debug, Clone)]
pub struct RecommendConfig {
    /// Registry name of the mechanism.
    pub mechanism: String,
    /// Its parameters.
    pub params: MechParams,
    /// Candidates per user (the user's top items by score).
    pub top: usize,
    /// Seeded float path (experiments) or the secure path (releases).
    pub noise: NoiseMode,
    /// Accept a mechanism that is not ε-DP at this `top` (`rnmh`, `rnmh-laplace`).
    pub allow_non_private: bool,
    /// Leave the user's own items out of the candidates (the default). With `false` and `top` at
    /// least the number of items, the candidate list no longer depends on the history and the
    /// guarantee is user-level (docs/deployment.md, "What is protected, and what is not").
    pub exclude_history: bool,
}

impl RecommendConfig {
    /// A configuration that refuses mechanisms that are not ε-DP.
    pub fn new(mechanism: &str, params: MechParams, top: usize, noise: NoiseMode) -> Self {
        RecommendConfig {
            mechanism: mechanism.into(),
            params,
            top,
            noise,
            allow_non_private: false,
            exclude_history: true,
        }
    }
}

/// Per-thread scratch space of [`Recommender::recommend`].
#[derive(Debug, Clone)]
pub struct RecScratch {
    scores: Vec<f64>,
    model: Scratch,
    history: Vec<u32>,
}

/// A model, its release artifact and a validated mechanism: one private item per history.
#[derive(Debug)]
pub struct Recommender {
    model: Model,
    release: Release,
    index: HashMap<String, u32>,
    mech: Box<dyn Mechanism>,
    mech_id: u32,
    top: usize,
    noise: NoiseMode,
    epsilon: Option<f64>,
    exclude_history: bool,
}

/// The stream key of a user id (FNV-1a): a user's seeded draws do not depend on where the user
/// stands in an input file.
pub fn user_key(user_id: &str) -> u64 {
    let mut h = Fnv64::new();
    h.write(user_id.as_bytes());
    h.finish()
}

impl Recommender {
    /// Loads the model and the release artifact in `dir` and builds the mechanism of `cfg`.
    pub fn load(dir: &Path, cfg: &RecommendConfig) -> Result<Self> {
        let release = Release::read(dir)?;
        let fp = u64::from_str_radix(&release.manifest.data_fingerprint, 16).map_err(|_| {
            Error::Invalid(format!(
                "{}: data_fingerprint '{}' is not hexadecimal",
                dir.join(release::MANIFEST).display(),
                release.manifest.data_fingerprint
            ))
        })?;
        let (model, meta) = model::io::load(dir, Some(fp))?;
        if meta.item_ids != release.manifest.item_ids {
            return Err(Error::Invalid(format!(
                "{}: the release's item ids differ from the model's",
                dir.display()
            )));
        }
        Self::new(model, release, cfg)
    }

    /// A recommender from a model and its release, both in memory.
    pub fn new(model: Model, release: Release, cfg: &RecommendConfig) -> Result<Self> {
        if cfg.top == 0 {
            return Err(Error::Invalid("top must be at least 1, got 0".into()));
        }
        if model.n_items() != release.manifest.n_items {
            return Err(Error::Invalid(format!(
                "the model has {} items but the release {}",
                model.n_items(),
                release.manifest.n_items
            )));
        }
        let mech = mechanisms::build(&cfg.mechanism, &cfg.params)?;
        let guarantee = mech.guarantee();
        let epsilon = match cfg.noise {
            NoiseMode::Secure => Some(mech.secure_epsilon()?),
            NoiseMode::Fast => guarantee.epsilon_for(cfg.top),
        };
        if let Guarantee::Approx { .. } = guarantee {
            // Serving charges pure ε per recommendation (and the privacy statement says ε-DP).
            return Err(Error::Invalid(format!(
                "mechanism '{}' is {guarantee}, not eps-DP: recommend serves only pure eps-DP \
                 mechanisms (e.g. mgem, gem, cgem, rnm, rs-hard)",
                cfg.mechanism
            )));
        }
        let pure = matches!(guarantee, Guarantee::Pure { .. });
        if !pure && !cfg.allow_non_private {
            return Err(Error::Invalid(format!(
                "mechanism '{}' is not {}-DP: it is {} at top = {} candidates; recommend with an \
                 eps-DP mechanism (e.g. mgem, gem, cgem, rnm), or pass --allow-non-private for a \
                 reference run",
                cfg.mechanism,
                cfg.params.epsilon,
                match epsilon {
                    Some(e) => format!("only {e}-DP"),
                    None => "not differentially private for any eps".into(),
                },
                cfg.top
            )));
        }
        let index = release
            .manifest
            .item_ids
            .iter()
            .enumerate()
            .map(|(j, id)| (id.clone(), j as u32))
            .collect();
        Ok(Recommender {
            mech_id: name_id(mech.name()),
            model,
            release,
            index,
            mech,
            top: cfg.top,
            noise: cfg.noise,
            epsilon,
            exclude_history: cfg.exclude_history,
        })
    }

    /// The release artifact in use.
    pub fn release(&self) -> &Release {
        &self.release
    }

    /// Number of item columns.
    pub fn n_items(&self) -> usize {
        self.model.n_items()
    }

    /// The ε each recommendation spends at this `top` (the secure path's ε in secure mode;
    /// (k − 1)ε for `rnmh-laplace`), or `None` for a mechanism that is not private at all.
    pub fn epsilon(&self) -> Option<f64> {
        self.epsilon
    }

    /// One line for people: mechanism, ε, what is protected and what is not (the candidate set;
    /// docs/deployment.md, "What is protected"), who the bounds were calibrated on, and the
    /// randomness.
    pub fn privacy_statement(&self) -> String {
        let c = &self.release.manifest.calibration;
        let guarantee = match self.epsilon {
            Some(e) => format!("{e}-DP"),
            None => "NOT differentially private".into(),
        };
        let scope = if !self.exclude_history && self.top >= self.n_items() {
            format!(
                "each recommended item is {guarantee} ({}) with respect to the user's whole \
                 history (every item is a candidate, the user's own included)",
                self.mech.name()
            )
        } else {
            format!(
                "the choice among each user's top {} candidates is {guarantee} ({}) with respect \
                 to the user's history, but which items are candidates (the top {} by score{}) is \
                 not protected (docs/deployment.md)",
                self.top,
                self.mech.name(),
                self.top,
                if self.exclude_history {
                    ", the user's own items excluded"
                } else {
                    ""
                }
            )
        };
        format!(
            "privacy: {scope}; scores clipped to bounds fixed beforehand on {} {} users who are \
             not served; n recommendations from one history spend n times that; noise: {}",
            c.users,
            c.population,
            if self.noise.is_secure() {
                "secure (OS-seeded ChaCha20, exact sampler)"
            } else {
                "seeded floating-point streams (experiments only, not for a release; use --secure)"
            }
        )
    }

    /// The column of item `id`, if the model knows it.
    pub fn item_index(&self, id: &str) -> Option<u32> {
        self.index.get(id).copied()
    }

    /// The id of item column `j`.
    pub fn item_id(&self, j: u32) -> &str {
        &self.release.manifest.item_ids[j as usize]
    }

    /// Item ids → columns (sorted, duplicates once); an unknown id is an error naming it.
    pub fn history<'s>(&self, ids: impl IntoIterator<Item = &'s str>) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for id in ids {
            out.push(self.item_index(id).ok_or_else(|| {
                Error::Invalid(format!("item '{id}' is not one of the model's item ids"))
            })?);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Fresh scratch space for one thread.
    pub fn scratch(&self) -> RecScratch {
        let n = self.model.n_items();
        RecScratch {
            scores: vec![0.0; n],
            model: Scratch::new(n),
            history: Vec::new(),
        }
    }

    /// The random source of one worker: seeded streams of `seed` in fast mode, an OS-seeded
    /// generator in secure mode (the seed is then unused).
    pub fn draws_seeded(&self, seed: u64) -> Result<Draws> {
        Draws::new(self.noise, Streams::new(seed))
    }

    /// The random source of one worker with no seed given: OS entropy in either mode.
    pub fn draws(&self) -> Result<Draws> {
        Draws::new(self.noise, Streams::from_entropy())
    }

    /// The selection problem of a history: its top candidates, clipped, with their Δ_j.
    pub fn candidates(&self, history: &[u32], scratch: &mut RecScratch) -> Candidates {
        scratch.history.clear();
        scratch.history.extend_from_slice(history);
        scratch.history.sort_unstable();
        scratch.history.dedup();
        self.model
            .score_into(&scratch.history, &mut scratch.scores, &mut scratch.model);
        let excluded: &[u32] = if self.exclude_history {
            &scratch.history
        } else {
            &[]
        };
        Candidates::new(
            &scratch.scores,
            excluded,
            &self.release.sens,
            self.top,
            true,
        )
    }

    /// One private recommendation for `history` (item columns): the chosen item's column, or
    /// `None` when the history covers every item. `user` keys the seeded stream (see
    /// [`user_key`]); secure draws ignore it. Errors only on the secure path, for inputs beyond
    /// its exact arithmetic.
    pub fn recommend(
        &self,
        history: &[u32],
        user: u64,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Option<u32>> {
        let c = self.candidates(history, scratch);
        if c.items.is_empty() {
            return Ok(None);
        }
        let problem = Problem::new(&c.scores, &c.deltas)?;
        let selector = Selector::single(&*self.mech, &problem, self.noise)?;
        let a = selector.sample(draws, self.mech_id, 0, user, 0);
        Ok(Some(c.items[a]))
    }

    /// One recommendation per `(user id, history)`, in parallel, in input order. Seeded streams of
    /// `seed` (fast mode) are keyed by the user id, so the result for a user depends only on the
    /// seed, the user id and the history; secure mode ignores the seed. `progress` receives users
    /// done.
    pub fn recommend_all(
        &self,
        users: &[(String, Vec<u32>)],
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Vec<Option<u32>>> {
        if self.noise.is_secure() {
            SecureRng::from_os()?; // fail here, not inside a worker, if the OS has no entropy
        }
        const BLOCK: usize = 4096;
        let mut out = Vec::with_capacity(users.len());
        for block in users.chunks(BLOCK) {
            let picks: Vec<Option<u32>> = block
                .par_iter()
                .map_init(
                    || {
                        let d = self
                            .draws_seeded(seed)
                            .expect("OS entropy was available when the run started");
                        (self.scratch(), d)
                    },
                    |(scratch, draws), (id, history)| {
                        self.recommend(history, user_key(id), draws, scratch)
                    },
                )
                .collect::<Result<_>>()?;
            out.extend(picks);
            progress(block.len() as u64);
        }
        Ok(out)
    }
}

/// The generated `synthetic` data (small shape, split seed 42) of the documentation's example,
/// the tests and the benchmark.
#[doc(hidden)]
pub fn example_data() -> Result<crate::data::Dataset> {
    use crate::data::synthetic::SyntheticShape;
    use crate::data::{load_dataset, DataSource, NamedDataset};
    load_dataset(
        &DataSource::Named {
            dataset: NamedDataset::Synthetic(SyntheticShape::Small),
            data_dir: "data".into(),
        },
        42,
    )
}

/// Writes a small model directory with a release for the documentation's example: SANSA fitted
/// on [`example_data`], calibrated on its training users; returns the data. Not for real use.
#[doc(hidden)]
pub fn example_release(dir: &Path) -> Result<crate::data::Dataset> {
    let data = example_data()?;
    let params = model::ModelParams::new(model::Method::Exact, 200.0, 0.01)?;
    let (m, _) = model::fit(&data.train, &params, &|_| {})?;
    model::io::save(
        dir,
        &m,
        &params,
        data.name(),
        data.fingerprint(),
        &data.item_ids,
    )?;
    let cfg = crate::scoring::SensitivityConfig::default();
    calibrate(&m, &params, &data, 2_000, &cfg, &|_| {})?.write(dir)?;
    Ok(data)
}
