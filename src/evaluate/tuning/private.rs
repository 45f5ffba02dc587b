//! Private tuning (docs/private-candidates.md, "Private tuning"): the serving configuration per ε
//! chosen with the calibration users protected, by selection from private candidates (Liu &
//! Talwar 2019, §3 and §5.1).
//!
//! Each candidate configuration c of the tuner's grid has an exact calibration score, the sum
//! over the n calibration users of the configuration's exact hit@1 probability
//! `S_c = Σ_u hit_u(c)`. Each term lies in [0, 1], so replacing one calibration user (all of their
//! history and held-out items) moves every `S_c` by at most 1. One run of Q draws a configuration
//! uniformly at random (independently of the data) and releases it with `S_c + Lap(1/ε₀)`: the
//! Laplace mechanism at sensitivity 1, so each run is ε₀-DP for that unit (and for one user
//! added or removed, who changes each sum by at most 1 as well). The number of users n is not
//! released: the keyed split makes it depend on the data (one user added or removed changes it),
//! so the released score is the noisy sum, never the sum over n. Random stopping compares the
//! noisy sums; the threshold rule compares the noisy mean with its threshold, dividing by the
//! exact n inside the selection: its stated guarantee holds for the replacement unit, under which
//! n is fixed (a replaced user keeps their id, hence their part), not for one user added or
//! removed — the default rule is random stopping.
//!
//! Q is then handed to one of the library's selections, which also states the guarantee:
//!
//! * random stopping ([`PrivateSelection`], Geometric(γ) runs, the best one released;
//!   Theorem 3.2: 3ε₀ whatever γ);
//! * the selection without a known threshold ([`UnknownThreshold`], Theorem 4.7: a threshold
//!   found by the sparse vector's search on m runs of Q, then the first run at or above it, with
//!   stopping probability γ after each miss; (ε_search + 2ε₀, δ_search)). It may release ⊥; the
//!   tuner then serves the most popular item (0-DP), a choice that does not depend on the data.
//!
//! One selection is made per tuned ε, each on the same calibration users, so the tuning's total
//! guarantee for them is the basic composition of the selections' statements
//! ([`PrivateTuner::total`]).
//!
//! Only the choice is released, with its own noisy score (the theorems cover the released run's
//! pair of candidate and score: seed 004, §3) and, for the threshold rule, the threshold the
//! sparse vector found. The number of runs is not: given K = k, the best of k runs costs up to
//! kε₀, and the threshold rule's index of the first run above the threshold leaks the same way.
//!
//! Under `secure` (random stopping only) the selection runs on the secure path
//! (docs/secure.md): the budget K from the exact Geometric sampler of an OS-seeded generator, and
//! each run's noise exact discrete Laplace on the 2^−20 grid of the score,
//! `Q_c = ⌊S_c·2^20⌋ + Z`, `P(Z = z) ∝ exp(−|z|·ε₀′/2^20)` with ε₀′ ≤ ε₀ the ε₀ rounded down
//! onto the 2^−32 grid. Two sums within 1 of each other have grid values within 2^20 units
//! (floors of reals within an integer of each other), so each run is ε₀′-DP and the selection's
//! statement with ε₀ holds.

use crate::error::{Error, Result};
use crate::mechanisms::private_candidates::sparse_vector::{SvtParams, UnknownThreshold};
use crate::mechanisms::private_candidates::{
    PrivateSelection, SelectionParams, Statement, Stopping,
};
use crate::privacy::{Population, PopulationPrivacy};
use crate::rng::{Rng, SecureRng};
use crate::scoring::{CandidatePolicy, Prior};

use crate::numerics::distributions::laplace1;
use crate::recommend::tuned::{PrivateRow, PrivateRule, PrivateTuneParams, TunedRow};

enum Selector {
    Stopping(PrivateSelection),
    Threshold {
        selection: UnknownThreshold,
        grid: Vec<f64>,
    },
}

/// The unit of a choice made on the calibration users (the private tuner's, the DP fit's shift
/// choice's): one calibration user replaced.
pub const CALIBRATION_UNIT: &str = "one calibration user replaced (their whole history and \
                                     held-out items); the number of calibration users is not \
                                     published";

/// The validated private tuner: one selection per tuned ε.
pub struct PrivateTuner {
    params: PrivateTuneParams,
    selector: Selector,
}

impl std::fmt::Debug for PrivateTuner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateTuner")
            .field("params", &self.params)
            .finish()
    }
}

/// What one private selection released: the choice, its noisy score and the search's threshold.
/// The number of runs stays inside [`PrivateTuner::select`] (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateChoice {
    /// The configuration chosen (its index in the candidate list), `None` for ⊥.
    pub index: Option<usize>,
    /// Its noisy calibration hit@1, the noisy sum over the number of users (the selection's
    /// own comparison; NaN for ⊥). A private tuning releases [`PrivateChoice::noisy_sum`], never
    /// this mean: the number of users is an exact count.
    pub noisy_hit: f64,
    /// Its noisy calibration score as the selection drew it: the sum of hit@1 over the users
    /// plus the selection's noise (the released score; NaN for ⊥).
    pub noisy_sum: f64,
    /// The threshold the search found (threshold rule).
    pub threshold: Option<f64>,
}

/// The generator of a private tuning's noise: seeded streams, or the secure path's OS-seeded
/// generator.
pub enum TuneRng {
    /// Seeded (or entropy-seeded) ChaCha8 streams and floating-point Laplace noise.
    Fast(Rng),
    /// An OS-seeded ChaCha20 generator and exact noise (module docs).
    Secure(SecureRng),
}

impl std::fmt::Debug for TuneRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TuneRng::Fast(_) => "TuneRng::Fast",
            TuneRng::Secure(_) => "TuneRng::Secure",
        })
    }
}

impl PrivateTuneParams {
    /// Validates every parameter once; errors name the bad value.
    pub fn check(&self) -> Result<PrivateTuner> {
        if self.secure && self.rule != PrivateRule::RandomStopping {
            return Err(Error::Invalid(format!(
                "the secure path of private tuning runs random stopping only, not '{}'",
                self.rule.name()
            )));
        }
        if self.secure && self.seed.is_some() {
            return Err(Error::Invalid(
                "the secure path of private tuning takes no seed (its noise comes from the \
                 operating system)"
                    .into(),
            ));
        }
        let stopping = Stopping::Geometric { gamma: self.gamma };
        let selector = match self.rule {
            PrivateRule::RandomStopping => {
                Selector::Stopping(SelectionParams::new(stopping, self.eps0).check()?)
            }
            PrivateRule::Threshold => {
                let step = self.threshold_step;
                if !(step.is_finite() && step > 0.0 && step <= 0.5) {
                    return Err(Error::InvalidParameter {
                        name: "threshold_step",
                        requirement: "in (0, 0.5]",
                        value: step,
                    });
                }
                let grid = threshold_grid(step);
                let search = SvtParams::estimated(
                    self.eps0,
                    self.percentile,
                    self.search_epsilon,
                    grid.len() as u64,
                    self.samples,
                    self.slack,
                )
                .with_smoothing(self.smoothing)
                .check()?;
                Selector::Threshold {
                    selection: UnknownThreshold::new(search, self.gamma, None)?,
                    grid,
                }
            }
        };
        Ok(PrivateTuner {
            params: self.clone(),
            selector,
        })
    }
}

/// The threshold rule's grid of calibration hit@1 levels: 1, 1/2, 1/4, … down to the last level at
/// or above `lowest`. Halving keeps the number of levels above any score L at log2(1/L): the
/// sparse vector's search answers "below" at each of them before it can reach a level some
/// configuration attains, and each such query is a chance of a false "above" (Theorem 4.6;
/// docs/private-candidates.md, "Private tuning"). A linear grid from 1 in steps of 0.01 puts 90
/// levels above a hit@1 of 0.1, and the search stopped at one of them in every selection measured.
pub fn threshold_grid(lowest: f64) -> Vec<f64> {
    let mut grid = vec![1.0];
    while grid[grid.len() - 1] / 2.0 >= lowest {
        grid.push(grid[grid.len() - 1] / 2.0);
    }
    grid
}

impl PrivateTuner {
    /// The validated parameters.
    pub fn params(&self) -> &PrivateTuneParams {
        &self.params
    }

    /// The guarantee of one selection (one tuned ε), as the primitive states it (on the secure
    /// path, for the stopping law as its exact sampler represents it).
    pub fn statement(&self) -> Statement {
        match &self.selector {
            Selector::Stopping(s) if self.params.secure => {
                s.secure().map_or_else(|_| s.guarantee(), |x| x.guarantee())
            }
            Selector::Stopping(s) => s.guarantee(),
            Selector::Threshold { selection, .. } => selection.guarantee(),
        }
    }

    /// The generator of this tuner's noise: the secure path's OS-seeded generator, or streams
    /// from the seed (from the operating system's entropy without one).
    pub fn rng(&self) -> Result<TuneRng> {
        if self.params.secure {
            return Ok(TuneRng::Secure(SecureRng::from_os()?));
        }
        Ok(TuneRng::Fast(
            self.params
                .seed
                .map_or_else(crate::rng::Streams::from_entropy, crate::rng::Streams::new)
                .stream(crate::rng::name_id("private-tuning"), 0, 0, 0),
        ))
    }

    /// The guarantee of `selections` selections on the same users: basic composition of
    /// [`PrivateTuner::statement`] (ε and δ add).
    pub fn total(&self, selections: usize) -> (f64, f64) {
        let s = self.statement();
        let n = selections as f64;
        (n * s.epsilon, (n * s.delta).min(1.0))
    }

    /// The calibration users' entry of the tuning's privacy report, for `selections` tuned ε.
    pub fn privacy(&self, selections: usize) -> PopulationPrivacy {
        let (epsilon, delta) = self.total(selections);
        let s = self.statement();
        let rule = match self.params.rule {
            PrivateRule::RandomStopping => format!(
                "random stopping over the configurations, Geometric(gamma = {}) runs",
                self.params.gamma
            ),
            PrivateRule::Threshold => format!(
                "threshold search (eps {}, percentile {}, {} runs, slack {}, smoothing {}) then \
                 the first configuration above it, gamma = {}",
                self.params.search_epsilon,
                self.params.percentile,
                self.params.samples,
                self.params.slack,
                self.params.smoothing,
                self.params.gamma
            ),
        };
        PopulationPrivacy {
            population: Population::Calibration,
            unit: CALIBRATION_UNIT.into(),
            epsilon: Some(epsilon),
            delta,
            mechanism: format!(
                "private tuning: each configuration's calibration hit@1 sum + Laplace(1/eps0), \
                 eps0 = {}; {rule}; {selections} selection(s), one per tuned eps, composed; \
                 {}",
                self.params.eps0,
                if self.params.secure {
                    "secure path: exact discrete Laplace on a 2^-20 grid, OS-seeded generator"
                } else {
                    "floating-point Laplace noise (fast path)"
                }
            ),
            note: format!(
                "per selection {} by {}; the release is the choice and its noisy score (no \
                 run count); covers what `recsel tune` reads, given the release. The release's \
                 own parts are reported separately: with private statistics its clip ranges \
                 come from the model alone and its counts from the training users; with exact \
                 statistics the clip ranges are these users' exact percentiles (not DP)",
                crate::privacy::report::guarantee(Some(s.epsilon), s.delta),
                s.source
            ),
        }
    }

    /// One selection among configurations whose exact calibration scores (sums over `users`
    /// calibration users of hit@1 probabilities, each in [0, 1]) are `sums`.
    pub fn select(&self, sums: &[f64], users: usize, rng: &mut Rng) -> Result<PrivateChoice> {
        use rand::Rng as _;
        if sums.is_empty() || users == 0 {
            return Err(Error::Invalid(format!(
                "private tuning needs candidates and calibration users, got {} and {users}",
                sums.len()
            )));
        }
        let (k, n, b) = (sums.len(), users as f64, 1.0 / self.params.eps0);
        // Random stopping keeps the best noisy sum (the same choice as the best mean); the
        // threshold rule compares the mean with its threshold.
        let q_sum = |r: &mut Rng| {
            let c = r.random_range(0..k);
            (c, sums[c] + b * laplace1(r))
        };
        Ok(match &self.selector {
            Selector::Stopping(s) => {
                let out = s.run(q_sum, rng);
                let (index, noisy_sum) = out.best.map_or((None, f64::NAN), |(c, v)| (Some(c), v));
                PrivateChoice {
                    index,
                    noisy_hit: noisy_sum / n,
                    noisy_sum,
                    threshold: None,
                }
            }
            Selector::Threshold { selection, grid } => {
                let q = |r: &mut Rng| {
                    let (c, v) = q_sum(r);
                    (c, v / n)
                };
                let out = selection.run(q, grid, rng)?;
                let (index, noisy_hit) = out
                    .outcome
                    .best
                    .map_or((None, f64::NAN), |(c, v)| (Some(c), v));
                PrivateChoice {
                    index,
                    noisy_hit,
                    noisy_sum: noisy_hit * n,
                    threshold: out.search.threshold,
                }
            }
        })
    }

    /// [`PrivateTuner::select`] on the secure path (module docs): random stopping only.
    pub fn select_secure(
        &self,
        sums: &[f64],
        users: usize,
        rng: &mut SecureRng,
    ) -> Result<PrivateChoice> {
        use crate::numerics::exact::discrete_laplace;
        let Selector::Stopping(s) = &self.selector else {
            return Err(Error::Invalid(
                "the secure path of private tuning runs random stopping only".into(),
            ));
        };
        if sums.is_empty() || users == 0 {
            return Err(Error::Invalid(format!(
                "private tuning needs candidates and calibration users, got {} and {users}",
                sums.len()
            )));
        }
        const UNIT_BITS: i32 = 20;
        let unit = 2f64.powi(UNIT_BITS);
        // Q_c = ⌊S_c·2^20⌋: exact (a power-of-two scaling of a float), S_c ≤ users < 2^40.
        let q: Vec<i128> = sums.iter().map(|&x| (x * unit).floor() as i128).collect();
        // Rate ε₀′/2^20 per unit as s/t: s = ε₀′·2^32, t = 2^20·2^32.
        let eps = crate::mechanisms::secure::SecureEpsilon::new(self.params.eps0)?;
        let (s_num, t) = (u128::from(eps.num), 1u128 << (UNIT_BITS + 32));
        let k = sums.len() as u64;
        let out = s.run_secure(
            |r| {
                let c = r.below(k) as usize;
                (c, (q[c] + discrete_laplace(r, s_num, t)) as f64)
            },
            rng,
        )?;
        let n = users as f64;
        let (index, noisy_sum) = out
            .best
            .map_or((None, f64::NAN), |(c, v)| (Some(c), v / unit));
        Ok(PrivateChoice {
            index,
            noisy_hit: noisy_sum / n,
            noisy_sum,
            threshold: None,
        })
    }

    /// [`PrivateTuner::select`] or [`PrivateTuner::select_secure`], as `rng` is.
    pub fn select_with(
        &self,
        sums: &[f64],
        users: usize,
        rng: &mut TuneRng,
    ) -> Result<PrivateChoice> {
        match rng {
            TuneRng::Fast(r) => self.select(sums, users, r),
            TuneRng::Secure(r) => self.select_secure(sums, users, r),
        }
    }
}

/// `sum` (of sensitivity 1) plus Laplace noise of scale 1/`epsilon`: floating-point Laplace on
/// the fast path; on the secure path the exact discrete Laplace on the 2^-20 grid of
/// [`PrivateTuner::select_secure`] (the sum rounded down to the grid first, which keeps its
/// sensitivity within one grid unit per unit of score), at ε′ ≤ ε on the 2^-32 grid.
pub fn noisy_sum(sum: f64, epsilon: f64, rng: &mut TuneRng) -> Result<f64> {
    match rng {
        TuneRng::Fast(r) => Ok(sum + laplace1(r) / epsilon),
        TuneRng::Secure(r) => {
            use crate::numerics::exact::discrete_laplace;
            const UNIT_BITS: i32 = 20;
            let unit = 2f64.powi(UNIT_BITS);
            let q = (sum * unit).floor() as i128;
            let eps = crate::mechanisms::secure::SecureEpsilon::new(epsilon)?;
            let (s_num, t) = (u128::from(eps.num), 1u128 << (UNIT_BITS + 32));
            Ok((q + discrete_laplace(r, s_num, t)) as f64 / unit)
        }
    }
}

/// The tuned row at `epsilon` chosen privately among `candidates` (pool, prior, exact
/// calibration sum over `users` users; the first is the most popular item, served 0-DP, and
/// what ⊥ serves). Only released values enter the row: the choice and its noisy calibration
/// score as a sum (the noise's standard deviation √2/ε₀ is public); never the number of runs,
/// and never the number of users, an exact count of a group the keyed split makes depend on the
/// data (the row's hit@1 and its standard error are the held-out estimate's, which
/// `estimate::private_margin` fills in from released values only).
pub(super) fn row(
    tuner: &PrivateTuner,
    epsilon: f64,
    candidates: &[(CandidatePolicy, Prior, f64)],
    users: usize,
    margin: f64,
    rng: &mut TuneRng,
) -> Result<TunedRow> {
    let sums: Vec<f64> = candidates.iter().map(|c| c.2).collect();
    let choice = tuner.select_with(&sums, users, rng)?;
    let index = choice.index.unwrap_or(0);
    let (pool, prior, _) = candidates[index].clone();
    let krr = index > 0;
    // Lap(b) has standard deviation √2·b; b = 1/ε₀ on the sum.
    let noise_sd = std::f64::consts::SQRT_2 / tuner.params.eps0;
    let reason = match choice.index {
        Some(_) => format!(
            "chosen by {} among {} configurations; released noisy calibration score {:.2} (the \
             sum of hit@1 over the selection users, noise s.d. {noise_sd:.2})",
            tuner.params.rule.name(),
            candidates.len(),
            choice.noisy_sum
        ),
        None => format!(
            "the {} selection released no configuration (⊥): the most popular item, which does \
             not depend on the calibration users",
            tuner.params.rule.name()
        ),
    };
    Ok(TunedRow {
        epsilon,
        mechanism: if krr { "krr" } else { "random" }.into(),
        candidates: pool.clone(),
        prior: prior.clone(),
        spends: if krr { epsilon } else { 0.0 },
        calibration_hit: 0.0,
        calibration_se: 0.0,
        fixed_hit: None,
        free_option: None,
        free_hit: None,
        best_pool: pool,
        best_prior: prior,
        best_no_prior_hit: None,
        best_pool_hit: None,
        best_pool_gain: None,
        best_pool_gain_se: None,
        margin,
        reason,
        private: Some(PrivateRow {
            noisy_hit: None,
            noisy_score: choice.index.map(|_| choice.noisy_sum),
            candidates: candidates.len(),
            threshold: choice.threshold,
            gain: None,
            estimate_epsilon: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recommend::tuned::{public_privacy, DEFAULT_EPS0, DEFAULT_SEARCH_EPSILON};

    #[test]
    fn guarantees_come_from_the_primitive_and_compose() {
        let t = PrivateTuneParams::default().check().unwrap();
        assert_eq!(t.statement().epsilon, 3.0 * DEFAULT_EPS0);
        assert_eq!(t.total(2), (0.6000000000000001, 0.0));
        let p = t.privacy(2);
        assert!(p.is_private() && p.population == Population::Calibration);
        let th = PrivateTuneParams {
            rule: PrivateRule::Threshold,
            ..Default::default()
        }
        .check()
        .unwrap();
        let s = th.statement();
        assert!(s.epsilon > DEFAULT_SEARCH_EPSILON + 2.0 * DEFAULT_EPS0 - 1e-12 && s.delta > 0.0);
        // The defaults keep δ small (7 grid levels × the coupling failure 4.3e-10).
        assert!(s.delta < 1e-8, "delta {}", s.delta);
        assert_eq!(
            threshold_grid(0.01),
            vec![1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625]
        );
        assert_eq!(threshold_grid(0.5), vec![1.0, 0.5]);
        assert!(!public_privacy().is_private());
        for bad in [
            PrivateTuneParams {
                eps0: 0.0,
                ..Default::default()
            },
            PrivateTuneParams {
                gamma: 1.5,
                ..Default::default()
            },
            PrivateTuneParams {
                rule: PrivateRule::Threshold,
                threshold_step: 0.0,
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(PrivateRule::parse("best").is_err());
    }

    #[test]
    fn a_clear_winner_is_chosen() {
        let t = PrivateTuneParams {
            eps0: 1.0,
            ..Default::default()
        }
        .check()
        .unwrap();
        let mut rng = crate::rng::Streams::new(1).stream(0, 0, 0, 0);
        let sums = [100.0, 400.0, 150.0];
        let c = t.select(&sums, 1000, &mut rng).unwrap();
        assert_eq!(c.index, Some(1));
        assert!((c.noisy_hit - 0.4).abs() < 0.05);
    }
}
