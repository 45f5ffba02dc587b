//! Selection for a range of users: each user's candidates and problem, every mechanism × ε ×
//! trial on it, and the candidate pass of the diagnostics taken from the same scores.

use rayon::prelude::*;

use super::{SelectConfig, UserProblem, UserRow, CHUNK_USERS};
use crate::error::Result;
use crate::mechanisms::{Mechanism, Problem, Selector, BETA};
use crate::numerics::{pearson, spearman, weighted_correlation};
use crate::rng::{name_id, Draws, SecureRng, Streams};
use crate::scoring::{CandidateCache, Candidates, Sensitivities, UserScorer};

/// The problem [`run_user`] runs the mechanisms on for `user`; `None` if the user has no
/// candidate (or no valid problem).
pub fn user_problem<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
) -> Option<UserProblem> {
    scorer.score(user, scores, scratch);
    let Candidates {
        items,
        scores: q,
        deltas: d,
    } = Candidates::from_items(
        scores,
        cfg.candidate_items(scores, scorer.excluded(user)),
        sens,
        cfg.clip,
    );
    if items.is_empty() {
        return None;
    }
    Problem::new(&q, &d).ok()?;
    Some(UserProblem {
        items,
        scores: q,
        sens: d,
    })
}

/// Every user's problem, in user order, with the user's index (users without one are left out,
/// as in the results). `progress` receives users done.
pub fn all_problems<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<(usize, UserProblem)> {
    let n = scorer.n_users();
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(CHUNK_USERS) {
        let end = (start + CHUNK_USERS).min(n);
        let chunk: Vec<Option<(usize, UserProblem)>> = (start..end)
            .into_par_iter()
            .map_init(
                || (vec![0.0; scorer.n_items()], scorer.scratch()),
                |(buf, scratch), u| {
                    user_problem(scorer, sens, cfg, u, buf, scratch).map(|p| (u, p))
                },
            )
            .collect();
        out.extend(chunk.into_iter().flatten());
        progress((end - start) as u64);
    }
    out
}

/// Runs every mechanism × ε × trial for one user, drawing from `draws` (of `cfg.noise`'s mode);
/// `None` if the user has no candidate. Errors only on the secure path, for inputs beyond its
/// exact 128-bit arithmetic.
#[allow(clippy::too_many_arguments)]
pub fn run_user<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
    draws: &mut Draws,
) -> Result<Option<UserRow>> {
    scorer.score(user, scores, scratch);
    let items = cfg.candidate_items(scores, scorer.excluded(user));
    let problem = Candidates::from_items(scores, items, sens, cfg.clip);
    run_problem(scorer, cfg, mechs, user, problem, draws)
}

/// What one user adds to the candidate pass of the diagnostics ([`candidate_pass_range`]): its
/// candidates, their raw (unclipped) scores and the bound rule's bits.
#[derive(Debug, Clone, Default)]
struct UserPass {
    items: Vec<u32>,
    raw: Vec<f64>,
    mask: u64,
}

/// [`run_user`] that also returns the user's part of the candidate pass, from the same scores and
/// candidates (docs/real-data.md, "Memory and time"); the candidates come from `cache` when it
/// holds the user (kept by the sensitivity pass for the same `top`; only for the paper's
/// candidates), else from scoring.
#[allow(clippy::too_many_arguments)]
fn run_user_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    scores: &mut [f64],
    scratch: &mut S::Scratch,
    draws: &mut Draws,
    cache: Option<&CandidateCache>,
) -> Result<(Option<UserRow>, UserPass)> {
    let cached = cache.filter(|_| cfg.candidates.is_none());
    let (items, raw) = match cached.and_then(|c| c.get(user)) {
        Some((items, raw)) => (items.to_vec(), raw.to_vec()),
        None => {
            scorer.score(user, scores, scratch);
            let items = cfg.candidate_items(scores, scorer.excluded(user));
            let raw = items.iter().map(|&j| scores[j as usize]).collect();
            (items, raw)
        }
    };
    let problem = Candidates::from_raw(items, &raw, sens, cfg.clip);
    let pass = UserPass {
        raw,
        mask: bound_mask(&problem.scores, &problem.deltas, cfg),
        items: problem.items.clone(),
    };
    Ok((run_problem(scorer, cfg, mechs, user, problem, draws)?, pass))
}

/// The bound rule's bit at every ε of `cfg` (the first 64) for the problem `(q, d)`; 0 when empty.
fn bound_mask(q: &[f64], d: &[f64], cfg: &SelectConfig) -> u64 {
    let mut mask = 0u64;
    if !q.is_empty() {
        for (e, &eps) in cfg.epsilons.iter().enumerate().take(64) {
            if crate::numerics::bounds::mgem_bound_at_least_gem(q, d, eps, cfg.params.number(&BETA))
            {
                mask |= 1 << e;
            }
        }
    }
    mask
}

/// Runs every mechanism × ε × trial on one user's candidates; `None` when there is no candidate
/// or no valid problem.
fn run_problem<S: UserScorer>(
    scorer: &S,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    user: usize,
    candidates: Candidates,
    draws: &mut Draws,
) -> Result<Option<UserRow>> {
    let Candidates {
        items,
        scores: q,
        deltas: d,
    } = candidates;
    if items.is_empty() {
        return Ok(None);
    }
    let Ok(problem) = Problem::new(&q, &d) else {
        return Ok(None);
    };
    let qmax = problem.max_score();
    let targets = scorer.targets(user);
    // Whether each candidate is one of the user's held-out items, looked up once per user.
    let is_target: Vec<bool> = items
        .iter()
        .map(|i| targets.binary_search(i).is_ok())
        .collect();
    // Whether each candidate is already the user's (only a policy that keeps the history).
    let owned = scorer.excluded(user);
    let is_own: Vec<bool> = match cfg.candidates {
        Some(_) => items
            .iter()
            .map(|i| owned.binary_search(i).is_ok())
            .collect(),
        None => Vec::new(),
    };
    // With a prior, each ε's problem is the scores plus the offsets at that ε (docs/priors.md);
    // what is measured stays the scores without them.
    let offset: Vec<Vec<f64>> = match &cfg.prior {
        Some(p) => cfg
            .epsilons
            .iter()
            .map(|&eps| {
                let mut v = q.clone();
                p.add_offsets(&mut v, &d, |a| items[a], eps, owned);
                v
            })
            .collect(),
        None => Vec::new(),
    };
    let offset_problems = offset
        .iter()
        .map(|v| Problem::new(v, &d))
        .collect::<Result<Vec<_>>>()?;
    let mut mean_selected = Vec::with_capacity(mechs.len() * cfg.epsilons.len());
    let mut mse = Vec::with_capacity(mean_selected.capacity());
    let mut hit = Vec::with_capacity(mean_selected.capacity());
    let mut in_history = Vec::with_capacity(is_own.len().min(mean_selected.capacity()));
    // ⊥ is counted when a mechanism of the run can release it (the same draws either way).
    let marks = mechs.iter().flatten().any(|m| m.may_release_bottom());
    let mut bottom = Vec::new();
    for per_eps in mechs {
        for (e, mech) in per_eps.iter().enumerate() {
            let problem = offset_problems.get(e).unwrap_or(&problem);
            let selector = Selector::new(&**mech, problem, cfg.noise)?;
            let id = name_id(mech.name());
            let (mut sum, mut sq, mut hits, mut own, mut bottoms) = (0.0, 0.0, 0u32, 0u32, 0u32);
            let mut tally = |a: usize| {
                let v = q[a];
                sum += v;
                sq += (v - qmax) * (v - qmax);
                hits += u32::from(is_target[a]);
                own += u32::from(is_own.get(a).copied().unwrap_or(false));
            };
            let trials = 0..cfg.trials;
            if marks {
                selector.sample_trials_marked(
                    draws,
                    id,
                    e as u32,
                    user as u64,
                    trials,
                    |_, a, b| {
                        tally(a);
                        bottoms += u32::from(b);
                    },
                );
                bottom.push(f64::from(bottoms) / f64::from(cfg.trials));
            } else {
                selector.sample_trials(draws, id, e as u32, user as u64, trials, |_, a| tally(a));
            }
            mean_selected.push(sum / f64::from(cfg.trials));
            mse.push(sq / f64::from(cfg.trials));
            hit.push(f64::from(hits) / f64::from(cfg.trials));
            if cfg.candidates.is_some() {
                in_history.push(f64::from(own) / f64::from(cfg.trials));
            }
        }
    }
    Ok(Some(UserRow {
        user: user as u64,
        candidates: q.len() as u32,
        spearman: spearman(&q, &d),
        pearson: pearson(&q, &d),
        weighted: weighted_correlation(&q, &d),
        max_score: qmax,
        mean_selected,
        mse,
        random_mse: q.iter().map(|v| (v - qmax) * (v - qmax)).sum::<f64>() / q.len() as f64,
        hit,
        in_history,
        bottom,
    }))
}

/// Runs [`run_user`] for every user in `users` (indices into the scorer's users), in parallel;
/// one entry per user, `None` for a user without candidates. Every user draws from its own
/// streams, so any split of the users into ranges (chunks, partitions on a cluster) gives the
/// same rows. `mechs` is `cfg.build()`.
pub fn run_range<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    users: std::ops::Range<usize>,
) -> Result<Vec<Option<UserRow>>> {
    Ok(run_range_pass(scorer, sens, cfg, mechs, users, &[], None)?.0)
}

/// [`run_range`] together with the candidate pass of the same users
/// ([`candidate_pass_range`] with `sample`, ascending, within `users`): the counts, bits and
/// samples are taken from the scores and candidates the selection builds anyway, so no user is
/// scored a second time (docs/real-data.md, "Memory and time"). Equal to the two calls. With a
/// `cache` of the sensitivity pass (made for `cfg.top`), its users are not scored at all.
pub fn run_range_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    mechs: &[Vec<Box<dyn Mechanism>>],
    users: std::ops::Range<usize>,
    sample: &[usize],
    cache: Option<&CandidateCache>,
) -> Result<(Vec<Option<UserRow>>, ItemCounts, CandidateSample)> {
    if cfg.noise.is_secure() {
        SecureRng::from_os()?; // fail now, not inside a worker, if the OS has no entropy
    }
    let draws = || {
        Draws::new(cfg.noise, Streams::new(cfg.seed))
            .expect("OS entropy was available when the run started")
    };
    let computed = users
        .clone()
        .into_par_iter()
        .map_init(
            || (vec![0.0; scorer.n_items()], scorer.scratch(), draws()),
            |(buf, scratch, dr), u| {
                run_user_pass(scorer, sens, cfg, mechs, u, buf, scratch, dr, cache)
            },
        )
        .collect::<Result<Vec<_>>>()?;
    let n_items = scorer.n_items();
    let mut counts = ItemCounts {
        appearances: vec![0; n_items],
        outside: vec![0; n_items],
        bound_mgem: Vec::with_capacity(users.len()),
    };
    let mut picked = CandidateSample {
        users: sample.len() as u64,
        ..CandidateSample::default()
    };
    let mut rows = Vec::with_capacity(users.len());
    for (u, (row, pass)) in users.zip(computed) {
        for (&j, &v) in pass.items.iter().zip(&pass.raw) {
            let j = j as usize;
            counts.appearances[j] += 1;
            if v < sens.lower[j] || v > sens.upper[j] {
                counts.outside[j] += 1;
            }
        }
        counts.bound_mgem.push(pass.mask);
        if sample.binary_search(&u).is_ok() {
            picked.scores.extend_from_slice(&pass.raw);
            picked
                .deltas
                .extend(pass.items.iter().map(|&j| sens.delta[j as usize]));
        }
        rows.push(row);
    }
    Ok((rows, counts, picked))
}

/// Per item: how often it was a candidate and how often its candidate score lay outside its
/// `[p1, p99]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemCounts {
    /// Candidate appearances per item.
    pub appearances: Vec<u64>,
    /// Of those, scores outside the item's percentile range.
    pub outside: Vec<u64>,
    /// Per user, bit e set when mGEM's utility bound at ε_e is at least GEM's (the bound rule).
    pub bound_mgem: Vec<u64>,
}

/// `k` distinct indices out of `0..n` drawn uniformly with the run's seed (all of them when
/// `n ≤ k`), in increasing order: the users of the fig 13 d–f scatter plot and of the quantiles.
pub fn random_sample(n: usize, k: usize, seed: u64) -> Vec<usize> {
    use rand::Rng as _;
    if n <= k {
        return (0..n).collect();
    }
    let mut rng = Streams::new(seed).stream(name_id("scatter-sample"), 0, 0, 0);
    let mut idx: Vec<usize> = (0..n).collect();
    // Partial Fisher–Yates: the first k positions become a uniform k-subset.
    for i in 0..k {
        let j = rng.random_range(i..n);
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

/// The candidates of a sample of users: raw scores and sensitivities, all users' concatenated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateSample {
    /// Users in the sample.
    pub users: u64,
    /// Candidate scores before clipping.
    pub scores: Vec<f64>,
    /// Candidate sensitivities.
    pub deltas: Vec<f64>,
}

/// One pass over every user (scores and candidates as in [`run_user`]): per-item candidate counts,
/// each user's bound-rule bits at every ε of `cfg`, and, for the users in `sample` (indices into the
/// scorer's users), their candidates' raw scores and sensitivities.
pub fn candidate_pass<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    sample: &[usize],
) -> (ItemCounts, CandidateSample) {
    candidate_pass_range(scorer, sens, cfg, 0..scorer.n_users(), sample)
}

/// [`candidate_pass`] over the users in `users` only (one partition): `bound_mgem` has one entry
/// per user of the range, and `sample` must lie in the range. Concatenating the ranges' bits and
/// candidate samples in user order and adding their counts gives the whole pass
/// (`partition::merge`).
pub fn candidate_pass_range<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    users: std::ops::Range<usize>,
    sample: &[usize],
) -> (ItemCounts, CandidateSample) {
    let n_items = scorer.n_items();
    let fresh = || ItemCounts {
        appearances: vec![0; n_items],
        outside: vec![0; n_items],
        bound_mgem: Vec::new(),
    };
    // Per thread: item counts and (user, bound bits); merged in user order below, so the result
    // does not depend on the number of threads.
    let (mut counts, masks) = users
        .clone()
        .into_par_iter()
        .fold(
            || (fresh(), Vec::new(), vec![0.0; n_items], scorer.scratch()),
            |(mut c, mut masks, mut buf, mut scratch), u| {
                scorer.score(u, &mut buf, &mut scratch);
                let items = cfg.candidate_items(&buf, scorer.excluded(u));
                let mut q = Vec::with_capacity(items.len());
                let mut d = Vec::with_capacity(items.len());
                for &j in &items {
                    let (j, v) = (j as usize, buf[j as usize]);
                    c.appearances[j] += 1;
                    if v < sens.lower[j] || v > sens.upper[j] {
                        c.outside[j] += 1;
                    }
                    // The scores the mechanisms see.
                    q.push(if cfg.clip { sens.clip(j, v) } else { v });
                    d.push(sens.delta[j]);
                }
                masks.push((u, bound_mask(&q, &d, cfg)));
                (c, masks, buf, scratch)
            },
        )
        .map(|(c, masks, _, _)| (c, masks))
        .reduce(
            || (fresh(), Vec::new()),
            |(mut a, mut ma), (b, mb)| {
                for j in 0..n_items {
                    a.appearances[j] += b.appearances[j];
                    a.outside[j] += b.outside[j];
                }
                ma.extend(mb);
                (a, ma)
            },
        );
    counts.bound_mgem = vec![0; users.len()];
    for (u, mask) in masks {
        counts.bound_mgem[u - users.start] = mask;
    }
    let per_user: Vec<(Vec<f64>, Vec<f64>)> = sample
        .par_iter()
        .map_init(
            || (vec![0.0; n_items], scorer.scratch()),
            |(buf, scratch), &u| {
                scorer.score(u, buf, scratch);
                let items = cfg.candidate_items(buf, scorer.excluded(u));
                (
                    items.iter().map(|&j| buf[j as usize]).collect(),
                    items.iter().map(|&j| sens.delta[j as usize]).collect(),
                )
            },
        )
        .collect();
    let mut out = CandidateSample {
        users: sample.len() as u64,
        ..CandidateSample::default()
    };
    for (q, d) in per_user {
        out.scores.extend(q);
        out.deltas.extend(d);
    }
    (counts, out)
}
