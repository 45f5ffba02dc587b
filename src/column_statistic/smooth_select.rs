//! The smooth-sensitivity exponential mechanism of Liu & Talwar's Theorem 5.2 (fourth part),
//! derived from random stopping (docs/statistics.md, "Choosing the column with the largest
//! quantile"; docs/private-candidates.md, "Theorem 5.2's family").
//!
//! The candidates are the k columns of a table of n rows (neighbours replace one row), and the
//! score of column a is its q-quantile on `[lo, hi]` — a statistic whose global sensitivity is the
//! whole range but whose smooth sensitivity is usually small. One run Q draws a column a
//! uniformly and releases `(a, x_a + (S_β(a)/α)·Z)`: the smooth-sensitivity mechanism of
//! [`SmoothSensitivity`] on that column at ε₀ (without its clamp, so the scores stay continuous
//! and ties have probability 0). Each run is ε₀-DP (Cauchy noise) or (ε₀, δ₀)-DP (Laplace noise)
//! for every a, hence so is the pair; random stopping then releases the best run with the
//! guarantee of [`crate::mechanisms::private_candidates`]: 3ε₀ for the geometric rule, (2+η)ε₀ for
//! D_{η,γ}, plus the δ of (ε₀, δ₀)-DP runs.
//!
//! The exponential mechanism cannot do this directly: its scores would need a global sensitivity,
//! which for a quantile is the range. The paper's version also shifts each score by a multiple of
//! its smooth sensitivity (as GEM shifts by Δ_a), so that the utility depends on the winner's
//! sensitivity; the shift is data-dependent and changes the admissibility constants (the paper's
//! are lost in the seed's text), so recsel releases the unshifted scores.

use super::smooth::{smooth_sensitivity, SmoothNoise, SmoothSensitivity};
use super::{check_range, rank};
use crate::error::{Error, Result};
use crate::mechanisms::private_candidates::{
    Outcome, PrivateSelection, SelectionParams, Statement, Stopping,
};
use crate::numerics::distributions::{cauchy1, laplace1};
use crate::rng::Rng;

/// The smooth-sensitivity exponential mechanism over the columns of a table, with validated
/// parameters.
#[derive(Debug, Clone)]
pub struct SmoothSelection {
    selection: PrivateSelection,
    smooth: SmoothSensitivity,
    q: f64,
    lo: f64,
    hi: f64,
}

impl SmoothSelection {
    /// A selection with total ε `epsilon` under `stopping`: each run spends the ε₀ of
    /// [`Stopping::eps0_for_total`] on a smooth-sensitivity release with `noise` (Laplace noise
    /// makes each run (ε₀, δ)-DP and adds the δ of the runs to the guarantee). `q` in (0, 1]
    /// (0.5: the median), `lo < hi` finite.
    pub fn new(
        epsilon: f64,
        stopping: Stopping,
        noise: SmoothNoise,
        q: f64,
        lo: f64,
        hi: f64,
    ) -> Result<Self> {
        check_range(lo, hi)?;
        if !(q > 0.0 && q <= 1.0) {
            return Err(Error::InvalidParameter {
                name: "q",
                requirement: "in (0, 1]",
                value: q,
            });
        }
        let eps0 = stopping.eps0_for_total(crate::mechanisms::check_epsilon(epsilon)?);
        let smooth = SmoothSensitivity::new(eps0, noise, lo, hi)?;
        let delta0 = match noise {
            SmoothNoise::Laplace { delta } => delta,
            _ => 0.0,
        };
        let selection = SelectionParams::new(stopping, eps0)
            .with_delta0(delta0)
            .check()?;
        Ok(SmoothSelection {
            selection,
            smooth,
            q,
            lo,
            hi,
        })
    }

    /// The guarantee of one release (the selection's strongest statement).
    pub fn guarantee(&self) -> Statement {
        self.selection.guarantee()
    }

    /// The selection from private candidates it runs (ε₀, stopping law, statements).
    pub fn selection(&self) -> &PrivateSelection {
        &self.selection
    }

    /// The smooth-sensitivity mechanism of one run (ε₀, α, β, noise).
    pub fn run_mechanism(&self) -> &SmoothSensitivity {
        &self.smooth
    }

    /// For each column (at least one row each): its q-quantile on `[lo, hi]` and the scale
    /// `S_β/α` of its noise — what one run adds noise to.
    pub fn centers_and_scales(&self, columns: &[&[f64]]) -> Result<Vec<(f64, f64)>> {
        if columns.is_empty() || columns.iter().any(|c| c.is_empty()) {
            return Err(Error::Invalid(
                "the smooth-sensitivity selection needs at least one column, each with at least \
                 one row"
                    .into(),
            ));
        }
        Ok(columns
            .iter()
            .map(|c| {
                let mut v: Vec<f64> = c.iter().map(|x| x.clamp(self.lo, self.hi)).collect();
                v.sort_by(f64::total_cmp);
                let m = rank(self.q, v.len());
                let s = smooth_sensitivity(&v, m, self.lo, self.hi, self.smooth.beta());
                (v[m - 1], s / self.smooth.alpha())
            })
            .collect())
    }

    /// One release on `columns`: the column of the best run, its noisy score and the number of
    /// runs.
    pub fn run(&self, columns: &[&[f64]], rng: &mut Rng) -> Result<Outcome<usize>> {
        let cs = self.centers_and_scales(columns)?;
        Ok(self.run_at(&cs, rng))
    }

    /// [`SmoothSelection::run`] from precomputed [`SmoothSelection::centers_and_scales`] (many
    /// releases on the same table).
    pub fn run_at(&self, centers_and_scales: &[(f64, f64)], rng: &mut Rng) -> Outcome<usize> {
        use rand::Rng as _;
        let k = centers_and_scales.len();
        let noise = self.smooth.noise();
        self.selection.run(
            |r| {
                let a = r.random_range(0..k);
                let (c, s) = centers_and_scales[a];
                let z = match noise {
                    SmoothNoise::Laplace { .. } => laplace1(r),
                    _ => cauchy1(r),
                };
                (a, c + s * z)
            },
            rng,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_spend_the_share_of_the_stopping_rule() {
        let s = SmoothSelection::new(
            1.5,
            Stopping::Geometric { gamma: 0.1 },
            SmoothNoise::Cauchy,
            0.5,
            0.0,
            1.0,
        )
        .unwrap();
        assert_eq!(s.selection().params().eps0, 0.5);
        assert_eq!(s.guarantee().epsilon, 1.5);
        assert_eq!(s.guarantee().delta, 0.0);
        let l = SmoothSelection::new(
            1.5,
            Stopping::Geometric { gamma: 0.1 },
            SmoothNoise::Laplace { delta: 1e-6 },
            0.5,
            0.0,
            1.0,
        )
        .unwrap();
        assert!(l.guarantee().delta > 0.0);
        let empty: &[f64] = &[];
        assert!(s.centers_and_scales(&[empty]).is_err());
        let (a, b): (&[f64], &[f64]) = (&[0.1, 0.2, 0.9], &[2.0]);
        let cs = s.centers_and_scales(&[a, b]).unwrap();
        assert_eq!(cs[0].0, 0.2);
        assert_eq!(cs[1].0, 1.0);
    }
}
