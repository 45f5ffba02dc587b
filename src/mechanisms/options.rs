//! The options of the mechanisms' own jobs, declared once: the random source of every job that
//! selects with noise ([`NoiseOptions`]: a seed, or the secure path; select, sample, audit and
//! the end-to-end audit take this one table whole, so the pair and its rule — the secure path
//! has no seed — are written once) and `recsel sample` ([`SampleOptions`]).

use serde::{Deserialize, Serialize};

use super::MechValues;
use crate::error::{Error, Result};
use crate::options::option_table;
use crate::rng::NoiseMode;

option_table! {
    /// Seeded streams (reproducible) or the secure path (docs/secure.md).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct NoiseOptions {
        /// Seed of the random streams (default: drawn from OS entropy and reported, so the run
        /// can be repeated; select first takes the seed of a run it resumes).
        #[option(group = "Randomness")]
        pub seed: u64,
        /// Release-grade randomness: every mechanism's secure path (exact discrete noise,
        /// OS-seeded ChaCha20, no seed; docs/secure.md); with `all`, mechanisms without one are
        /// left out. Use it for anything shown to users.
        #[option(group = "Randomness")]
        pub secure: bool = false,
    }
}

impl NoiseOptions {
    /// A seed is not given with `secure`: a secure run draws from the OS.
    pub fn check(&self) -> Result<()> {
        if self.seed.is_some() && self.secure() {
            return Err(Error::Invalid(
                "seed and secure exclude each other: a secure run takes no seed (it draws from \
                 the OS)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The noise mode these options choose.
    pub fn mode(&self) -> NoiseMode {
        NoiseMode::from_flag(self.secure())
    }

    /// The seed of the run's streams: the one given, else `otherwise()` (a stored or an
    /// entropy seed, which the caller reports). The secure path reads no seed: its runs record
    /// 0. A seed given with `secure` is the error of [`NoiseOptions::check`].
    pub fn seed_or(&self, otherwise: impl FnOnce() -> u64) -> Result<u64> {
        self.check()?;
        Ok(match (self.secure(), self.seed) {
            (true, _) => 0,
            (false, Some(s)) => s,
            (false, None) => otherwise(),
        })
    }
}

option_table! {
    /// The options of `recsel sample`: one mechanism run N times on one selection problem.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct SampleOptions {
        /// Mechanism name (see `recsel mechanisms`).
        #[option(flag = "mech", value_name = "MECH", required = true, group = "Sampling")]
        pub mechanism: String,
        /// Privacy parameter ε (finite, > 0).
        #[option(flag = "eps", value_name = "E", required = true, group = "Sampling")]
        pub epsilon: f64,
        /// Candidate scores, comma separated.
        #[option(value_name = "Q1,Q2,...", required = true, group = "Sampling")]
        pub scores: Vec<f64>,
        /// Candidate sensitivities (finite, > 0), comma separated, one per score.
        #[option(value_name = "D1,D2,...", required = true, group = "Sampling")]
        pub sens: Vec<f64>,
        /// Number of selections.
        #[option(value_name = "N", required = true, group = "Sampling")]
        pub n: u64,
        /// The random source.
        #[flatten]
        pub noise: NoiseOptions,
        /// Parameters of the mechanism.
        #[flatten]
        pub params: MechValues,
    }
}
