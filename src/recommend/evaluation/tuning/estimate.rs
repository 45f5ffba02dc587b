//! Estimates free of the tuner's selection (docs/utility.md, "What a tuned row is worth"): the
//! calibration users are cut into two fixed parts by row — even rows choose, odd rows estimate —
//! and every number `tuning.json` reports of a chosen row (its hit@1, the best free option's,
//! their paired difference) is measured on the part the choice never read. The best of many
//! configurations measured on the users it was chosen on is optimistic (the winner's curse);
//! on other users its mean is unbiased.
//!
//! The free options are what a release serves at 0 ε: one item shown to everyone, either the most
//! popular training item (`popular:1`) or the item the fitted users held out most (`heldout:1`,
//! from the release's public counts, when it carries them). The best of them is chosen on the
//! selection part by the same rule as the tuned rows and estimated on the estimation part; a
//! row is served as tuned only when it beats that option there by a stated margin (the margin
//! rule).
//!
//! The private tuner makes the same cut: its selection reads the selection part only, and a
//! Laplace estimate of the chosen configuration and of every free option reads the estimation
//! part only ([`private_estimate`]). The cut is by row position, which a replaced user can shift
//! (rows in another order), so the two are accounted by basic composition: their ε add
//! ([`private_privacy`]).

use serde::{Deserialize, Serialize};

use crate::privacy::PopulationPrivacy;
use crate::rng::Rng;
use crate::scoring::CandidatePolicy;
use crate::stats::distributions::laplace1;

use super::private::PrivateTuner;
use super::Estimate;
use crate::recommend::release::Release;

/// How the calibration users were cut, recorded in `tuning.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimationSplit {
    /// Calibration users the choices were made on.
    pub selection_users: u64,
    /// Calibration users every reported estimate was measured on (disjoint from those).
    pub estimation_users: u64,
    /// The rule, for people.
    pub rule: String,
}

/// The rule of [`selection_user`], for people.
pub const RULE: &str = "calibration rows 0, 2, 4, ... choose; rows 1, 3, 5, ... estimate the \
                        choice (a fixed cut by row, independent of the data)";

/// Whether calibration row `u` is in the selection part (even rows); odd rows estimate.
pub fn selection_user(u: usize) -> bool {
    u % 2 == 0
}

/// The rows of the two parts of `n` calibration users: (selection, estimation).
pub fn parts(n: usize) -> (Vec<usize>, Vec<usize>) {
    (0..n).partition(|&u| selection_user(u))
}

/// The split record of `n` calibration users.
pub fn split(n: usize) -> EstimationSplit {
    let (s, e) = parts(n);
    EstimationSplit {
        selection_users: s.len() as u64,
        estimation_users: e.len() as u64,
        rule: RULE.into(),
    }
}

/// The values of `v` at `rows`.
pub fn on(rows: &[usize], v: &[f64]) -> Vec<f64> {
    rows.iter().map(|&u| v[u]).collect()
}

/// The free options `release` offers, with the item each shows to everyone: the most popular
/// training item, then (when the release carries held-out counts) the most held-out item.
pub fn free_options(release: &Release) -> Vec<(CandidatePolicy, u32)> {
    let mut out = Vec::new();
    if let Some(p) = release.popularity.as_deref() {
        out.push((CandidatePolicy::Popular(1), super::ranking(p, 1)[0]));
    }
    if let Some(h) = release.heldout.as_deref() {
        out.push((CandidatePolicy::Heldout(1), super::ranking(h, 1)[0]));
    }
    out
}

/// A free option for people.
pub fn free_name(policy: &CandidatePolicy) -> String {
    match policy {
        CandidatePolicy::Popular(1) => {
            "showing everyone the most popular training item (popular:1, 0 eps)".into()
        }
        CandidatePolicy::Heldout(1) => {
            "showing everyone the item the fitted users held out most (heldout:1, public counts, \
             0 eps)"
                .into()
        }
        p => format!("showing everyone {p} (0 eps)"),
    }
}

/// The index of the best of `options` (per-user hits) by mean over `rows`; ties: the first.
pub fn best_on(rows: &[usize], options: &[Vec<f64>]) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, o) in options.iter().enumerate() {
        let m = Estimate::of(&on(rows, o)).mean;
        if m > best.1 {
            best = (i, m);
        }
    }
    best.0
}

/// Whether a paired gain beats the free option by the margin: positive and above `margin`
/// standard errors.
pub fn beats(gain: &Estimate, margin: f64) -> bool {
    gain.mean > 0.0 && gain.mean > margin * gain.se
}

/// What the private tuner's held-out estimate released at one ε.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateEstimate {
    /// The noisy hit@1 of each released configuration (candidate index, estimate whose `se`
    /// is the Laplace noise's standard deviation), the chosen one first.
    pub released: Vec<(usize, Estimate)>,
    /// The best free option by its noisy estimate (candidate index).
    pub best_free: usize,
    /// The chosen configuration's noisy gain over it; `se` bounds the noise and the sampling
    /// error together (see [`private_estimate`]).
    pub gain: Estimate,
    /// ε of the estimate (on the estimation part).
    pub epsilon: f64,
}

/// The ε-DP held-out estimate of the chosen candidate `chosen` and of the free options `free`
/// (candidate indices) from their exact sums over the `users` estimation users (`sums[c]`, each
/// user adding a hit probability in [0, 1] to each): the k distinct configurations released
/// together have L1 sensitivity k for a replaced user, so each sum gets Laplace(k/ε) noise and the
/// release is ε-DP. The gain's standard error adds the noise of the two means and a bound on the
/// paired sampling error computed from the released means, `√((hit + free)/n)` (a difference of
/// two hits in [0, 1] has a second moment at most the sum of their means).
pub fn private_estimate(
    sums: &[f64],
    chosen: usize,
    free: &[usize],
    users: usize,
    epsilon: f64,
    rng: &mut Rng,
) -> PrivateEstimate {
    let mut ids = vec![chosen];
    for &f in free {
        if !ids.contains(&f) {
            ids.push(f);
        }
    }
    let n = users.max(1) as f64;
    let scale = ids.len() as f64 / epsilon;
    let sd = std::f64::consts::SQRT_2 * scale / n;
    let released: Vec<(usize, Estimate)> = ids
        .iter()
        .map(|&c| {
            let mean = (sums[c] + scale * laplace1(rng)) / n;
            (c, Estimate { mean, se: sd })
        })
        .collect();
    let noisy = |c: usize| released.iter().find(|r| r.0 == c).expect("released").1;
    let (mut best_free, mut top) = (chosen, f64::NEG_INFINITY);
    for &f in free {
        if noisy(f).mean > top {
            (best_free, top) = (f, noisy(f).mean);
        }
    }
    let (h, f) = (noisy(chosen).mean, noisy(best_free).mean);
    let gain = if chosen == best_free {
        Estimate { mean: 0.0, se: 0.0 }
    } else {
        let sampling = ((h.clamp(0.0, 1.0) + f.clamp(0.0, 1.0)) / n).sqrt();
        Estimate {
            mean: h - f,
            se: (2.0 * sd * sd + sampling * sampling).sqrt(),
        }
    };
    PrivateEstimate {
        released,
        best_free,
        gain,
        epsilon,
    }
}

/// The calibration users' entry of a private tuning of `selections` ε: the selections and the
/// held-out estimates (ε of one selection each) add by basic composition — the cut is by row
/// position, which a replaced user can shift, so parallel composition over the two parts is not
/// claimed.
pub fn private_privacy(
    tuner: &PrivateTuner,
    selections: usize,
    split: &EstimationSplit,
) -> PopulationPrivacy {
    let mut p = tuner.privacy(selections);
    let s = tuner.statement();
    p.epsilon = p.epsilon.map(|e| e + selections as f64 * s.epsilon);
    p.mechanism = format!(
        "{}; margin rule: the free options (popular:1, heldout:1) are candidates whose scores \
         carry the same noise, and the chosen configuration and every free option are then \
         estimated on the other calibration users, each sum + Laplace(k/eps_est) for the k \
         configurations released, eps_est = {} per tuned eps; krr is served only when its noisy \
         gain over the best free option exceeds the margin",
        p.mechanism, s.epsilon
    );
    p.note = format!(
        "{}; the selections read the {} selection users and the estimates the {} estimation \
         users (a cut by row position, which a replaced user can shift): basic composition, the \
         selections' eps plus {selections} x {} for the estimates",
        p.note, split.selection_users, split.estimation_users, s.epsilon
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_are_disjoint_and_cover_the_users() {
        let (s, e) = parts(7);
        assert_eq!(s, vec![0, 2, 4, 6]);
        assert_eq!(e, vec![1, 3, 5]);
        assert!(s.iter().all(|u| !e.contains(u)));
        let sp = split(7);
        assert_eq!((sp.selection_users, sp.estimation_users), (4, 3));
    }

    #[test]
    fn the_private_estimate_names_the_best_free_option_and_carries_its_noise() {
        let mut rng = crate::rng::Streams::new(3).stream(0, 0, 0, 0);
        // Candidates: 0 popular:1 (100 of 1000), 1 heldout:1 (300), 2 krr (320): the gain of
        // krr over the best free option is small against a noise s.d. of √2·3/(1·1000).
        let est = private_estimate(&[100.0, 300.0, 320.0], 2, &[0, 1], 1000, 1.0, &mut rng);
        assert_eq!(est.best_free, 1);
        assert_eq!(est.released.len(), 3);
        let sd = std::f64::consts::SQRT_2 * 3.0 / 1000.0;
        assert!((est.released[0].1.se - sd).abs() < 1e-12);
        assert!(est.gain.se > sd && !beats(&est.gain, 2.0));
        // A large gain clears it.
        let est = private_estimate(&[100.0, 300.0, 600.0], 2, &[0, 1], 1000, 1.0, &mut rng);
        assert!(beats(&est.gain, 2.0), "{:?}", est.gain);
    }
}
