//! Estimates free of the tuner's selection (docs/utility.md, "What a tuned row is worth"): the
//! calibration users are cut into two parts, each user by a keyed hash of that user's own history
//! ([`selection_user`]) — one part chooses, the other estimates — and every number `tuning.json` reports of a chosen row (its hit@1, the best free option's,
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
//! part only ([`private_estimate`]). A user's part depends on that user's own row only, so a
//! neighbour moves each part's sums by at most one user's contribution; a changed user may move
//! between the parts, so the two are accounted by basic composition: their ε add
//! ([`private_privacy`]).

use crate::error::Result;

use crate::data::heldout::HeldOutRows;
use crate::privacy::PopulationPrivacy;
use crate::scoring::{CandidatePolicy, Prior};

use super::private::{noisy_sum, PrivateTuner, TuneRng};
use crate::recommend::release::Release;
use crate::recommend::tuned::{beats, Estimate, EstimationSplit, TunedRow};

/// The rule of [`selection_user`], for people.
pub const RULE: &str = "each calibration user chooses or estimates by a keyed hash of that user's \
                        own history with a public constant: no user's \
                        presence or data moves another between the parts; the part sizes vary \
                        with the data and are published like the calibration count";

/// The public key of the cut: a constant, so the cut depends on nothing but each user's own row.
const PART_SEED: u64 = 0x6573_7469_6d61_7465;

/// Whether the calibration user whose history is `history` is in the selection part: one bit of
/// [`user_key`](crate::data::split::user_key) over that user's own history alone (not the
/// held-out items, so what a user held out never moves them between the parts).
pub fn selection_user(history: &[u32]) -> bool {
    let own: Vec<u8> = history.iter().flat_map(|i| i.to_le_bytes()).collect();
    crate::data::split::user_key(PART_SEED, b"estimation-part", &own) >> 63 == 0
}

/// Per calibration row of `cal`, whether it is in the selection part ([`selection_user`]).
pub fn selection_mask(cal: &HeldOutRows) -> Vec<bool> {
    (0..cal.rows())
        .map(|u| {
            let h = cal.history.outer_view(u);
            selection_user(h.as_ref().map_or(&[][..], |r| r.indices()))
        })
        .collect()
}

/// The rows of the two parts of the calibration users `cal`: (selection, estimation).
pub fn parts(cal: &HeldOutRows) -> (Vec<usize>, Vec<usize>) {
    let mask = selection_mask(cal);
    (0..cal.rows()).partition(|&u| mask[u])
}

/// The split record of the calibration users `cal`.
pub fn split(cal: &HeldOutRows) -> EstimationSplit {
    let (s, e) = parts(cal);
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
    rng: &mut TuneRng,
) -> Result<PrivateEstimate> {
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
            let mean = noisy_sum(sums[c], 1.0 / scale, rng)? / n;
            Ok((c, Estimate { mean, se: sd }))
        })
        .collect::<Result<_>>()?;
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
    Ok(PrivateEstimate {
        released,
        best_free,
        gain,
        epsilon,
    })
}

/// The calibration users' entry of a private tuning of `selections` ε: the selections and the
/// held-out estimates (ε of one selection each) add by basic composition — each user's part is
/// a function of that user's own row, but a changed user may move between the parts, so
/// parallel composition over the two parts is not claimed.
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
         users (each user's part by a keyed hash of that user's own row, so no user moves \
         another; a changed user may change parts): basic composition, the \
         selections' eps plus {selections} x {} for the estimates",
        p.note, split.selection_users, split.estimation_users, s.epsilon
    );
    p
}

/// The margin rule of a private tuning at one ε: `row` is what the private selection chose
/// among `cands` on the selection part (the first `n_free` are the free options); the chosen
/// configuration and every free option are estimated on the `users` estimation users from their
/// exact sums `est_sums` with ε `eps_est` ([`private_estimate`]), and krr is served
/// only when its noisy gain over the best free option exceeds `margin` standard errors, else
/// that free option (0 ε). Only released values enter the row.
#[allow(clippy::too_many_arguments)]
pub(super) fn private_margin(
    mut row: TunedRow,
    cands: &[(CandidatePolicy, Prior, f64)],
    est_sums: &[f64],
    n_free: usize,
    users: usize,
    eps_est: f64,
    margin: f64,
    rng: &mut TuneRng,
) -> Result<TunedRow> {
    let chosen = cands
        .iter()
        .position(|c| c.0 == row.candidates && c.1 == row.prior)
        .unwrap_or(0);
    let free: Vec<usize> = (0..n_free).collect();
    let e = private_estimate(est_sums, chosen, &free, users, eps_est, rng)?;
    let noisy = |c: usize| e.released.iter().find(|r| r.0 == c).expect("released").1;
    let wins = chosen >= n_free && beats(&e.gain, margin);
    let free_policy = cands[e.best_free].0.clone();
    let (h, f) = (noisy(chosen), noisy(e.best_free));
    let selection = row.reason.clone();
    row.mechanism = if wins { "krr" } else { "random" }.into();
    if !wins {
        row.candidates = free_policy.clone();
        row.prior = Prior::None;
    }
    row.spends = if wins { row.epsilon } else { 0.0 };
    (row.calibration_hit, row.calibration_se) = if wins { (h.mean, h.se) } else { (f.mean, f.se) };
    row.free_option = Some(free_policy.clone());
    row.free_hit = Some(f);
    if let Some(p) = row.private.as_mut() {
        p.gain = Some(if wins {
            e.gain
        } else {
            Estimate { mean: 0.0, se: 0.0 }
        });
        p.estimate_epsilon = Some(e.epsilon);
    }
    row.reason = format!(
        "{selection}; on {users} other calibration users (eps {eps_est}): noisy hit@1 {h} \
         against {f} for {free_policy}, gain {:+.4} ± {:.4} (noise and sampling), {} {margin} \
         s.e.: serves {}",
        e.gain.mean,
        e.gain.se,
        if wins { "above" } else { "not above" },
        if wins {
            format!("krr over {}", row.candidates)
        } else {
            format!("{free_policy} (0 eps)")
        }
    );
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &[(Vec<u32>, Vec<u32>)], n_items: usize) -> HeldOutRows {
        let h: Vec<Vec<u32>> = rows.iter().map(|r| r.0.clone()).collect();
        let t: Vec<Vec<u32>> = rows.iter().map(|r| r.1.clone()).collect();
        HeldOutRows {
            history: crate::data::csr_from_rows(&h, n_items),
            heldout: crate::data::csr_from_rows(&t, n_items),
            population: "validation",
            split: String::new(),
        }
    }

    #[test]
    fn the_parts_are_disjoint_cover_the_users_and_are_each_users_own() {
        let users: Vec<(Vec<u32>, Vec<u32>)> = (0..400u32)
            .map(|u| {
                (
                    (0..1 + u % 7).map(|i| (u + 3 * i) % 1000).collect(),
                    vec![u % 50],
                )
            })
            .map(|(mut h, t): (Vec<u32>, Vec<u32>)| {
                h.sort_unstable();
                h.dedup();
                (h, t)
            })
            .collect();
        let cal = rows(&users, 1000);
        let (s, e) = parts(&cal);
        assert_eq!(s.len() + e.len(), 400);
        assert!(s.iter().all(|u| !e.contains(u)));
        // Both parts are about half.
        assert!((150..250).contains(&s.len()), "{}", s.len());
        let sp = split(&cal);
        assert_eq!(sp.selection_users as usize, s.len());
        // One user added at the front (and one removed) moves no other user between the parts.
        let mask = selection_mask(&cal);
        let mut more = vec![(vec![1, 2, 3], vec![4])];
        more.extend(users.iter().cloned());
        assert_eq!(&selection_mask(&rows(&more, 1000))[1..], &mask[..]);
        assert_eq!(selection_mask(&rows(&users[1..], 1000)), mask[1..].to_vec());
        // Power: a cut by row position (even rows choose) moves about half of them.
        let by_position = |n: usize| (0..n).map(|u| u % 2 == 0).collect::<Vec<bool>>();
        let moved = by_position(401)[1..]
            .iter()
            .zip(by_position(400))
            .filter(|(a, b)| *a != b)
            .count();
        assert!(moved > 300, "{moved}");
    }

    #[test]
    fn the_private_estimate_names_the_best_free_option_and_carries_its_noise() {
        let mut rng = TuneRng::Fast(crate::rng::Streams::new(3).stream(0, 0, 0, 0));
        // Candidates: 0 popular:1 (100 of 1000), 1 heldout:1 (300), 2 krr (320): the gain of
        // krr over the best free option is small against a noise s.d. of √2·3/(1·1000).
        let est =
            private_estimate(&[100.0, 300.0, 320.0], 2, &[0, 1], 1000, 1.0, &mut rng).unwrap();
        assert_eq!(est.best_free, 1);
        assert_eq!(est.released.len(), 3);
        let sd = std::f64::consts::SQRT_2 * 3.0 / 1000.0;
        assert!((est.released[0].1.se - sd).abs() < 1e-12);
        assert!(est.gain.se > sd && !beats(&est.gain, 2.0));
        // A large gain clears it.
        let est =
            private_estimate(&[100.0, 300.0, 600.0], 2, &[0, 1], 1000, 1.0, &mut rng).unwrap();
        assert!(beats(&est.gain, 2.0), "{:?}", est.gain);
    }
}
