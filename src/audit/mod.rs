//! Empirical privacy audit: lower bounds on the ε a mechanism actually spends (in the style of
//! DP-Sniper and dp-auditorium).
//!
//! For a pair of neighbouring inputs — scores q and q' with `|q_a − q'_a| ≤ Δ_a` for every a and the
//! same sensitivities — and each direction (q → q', q' → q):
//!
//! 1. on a first batch of samples from both inputs, choose the output o with the largest
//!    (add-one smoothed) empirical ratio `P̂[M(q) = o] / P̂[M(q') = o]`;
//! 2. on N fresh samples per input, bound `P[M(q) = o] ≥ p_lo` and `P[M(q') = o] ≤ p'_hi` with
//!    one-sided Clopper–Pearson bounds at level α/(2m), where m counts every output, direction and
//!    pair tried (Bonferroni), and report `ε_LB = ln(p_lo / p'_hi)`.
//!
//! With probability at least 1 − α every reported ε_LB is below the ε the mechanism really spends on
//! that pair, so `ε_LB > claimed ε` refutes the claim. An audit can refute a claim, never prove one:
//! a mechanism that passes was merely not caught on these pairs with these samples.
//!
//! With [`NoiseMode::Secure`] the audit samples the secure path (`docs/secure.md`) from OS-seeded
//! generators — not reproducible, by design — and holds it to its effective ε (ε rounded down onto
//! the 2^−32 grid).

pub mod conformance;
pub mod end_to_end;
pub mod list;
pub mod options;
pub mod pairs;
pub mod release;
pub mod training;

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::mechanisms::{Guarantee, Mechanism, Problem, Selector};
use crate::numerics::hypothesis::{clopper_pearson_lower, clopper_pearson_upper};
use crate::rng::{name_id, Draws, NoiseMode, Streams};

pub use options::{AuditOptions, AuditSampling, EndToEndOptions};
pub use pairs::{builtin_pairs, read_pairs, NeighbourPair};

/// Validated audit settings.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AuditConfig {
    /// Fresh samples per input for the final bounds (N).
    pub samples: u64,
    /// Samples per input of the first batch that chooses the output.
    pub select_samples: u64,
    /// Total failure probability α of all bounds together.
    pub alpha: f64,
    /// Seed of the random streams (unused in secure mode).
    pub seed: u64,
    /// Which path of the mechanisms is audited.
    pub noise: NoiseMode,
}

impl AuditConfig {
    /// Validates N ≥ 100 and α in (0, 1); the selection batch is N/5 (at least 100).
    pub fn new(samples: u64, alpha: f64, seed: u64) -> Result<Self> {
        if samples < 100 {
            return Err(Error::Invalid(format!(
                "samples must be at least 100, got {samples}"
            )));
        }
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(Error::InvalidParameter {
                name: "alpha",
                requirement: "in (0, 1)",
                value: alpha,
            });
        }
        Ok(AuditConfig {
            samples,
            select_samples: (samples / 5).max(100),
            alpha,
            seed,
            noise: NoiseMode::Fast,
        })
    }

    /// These settings auditing the path of `noise`.
    pub fn with_noise(mut self, noise: NoiseMode) -> Self {
        self.noise = noise;
        self
    }
}

/// The bound for one pair in one direction.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionResult {
    /// Pair label.
    pub pair: String,
    /// `q->q'` or `q'->q`.
    pub direction: &'static str,
    /// Number of candidates of the pair.
    pub k: usize,
    /// The output tested and its bounds (in the JSON, fields of this object).
    #[serde(flatten)]
    pub bound: DirectionBound,
    /// The ε the mechanism claims for k candidates (`None`: it claims nothing).
    pub claimed: Option<f64>,
}

/// Outcome of an audit of one mechanism.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// Mechanism name.
    pub mechanism: String,
    /// The ε the mechanism was built with.
    pub epsilon: f64,
    /// The guarantee it claims, in words.
    pub guarantee: String,
    /// Whether it claims any differential privacy.
    pub private: bool,
    /// Every (pair, direction) bound.
    pub results: Vec<DirectionResult>,
    /// The largest ε_LB (0 when no pair gave evidence).
    pub max_eps_lb: f64,
    /// Whether some ε_LB exceeds the claimed guarantee (only for mechanisms that claim one).
    pub violation: bool,
    /// Whether some ε_LB exceeds the nominal ε the mechanism was built with.
    pub exceeds_nominal: bool,
    /// Samples drawn in total.
    pub samples_drawn: u64,
    /// For a mechanism that can release ⊥ ([`Mechanism::may_release_bottom`]): how many of the
    /// fresh samples (every pair, both inputs) released it. ⊥ is then its own output, index k of
    /// a pair with k candidates; `None` (and absent from the JSON) for every other mechanism.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottom: Option<u64>,
    /// Settings.
    pub config: AuditConfig,
}

impl AuditReport {
    /// A one-word verdict: `VIOLATION` (a claimed guarantee refuted), `consistent`, or for
    /// mechanisms that claim nothing, `flagged` / `not flagged` against the nominal ε.
    pub fn verdict(&self) -> &'static str {
        match (self.private, self.violation, self.exceeds_nominal) {
            (true, true, _) => "VIOLATION",
            (true, false, _) => "consistent",
            (false, _, true) => "flagged (not private)",
            (false, _, false) => "not flagged",
        }
    }
}

/// Output counts of `n` selections on `q` (stream family `family`).
fn counts(
    mech: &dyn Mechanism,
    q: &[f64],
    sens: &[f64],
    n: u64,
    streams: &Streams,
    family: u32,
    noise: NoiseMode,
) -> Result<Vec<u64>> {
    let problem = Problem::new(q, sens)?;
    let selector = Selector::new(mech, &problem, noise)?;
    if mech.may_release_bottom() {
        // ⊥ is its own output, after the candidates.
        return bottom_counts(
            &selector,
            name_id(mech.name()),
            q.len(),
            n,
            streams,
            family,
            noise,
        );
    }
    counts_of(
        &selector,
        name_id(mech.name()),
        None,
        q.len(),
        n,
        streams,
        family,
        noise,
    )
}

/// Output counts of `n` selections from `selector` (stream family `family` of mechanism `id`),
/// over `outputs` outputs: candidate a counts as output `map[a]` (as a itself without a map).
#[allow(clippy::too_many_arguments)]
pub(crate) fn counts_of(
    selector: &Selector<'_>,
    id: u32,
    map: Option<&[u32]>,
    outputs: usize,
    n: u64,
    streams: &Streams,
    family: u32,
    noise: NoiseMode,
) -> Result<Vec<u64>> {
    tally(outputs, n, streams, noise, |draws, i| {
        let a = selector.sample(draws, id, family, i >> 32, i as u32);
        map.map_or(a, |m| m[a] as usize)
    })
}

/// As [`counts_of`] without a map, with ⊥ counted as output `k` ([`Selector::sample_outcome`]).
fn bottom_counts(
    selector: &Selector<'_>,
    id: u32,
    k: usize,
    n: u64,
    streams: &Streams,
    family: u32,
    noise: NoiseMode,
) -> Result<Vec<u64>> {
    tally(k + 1, n, streams, noise, |draws, i| {
        selector
            .sample_outcome(draws, id, family, i >> 32, i as u32)
            .unwrap_or(k)
    })
}

/// Counts of `outputs` outputs over draws `0..n`, where `draw(draws, i)` is the output of draw
/// `i`; chunks of draws in parallel, each with its own random source (the counts do not depend
/// on the threads).
fn tally(
    outputs: usize,
    n: u64,
    streams: &Streams,
    noise: NoiseMode,
    draw: impl Fn(&mut Draws, u64) -> usize + Sync,
) -> Result<Vec<u64>> {
    const CHUNK: u64 = 4096;
    (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut out = vec![0u64; outputs];
            let mut draws = Draws::new(noise, *streams)?;
            for i in c * CHUNK..((c + 1) * CHUNK).min(n) {
                out[draw(&mut draws, i)] += 1;
            }
            Ok(out)
        })
        .try_reduce(
            || vec![0u64; outputs],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                Ok(a)
            },
        )
}

/// One direction's bound (steps 1–2 of the module's recipe): the output with the largest
/// add-one smoothed ratio of the selection batches `sel_first / sel_second`, and one-sided
/// Clopper–Pearson bounds at `level` on its probability under the first input (lower, from the
/// `n` fresh samples `first`) and under the second (upper, from `second`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DirectionBound {
    /// The output tested.
    pub output: usize,
    /// Fresh samples of the first input that gave `output`.
    pub count_first: u64,
    /// Fresh samples of the second input that gave `output`.
    pub count_second: u64,
    /// Lower confidence bound on P[M(first) = output].
    pub p_lo: f64,
    /// Upper confidence bound on P[M(second) = output].
    pub p_hi: f64,
    /// ln(p_lo / p_hi); −∞ when `p_lo` is 0.
    pub eps_lb: f64,
}

/// How the selection batch chooses the output a direction is tested on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutputChoice {
    /// The largest add-one smoothed ratio `(c + 1) / (c' + 1)` (`recsel audit`: few outputs).
    Smoothed,
    /// The largest ratio of Clopper–Pearson bounds on the batch itself (lower on the first input,
    /// upper on the second, at this level, over `n` batch samples): with thousands of outputs of
    /// small probability it prefers an output with evidence over one drawn once against zero.
    Bounded {
        /// Samples per input of the batch.
        n: u64,
        /// One-sided level of each bound.
        level: f64,
    },
}

/// [`DirectionBound`] of one direction; every slice has one count per output.
pub fn direction_bound(
    sel_first: &[u64],
    sel_second: &[u64],
    first: &[u64],
    second: &[u64],
    n: u64,
    level: f64,
) -> DirectionBound {
    direction_bound_by(
        OutputChoice::Smoothed,
        sel_first,
        sel_second,
        first,
        second,
        n,
        level,
    )
}

/// [`direction_bound`] with the output chosen by `choice`.
pub fn direction_bound_by(
    choice: OutputChoice,
    sel_first: &[u64],
    sel_second: &[u64],
    first: &[u64],
    second: &[u64],
    n: u64,
    level: f64,
) -> DirectionBound {
    // The bounded ratio of each distinct (count, count') pair, computed once: outputs share few.
    let mut bounded = std::collections::HashMap::new();
    if let OutputChoice::Bounded { n, level } = choice {
        for (&c, &c2) in sel_first.iter().zip(sel_second) {
            if c > 0 {
                bounded.entry((c, c2)).or_insert_with(|| {
                    (clopper_pearson_lower(c, n, level) / clopper_pearson_upper(c2, n, level)).ln()
                });
            }
        }
    }
    let ratio = |o: usize| match choice {
        OutputChoice::Smoothed => ((sel_first[o] as f64 + 1.0) / (sel_second[o] as f64 + 1.0)).ln(),
        OutputChoice::Bounded { .. } => bounded
            .get(&(sel_first[o], sel_second[o]))
            .copied()
            .unwrap_or(f64::NEG_INFINITY),
    };
    let output = (0..sel_first.len())
        .max_by(|&a, &b| ratio(a).total_cmp(&ratio(b)).then(b.cmp(&a)))
        .expect("at least one output");
    let p_lo = clopper_pearson_lower(first[output], n, level);
    let p_hi = clopper_pearson_upper(second[output], n, level);
    DirectionBound {
        output,
        count_first: first[output],
        count_second: second[output],
        p_lo,
        p_hi,
        eps_lb: (p_lo / p_hi).ln(),
    }
}

/// The guarantee `mech` is held to in `noise`'s mode: the secure path to its effective ε.
pub(crate) fn held_to(mech: &dyn Mechanism, noise: NoiseMode) -> Result<Guarantee> {
    Ok(match (noise, mech.guarantee()) {
        (NoiseMode::Secure, Guarantee::Pure { .. }) => Guarantee::Pure {
            epsilon: mech.secure_epsilon()?,
        },
        (NoiseMode::Secure, Guarantee::Approx { delta, .. }) => Guarantee::Approx {
            epsilon: mech.secure_epsilon()?,
            delta,
        },
        (NoiseMode::Secure, g) => {
            mech.secure_epsilon()?;
            g
        }
        (NoiseMode::Fast, g) => g,
    })
}

/// The verdict of an [`AuditReport`] over `results`: the largest ε_LB (0 without evidence),
/// whether a claimed guarantee with this `delta` is refuted (only when the mechanism claims one,
/// `private`), and whether some ε_LB exceeds the nominal `epsilon`. An (ε, δ) claim is refuted
/// when P_lo > e^ε·P_hi + δ: the bound with δ taken off first.
pub(crate) fn verdict(
    results: &[DirectionResult],
    private: bool,
    delta: f64,
    epsilon: f64,
) -> (f64, bool, bool) {
    let max_eps_lb = results
        .iter()
        .map(|r| r.bound.eps_lb)
        .fold(0.0f64, |a, b| if b > a { b } else { a });
    let refutes = |r: &DirectionResult, eps: f64| {
        if delta == 0.0 {
            exceeds(r.bound.eps_lb, eps)
        } else {
            exceeds(((r.bound.p_lo - delta).max(0.0) / r.bound.p_hi).ln(), eps)
        }
    };
    let violation = private
        && results
            .iter()
            .any(|r| r.claimed.is_some_and(|c| refutes(r, c)));
    let exceeds_nominal = results.iter().any(|r| exceeds(r.bound.eps_lb, epsilon));
    (max_eps_lb, violation, exceeds_nominal)
}

/// A small relative slack keeps rounding in the bounds from reading as a violation.
pub(crate) fn exceeds(eps_lb: f64, eps: f64) -> bool {
    eps_lb > eps * (1.0 + 1e-9)
}

/// Audits `mech` on `pairs`. `progress` is called with the number of samples drawn after each
/// batch.
pub fn audit(
    mech: &dyn Mechanism,
    pairs: &[NeighbourPair],
    config: &AuditConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<AuditReport> {
    if pairs.is_empty() {
        return Err(Error::Invalid("no neighbouring pairs to audit".into()));
    }
    // Bonferroni over every output, direction and pair; each bound gets half of its share.
    let bottom = mech.may_release_bottom();
    let tests: usize = pairs
        .iter()
        .map(|p| 2 * (p.len() + usize::from(bottom)))
        .sum();
    let level = config.alpha / (2.0 * tests as f64);
    let streams = Streams::new(config.seed);
    let guarantee = held_to(mech, config.noise)?;
    let mut results = Vec::new();
    let mut drawn = 0u64;
    let mut bottoms = 0u64;
    for (i, pair) in pairs.iter().enumerate() {
        let fam = 4 * i as u32;
        let (n0, n) = (config.select_samples, config.samples);
        let mode = config.noise;
        let sel_a = counts(mech, &pair.q, &pair.sens, n0, &streams, fam, mode)?;
        let sel_b = counts(mech, &pair.q2, &pair.sens, n0, &streams, fam + 1, mode)?;
        let fresh_a = counts(mech, &pair.q, &pair.sens, n, &streams, fam + 2, mode)?;
        let fresh_b = counts(mech, &pair.q2, &pair.sens, n, &streams, fam + 3, mode)?;
        if bottom {
            bottoms += fresh_a[pair.len()] + fresh_b[pair.len()];
        }
        drawn += 2 * (n0 + n);
        progress(2 * (n0 + n));
        for (direction, sel_first, sel_second, first, second) in [
            ("q->q'", &sel_a, &sel_b, &fresh_a, &fresh_b),
            ("q'->q", &sel_b, &sel_a, &fresh_b, &fresh_a),
        ] {
            results.push(DirectionResult {
                pair: pair.label.clone(),
                direction,
                k: pair.len(),
                bound: direction_bound(sel_first, sel_second, first, second, n, level),
                claimed: guarantee.epsilon_for(pair.len()),
            });
        }
    }
    let (max_eps_lb, violation, exceeds_nominal) = verdict(
        &results,
        guarantee.is_private(),
        guarantee.delta(),
        mech.epsilon(),
    );
    Ok(AuditReport {
        mechanism: mech.name().to_string(),
        epsilon: mech.epsilon(),
        guarantee: guarantee.to_string(),
        private: guarantee.is_private(),
        results,
        max_eps_lb,
        violation,
        exceeds_nominal,
        samples_drawn: drawn,
        bottom: bottom.then_some(bottoms),
        config: *config,
    })
}
