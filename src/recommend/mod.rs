//! Private recommendations for served users (docs/deployment.md): load a release artifact, score a
//! history, take the candidates of the [`CandidatePolicy`] (every item by default), clip them to
//! the calibrated `[p1_j, p99_j]`, select one item with a mechanism and the calibrated `Δ_j`.
//!
//! With a policy whose list does not depend on the history (`all`, `popular:N`, `pool:FILE`) each
//! recommendation is user-level ε-DP: ε-DP with respect to the user's whole history.
//! `history-top:N` (the paper's protocol) leaks which items are candidates and needs
//! `allow_non_private`.
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
//! let config = RecommendConfig::new("mgem", params, NoiseMode::Secure); // every item a candidate
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

mod block;
mod claim;
pub mod input;
pub mod ledgered;
mod list;
mod load;
pub mod options;
pub mod public_list;
pub mod publish;
pub mod release;
pub mod release_statistics;
pub mod signature;
pub mod tuned;
pub mod worth;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rayon::prelude::*;

use crate::data::Fnv64;
use crate::error::{Error, Result};
use crate::mechanisms::{
    self, Guarantee, ListForm, MechParams, Mechanism, Problem, Selector, TopK,
};
use crate::model::{self, Model, Scratch};
use crate::privacy::report::PrivacyReport;
use crate::rng::{name_id, Draws, NoiseMode, SecureRng, Streams};
use crate::scoring::{
    top_candidates, CandidateList, CandidatePolicy, Candidates, Prior, ResolvedPrior,
};

pub use block::{ScoredBlock, MIN_BLOCK};
pub use claim::Scope;
pub use list::{device_filter, MAX_LIST};
pub use load::release_privacy_report;
pub use options::RecommendOptions;
pub use release::{calibrate, Release, ReleaseManifest};
pub use worth::{Standing, Worth};

/// What to recommend with: the mechanism, its parameters (ε among them), the candidate policy
/// and the random source's mode. Validated when a [`Recommender`] is built.
#[derive(Debug, Clone)]
pub struct RecommendConfig {
    /// Registry name of the mechanism.
    pub mechanism: String,
    /// Its parameters.
    pub params: MechParams,
    /// Which items are candidates (default: all, the user's own included).
    pub candidates: CandidatePolicy,
    /// A public per-item prior added to the clipped scores (default: none; docs/priors.md).
    pub prior: Prior,
    /// Seeded float path (experiments) or the secure path (releases).
    pub noise: NoiseMode,
    /// Accept what is not user-level ε-DP: a mechanism that is not ε-DP for this many candidates
    /// (`rnmh`, `rnmh-laplace`), the `history-top:N` policy or the `own-history:W` prior.
    /// Reference runs only.
    pub allow_non_private: bool,
    /// A clip range other than the release's: percentiles (LO, HI) of the calibration users'
    /// scores whose bounds `recsel tune` stored beside the model (`None`: the release's, or the
    /// tuned row's). Read by [`Recommender::load`].
    pub clip_range: Option<(f64, f64)>,
    /// Serve the named mechanism's tuned row of `tuning.json` (pool, clip range, prior) when the
    /// model directory has one for this ε; what the front ends set when no candidates, clip
    /// range or prior were given. Read by [`Recommender::load`].
    pub tuned_row: bool,
    /// How a list of k > 1 items is drawn (docs/lists.md; default: peeling, k rounds at ε/k).
    pub list_form: ListForm,
    /// The list length the tuned configuration ([`tuned::TUNED`]) is resolved for: 1, its top-1
    /// row; k > 1, its tuned list of k (`recsel tune --k K`). Read by [`Recommender::load`].
    pub list_k: usize,
}

impl RecommendConfig {
    /// A configuration with every item a candidate that refuses what is not ε-DP.
    pub fn new(mechanism: &str, params: MechParams, noise: NoiseMode) -> Self {
        RecommendConfig {
            mechanism: mechanism.into(),
            params,
            candidates: CandidatePolicy::All,
            prior: Prior::None,
            noise,
            allow_non_private: false,
            clip_range: None,
            tuned_row: false,
            list_form: ListForm::Peeling,
            list_k: 1,
        }
    }

    /// This configuration with the candidate policy `candidates`.
    pub fn with_candidates(mut self, candidates: CandidatePolicy) -> Self {
        self.candidates = candidates;
        self
    }

    /// This configuration with the prior `prior`.
    pub fn with_prior(mut self, prior: Prior) -> Self {
        self.prior = prior;
        self
    }
}

/// Per-thread scratch space of [`Recommender::recommend`]: a recommendation allocates nothing
/// once it has been used.
#[derive(Debug, Clone)]
pub struct RecScratch {
    scores: Vec<f64>,
    model: Scratch,
    history: Vec<u32>,
    /// The candidates' clipped scores (`all`: every column, in column order).
    q: Vec<f64>,
    /// `history-top`: the candidates' columns and sensitivities.
    items: Vec<u32>,
    d: Vec<f64>,
}

impl RecScratch {
    /// The model's raw (unclipped) scores of every item for the history last passed to
    /// [`Recommender::candidates`] or [`Recommender::recommend`].
    pub fn scores(&self) -> &[f64] {
        &self.scores
    }
}

/// A model, its release artifact and a validated mechanism: one private item per history.
#[derive(Debug)]
pub struct Recommender {
    model: Arc<Model>,
    release: Release,
    index: HashMap<String, u32>,
    mech: Box<dyn Mechanism>,
    mech_id: u32,
    policy: CandidatePolicy,
    list: CandidateList,
    /// Sensitivities of a fixed list's columns, in its order.
    fixed_deltas: Vec<f64>,
    /// The candidates of `all` or a fixed list by ascending sensitivity, computed once: the GEM
    /// family's hull then needs no sort per recommendation.
    sens_order: Vec<u32>,
    noise: NoiseMode,
    epsilon: Option<f64>,
    /// The public prior, if any, with the ε its offsets are scaled by (the configuration's).
    prior: Option<ResolvedPrior>,
    prior_epsilon: f64,
    /// The prior's offsets in candidate order, computed once when neither the list nor the
    /// prior depends on the history (empty otherwise).
    offsets: Vec<f64>,
    /// The tuned choice this recommender serves, when asked for [`tuned::TUNED`].
    tuned: Option<tuned::TunedChoice>,
    /// What the served configuration is worth on the calibration users.
    worth: Worth,
    /// The tuned list served (a tuned configuration resolved for lists of its k) with, for a
    /// public ranking, its released items in the ranking's order.
    tuned_list: Option<(tuned::lists::ListRow, Vec<u32>)>,
    /// The mechanism's parameters (ε the whole answer's) and the form of a list: a list of k
    /// is [`TopK`] of them, built once per k and kept in `lists`.
    params: MechParams,
    list_form: ListForm,
    lists: RwLock<HashMap<usize, Arc<TopK>>>,
    /// A tuned recommender's model directory and configuration ([`tuned::TUNED`], no mechanism
    /// named): where [`Recommender::for_k`] resolves the tuned answer of another length.
    origin: Option<(PathBuf, RecommendConfig)>,
    /// The directory's `tuning.json` as read when the recommender was loaded: every other length
    /// is resolved from it, and its list rows say what an untuned list is worth — never the file
    /// again.
    tuning: Option<Arc<tuned::Tuning>>,
    /// The answers of other lengths resolved so far ([`Recommender::for_k`]), or why not.
    answers: RwLock<HashMap<usize, std::result::Result<Arc<Recommender>, String>>>,
    /// The release's privacy report (training, calibration and tuning entries).
    report: PrivacyReport,
    /// The tuned clip range served instead of the release's: exact percentiles of the calibration
    /// users' scores (`tuning.npz`), which the statement and the report name as not DP.
    exact_clip: Option<(f64, f64)>,
}

/// The stream key of a user id (FNV-1a): a user's seeded draws do not depend on where the user
/// stands in an input file.
pub fn user_key(user_id: &str) -> u64 {
    let mut h = Fnv64::new();
    h.write(user_id.as_bytes());
    h.finish()
}

impl Recommender {
    /// A recommender from a model and its release, both in memory.
    pub fn new(model: Model, release: Release, cfg: &RecommendConfig) -> Result<Self> {
        Self::with_model(Arc::new(model), release, cfg)
    }

    /// [`Recommender::new`] with a model shared with other recommenders.
    pub(super) fn with_model(
        model: Arc<Model>,
        release: Release,
        cfg: &RecommendConfig,
    ) -> Result<Self> {
        if cfg.mechanism == tuned::TUNED {
            return Err(Error::Invalid(format!(
                "the '{}' configuration is read from a model directory's {}: use                  Recommender::load",
                tuned::TUNED,
                tuned::TUNING
            )));
        }
        if let Some((lo, hi)) = cfg.clip_range {
            return Err(Error::Invalid(format!(
                "clip range {lo},{hi}: the bounds of a clip range other than the release's are \
                 read from a model directory's {}: use Recommender::load",
                tuned::BOUNDS
            )));
        }
        if model.n_items() != release.manifest.n_items {
            return Err(Error::Invalid(format!(
                "the model has {} items but the release {}",
                model.n_items(),
                release.manifest.n_items
            )));
        }
        let index: HashMap<String, u32> = release
            .manifest
            .item_ids
            .iter()
            .enumerate()
            .map(|(j, id)| (id.clone(), j as u32))
            .collect();
        let n = model.n_items();
        let policy = cfg.candidates.clone();
        let list = policy
            .resolve_with(
                n,
                release.popularity.as_deref(),
                release.heldout.as_deref(),
                &|id| index.get(id).copied(),
            )
            .map_err(|e| match (&policy, &release.popularity) {
                (CandidatePolicy::Popular(_), None) => Error::Invalid(format!(
                    "{e}: the release is format version {} (written by recsel {}); write it \
                     again with `recsel fit ... --out DIR` to add the training popularity",
                    release.manifest.format_version, release.manifest.recsel_version
                )),
                _ => e,
            })?;
        if !list.history_independent() && !cfg.allow_non_private {
            return Err(Error::Invalid(format!(
                "candidates '{policy}' depend on the user's history (each user's top items by \
                 the user's own scores, the user's items excluded), so which items are \
                 candidates is not protected; use 'all', 'popular:N' or 'pool:FILE', or pass \
                 --allow-non-private for a reference run"
            )));
        }
        let k = list.k(n);
        let mech = mechanisms::build(&cfg.mechanism, &cfg.params)?;
        let guarantee = mech.guarantee();
        let epsilon = match cfg.noise {
            NoiseMode::Secure => Some(mech.secure_epsilon()?),
            NoiseMode::Fast => guarantee.epsilon_for(k),
        };
        // Serving charges pure ε per recommendation (and the privacy statement says ε-DP).
        guarantee.refuse_approximate(
            &cfg.mechanism,
            "recommend (it charges pure eps per recommendation)",
        )?;
        let pure = matches!(guarantee, Guarantee::Pure { .. });
        if !pure && !cfg.allow_non_private {
            return Err(Error::Invalid(format!(
                "mechanism '{}' is not {}-DP: it is {} at {k} candidates ('{policy}'); recommend \
                 with an eps-DP mechanism (e.g. mgem, gem, cgem, rnm), or pass \
                 --allow-non-private for a reference run",
                cfg.mechanism,
                cfg.params.epsilon,
                match epsilon {
                    Some(e) => format!("only {e}-DP"),
                    None => "not differentially private for any eps".into(),
                },
            )));
        }
        let fixed_deltas = match &list {
            CandidateList::Fixed(items) => items
                .iter()
                .map(|&j| release.sens.delta[j as usize])
                .collect(),
            _ => Vec::new(),
        };
        let sens_order = {
            let d: &[f64] = match &list {
                CandidateList::All => &release.sens.delta,
                CandidateList::Fixed(_) => &fixed_deltas,
                CandidateList::HistoryTop(_) => &[],
            };
            let mut order: Vec<u32> = (0..d.len() as u32).collect();
            order.sort_by(|&a, &b| d[a as usize].total_cmp(&d[b as usize]));
            order
        };
        let prior = cfg.prior.resolve(
            n,
            release.popularity.as_deref(),
            release.heldout.as_deref(),
            &|id| index.get(id).copied(),
        )?;
        if prior.as_ref().is_some_and(|p| !p.history_independent()) && !cfg.allow_non_private {
            return Err(Error::Invalid(format!(
                "prior '{}' depends on the user's history (it boosts the user's own items): not \
                 private; use a public prior (popularity:W, heldout:W, file:PATH:W) or none, or \
                 pass --allow-non-private for a reference run",
                cfg.prior
            )));
        }
        let offsets = match (&prior, &list) {
            (Some(p), CandidateList::All | CandidateList::Fixed(_)) if p.history_independent() => {
                let (deltas, cols): (&[f64], Option<&[u32]>) = match &list {
                    CandidateList::Fixed(items) => (&fixed_deltas, Some(items)),
                    _ => (&release.sens.delta, None),
                };
                let mut b = vec![0.0; deltas.len()];
                let column = |a: usize| cols.map_or(a as u32, |c| c[a]);
                p.add_offsets(&mut b, deltas, column, cfg.params.epsilon, &[]);
                b
            }
            _ => Vec::new(),
        };
        let report = match &release.privacy {
            Some(r) => r.clone(),
            None => release.report_of(None),
        };
        Ok(Recommender {
            params: cfg.params.clone(),
            list_form: cfg.list_form,
            lists: Default::default(),
            report,
            prior,
            prior_epsilon: cfg.params.epsilon,
            offsets,
            mech_id: name_id(mech.name()),
            model,
            release,
            index,
            mech,
            policy,
            list,
            fixed_deltas,
            sens_order,
            noise: cfg.noise,
            epsilon,
            tuned: None,
            exact_clip: None,
            worth: Worth::in_memory(cfg),
            tuned_list: None,
            origin: None,
            tuning: None,
            answers: Default::default(),
        })
    }

    /// What the served configuration is worth on the calibration users, beside the free
    /// baseline (docs/utility.md): what `recsel recommend`, `recsel serve` and the Python
    /// `Recommender` print at start.
    pub fn worth(&self) -> &Worth {
        &self.worth
    }

    /// The tuned choice served, when the recommender was loaded for [`tuned::TUNED`].
    pub fn tuned(&self) -> Option<&tuned::TunedChoice> {
        self.tuned.as_ref()
    }

    /// The release artifact in use.
    pub fn release(&self) -> &Release {
        &self.release
    }

    /// Number of item columns.
    pub fn n_items(&self) -> usize {
        self.model.n_items()
    }

    /// The ε each recommendation spends for the policy's number of candidates (the secure path's
    /// ε in secure mode; (k − 1)ε for `rnmh-laplace`), or `None` for a mechanism that is not
    /// private at all. It covers the whole history only when [`Recommender::user_level`].
    pub fn epsilon(&self) -> Option<f64> {
        self.epsilon
    }

    /// The candidate policy.
    pub fn candidate_policy(&self) -> &CandidatePolicy {
        &self.policy
    }

    /// The resolved candidate list.
    pub fn candidate_list(&self) -> &CandidateList {
        &self.list
    }

    /// The mechanism.
    pub fn mechanism(&self) -> &dyn Mechanism {
        &*self.mech
    }

    /// The random source's mode.
    pub fn noise(&self) -> NoiseMode {
        self.noise
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
        let k = self.list.k(n);
        RecScratch {
            scores: vec![0.0; n],
            model: Scratch::new(n),
            history: Vec::new(),
            q: Vec::with_capacity(k),
            items: Vec::with_capacity(k),
            d: Vec::with_capacity(k),
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

    /// Scores `history` and writes its candidates' clipped scores, plus the prior's offsets if
    /// there is a prior, into `s.q` (and, for `history-top`, their columns and Δ_j into
    /// `s.items`, `s.d`). No sorting for `all` and fixed lists: their candidates stay in list
    /// order.
    fn build_problem(&self, history: &[u32], s: &mut RecScratch) {
        block::sorted_history(history, &mut s.history);
        self.model
            .score_into(&s.history, &mut s.scores, &mut s.model);
        self.problem_from_scores(s, self.prior_epsilon);
    }

    /// The second half of [`Recommender::build_problem`]: the problem of the history and raw
    /// scores already in `s.history` and `s.scores`, with the prior's offsets at `prior_epsilon`
    /// (the ε of one selection: the configuration's, or a list's ε per round).
    fn problem_from_scores(&self, s: &mut RecScratch, prior_epsilon: f64) {
        let sens = &self.release.sens;
        s.q.clear();
        match &self.list {
            CandidateList::All => s.q.extend(
                s.scores
                    .iter()
                    .zip(sens.lower.iter().zip(&sens.upper))
                    .map(|(&v, (&lo, &hi))| v.clamp(lo, hi)),
            ),
            CandidateList::Fixed(items) => s.q.extend(
                items
                    .iter()
                    .map(|&j| sens.clip(j as usize, s.scores[j as usize])),
            ),
            CandidateList::HistoryTop(n) => {
                s.items = top_candidates(&s.scores, &s.history, *n);
                s.q.extend(
                    s.items
                        .iter()
                        .map(|&j| sens.clip(j as usize, s.scores[j as usize])),
                );
                s.d.clear();
                s.d.extend(s.items.iter().map(|&j| sens.delta[j as usize]));
            }
        }
        if let Some(p) = &self.prior {
            if self.offsets.is_empty() || prior_epsilon != self.prior_epsilon {
                let mut q = std::mem::take(&mut s.q);
                let deltas = self.deltas(s);
                p.add_offsets(
                    &mut q,
                    deltas,
                    |a| self.column(s, a),
                    prior_epsilon,
                    &s.history,
                );
                s.q = q;
            } else {
                for (q, b) in s.q.iter_mut().zip(&self.offsets) {
                    *q += b;
                }
            }
        }
    }

    /// The sensitivities of the problem [`Recommender::build_problem`] left in `s`.
    fn deltas<'a>(&'a self, s: &'a RecScratch) -> &'a [f64] {
        match &self.list {
            CandidateList::All => &self.release.sens.delta,
            CandidateList::Fixed(_) => &self.fixed_deltas,
            CandidateList::HistoryTop(_) => &s.d,
        }
    }

    /// The column of candidate `a` of the problem in `s`.
    fn column(&self, s: &RecScratch, a: usize) -> u32 {
        match &self.list {
            CandidateList::All => a as u32,
            CandidateList::Fixed(items) => items[a],
            CandidateList::HistoryTop(_) => s.items[a],
        }
    }

    /// The selection problem of a history as [`Recommender::recommend`] builds it: the
    /// candidates of the policy (in the order the mechanism sees them: column order for `all`
    /// and fixed lists, best score first for `history-top`), clipped, plus the prior's offsets
    /// if there is a prior, with their Δ_j.
    pub fn candidates(&self, history: &[u32], scratch: &mut RecScratch) -> Candidates {
        self.build_problem(history, scratch);
        let k = scratch.q.len();
        Candidates {
            items: (0..k).map(|a| self.column(scratch, a)).collect(),
            scores: scratch.q.clone(),
            deltas: self.deltas(scratch).to_vec(),
        }
    }

    /// One private recommendation for `history` (item columns): the chosen item's column, or
    /// `None` when there is no candidate (`history-top` with a history that covers every item).
    /// `user` keys the seeded stream (see [`user_key`]); secure draws ignore it. Errors only on
    /// the secure path, for inputs beyond its exact arithmetic.
    pub fn recommend(
        &self,
        history: &[u32],
        user: u64,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Option<u32>> {
        self.build_problem(history, scratch);
        self.select(user, draws, scratch)
    }

    /// The private pick of the problem built in `scratch` (the second half of
    /// [`Recommender::recommend`]).
    fn select(&self, user: u64, draws: &mut Draws, scratch: &RecScratch) -> Result<Option<u32>> {
        if scratch.q.is_empty() {
            return Ok(None);
        }
        let mut problem = Problem::new(&scratch.q, self.deltas(scratch))?;
        if self.list.history_independent() {
            problem = problem.with_sens_order(&self.sens_order);
        }
        let selector = Selector::single(&*self.mech, &problem, self.noise)?;
        let a = selector.sample(draws, self.mech_id, 0, user, 0);
        Ok(Some(self.column(scratch, a)))
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
        // Users a worker scores together (`Recommender::score_block`: the same scores, the
        // model's weights read once per lane pass instead of once per user).
        const LANES: usize = crate::model::SCORE_LANES;
        let mut out = Vec::with_capacity(users.len());
        for block in users.chunks(BLOCK) {
            let picks: Vec<Vec<Option<u32>>> = block
                .par_chunks(LANES)
                .map_init(
                    || {
                        let d = self
                            .draws_seeded(seed)
                            .expect("OS entropy was available when the run started");
                        (self.scratch(), d, ScoredBlock::default())
                    },
                    |(scratch, draws, scored), lane| {
                        let histories: Vec<&[u32]> =
                            lane.iter().map(|(_, h)| h.as_slice()).collect();
                        self.score_block(&histories, scored);
                        lane.iter()
                            .enumerate()
                            .map(|(i, (id, _))| {
                                self.recommend_scored(scored, i, user_key(id), draws, scratch)
                            })
                            .collect::<Result<Vec<_>>>()
                    },
                )
                .collect::<Result<_>>()?;
            out.extend(picks.into_iter().flatten());
            progress(block.len() as u64);
        }
        Ok(out)
    }
}

/// How many of `picks` are an item already in the user's history (`users[i].1`): the price of a
/// policy that does not leave the history out (with `history-top` it is 0).
pub fn picks_in_history(users: &[(String, Vec<u32>)], picks: &[Option<u32>]) -> usize {
    users
        .iter()
        .zip(picks)
        .filter(|((_, h), p)| p.is_some_and(|j| h.contains(&j)))
        .count()
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
    model::io::save(dir, &m, &params, data.name(), &data.item_ids)?;
    let cfg = crate::scoring::SensitivityConfig::default();
    // Exact (leaky) statistics: the tests that read this release compare its arrays with the
    // data's exact percentiles and counts.
    let stats = release::Statistics::ExactLeaky;
    calibrate(&m, &params, &data, 2_000, &cfg, &stats, &|_| {})?.write(dir)?;
    Ok(data)
}
