//! High-probability utility bounds of RNM, GEM and mGEM (seed 001 §IV-D and appendix J), and the
//! two comparisons of appendix J as flags. See `docs/bounds.md`.
//!
//! With `L = ln(k/β)`, each bound `b` satisfies `P[q_selected ≥ b] ≥ 1 − β` for every input:
//!
//! * **RNM** (exponential noise of mean `2Δ/ε`, `Δ = max_a Δ_a`): a candidate `a` can only win if its
//!   noise exceeds `q* − q_a`, which happens with probability `exp(−ε(q* − q_a)/(2Δ))`; a union bound
//!   over the k candidates gives `q_selected ≥ q* − 2ΔL/ε` (the standard exponential-mechanism bound,
//!   seed 001 §IV-D, first display).
//! * **GEM family**: RNM on the transformed scores `q'` (sensitivity 1, `max q' = 0`) gives
//!   `q'_selected ≥ −2L/ε`; substituting eqn (6) of seed 001 gives, for every `j`,
//!   `q_sel ≥ q_j − Δ_sel(2L/ε − t) − Δ_j(2L/ε + t)` (seed 001 §IV-D, second display).
//!   - GEM, `t = 2L/ε`: `q_sel ≥ max_j {q_j − 4LΔ_j/ε}` (seed 001 §IV-D, third display).
//!   - mGEM, `t = −2L/ε`: `q_sel + 4LΔ_sel/ε ≥ q*`, so the selected candidate is in
//!     `S = {a : q_a + 4LΔ_a/ε ≥ q*}` and `q_sel ≥ min_{a ∈ S} q_a` (our instantiation of the same
//!     display; the paper does not write it out).
//! * **Uniform random choice**: its worst case is the lowest score `q_-` (appendix J compares with it).
//!
//! Appendix J's two conditions use the GEM bound at `j = *` (the best candidate), `q* − 4LΔ*/ε`:
//! GEM's bound is worse than RNM's when `Δ* > Δ/2` (eqn 18) and worse than random choice when
//! `Δ* > ε(q* − q_-)/(4L)` (eqn 19). The full GEM bound (the maximum over `j`) can be higher than that
//! term, so the flags exist in two readings ([`GemBoundReading`]); the paper's, the `j = *` term, is
//! the default. With several best candidates, `Δ*` is the smallest of their sensitivities (the
//! largest `j = *` term).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::options::option_table;

option_table! {
    /// The options of `recsel bounds`: one selection problem, ε, β and the reading of GEM's
    /// bound that appendix J's comparisons use.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct BoundsOptions {
        /// Candidate scores, comma separated.
        #[option(value_name = "Q1,Q2,...", required = true, group = "Bounds")]
        pub scores: Vec<f64>,
        /// Candidate sensitivities (finite, > 0), comma separated, one per score.
        #[option(value_name = "D1,D2,...", required = true, group = "Bounds")]
        pub sens: Vec<f64>,
        /// Privacy parameter ε (finite, > 0).
        #[option(flag = "eps", value_name = "E", required = true, group = "Bounds")]
        pub epsilon: f64,
        /// Failure probability β in (0, 1): each bound holds with probability ≥ 1 − β.
        #[option(value_name = "B", group = "Bounds")]
        pub beta: f64 = 0.05,
        /// GEM bound the flags compare: `paper` (the best candidate's term, appendix J eqns
        /// 18-19) or `full` (max over all candidates, §IV-D).
        #[option(choices = &["paper", "full"], group = "Bounds")]
        pub flags: String = GemBoundReading::default().name().to_string(),
    }
}

/// Which GEM bound appendix J's comparisons use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GemBoundReading {
    /// The `j = *` term `q* − 4LΔ*/ε`, as eqns (18) and (19) of seed 001 appendix J do (default).
    #[default]
    Paper,
    /// The full bound of seed 001 §IV-D, `max_j {q_j − 4LΔ_j/ε}`.
    Full,
}

impl GemBoundReading {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            GemBoundReading::Paper => "paper",
            GemBoundReading::Full => "full",
        }
    }

    /// The reading called `name` (`paper` or `full`).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "paper" => Ok(GemBoundReading::Paper),
            "full" => Ok(GemBoundReading::Full),
            _ => Err(Error::UnknownName {
                kind: "GEM bound reading",
                name: name.to_string(),
                valid: "paper, full".into(),
            }),
        }
    }
}

/// The utility bounds of one selection problem at one (ε, β).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UtilityBounds {
    /// `L = ln(k/β)`.
    pub log_term: f64,
    /// The best score `q*`.
    pub best: f64,
    /// The lowest score `q_-`: the worst case of uniform random choice.
    pub random: f64,
    /// RNM: `q* − 2ΔL/ε`.
    pub rnm: f64,
    /// GEM, the full bound of §IV-D: `max_j {q_j − 4LΔ_j/ε}`.
    pub gem: f64,
    /// GEM, the `j = *` term appendix J uses: `q* − 4LΔ*/ε`.
    pub gem_at_best: f64,
    /// mGEM: `min {q_a : q_a + 4LΔ_a/ε ≥ q*}`.
    pub mgem: f64,
    /// Which GEM bound the two flags compare.
    pub reading: GemBoundReading,
    /// GEM's bound below RNM's (eqn 18 under the paper's reading: `Δ* > Δ/2`).
    pub gem_worse_than_rnm: bool,
    /// GEM's bound below the lowest score (eqn 19 under the paper's reading).
    pub gem_worse_than_random: bool,
}

impl UtilityBounds {
    /// The GEM bound of the chosen reading.
    pub fn gem_for_flags(&self) -> f64 {
        match self.reading {
            GemBoundReading::Paper => self.gem_at_best,
            GemBoundReading::Full => self.gem,
        }
    }

    /// Which of RNM, GEM (full bound) and mGEM has the highest bound; ties go to the earlier name.
    pub fn best_mechanism(&self) -> &'static str {
        let mut best = ("rnm", self.rnm);
        for (name, b) in [("gem", self.gem), ("mgem", self.mgem)] {
            if b > best.1 {
                best = (name, b);
            }
        }
        best.0
    }
}

/// The problem checked as the mechanisms check it ([`super::check_problem`]), then ε and β.
fn check_inputs(scores: &[f64], sens: &[f64], epsilon: f64, beta: f64) -> Result<()> {
    super::check_problem(scores, sens)?;
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(Error::InvalidParameter {
            name: "epsilon",
            requirement: "finite and > 0",
            value: epsilon,
        });
    }
    if !(beta > 0.0 && beta < 1.0) {
        return Err(Error::InvalidParameter {
            name: "beta",
            requirement: "in (0, 1)",
            value: beta,
        });
    }
    Ok(())
}

/// The utility bounds of RNM, GEM and mGEM for scores `q`, sensitivities `Δ > 0`, privacy `ε` and
/// failure probability `β ∈ (0, 1)`, with appendix J's flags under `reading`. Errors name the first
/// bad value. O(k).
pub fn utility_bounds(
    scores: &[f64],
    sens: &[f64],
    epsilon: f64,
    beta: f64,
    reading: GemBoundReading,
) -> Result<UtilityBounds> {
    check_inputs(scores, sens, epsilon, beta)?;
    Ok(utility_bounds_unchecked(
        scores, sens, epsilon, beta, reading,
    ))
}

/// [`utility_bounds`] without validation, for callers that validated the problem already
/// (`cgem`'s bound chooser on a [`crate::mechanisms::Problem`]).
pub(crate) fn utility_bounds_unchecked(
    scores: &[f64],
    sens: &[f64],
    epsilon: f64,
    beta: f64,
    reading: GemBoundReading,
) -> UtilityBounds {
    let k = scores.len() as f64;
    let l = (k / beta).ln();
    let best = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let random = scores.iter().cloned().fold(f64::INFINITY, f64::min);
    let dmax = sens.iter().cloned().fold(0.0, f64::max);
    let c = 4.0 * l / epsilon;
    let rnm = best - 2.0 * dmax * l / epsilon;
    let gem = scores
        .iter()
        .zip(sens)
        .map(|(&q, &d)| q - c * d)
        .fold(f64::NEG_INFINITY, f64::max);
    let d_star = scores
        .iter()
        .zip(sens)
        .filter(|(&q, _)| q == best)
        .map(|(_, &d)| d)
        .fold(f64::INFINITY, f64::min);
    let gem_at_best = best - c * d_star;
    let mgem = scores
        .iter()
        .zip(sens)
        .filter(|(&q, &d)| q + c * d >= best)
        .map(|(&q, _)| q)
        .fold(f64::INFINITY, f64::min);
    let mut out = UtilityBounds {
        log_term: l,
        best,
        random,
        rnm,
        gem,
        gem_at_best,
        mgem,
        reading,
        gem_worse_than_rnm: false,
        gem_worse_than_random: false,
    };
    let g = out.gem_for_flags();
    out.gem_worse_than_rnm = g < rnm;
    out.gem_worse_than_random = g < random;
    out
}

/// `cgem`'s bound chooser: whether mGEM's bound at `ε_g` is at least GEM's full bound (the bit that
/// randomised response then releases).
pub fn mgem_bound_at_least_gem(scores: &[f64], sens: &[f64], epsilon: f64, beta: f64) -> bool {
    let b = utility_bounds_unchecked(scores, sens, epsilon, beta, GemBoundReading::Full);
    b.mgem >= b.gem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sensitivities_give_gem_equal_mgem() {
        let q = [3.0, 1.0, 0.0];
        let d = [0.5; 3];
        let b = utility_bounds(&q, &d, 1.0, 0.05, GemBoundReading::Paper).unwrap();
        // Both bounds are q* − 4LΔ/ε here, but mGEM's is the lowest score above it.
        assert_eq!(b.gem, b.gem_at_best);
        assert!(b.mgem >= b.gem);
        assert!(!b.gem_worse_than_rnm || b.gem < b.rnm);
    }

    #[test]
    fn rejects_bad_inputs() {
        assert!(utility_bounds(&[], &[], 1.0, 0.05, GemBoundReading::Paper).is_err());
        assert!(utility_bounds(&[1.0], &[0.0], 1.0, 0.05, GemBoundReading::Paper).is_err());
        assert!(utility_bounds(&[1.0], &[1.0], -1.0, 0.05, GemBoundReading::Paper).is_err());
        assert!(utility_bounds(&[1.0], &[1.0], 1.0, 1.0, GemBoundReading::Paper).is_err());
    }
}
