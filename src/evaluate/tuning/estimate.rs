//! Estimates free of the tuner's selection (docs/utility.md, "What a tuned row is worth"): the
//! calibration users are cut into two parts, each user by a keyed hash of that user's id
//! ([`selection_user`]) — one part chooses, the other estimates — and every number `tuning.json`
//! reports of a chosen row (its hit@1, the best free option's, their paired difference) is
//! measured on the part the choice never read. The best of many configurations measured on the
//! users it was chosen on is optimistic (the winner's curse); on other users its mean is
//! unbiased.
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
//! part only ([`private_estimate`]). A user's part is a function of that user's id and a public
//! constant, like the group the split drew them into: one user added or removed is in one part
//! and moves no other, and a user whose data (history and held-out items) is replaced under the
//! same id stays in their part, so the other part's inputs are the same on both neighbours. The
//! exact size of either part depends on the data and is never released by a private tuning: the
//! estimates divide noisy sums by a noisy count released with them. The two parts compose in parallel: the calibration users' ε is the larger
//! of the selections' and the estimates' ([`private_privacy`]).

use crate::error::{Error, Result};

use crate::data::heldout::HeldOutRows;
use crate::privacy::PopulationPrivacy;
use crate::scoring::{CandidatePolicy, Prior};

use super::private::{noisy_sum, PrivateTuner, TuneRng};
use crate::recommend::release::Release;
use crate::recommend::tuned::{beats, Estimate, EstimationSplit, TunedRow};

/// The rule of [`selection_user`], for people.
pub const RULE: &str = "each calibration user chooses or estimates by a keyed hash of that user's \
                        id with a public constant, as the split drew their group: no user's \
                        presence or data moves another between the parts, and replacing a \
                        user's data keeps them in theirs; the part sizes vary with the data \
                        (published by a non-private tuning only)";

/// The public key of the cut: a constant, so the cut depends on nothing but each user's id.
const PART_SEED: u64 = 0x6573_7469_6d61_7465;

/// Whether the calibration user `id` is in the selection part: one bit of
/// [`user_key`](crate::data::split::user_key) over that user's id alone — the identifier the
/// split drew their group by, public in the same way and kept when their data is replaced — so
/// neither another user's presence nor anyone's history or held-out items move a user between
/// the parts.
pub fn selection_user(id: &str) -> bool {
    crate::data::split::user_key(PART_SEED, b"estimation-part", id.as_bytes()) >> 63 == 0
}

/// Per calibration row of `cal`, whether it is in the selection part ([`selection_user`]);
/// an error when the rows carry no ids (the cut is keyed on them).
pub fn selection_mask(cal: &HeldOutRows) -> Result<Vec<bool>> {
    if cal.ids.len() != cal.rows() {
        return Err(Error::Invalid(format!(
            "{} calibration users with {} user ids: the selection/estimation cut is keyed on \
             each user's id",
            cal.rows(),
            cal.ids.len()
        )));
    }
    Ok(cal.ids.iter().map(|id| selection_user(id)).collect())
}

/// The rows of the two parts of the calibration users `cal`: (selection, estimation).
pub fn parts(cal: &HeldOutRows) -> Result<(Vec<usize>, Vec<usize>)> {
    let mask = selection_mask(cal)?;
    Ok((0..cal.rows()).partition(|&u| mask[u]))
}

/// The split record of the calibration users `cal`: the part sizes when `counts` (a
/// non-private tuning), else the rule alone — exact counts of groups the data decides are
/// neither public nor DP.
pub fn split(cal: &HeldOutRows, counts: bool) -> Result<EstimationSplit> {
    let (s, e) = parts(cal)?;
    Ok(EstimationSplit {
        selection_users: counts.then_some(s.len() as u64),
        estimation_users: counts.then_some(e.len() as u64),
        rule: RULE.into(),
    })
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
    /// The free option the margin rule compares with (candidate index): the first free option,
    /// or a later one whose noisy gain over it clears the margin.
    pub best_free: usize,
    /// The chosen configuration's noisy gain over it; `se` bounds the noise and the sampling
    /// error together (see [`private_estimate`]).
    pub gain: Estimate,
    /// ε of the estimate (on the estimation part).
    pub epsilon: f64,
    /// The noisy number of estimation users the means divide by (released with the sums).
    pub users: f64,
}

/// The noisy paired gain of a noisy mean `h` over a noisy mean `f` on `n` users, each with
/// noise s.d. `sd`: its `se` adds the noise of both means and a bound on the paired sampling
/// error computed from the released means, `√((hit + free)/n)` (a difference of two hits in
/// [0, 1] has a second moment at most the sum of their means).
fn noisy_gain(h: Estimate, f: Estimate, n: f64) -> Estimate {
    let sampling = ((h.mean.clamp(0.0, 1.0) + f.mean.clamp(0.0, 1.0)) / n).sqrt();
    Estimate {
        mean: h.mean - f.mean,
        se: (h.se * h.se + f.se * f.se + sampling * sampling).sqrt(),
    }
}

/// The ε-DP held-out estimate of the chosen candidate `chosen` and of the free options `free`
/// (candidate indices, the default first) from their exact sums over the `users` estimation
/// users (`sums[c]`, each user adding a hit probability in [0, 1] to each). The k distinct
/// configurations' sums and the number of users are released together with Laplace((k+1)/ε)
/// noise on each: one user added, removed or replaced changes each sum by at most 1 and the
/// count by at most 1, an L1 sensitivity of k + 1, so the release is ε-DP. The means divide the
/// noisy sums by the noisy count (at least 1): the exact count, which the keyed split makes
/// depend on the data, is never released. The free option compared with is the first
/// unless a later one's noisy gain over it clears `margin` standard errors ([`beats`]): with
/// noise larger than the free options' differences, the best by noisy mean would be a coin
/// flip between them, and the first (the most popular training item) is never a chosen-by-noise
/// item. The chosen configuration's gain over that option is released with its standard error
/// (`noisy_gain`).
pub fn private_estimate(
    sums: &[f64],
    chosen: usize,
    free: &[usize],
    users: usize,
    epsilon: f64,
    margin: f64,
    rng: &mut TuneRng,
) -> Result<PrivateEstimate> {
    let mut ids = vec![chosen];
    for &f in free {
        if !ids.contains(&f) {
            ids.push(f);
        }
    }
    let scale = (ids.len() + 1) as f64 / epsilon;
    let n = noisy_sum(users as f64, 1.0 / scale, rng)?.max(1.0);
    let sd = std::f64::consts::SQRT_2 * scale / n;
    let released: Vec<(usize, Estimate)> = ids
        .iter()
        .map(|&c| {
            let mean = noisy_sum(sums[c], 1.0 / scale, rng)? / n;
            Ok((c, Estimate { mean, se: sd }))
        })
        .collect::<Result<_>>()?;
    let noisy = |c: usize| released.iter().find(|r| r.0 == c).expect("released").1;
    let mut best_free = *free.first().unwrap_or(&chosen);
    for &f in free.iter().skip(1) {
        let g = noisy_gain(noisy(f), noisy(best_free), n);
        if beats(&g, margin) {
            best_free = f;
        }
    }
    let gain = if chosen == best_free {
        Estimate { mean: 0.0, se: 0.0 }
    } else {
        noisy_gain(noisy(chosen), noisy(best_free), n)
    };
    Ok(PrivateEstimate {
        released,
        best_free,
        gain,
        epsilon,
        users: n,
    })
}

/// An ε for people: rounded to 6 decimals, so sums such as 3 × 0.1 print as 0.3.
pub fn shown(epsilon: f64) -> f64 {
    (epsilon * 1e6).round() / 1e6
}

/// The calibration users' entry of a private tuning of `selections` ε: the selections read the
/// selection part only, the held-out estimates (ε of one selection each) the estimation part
/// only, and a user's part is a function of that user's id alone (kept when their data is
/// replaced; an added or removed user is in one part), so a neighbour changes the inputs of one
/// part: parallel composition, the larger of the two parts' totals (the selections' δ, if any,
/// unchanged). Neither part's size is published.
pub fn private_privacy(tuner: &PrivateTuner, selections: usize) -> PopulationPrivacy {
    let mut p = tuner.privacy(selections);
    let s = tuner.statement();
    let estimates = selections as f64 * s.epsilon;
    p.epsilon = p.epsilon.map(|e| e.max(estimates));
    p.mechanism = format!(
        "{}; margin rule: the free options (popular:1, heldout:1) are candidates whose scores \
         carry the same noise, and the chosen configuration and every free option are then \
         estimated on the other calibration users, each sum and their number + \
         Laplace((k+1)/eps_est) for the k configurations released, the means the noisy sums over \
         the noisy count, eps_est = {} per tuned eps; krr is served only when its noisy \
         gain over the free option (popular:1, or heldout:1 when its noisy gain over popular:1 \
         clears the margin) exceeds the margin",
        p.mechanism,
        shown(s.epsilon)
    );
    p.note = format!(
        "{}; the selections read the selection users only and the estimates ({selections} x \
         {} = {}) the estimation users only; each user's part is a keyed hash of that user's id, \
         which a neighbour keeps (one user's data replaced) or adds to one part only (one user \
         added or removed), so a neighbour changes one part's inputs: parallel composition, the \
         larger of the two parts' eps; neither part's size is published, the estimates divide by \
         a noisy count released with them",
        p.note,
        shown(s.epsilon),
        shown(estimates),
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
    let e = private_estimate(est_sums, chosen, &free, users, eps_est, margin, rng)?;
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
        "{selection}; on the other calibration users (noisy count {:.1}, eps {}): noisy hit@1 \
         {h} against {f} for {free_policy}, gain {:+.4} ± {:.4} (noise and sampling), {} \
         {margin} s.e.: serves {}",
        e.users,
        shown(eps_est),
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

    /// Calibration rows of (id, history, held-out items).
    fn rows(rows: &[(String, Vec<u32>, Vec<u32>)], n_items: usize) -> HeldOutRows {
        let h: Vec<Vec<u32>> = rows.iter().map(|r| r.1.clone()).collect();
        let t: Vec<Vec<u32>> = rows.iter().map(|r| r.2.clone()).collect();
        HeldOutRows {
            history: crate::data::csr_from_rows(&h, n_items),
            heldout: crate::data::csr_from_rows(&t, n_items),
            ids: rows.iter().map(|r| r.0.clone()).collect(),
            population: "validation",
            split: String::new(),
        }
    }

    /// 400 users with distinct ids, histories and held-out items.
    fn users() -> Vec<(String, Vec<u32>, Vec<u32>)> {
        (0..400u32)
            .map(|u| {
                let mut h: Vec<u32> = (0..1 + u % 7).map(|i| (u + 3 * i) % 1000).collect();
                h.sort_unstable();
                h.dedup();
                (format!("{}", 1000 + 7 * u), h, vec![u % 50])
            })
            .collect()
    }

    /// Of the users of `base` also in `other` (matched by id), how many are in another part, and
    /// whether the selection part's size changed.
    fn moved(
        cut: &dyn Fn(&HeldOutRows) -> Vec<bool>,
        base: &HeldOutRows,
        other: &HeldOutRows,
    ) -> (usize, bool) {
        let (a, b) = (cut(base), cut(other));
        let n = base
            .ids
            .iter()
            .enumerate()
            .filter_map(|(u, id)| other.ids.iter().position(|o| o == id).map(|v| (u, v)))
            .filter(|&(u, v)| a[u] != b[v])
            .count();
        let count = |m: &[bool]| m.iter().filter(|&&x| x).count();
        (n, count(&a) != count(&b))
    }

    #[test]
    fn a_neighbour_moves_no_user_between_the_parts_and_a_positional_or_history_cut_does() {
        let users = users();
        let cal = rows(&users, 1000);
        let (s, e) = parts(&cal).unwrap();
        assert_eq!(s.len() + e.len(), 400);
        assert!(s.iter().all(|u| !e.contains(u)));
        // Both parts are about half.
        assert!((150..250).contains(&s.len()), "{}", s.len());
        assert_eq!(
            split(&cal, true).unwrap().selection_users,
            Some(s.len() as u64)
        );
        assert_eq!(split(&cal, false).unwrap().selection_users, None);
        let keyed = |c: &HeldOutRows| selection_mask(c).unwrap();
        let by_position = |c: &HeldOutRows| (0..c.rows()).map(|u| u % 2 == 0).collect::<Vec<_>>();
        let by_history = |c: &HeldOutRows| {
            (0..c.rows())
                .map(|u| {
                    let h = c
                        .history
                        .outer_view(u)
                        .map_or(vec![], |r| r.indices().to_vec());
                    let own: Vec<u8> = h.iter().flat_map(|i| i.to_le_bytes()).collect();
                    crate::data::split::user_key(PART_SEED, b"estimation-part", &own) >> 63 == 0
                })
                .collect::<Vec<_>>()
        };
        // One user added at the front; one removed from the front.
        let mut more = vec![("1".to_string(), vec![1, 2, 3], vec![4])];
        more.extend(users.iter().cloned());
        let added = rows(&more, 1000);
        let removed = rows(&users[1..], 1000);
        assert_eq!(moved(&keyed, &cal, &added).0, 0);
        assert_eq!(moved(&keyed, &cal, &removed).0, 0);
        // Power: a cut by row position moves about half of them.
        assert!(moved(&by_position, &cal, &added).0 > 150);
        assert!(moved(&by_position, &cal, &removed).0 > 150);
        // One user's data replaced under the same id (the unit of the private tuner): nobody
        // moves, the replaced user included, and the part sizes stay as they were — for every
        // user replaced. Power: a cut keyed on the history moves the replaced user (and the
        // part sizes, which a non-private tuning publishes) for about half of them.
        let (mut keyed_moves, mut history_moves) = (0, 0);
        for u in 0..100 {
            let mut changed = users.clone();
            changed[u].1 = vec![900 + u as u32 % 50, 999];
            changed[u].2 = vec![7];
            let changed = rows(&changed, 1000);
            let (m, sizes) = moved(&keyed, &cal, &changed);
            keyed_moves += m + usize::from(sizes);
            let (m, sizes) = moved(&by_history, &cal, &changed);
            assert!(m <= 1);
            history_moves += usize::from(sizes);
        }
        assert_eq!(keyed_moves, 0);
        assert!(history_moves > 25, "{history_moves}");
        // Rows without ids are refused, not cut some other way.
        let mut no_ids = cal.clone();
        no_ids.ids.clear();
        assert!(parts(&no_ids).is_err());
    }

    #[test]
    fn the_private_estimate_names_the_best_free_option_and_carries_its_noise() {
        let mut rng = TuneRng::Fast(crate::rng::Streams::new(3).stream(0, 0, 0, 0));
        // Candidates: 0 popular:1 (100 of 1000), 1 heldout:1 (300), 2 krr (320): heldout:1
        // clears the margin over popular:1; the gain of krr over it is small against a noise
        // s.d. of √2·4/(1·ñ), ñ the noisy count (three sums and the count: sensitivity 4).
        let est =
            private_estimate(&[100.0, 300.0, 320.0], 2, &[0, 1], 1000, 1.0, 2.0, &mut rng).unwrap();
        assert_eq!(est.best_free, 1);
        assert_eq!(est.released.len(), 3);
        assert!((est.users - 1000.0).abs() < 100.0, "{}", est.users);
        assert_ne!(est.users, 1000.0, "the count is noised");
        let sd = std::f64::consts::SQRT_2 * 4.0 / est.users;
        assert!((est.released[0].1.se - sd).abs() < 1e-12);
        assert!(est.gain.se > sd && !beats(&est.gain, 2.0));
        // A large gain clears it.
        let est =
            private_estimate(&[100.0, 300.0, 600.0], 2, &[0, 1], 1000, 1.0, 2.0, &mut rng).unwrap();
        assert!(beats(&est.gain, 2.0), "{:?}", est.gain);
    }

    #[test]
    fn a_free_option_within_the_noise_does_not_replace_the_first() {
        // popular:1 (100 of 300 users) and heldout:1 (105) at eps 0.3: the noise s.d. of a
        // mean, √2·4/(0.3·300) ≈ 0.063, dwarfs their difference. The first stays the free
        // option in most draws; the best by noisy mean would take the other in about half.
        let mut rng = TuneRng::Fast(crate::rng::Streams::new(5).stream(0, 0, 0, 0));
        let (mut kept, mut by_noise) = (0, 0);
        for _ in 0..400 {
            let est = private_estimate(&[100.0, 105.0, 110.0], 2, &[0, 1], 300, 0.3, 2.0, &mut rng)
                .unwrap();
            kept += usize::from(est.best_free == 0);
            let m = |c: usize| est.released.iter().find(|r| r.0 == c).unwrap().1.mean;
            by_noise += usize::from(m(1) > m(0));
        }
        assert!(kept > 380, "{kept}");
        assert!((160..280).contains(&by_noise), "{by_noise}");
    }
}
