//! The model's hyperparameters as options (`recsel fit` and `select` take them; a pipeline's
//! `[select]` table has the same keys). A named data set of the paper defaults to the paper's
//! settings for it (its descriptor); other data to exact, λ = 200, density 0.01.

use serde::{Deserialize, Serialize};

use super::{FitReport, Method, Model, ModelParams, Precision};
use crate::data::{Csr, Descriptor};
use crate::error::Result;
use crate::options::option_table;
use crate::privacy::PopulationPrivacy;

option_table! {
    /// The model options.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct ModelOptions {
        /// Model: exact (SANSA, sparse Cholesky), icf (SANSA, incomplete Cholesky), ease
        /// (dense), popular [default: the paper's for a named data set, else exact].
        #[option(
            value_name = "METHOD",
            choices = &["exact", "icf", "ease", "popular"],
            group = "Model"
        )]
        pub method: String,
        /// L2 regularisation λ [default: the paper's for a named data set (600 MovieLens 20M,
        /// 1200 Netflix, 20 Amazon-Book), else 200].
        #[option(value_name = "λ", group = "Model")]
        pub l2: f64,
        /// Target density of each SANSA weight factor, in (0, 1] [default: the paper's for a
        /// named data set (0.005 MovieLens 20M and Netflix, 5e-5 Amazon-Book), else 0.01].
        #[option(value_name = "D", group = "Model")]
        pub density: f64,
        /// Precision of SANSA's dense factorisation (`exact` on a nearly dense Gram matrix, such
        /// as MovieLens or Netflix): f32 (half the memory and time) or f64 (docs/sansa.md,
        /// "Precision").
        #[option(value_name = "P", choices = &["f32", "f64"], group = "Model")]
        pub precision: String = Precision::DEFAULT.name().to_string(),
    }
}

/// The model of data without the paper's settings (a data set of one's own, synthetic data):
/// method, λ and density, where the options do not say.
const GENERIC_METHOD: &str = "exact";
const GENERIC_L2: f64 = 200.0;
const GENERIC_DENSITY: f64 = 0.01;

impl ModelOptions {
    /// Validated model parameters: the options given, the rest from the data set's paper
    /// settings (when it has them) or the generic defaults; with a line that says which
    /// settings were used and where each default came from.
    pub fn params(&self, data: &Descriptor) -> Result<(ModelParams, String)> {
        let paper = data.paper_model;
        let method = self
            .method
            .clone()
            .unwrap_or_else(|| paper.map_or(GENERIC_METHOD, |p| p.method).to_string());
        let l2 = self.l2.unwrap_or(paper.map_or(GENERIC_L2, |p| p.l2));
        let density = self
            .density
            .unwrap_or(paper.map_or(GENERIC_DENSITY, |p| p.density));
        let origin = match paper {
            Some(p) if self.method.is_none() || self.l2.is_none() || self.density.is_none() => {
                format!("defaults not given are the paper's ({})", p.source)
            }
            Some(p) => format!(
                "all given; the paper used {} λ={} density={} ({})",
                p.method, p.l2, p.density, p.source
            ),
            None => {
                format!("defaults: {GENERIC_METHOD}, λ={GENERIC_L2}, density={GENERIC_DENSITY}")
            }
        };
        let line = format!(
            "model for {}: {method}, λ={l2}, density={density} ({origin})",
            data.name
        );
        let precision = Precision::parse(&self.precision())?;
        let params =
            ModelParams::new(Method::parse(&method)?, l2, density)?.with_precision(precision);
        Ok((params, line))
    }

    /// The options that give `params` again.
    pub fn recorded(params: &ModelParams) -> ModelOptions {
        ModelOptions {
            method: Some(params.method.name().to_string()),
            l2: Some(params.l2),
            density: Some(params.density),
            precision: Some(params.precision.name().to_string()),
        }
    }
}

option_table! {
    /// Differentially private training (docs/training-privacy.md): `recsel fit` releases the
    /// training users' Gram matrix with Gaussian noise and fits the model from it.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct TrainingPrivacyOptions {
        /// Fit with user-level (ε, δ)-DP for the training users, at this ε (default: no DP; the
        /// training data are then treated as public).
        #[option(value_name = "ε", group = "Training privacy")]
        pub dp_epsilon: f64,
        /// δ of the training guarantee: a fixed public constant, far below 1/(training users)
        /// for every data set recsel reads (Netflix: 1/480,189 ≈ 2e-6).
        #[option(value_name = "δ", group = "Training privacy")]
        pub dp_delta: f64 = 1e-8,
        /// The contribution bound of one training user, C interactions' worth: L2 sensitivity
        /// √(C(C+1)/2) on the Gram matrix (see dp-bound).
        #[option(value_name = "C", group = "Training privacy")]
        pub dp_cap: usize = 20,
        /// How a training user's contribution is bounded: weight (every interaction kept, a user
        /// with n > C of them weighted by √(C(C+1))/√(n(n+1))) or sample (C of their
        /// interactions kept, chosen by the user's items and the seed); same sensitivity, same
        /// noise (docs/training-privacy.md).
        #[option(value_name = "BOUND", choices = &["weight", "sample"], group = "Training privacy")]
        pub dp_bound: String = super::dp::ContributionBound::DEFAULT.name().to_string(),
        /// λ of a DP fit is at least K times the positive-definite floor σ(2√n + 2√ln 10⁹)
        /// (docs/training-privacy.md, "Positive definiteness"); K ≥ 1. The floor only makes
        /// the noisy matrix invertible, a larger λ also damps the noise.
        #[option(value_name = "K", group = "Training privacy")]
        pub dp_shift: f64 = 3.0,
        /// Fit every shift K of this grid (2 to 8 values ≥ 1, e.g. 1,2,3,5,10) from the one noisy
        /// Gram matrix (post-processing) and keep the one the exponential mechanism chooses by
        /// the calibration users' Recall@20 at dp-select-epsilon (docs/training-privacy.md, "A
        /// private choice of the shift"); instead of dp-shift. Needs calibration users.
        #[option(value_name = "K,K,...", group = "Training privacy")]
        pub dp_shift_grid: Vec<f64>,
        /// ε of the calibration users spent on choosing the shift of dp-shift-grid (the
        /// exponential mechanism on the sum of their Recall@20, sensitivity 1 per calibration
        /// user replaced).
        #[option(value_name = "ε", group = "Training privacy")]
        pub dp_select_epsilon: f64 = 0.1,
        /// Exact discrete Gaussian noise on the integer Gram matrix (Canonne–Kamath–Steinke
        /// sampler, OS-seeded ChaCha20) instead of floating-point Gaussian noise. Use it for a
        /// release.
        #[option(group = "Training privacy")]
        pub dp_secure: bool = false,
        /// Fit on K items chosen by a DP count of the training users' items instead of the whole
        /// catalogue (docs/training-privacy.md, "Large catalogues"): the noise floor of λ and the
        /// dense matrix shrink from n to K items; the other items score 0. Default: all items,
        /// refused when their dense matrix does not fit in memory.
        #[option(value_name = "K", group = "Training privacy")]
        pub dp_items: usize,
        /// Share of the training users' zCDP budget ρ spent on the item counts that choose
        /// --dp-items (the Gram matrix gets the rest; its noise grows by 1/√(1 − share)).
        #[option(value_name = "S", group = "Training privacy")]
        pub dp_items_share: f64 = super::dp_items::DEFAULT_SHARE,
    }
}

impl TrainingPrivacyOptions {
    /// The Gram mechanism these options ask for (`None`: no DP), its noise from the OS. The
    /// other options without `dp-epsilon` are an error (they would silently do nothing).
    pub fn mechanism(&self) -> Result<Option<super::dp::GramMechanism>> {
        let Some(epsilon) = self.dp_epsilon else {
            if self.dp_delta.is_some()
                || self.dp_cap.is_some()
                || self.dp_bound.is_some()
                || self.dp_shift.is_some()
                || self.dp_secure.is_some()
            {
                return Err(crate::error::Error::Invalid(
                    "dp-delta, dp-cap, dp-bound, dp-shift and dp-secure set up a DP fit: give dp-epsilon too"
                        .into(),
                ));
            }
            if self.dp_shift_grid.is_some() || self.dp_select_epsilon.is_some() {
                return Err(crate::error::Error::Invalid(
                    "dp-shift-grid and dp-select-epsilon choose a DP fit's shift: give \
                     dp-epsilon too"
                        .into(),
                ));
            }
            return Ok(None);
        };
        super::dp::GramMechanism::new(
            epsilon,
            self.dp_delta(),
            self.dp_cap(),
            self.dp_secure(),
            noise_source(),
        )
        .and_then(|m| self.shifted(m))
        .and_then(|m| Ok(m.with_bound(super::dp::ContributionBound::parse(&self.dp_bound())?)))
        .map(Some)
    }

    /// `mech` with the shift these options ask for: `dp-shift`, or the grid of `dp-shift-grid`
    /// (the two exclude each other; `dp-select-epsilon` needs the grid).
    fn shifted(&self, mech: super::dp::GramMechanism) -> Result<super::dp::GramMechanism> {
        match &self.dp_shift_grid {
            Some(_) if self.dp_shift.is_some() => Err(crate::error::Error::Invalid(
                "dp-shift and dp-shift-grid exclude each other: the grid's shift is chosen \
                 privately"
                    .into(),
            )),
            Some(grid) => {
                let e = self.dp_select_epsilon();
                if !(e.is_finite() && e > 0.0) {
                    return Err(crate::error::Error::InvalidParameter {
                        name: "dp-select-epsilon",
                        requirement: "finite and > 0",
                        value: e,
                    });
                }
                mech.with_shift_grid(grid)
            }
            None if self.dp_select_epsilon.is_some() => Err(crate::error::Error::Invalid(
                "dp-select-epsilon is the ε of choosing among dp-shift-grid: give dp-shift-grid \
                 too"
                .into(),
            )),
            None => mech.with_shift(self.dp_shift()),
        }
    }
}

/// What a release records of the private choice of its DP fit's shift (`model.json`'s
/// `shift_choice`): the grid (a public input), the chosen shift (the exponential mechanism's
/// output) and the calibration users' entry of the privacy report. Never the per-shift scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShiftChoice {
    /// The shifts fitted, in the order given.
    pub grid: Vec<f64>,
    /// The shift kept (a DP output).
    pub chosen: f64,
    /// The calibration users' entry (part [`crate::privacy::report::SHIFT_CHOICE`]).
    pub privacy: PopulationPrivacy,
}

impl TrainingPrivacyOptions {
    /// The item set a DP fit is restricted to: `Some((K, share of ρ))` with `--dp-items`, `None`
    /// for the whole catalogue. The item options without `dp-epsilon` or `--dp-items-share`
    /// without `--dp-items` are an error (they would silently do nothing).
    pub fn item_set(&self) -> Result<Option<(usize, f64)>> {
        if self.dp_epsilon.is_none() && (self.dp_items.is_some() || self.dp_items_share.is_some()) {
            return Err(crate::error::Error::Invalid(
                "dp-items and dp-items-share restrict a DP fit: give dp-epsilon too".into(),
            ));
        }
        match self.dp_items {
            Some(k) => Ok(Some((k, self.dp_items_share()))),
            None if self.dp_items_share.is_some() => Err(crate::error::Error::Invalid(
                "dp-items-share is the share of the item counts of --dp-items: give dp-items too"
                    .into(),
            )),
            None => Ok(None),
        }
    }
}

/// A model fitted as [`TrainingPrivacyOptions`] ask, with what `model.json` records of it.
#[derive(Debug)]
pub struct TrainedModel {
    /// The model.
    pub model: Model,
    /// Stages and their seconds.
    pub report: FitReport,
    /// The training users' entry of `model.json` and of the release's privacy report (`None`:
    /// no DP, the training data are treated as public).
    pub training_privacy: Option<PopulationPrivacy>,
    /// λ used: the requested one, or for a DP fit at least its positive-definite floor.
    pub l2_used: f64,
    /// A DP fit on an item set (`--dp-items`): the chosen items and every item's noisy count.
    pub selection: Option<super::dp_items::ItemSelection>,
    /// What the item universe is, for the privacy report (`None`: the caller's columns, as
    /// [`TrainingPrivacyOptions::fit`] takes them).
    pub item_universe: Option<PopulationPrivacy>,
    /// With `dp-shift-grid`: every fit of the grid (in the model's columns), from which a
    /// choice on calibration users keeps one (`evaluate::shift`); empty otherwise.
    pub shift_candidates: Vec<super::dp::ShiftFit>,
    /// The private choice of the shift, once made (`evaluate::shift::choose`).
    pub shift_choice: Option<ShiftChoice>,
}

/// The DP fit's noise: from the OS, unless the whole-release audit seeded it
/// ([`crate::rng::AUDIT_NOISE_SEED`]).
fn noise_source() -> crate::privacy::NoiseSource {
    match crate::rng::audit_noise_seed() {
        Some(s) => crate::privacy::NoiseSource::InsecureSeed(s),
        None => crate::privacy::NoiseSource::Os,
    }
}

/// Says in the training entry that its noise was seeded for the audit (every output of such a
/// fit then says it is not a release).
fn mark_audit_seed(p: &mut Option<PopulationPrivacy>) {
    if let (Some(p), Some(_)) = (p.as_mut(), crate::rng::audit_noise_seed()) {
        p.note.push_str(&format!(
            "; NOISE SEEDED BY {} (predictable: an audit, not a release)",
            crate::rng::AUDIT_NOISE_SEED
        ));
    }
}

/// The privacy report's part that names the release's item universe.
pub const ITEM_UNIVERSE: &str = "item universe";
/// The unit of a part that is a declared public input (the catalogue), not a DP output.
pub const PUBLIC_INPUT_UNIT: &str = "none (public input)";

/// The item universe entry of a release on a declared catalogue of `n` items: a public input,
/// nothing spent (how many items of the data fell outside it is not said: that is data).
pub fn universe_catalogue(n: usize) -> PopulationPrivacy {
    PopulationPrivacy {
        population: crate::privacy::Population::Training,
        unit: PUBLIC_INPUT_UNIT.into(),
        epsilon: Some(0.0),
        delta: 0.0,
        mechanism: format!(
            "public input: the declared catalogue of {n} items (--catalogue); items of the data \
             outside it dropped, its items without interactions kept"
        ),
        note: String::new(),
    }
}

/// The item universe entry of a release whose items are those of the data (no catalogue, no DP
/// fit): not private.
pub fn universe_data_derived() -> PopulationPrivacy {
    PopulationPrivacy::public(
        crate::privacy::Population::Training,
        "item universe derived from the data (every item some kept interaction mentions; a \
         LightGCN file's max id + 1): an item only one user has reveals that user",
    )
}

/// The item universe entry of a DP fit that released its universe by partition selection: its
/// cost is part of the model weights' entry (one zCDP budget).
pub fn universe_partition(
    p: &super::universe::PartitionSelection,
    kept: usize,
) -> PopulationPrivacy {
    PopulationPrivacy {
        population: crate::privacy::Population::Training,
        unit: "user (added or removed)".into(),
        epsilon: Some(0.0),
        delta: 0.0,
        mechanism: format!(
            "DP output, counted in the model weights' guarantee (one zCDP budget): {}",
            p.describe(kept)
        ),
        note: String::new(),
    }
}

impl TrainingPrivacyOptions {
    /// Fits the model of `params` on `train` as these options ask: without `dp-epsilon` the
    /// plain fit ([`super::fit`]), with it the DP fit
    /// ([`super::dp_items::fit_private_with_items`]: on every item or a DP item set; `cap_seed`
    /// choosing the interactions kept of a user above the cap). Every front end (`recsel fit`,
    /// Python's `Model.fit`) fits through here, so the model and its training entry are decided
    /// in one place.
    pub fn fit(
        &self,
        train: &Csr,
        params: &ModelParams,
        cap_seed: u64,
        progress: &dyn Fn(&str),
    ) -> Result<TrainedModel> {
        let item_set = self.item_set()?;
        match self.mechanism()? {
            None => {
                let (model, report) = super::fit(train, params, progress)?;
                Ok(TrainedModel {
                    model,
                    report,
                    training_privacy: None,
                    l2_used: params.l2,
                    selection: None,
                    item_universe: None,
                    shift_candidates: Vec::new(),
                    shift_choice: None,
                })
            }
            Some(mech) => {
                let (mut f, selection) = super::dp_items::fit_private_with_items(
                    train, params, &mech, item_set, cap_seed, progress,
                )?;
                let mut p = Some(f.privacy.clone());
                mark_audit_seed(&mut p);
                f.privacy = p.expect("set");
                Ok(TrainedModel {
                    model: f.model,
                    report: f.report,
                    training_privacy: Some(f.privacy),
                    l2_used: f.l2_used,
                    selection,
                    item_universe: None,
                    shift_candidates: f.by_shift,
                    shift_choice: None,
                })
            }
        }
    }
}

impl TrainingPrivacyOptions {
    /// Fits the model of `params` on the training users of `data` as [`TrainingPrivacyOptions::fit`]
    /// does, with the release's item universe decided here, once for every front end that
    /// loads a data set (docs/training-privacy.md, "The item universe"): `catalogue` when the
    /// data set is on a declared catalogue (its columns are public: kept as they are);
    /// otherwise a DP fit releases its universe by partition selection, and a non-DP fit keeps
    /// the data's items and says they are data-derived. Returns the model and, when a universe was released, its columns of `data`
    /// (ascending): the model's items are those, and the release's data is
    /// `data.keep_columns(universe)` ([`crate::data::Dataset::keep_columns`]).
    pub fn fit_dataset(
        &self,
        data: &crate::data::Dataset,
        params: &ModelParams,
        cap_seed: u64,
        catalogue: bool,
        progress: &dyn Fn(&str),
    ) -> Result<(TrainedModel, Option<Vec<u32>>)> {
        let item_set = self.item_set()?;
        let mech = self.mechanism()?;
        match (mech, catalogue) {
            (None, _) | (Some(_), true) => {
                let mut t = self.fit(&data.train, params, cap_seed, progress)?;
                t.item_universe = Some(if catalogue {
                    universe_catalogue(data.n_items())
                } else {
                    universe_data_derived()
                });
                Ok((t, None))
            }
            (Some(_), false) => {
                let delta = self.dp_delta();
                // The Gram and count stages convert at δ′; the threshold spends δ_T = δ − δ′.
                let total = super::dp::GramMechanism::new(
                    self.dp_epsilon.expect("a DP fit has dp-epsilon"),
                    delta * (1.0 - super::universe::DELTA_SHARE),
                    self.dp_cap(),
                    self.dp_secure(),
                    noise_source(),
                )?;
                let total = self
                    .shifted(total)?
                    .with_bound(super::dp::ContributionBound::parse(&self.dp_bound())?);
                let u = super::universe::fit_private_on_universe(
                    &data.train,
                    &data.item_ids,
                    params,
                    &total,
                    delta,
                    item_set.map(|(k, _)| k),
                    self.dp_items_share(),
                    cap_seed,
                    progress,
                )?;
                let kept = u.universe.items.len();
                let mut training_privacy = Some(u.fit.privacy);
                mark_audit_seed(&mut training_privacy);
                Ok((
                    TrainedModel {
                        model: u.fit.model,
                        report: u.fit.report,
                        training_privacy,
                        l2_used: u.fit.l2_used,
                        selection: u.selection,
                        item_universe: Some(universe_partition(&u.partition, kept)),
                        shift_candidates: u.fit.by_shift,
                        shift_choice: None,
                    },
                    Some(u.universe.items),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OptionTable;

    fn train() -> Csr {
        let mut pairs: Vec<(u32, u32)> = (0u32..60)
            .flat_map(|u| {
                (0u32..8)
                    .filter(move |j| (u + j) % 3 != 0)
                    .map(move |j| (u, j))
            })
            .collect();
        crate::data::csr_from_pairs(60, 8, &mut pairs)
    }

    #[test]
    fn fit_without_dp_is_the_plain_fit_and_with_it_records_the_guarantee() {
        let x = train();
        let params = ModelParams::new(Method::Ease, 5.0, 1.0).unwrap();
        let plain = TrainingPrivacyOptions::default()
            .fit(&x, &params, 42, &|_| {})
            .unwrap();
        let (want, _) = super::super::fit(&x, &params, &|_| {}).unwrap();
        let (Model::Ease(a), Model::Ease(b)) = (&plain.model, &want) else {
            panic!("an EASE model")
        };
        assert_eq!(a.b, b.b);
        assert!(plain.training_privacy.is_none());
        assert_eq!(plain.l2_used, 5.0);

        let mut dp = TrainingPrivacyOptions::default();
        assert!(dp.set("dp_epsilon", "2").unwrap());
        assert!(dp.set("dp_cap", "4").unwrap());
        let f = dp.fit(&x, &params, 42, &|_| {}).unwrap();
        let mech = dp.mechanism().unwrap().unwrap();
        let p = f.training_privacy.unwrap();
        assert_eq!(p, mech.privacy(f.l2_used));
        assert!((p.epsilon.unwrap() - 2.0).abs() < 1e-9 && p.delta == dp.dp_delta());
        assert_eq!(f.l2_used, mech.l2_used(5.0, 8));
        let Model::Ease(n) = &f.model else {
            panic!("an EASE model")
        };
        assert_ne!(n.b, b.b, "a DP fit adds noise");

        let mut bad = TrainingPrivacyOptions::default();
        assert!(bad.set("dp_cap", "4").unwrap());
        let e = bad.fit(&x, &params, 42, &|_| {}).unwrap_err().to_string();
        assert!(e.contains("give dp-epsilon too"), "{e}");
    }
}
