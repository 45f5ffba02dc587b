//! The model's hyperparameters as options (`recsel fit` and `select` take them; a pipeline's
//! `[select]` table has the same keys). A named data set of the paper defaults to the paper's
//! settings for it (its descriptor); other data to exact, λ = 200, density 0.01.

use serde::{Deserialize, Serialize};

use super::{Method, ModelParams, Precision};
use crate::data::Descriptor;
use crate::error::Result;
use crate::options::option_table;

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
        /// Exact discrete Gaussian noise on the integer Gram matrix (Canonne–Kamath–Steinke
        /// sampler, OS-seeded ChaCha20) instead of floating-point Gaussian noise. Use it for a
        /// release.
        #[option(group = "Training privacy")]
        pub dp_secure: bool = false,
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
            return Ok(None);
        };
        super::dp::GramMechanism::new(
            epsilon,
            self.dp_delta(),
            self.dp_cap(),
            self.dp_secure(),
            super::dp::NoiseSource::Os,
        )
        .and_then(|m| m.with_shift(self.dp_shift()))
        .and_then(|m| Ok(m.with_bound(super::dp::ContributionBound::parse(&self.dp_bound())?)))
        .map(Some)
    }
}
