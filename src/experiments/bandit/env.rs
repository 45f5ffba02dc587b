//! The bandit environment of seed 001 appendix H (docs/bandit.md; `docs/bandit.md`, "Setting"): k arms,
//! reward `N(m_a, σ_a²)` clipped to the reward range [0, 1], one set of (m, σ) before the shift and
//! another after it.

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use crate::error::{Error, Result};
use crate::rng::Rng;

/// Rewards are clipped to `[REWARD_LO, REWARD_HI]`; the range is the sensitivity of a reward sum.
pub const REWARD_LO: f64 = 0.0;
/// Upper end of the reward range.
pub const REWARD_HI: f64 = 1.0;

/// Clips a reward to the reward range [0, 1] (NaN is a contract violation and maps to 0).
#[inline]
pub fn clip_reward(r: f64) -> f64 {
    if r.is_nan() {
        return REWARD_LO;
    }
    r.clamp(REWARD_LO, REWARD_HI)
}

/// The arms' reward distributions in one phase: means and standard deviations of the unclipped
/// normal laws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Mean m_a of each arm.
    pub means: Vec<f64>,
    /// Standard deviation σ_a of each arm (σ = 0: the constant reward clip(m_a)).
    pub sigmas: Vec<f64>,
}

/// The arms before and after the shift. `Default` is the paper's: `m = (0.2, 0.8)`,
/// `σ = (0.1, 0.3)`, swapped after the shift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arms {
    /// Steps `t ≤ shift`.
    pub before: Phase,
    /// Steps `t > shift`.
    pub after: Phase,
}

impl Default for Arms {
    fn default() -> Self {
        Arms {
            before: Phase {
                means: vec![0.2, 0.8],
                sigmas: vec![0.1, 0.3],
            },
            after: Phase {
                means: vec![0.8, 0.2],
                sigmas: vec![0.3, 0.1],
            },
        }
    }
}

impl Arms {
    /// Parses a TOML arms table (`[before]` and `[after]`, each with `means` and `sigmas`);
    /// `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let arms: Arms = toml::from_str(text).map_err(|e| Error::Parse {
            context: origin.to_string(),
            message: e.to_string(),
        })?;
        arms.validate().map_err(|e| Error::Parse {
            context: origin.to_string(),
            message: e.to_string(),
        })?;
        Ok(arms)
    }

    /// Number of arms k.
    pub fn len(&self) -> usize {
        self.before.means.len()
    }

    /// Whether there are no arms (never true for validated arms).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// At least two arms, the same number in both phases, finite means, finite σ ≥ 0.
    pub fn validate(&self) -> Result<()> {
        let k = self.before.means.len();
        if k < 2 {
            return Err(Error::Invalid(format!(
                "a bandit needs at least 2 arms, got {k}"
            )));
        }
        for (name, phase) in [("before", &self.before), ("after", &self.after)] {
            if phase.means.len() != k || phase.sigmas.len() != k {
                return Err(Error::Invalid(format!(
                    "[{name}]: every phase needs {k} means and {k} sigmas, got {} and {}",
                    phase.means.len(),
                    phase.sigmas.len()
                )));
            }
            for (a, (&m, &s)) in phase.means.iter().zip(&phase.sigmas).enumerate() {
                if !m.is_finite() {
                    return Err(Error::Invalid(format!(
                        "[{name}] mean of arm {a} must be finite, got {m}"
                    )));
                }
                if !(s.is_finite() && s >= 0.0) {
                    return Err(Error::Invalid(format!(
                        "[{name}] sigma of arm {a} must be finite and >= 0, got {s}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The environment at run time: arms and the shift, with the exact means and quantiles of the
/// clipped rewards precomputed.
#[derive(Debug, Clone)]
pub struct Environment {
    arms: Arms,
    shift: u64,
    clipped_means: [Vec<f64>; 2],
    best: [usize; 2],
}

impl Environment {
    /// Validates the arms; steps `1..=shift` use `before`, later steps `after`.
    pub fn new(arms: Arms, shift: u64) -> Result<Self> {
        arms.validate()?;
        let cm = |p: &Phase| -> Vec<f64> {
            p.means
                .iter()
                .zip(&p.sigmas)
                .map(|(&m, &s)| clipped_normal_mean(m, s))
                .collect()
        };
        let clipped_means = [cm(&arms.before), cm(&arms.after)];
        let argmax = |v: &[f64]| {
            (0..v.len())
                .max_by(|&a, &b| v[a].total_cmp(&v[b]))
                .expect("at least two arms")
        };
        let best = [argmax(&clipped_means[0]), argmax(&clipped_means[1])];
        Ok(Environment {
            arms,
            shift,
            clipped_means,
            best,
        })
    }

    /// Number of arms.
    pub fn arms(&self) -> usize {
        self.arms.len()
    }

    /// The phase index of step t (1-based): 0 for `t ≤ shift`, else 1.
    #[inline]
    pub fn phase_of(&self, t: u64) -> usize {
        usize::from(t > self.shift)
    }

    fn phase(&self, t: u64) -> &Phase {
        if t > self.shift {
            &self.arms.after
        } else {
            &self.arms.before
        }
    }

    /// One reward of arm `a` at step t: `clip(m_a + σ_a·Z)`, Z standard normal.
    #[inline]
    pub fn reward(&self, a: usize, t: u64, rng: &mut Rng) -> f64 {
        let p = self.phase(t);
        let z: f64 = StandardNormal.sample(rng);
        clip_reward(p.means[a] + p.sigmas[a] * z)
    }

    /// Expected clipped reward of arm `a` at step t.
    #[inline]
    pub fn expected(&self, a: usize, t: u64) -> f64 {
        self.clipped_means[self.phase_of(t)][a]
    }

    /// The oracle arm (largest expected clipped reward) at step t.
    #[inline]
    pub fn best_arm(&self, t: u64) -> usize {
        self.best[self.phase_of(t)]
    }

    /// The `p`-quantile (0 < p < 1) of arm `a`'s clipped reward at step t:
    /// `clip(m_a + σ_a·Φ⁻¹(p))` (clipping is monotone, so it commutes with quantiles).
    pub fn true_quantile(&self, a: usize, t: u64, p: f64) -> f64 {
        let ph = self.phase(t);
        let (m, s) = (ph.means[a], ph.sigmas[a]);
        if s == 0.0 {
            return clip_reward(m);
        }
        let n = Normal::new(0.0, 1.0).expect("standard normal");
        clip_reward(m + s * n.inverse_cdf(p))
    }
}

/// `E[clip(X, 0, 1)]` for `X ~ N(m, σ²)`:
/// `E[X; 0 < X < 1] + P(X ≥ 1) = m(Φ(β) − Φ(α)) + σ(φ(α) − φ(β)) + 1 − Φ(β)`, α = −m/σ,
/// β = (1 − m)/σ.
pub fn clipped_normal_mean(m: f64, s: f64) -> f64 {
    if s == 0.0 {
        return clip_reward(m);
    }
    let n = Normal::new(0.0, 1.0).expect("standard normal");
    let (a, b) = ((REWARD_LO - m) / s, (REWARD_HI - m) / s);
    let phi = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    m * (n.cdf(b) - n.cdf(a))
        + s * (phi(a) - phi(b))
        + REWARD_HI * (1.0 - n.cdf(b))
        + REWARD_LO * n.cdf(a)
}
