//! Random stopping (docs/mechanisms.md, "Random stopping") and its audit references.
//!
//! Repeat: draw a candidate a uniformly from all k (with replacement), record `q_a + noise_a`, and
//! stop after K draws; output the best recorded candidate (ties uniformly at random).
//!
//! | name | K | noise | guarantee |
//! |---|---|---|---|
//! | `rs` (RS_γ, Liu & Talwar 2019, seed 001 Algorithm 1) | Geometric(γ) on {1, 2, …} | Lap(3Δ_a/ε) | ε-DP |
//! | `rs-tnb` (Papernot & Steinke 2022) | truncated negative binomial `D_{η,γ}` | Lap((2+η)Δ_a/ε) | ε-DP |
//! | `rs-exp` | Geometric(γ) | Exp(mean 3Δ_a/ε) | ε-DP (seed 001 appendix B claims otherwise; its proof is wrong — docs/mechanisms.md) |
//! | `bot-exp` (audit reference) | fixed T | Exp(mean 3Δ_a/ε) | **not DP**: without random stopping the loss is `ln[(1+p)^T − p^T]` |
//! | `rs-exp-m1` (audit reference) | Geometric(γ) | Exp(mean Δ_a/ε) | claims ε-DP, is only 3ε-DP |
//!
//! Cost per selection: the seeded path draws the maximum of the K recorded values directly — one
//! uniform for its level, a root of `Σ_a S_a(V) = k·t` (a few passes over the k candidates), one
//! uniform for the released candidate, drawn in proportion to its noise density at V — whatever K is
//! (docs/mechanisms.md, "Sampling the maximum directly"). The draw-by-draw loop (K noise draws,
//! E(K) = 1/γ for `rs`) stays as [`RandomStopping::select_counting`], which also reports K.
//!
//! The three are instances of selection from private candidates ([`super::private_candidates`],
//! docs/private-candidates.md): one run draws a uniform candidate and records its noisy score, the
//! stopping law and the draw-by-draw loop are that module's, and the noise multiplier is its
//! factor ε/ε₀ (3 for the geometric law, Theorem 3.2; 2 + η for D_{η,γ}). For `rs-exp` the
//! loop and the law are the same but the guarantee is not the theorem's — a score with one-sided
//! noise is not ε₀-DP alone — it is the proof in docs/mechanisms.md.
//!
//! Secure path (`docs/secure.md`), for all three: K from an exact sampler (Bernoulli(γ) trials with
//! the dyadic γ; for `rs-tnb` exact rejection from geometric proposals, η rounded toward zero onto
//! the 2^−32 grid), uniform candidates as exact integers, and discrete Laplace (`rs`, `rs-tnb`) or
//! one-sided geometric (`rs-exp`) noise of rate ε'/(m·D_a) in grid units.

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::mechanisms::maxdraw::{self, Guide, NoiseShape, Solution};
use crate::mechanisms::private_candidates::{Law, PrivateSelection, SelectionParams, Stopping};
use crate::mechanisms::secure::{noise_scales, ExactNoise, SecurePrepared, SecureRandomStopping};
use crate::mechanisms::{
    check_epsilon, no_secure_path, Bound, Grid, Guarantee, Mechanism, ParamSpec, Prepared, Problem,
    SecureEpsilon,
};
use crate::numerics::distributions::{exp1, index_and_sign};
use crate::numerics::exact::{ExactStopping, FRACTION_BITS};
use crate::rng::Rng;
use crate::rng::SecureRng;

/// Stopping probability γ of `rs`, `rs-tnb`, `rs-exp` (and `rs-exp-m1`): the number of draws
/// is Geometric(γ) (truncated negative binomial for `rs-tnb`), E K ≈ 1/γ.
pub const GAMMA: ParamSpec = ParamSpec::real_in(
    "gamma",
    "Stopping probability of random stopping: about 1/gamma draws",
    0.05,
    Bound::Open(0.0),
    Bound::Closed(1.0),
);

/// Shape η of `rs-tnb`'s truncated negative binomial: noise `Lap((2+η)Δ_a/ε)`.
pub const ETA: ParamSpec = ParamSpec::real_in(
    "eta",
    "Shape of the truncated negative binomial: noise Lap((2+eta)*Delta_a/eps)",
    0.0,
    Bound::Open(-1.0),
    Bound::Unbounded,
);

/// Number of draws T of the audit reference `bot-exp`.
pub const DRAWS: ParamSpec = ParamSpec::integer(
    "draws",
    "Number of draws T, without random stopping",
    10,
    1,
    i64::MAX,
);

/// How the number of draws K is chosen, and with it the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppingRule {
    /// `rs`: K ~ Geometric(γ), Laplace noise with multiplier 3.
    Geometric,
    /// `rs-tnb`: K ~ D_{η,γ}, Laplace noise with multiplier 2 + η.
    TruncatedNegBinomial,
    /// `rs-exp`: K ~ Geometric(γ), *exponential* noise with multiplier 3 (ε-DP).
    GeometricExponentialNoise,
    /// `bot-exp`: a fixed number T of draws, exponential noise with multiplier 3 (not DP).
    FixedExponentialNoise,
}

/// A random-stopping mechanism with validated ε, γ and η.
#[derive(Debug, Clone)]
pub struct RandomStopping {
    rule: StoppingRule,
    epsilon: f64,
    /// The selection from private candidates it runs: the stopping law, and ε₀ = ε / multiplier.
    selection: PrivateSelection,
    /// Noise scale multiplier m in `Lap(m Δ_a / ε)` (or `Exp(mean m Δ_a / ε)`).
    multiplier: f64,
    /// Registry name.
    name: &'static str,
    /// The guarantee claimed.
    guarantee: Guarantee,
}

impl RandomStopping {
    /// Validates ε (finite, > 0), γ (in (0, 1]) and, for `rs-tnb`, η (> −1). For
    /// [`StoppingRule::FixedExponentialNoise`] use [`RandomStopping::best_of`].
    pub fn new(rule: StoppingRule, epsilon: f64, gamma: f64, eta: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        let (stopping, name) = match rule {
            StoppingRule::Geometric => (Stopping::Geometric { gamma }, "rs"),
            StoppingRule::GeometricExponentialNoise => (Stopping::Geometric { gamma }, "rs-exp"),
            StoppingRule::TruncatedNegBinomial => {
                (Stopping::TruncatedNegBinomial { eta, gamma }, "rs-tnb")
            }
            StoppingRule::FixedExponentialNoise => {
                return Err(Error::Invalid(
                    "bot-exp has a fixed number of draws: build it with RandomStopping::best_of"
                        .into(),
                ))
            }
        };
        // The noise multiplier is the selection's factor ε/ε₀: each run is ε₀ = ε/m-DP (for
        // `rs-exp`, the same factor with the proof of docs/mechanisms.md).
        let multiplier = stopping
            .epsilon_factor()
            .expect("geometric and truncated negative binomial laws are linear in eps0");
        let selection = Self::selection(stopping, epsilon / multiplier)?;
        Ok(RandomStopping {
            rule,
            epsilon,
            selection,
            multiplier,
            name,
            guarantee: Guarantee::Pure { epsilon },
        })
    }

    /// The selection from private candidates with `stopping` and runs of ε₀ = `eps0`.
    fn selection(stopping: Stopping, eps0: f64) -> Result<PrivateSelection> {
        SelectionParams::new(stopping, eps0).check()
    }

    /// The selection from private candidates this mechanism runs (its stopping law, ε₀ and the
    /// theorem's total).
    pub fn private_selection(&self) -> &PrivateSelection {
        &self.selection
    }

    /// `bot-exp`, an audit reference that is **not** differentially private: the best of `draws`
    /// uniform draws with `Exp(mean 3Δ_a/ε)` noise and no random stopping (docs/mechanisms.md,
    /// "Random stopping"). Validates ε and `draws` ≥ 1.
    pub fn best_of(epsilon: f64, draws: u64) -> Result<Self> {
        check_epsilon(epsilon)?;
        if draws == 0 {
            return Err(Error::InvalidParameter {
                name: "draws",
                requirement: ">= 1",
                value: 0.0,
            });
        }
        Ok(RandomStopping {
            rule: StoppingRule::FixedExponentialNoise,
            epsilon,
            selection: Self::selection(Stopping::Fixed { runs: draws }, epsilon / 3.0)?,
            multiplier: 3.0,
            name: "bot-exp",
            guarantee: Guarantee::NotPrivate,
        })
    }

    /// An audit reference that *claims* ε-DP while scaling its noise by `multiplier` instead of
    /// the rule's own (3, or 2 + η): `rs-exp` with multiplier 1 (`rs-exp-m1`) is only 3ε-DP, and
    /// the audit must say so. Validates the parameters as [`RandomStopping::new`] and
    /// `multiplier` (finite, > 0).
    pub fn miscalibrated(
        rule: StoppingRule,
        epsilon: f64,
        gamma: f64,
        eta: f64,
        multiplier: f64,
    ) -> Result<Self> {
        if !(multiplier.is_finite() && multiplier > 0.0) {
            return Err(Error::InvalidParameter {
                name: "noise multiplier",
                requirement: "finite and > 0",
                value: multiplier,
            });
        }
        let mut m = Self::new(rule, epsilon, gamma, eta)?;
        m.multiplier = multiplier;
        m.selection = Self::selection(m.selection.params().stopping, epsilon / multiplier)?;
        m.name = if rule == StoppingRule::GeometricExponentialNoise && multiplier == 1.0 {
            "rs-exp-m1"
        } else {
            "rs-miscalibrated"
        };
        Ok(m)
    }

    /// One draw of the number of repetitions K.
    pub fn draw_k(&self, rng: &mut Rng) -> u64 {
        self.selection.draw_budget(rng)
    }

    /// One selection that also reports the K it used (for tests of the stopping distribution).
    pub fn select_counting(&self, problem: &Problem<'_>, rng: &mut Rng) -> (usize, u64) {
        let prepared = self.prepare_rs(problem, false);
        prepared.sample_counting(rng)
    }

    /// The secure path's exact stopping rule and noise multiplier m (as m·2^32).
    fn secure_stopping(&self) -> Result<(ExactStopping, u128)> {
        Ok(match self.selection.law() {
            Law::Tnb(t) => {
                let stop = ExactStopping::tnb(t.gamma(), t.eta())?;
                let ExactStopping::TruncatedNegBinomial { eta_num, .. } = stop else {
                    unreachable!("tnb() builds the truncated negative binomial")
                };
                (
                    stop,
                    ((2i128 << FRACTION_BITS) + i128::from(eta_num)) as u128,
                )
            }
            // Multiplier 3 (`rs`, `rs-exp`) or 1 (the mis-calibrated audit reference `rs-exp-m1`,
            // which keeps its miscalibration on the secure path): exact in 2^32 units.
            Law::Geometric(g) => (
                ExactStopping::Geometric { gamma: g.gamma() },
                (self.multiplier * 2f64.powi(FRACTION_BITS as i32)) as u128,
            ),
            // `bot-exp` claims no DP: no secure path.
            Law::Fixed(_) | Law::Poisson { .. } => return Err(no_secure_path(self.name)),
        })
    }

    fn prepare_secure_rs(&self, problem: &Problem<'_>) -> Result<SecureRandomStopping> {
        let eps = SecureEpsilon::new(self.epsilon)?;
        let (stopping, mult) = self.secure_stopping()?;
        let grid = Grid::new(problem);
        Ok(SecureRandomStopping {
            t: noise_scales(&grid.d, mult),
            q: grid.q,
            s: u128::from(eps.num),
            noise: if self.rule != StoppingRule::Geometric
                && self.rule != StoppingRule::TruncatedNegBinomial
            {
                ExactNoise::Geometric
            } else {
                ExactNoise::Laplace
            },
            stopping,
        })
    }

    /// One secure selection that also reports the K it used (for tests of the exact stopping
    /// distribution).
    pub fn select_secure_counting(
        &self,
        problem: &Problem<'_>,
        rng: &mut SecureRng,
    ) -> Result<(usize, u64)> {
        Ok(self.prepare_secure_rs(problem)?.sample_counting(rng))
    }

    /// The level of the maximum: the survival probability t of one recorded value (a uniform
    /// candidate plus its noise) at the maximum of the K recorded values, from the stopping law's
    /// generating function (docs/mechanisms.md, "Sampling the maximum directly").
    #[inline]
    fn level_at(&self, u: f64) -> f64 {
        self.selection
            .law()
            .max_level(u)
            .expect("random stopping always records at least one value")
    }

    /// E K, the expected number of recorded values of the draw-by-draw loop.
    fn mean_draws(&self) -> f64 {
        self.selection.mean_runs()
    }

    fn noise_shape(&self) -> NoiseShape {
        match self.rule {
            StoppingRule::GeometricExponentialNoise | StoppingRule::FixedExponentialNoise => {
                NoiseShape::Exponential
            }
            StoppingRule::Geometric | StoppingRule::TruncatedNegBinomial => NoiseShape::Laplace,
        }
    }

    /// `many`: the problem will be sampled many times, so a [`Guide`] pays for itself.
    /// The sampler is chosen from the parameters and k alone (never from the machine), so a seed
    /// gives the same selections everywhere: the maximum is drawn directly when E K is at least
    /// `MAX_DRAW_FACTOR` times k (twice that without a guide), else draw by draw
    /// (docs/mechanisms.md, "Sampling the maximum directly").
    fn prepare_rs<'a>(&'a self, problem: &Problem<'a>, many: bool) -> PreparedRs<'a> {
        let c = self.multiplier / self.epsilon;
        let scales: Vec<f64> = problem.sensitivities().iter().map(|d| c * d).collect();
        let inv_scales: Vec<f64> = scales.iter().map(|s| 1.0 / s).collect();
        let k = problem.len() as f64;
        let factor = if many {
            MAX_DRAW_FACTOR
        } else {
            2.0 * MAX_DRAW_FACTOR
        };
        let direct = self.mean_draws() >= factor * k;
        let guide = (direct && many)
            .then(|| {
                WORK.with_borrow_mut(|work| {
                    Guide::new(
                        self.noise_shape(),
                        problem.scores(),
                        &scales,
                        &inv_scales,
                        |u| self.level_at(u),
                        work,
                    )
                })
            })
            .flatten();
        PreparedRs {
            mech: self,
            scores: problem.scores(),
            inv_scales,
            scales,
            direct,
            guide,
        }
    }
}

thread_local! {
    /// The direct maximum draw's scratch space, one per thread: a selection allocates nothing.
    static WORK: std::cell::RefCell<maxdraw::Work> = std::cell::RefCell::new(maxdraw::Work::default());
}

/// The maximum is drawn directly when E K ≥ this × k (with a [`Guide`]): one draw-by-draw
/// recorded value costs about as much as 2.5 candidates of one pass of the solver, and a guided
/// solve takes about 2.5 passes (`cargo bench --bench grid_mechanisms`).
const MAX_DRAW_FACTOR: f64 = 1.0;

struct PreparedRs<'a> {
    mech: &'a RandomStopping,
    scores: &'a [f64],
    scales: Vec<f64>,
    /// 1 / scale of every candidate (the maximum sampler's evaluations multiply).
    inv_scales: Vec<f64>,
    /// Draw the maximum directly rather than draw by draw.
    direct: bool,
    /// Starting points for the direct draw (`prepare_many`).
    guide: Option<Guide>,
}

impl PreparedRs<'_> {
    /// The draw-by-draw sampler (docs/mechanisms.md, "Random stopping"): K noisy values, the
    /// best released. It also reports K, for the tests of the stopping law.
    fn sample_counting(&self, rng: &mut Rng) -> (usize, u64) {
        let k = self.scores.len();
        let exponential = self.mech.noise_shape() == NoiseShape::Exponential;
        // One run of selection from private candidates: a uniform candidate and its noisy score.
        let (best, draws) = self.mech.selection.run_scores(None, rng, |rng| {
            let (a, z) = if exponential {
                (rng.random_range(0..k), exp1(rng))
            } else {
                // Candidate and the Laplace sign from one uniform draw, then the Exp(1)
                // magnitude: the law of `random_range(0..k)` then `laplace1`, fewer generator
                // words (docs/mechanisms.md, "Random stopping").
                let (a, plus) = index_and_sign(rng, k);
                let e = exp1(rng);
                (a, if plus { e } else { -e })
            };
            (a, self.scores[a] + self.scales[a] * z)
        });
        (best.map_or(0, |(a, _)| a), draws)
    }

    /// The level of the maximum from one open uniform ([`RandomStopping::level_at`]).
    fn level(&self, rng: &mut Rng) -> f64 {
        // u in the open interval (0, 1): 53 random bits, centred in their cell.
        let u = ((rng.random::<u64>() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64);
        self.mech.level_at(u)
    }

    /// One selection with the law of [`PreparedRs::sample_counting`], drawn without the K
    /// recorded values (docs/mechanisms.md, "Sampling the maximum directly"): the maximum's level
    /// from one uniform, its value V from [`maxdraw::solve`], then the released candidate with
    /// probability proportional to its noise density at V. Falls back to the draw-by-draw
    /// sampler if the densities vanish.
    fn sample_max(&self, rng: &mut Rng) -> usize {
        let t = self.level(rng);
        let (q, s, inv) = (self.scores, &self.scales, &self.inv_scales);
        let picked = WORK.with_borrow_mut(|work| {
            let solution = match &self.guide {
                Some(guide) => guide.solve(q, s, inv, t, work),
                None => maxdraw::solve(self.mech.noise_shape(), q, s, inv, t, None, work),
            };
            let Solution {
                active,
                dens,
                total,
                ..
            } = solution?;
            let mut r = rng.random::<f64>() * total;
            for (&d, &a) in dens.iter().zip(active) {
                if r < d {
                    return Some(a as usize);
                }
                r -= d;
            }
            // Rounding left r at or above the last partial sum: the last candidate with a
            // density.
            let last = dens
                .iter()
                .rposition(|&d| d > 0.0)
                .expect("a positive total");
            Some(active[last] as usize)
        });
        picked.unwrap_or_else(|| self.sample_counting(rng).0)
    }
}

impl Prepared for PreparedRs<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        if self.direct {
            self.sample_max(rng)
        } else {
            self.sample_counting(rng).0
        }
    }
}

impl Mechanism for RandomStopping {
    fn name(&self) -> &'static str {
        self.name
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn guarantee(&self) -> Guarantee {
        self.guarantee
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(self.prepare_rs(problem, false))
    }

    fn prepare_many<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(self.prepare_rs(problem, true))
    }

    fn secure_epsilon(&self) -> Result<f64> {
        self.secure_stopping()?;
        Ok(SecureEpsilon::new(self.epsilon)?.value())
    }

    fn prepare_secure<'a>(&'a self, problem: &Problem<'a>) -> Result<Box<dyn SecurePrepared + 'a>> {
        Ok(Box::new(self.prepare_secure_rs(problem)?))
    }
}
