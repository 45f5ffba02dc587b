//! The hybrid continual-counting mechanism of Chan, Shi and Song (2010, "Private and continual
//! release of statistics", §4) for a stream of unknown length (`docs/bandit.md`, "Private means").
//!
//! After every item it releases a noisy prefix sum. Two ε/2-DP halves:
//!
//! * the **logarithmic mechanism** L: at every power of two `t = 2^k` it adds the exact sum of the
//!   items `(2^{k−1}, 2^k]` and one fresh `Lap(2Δ/ε)` draw to its running noisy total, so L's
//!   release at `2^k` is the true sum of the first `2^k` items plus `k + 1` Laplace draws;
//! * for `2^k < t < 2^{k+1}` a **binary (tree) mechanism** B_k with horizon `2^k` over the items
//!   `2^k + 1, …`: every dyadic block ("p-sum") of relative time `τ = t − 2^k` gets one
//!   `Lap(2kΔ/ε)` draw when it is completed; an item lies in at most k blocks (levels 0..k−1), so
//!   B_k is ε/2-DP.
//!
//! The release at t is `L(2^k) + Σ_{j : bit j of τ is 1} p̂-sum_j`: the true prefix sum plus
//! `k + 1` draws of `Lap(2Δ/ε)` and `popcount(τ)` draws of `Lap(2kΔ/ε)` — at most `2k + 1 ≤
//! 2 log₂ t + 1` Laplace terms, variance `(k + 1)·2(2Δ/ε)² + popcount(τ)·2(2kΔ/ε)²`. Every item
//! enters L once and B_k at most k times, so the whole released sequence is ε-DP when one item
//! changes by at most Δ.

use crate::error::Result;
use crate::mechanisms::check_epsilon;
use crate::numerics::distributions::laplace1;
use crate::rng::Rng;

/// A running private counter: push items in [0, Δ] (or any items whose replacement moves the sum
/// by at most Δ), read the released noisy prefix sum.
#[derive(Debug, Clone)]
pub struct HybridCounter {
    epsilon: f64,
    sensitivity: f64,
    /// Items pushed so far.
    t: u64,
    /// L's running noisy total at the last power of two.
    log_total: f64,
    /// Laplace draws inside `log_total`.
    log_terms: u32,
    /// Exact sum of the items since the last power of two.
    pending: f64,
    /// Level k of the current binary segment (horizon 2^k).
    level: u32,
    /// Exact p-sums α_j of the current segment.
    alpha: Vec<f64>,
    /// Noisy p-sums α̂_j.
    alpha_noisy: Vec<f64>,
    /// The latest release.
    released: f64,
    /// Laplace draws inside the latest release.
    released_terms: u32,
}

impl HybridCounter {
    /// A counter that is `epsilon`-DP for items that move the sum by at most `sensitivity` (> 0).
    pub fn new(epsilon: f64, sensitivity: f64) -> Result<Self> {
        let epsilon = check_epsilon(epsilon)?;
        if !(sensitivity.is_finite() && sensitivity > 0.0) {
            return Err(crate::error::Error::InvalidParameter {
                name: "counter sensitivity",
                requirement: "finite and > 0",
                value: sensitivity,
            });
        }
        Ok(HybridCounter {
            epsilon,
            sensitivity,
            t: 0,
            log_total: 0.0,
            log_terms: 0,
            pending: 0.0,
            level: 0,
            alpha: Vec::new(),
            alpha_noisy: Vec::new(),
            released: 0.0,
            released_terms: 0,
        })
    }

    /// ε of the whole released sequence.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Items pushed so far.
    pub fn len(&self) -> u64 {
        self.t
    }

    /// Whether no item was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.t == 0
    }

    /// The latest released noisy prefix sum (0 before the first item).
    pub fn released(&self) -> f64 {
        self.released
    }

    /// How many Laplace draws the latest release adds up (`k + 1 + popcount(τ)`).
    pub fn released_terms(&self) -> u32 {
        self.released_terms
    }

    /// Adds one item and returns the new released prefix sum.
    pub fn push(&mut self, x: f64, rng: &mut Rng) -> f64 {
        self.t += 1;
        let t = self.t;
        self.pending += x;
        // Scale of L's draws: Lap(Δ/(ε/2)).
        let b_log = 2.0 * self.sensitivity / self.epsilon;
        if t.is_power_of_two() {
            self.log_total += self.pending + b_log * laplace1(rng);
            self.log_terms += 1;
            self.pending = 0.0;
            // A new binary segment B_k for the items 2^k + 1 .. 2^{k+1} − 1.
            self.level = t.trailing_zeros();
            self.alpha.clear();
            self.alpha.resize(self.level as usize, 0.0);
            self.alpha_noisy.clear();
            self.alpha_noisy.resize(self.level as usize, 0.0);
            self.released = self.log_total;
            self.released_terms = self.log_terms;
            return self.released;
        }
        let k = self.level;
        let tau = t - (1u64 << k);
        // Binary mechanism step (Chan-Shi-Song, Algorithm 2): the block ending at τ at level
        // i = lowest set bit of τ absorbs the lower blocks and the new item.
        let i = tau.trailing_zeros() as usize;
        let mut s = x;
        for j in 0..i {
            s += self.alpha[j];
            self.alpha[j] = 0.0;
            self.alpha_noisy[j] = 0.0;
        }
        self.alpha[i] = s;
        // Every item lies in at most k blocks: Lap(kΔ/(ε/2)).
        let b_bin = 2.0 * f64::from(k) * self.sensitivity / self.epsilon;
        self.alpha_noisy[i] = s + b_bin * laplace1(rng);
        let mut out = self.log_total;
        let mut bits = tau;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            out += self.alpha_noisy[j];
            bits &= bits - 1;
        }
        self.released = out;
        self.released_terms = self.log_terms + tau.count_ones();
        out
    }
}
