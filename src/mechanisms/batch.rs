//! Many selections in one call: the counts of `recsel sample` and one selection per user of a
//! batch (docs/python.md). The command line and the Python package call these functions, so the
//! same seed gives the same counts and the same selections from both.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::mechanisms::{Mechanism, Problem, Selector};
use crate::rng::{name_id, Draws, NoiseMode, SecureRng, Streams};

/// Selections per parallel work item of [`sample_counts`].
const CHUNK: u64 = 1 << 14;

/// How often each candidate of `problem` is chosen in `n` selections by `mech`. In fast mode
/// selection i draws from the stream (mechanism, ε index 0, user i >> 32, trial i mod 2^32) of
/// `streams`, so the counts do not depend on the number of threads; in secure mode every chunk
/// draws from its own OS-seeded generator. `progress` receives selections done.
pub fn sample_counts(
    mech: &dyn Mechanism,
    problem: &Problem<'_>,
    mode: NoiseMode,
    streams: Streams,
    n: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<u64>> {
    let counts = outcome_counts(mech, problem, mode, streams, n, false, progress)?;
    Ok(counts.candidates)
}

/// How often each candidate was chosen, and how often ⊥ was released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeCounts {
    /// Selections of each candidate.
    pub candidates: Vec<u64>,
    /// Selections that released ⊥ (always 0 for a mechanism that cannot,
    /// [`Mechanism::may_release_bottom`]).
    pub bottom: u64,
}

/// [`sample_counts`] with ⊥ counted apart ([`crate::mechanisms::Prepared::sample_outcome`]) when
/// `explicit_bottom` is set; otherwise ⊥ is the mechanism's uniform stand-in, as in
/// [`sample_counts`]. The same streams, so a mechanism that never releases ⊥ gives the same
/// counts either way.
pub fn sample_outcome_counts(
    mech: &dyn Mechanism,
    problem: &Problem<'_>,
    mode: NoiseMode,
    streams: Streams,
    n: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OutcomeCounts> {
    outcome_counts(mech, problem, mode, streams, n, true, progress)
}

fn outcome_counts(
    mech: &dyn Mechanism,
    problem: &Problem<'_>,
    mode: NoiseMode,
    streams: Streams,
    n: u64,
    explicit_bottom: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OutcomeCounts> {
    let k = problem.len();
    let id = name_id(mech.name());
    let selector = Selector::new(mech, problem, mode)?;
    let mut counts = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| -> Result<Vec<u64>> {
            // Candidates, then ⊥ in the last cell.
            let mut counts = vec![0u64; k + 1];
            let (start, end) = (c * CHUNK, ((c + 1) * CHUNK).min(n));
            let mut draws = Draws::new(mode, streams)?;
            for i in start..end {
                let cell = if explicit_bottom {
                    selector
                        .sample_outcome(&mut draws, id, 0, i >> 32, i as u32)
                        .unwrap_or(k)
                } else {
                    selector.sample(&mut draws, id, 0, i >> 32, i as u32)
                };
                counts[cell] += 1;
            }
            progress(end - start);
            Ok(counts)
        })
        .try_reduce(
            || vec![0u64; k + 1],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                Ok(a)
            },
        )?;
    let bottom = counts.pop().unwrap_or(0);
    Ok(OutcomeCounts {
        candidates: counts,
        bottom,
    })
}

/// Where a batch's stream coordinates come from: row i of the batch is user `users[i]` (or i),
/// drawing from the stream (mechanism, `eps_index`, user, `trial`) — the stream `recsel select`
/// uses for that user at the ε of index `eps_index` of its grid in trial `trial`.
#[derive(Debug, Clone, Copy)]
pub struct BatchStreams<'a> {
    /// The run's streams.
    pub streams: Streams,
    /// User index of each row (`None`: the row index).
    pub users: Option<&'a [u64]>,
    /// ε index of the stream.
    pub eps_index: u32,
    /// Trial of the stream.
    pub trial: u32,
}

/// One selection per row of `scores` (`rows × k`, row-major): row i is the problem
/// `(scores[i], sens)` where `sens` is one row of `k` shared by all rows or `rows × k`. Rows are
/// selected in parallel; errors name the first invalid row.
pub fn select_batch(
    mech: &dyn Mechanism,
    scores: &[f64],
    k: usize,
    sens: &[f64],
    mode: NoiseMode,
    at: &BatchStreams<'_>,
) -> Result<Vec<usize>> {
    if k == 0 || scores.len() % k != 0 {
        return Err(Error::Invalid(format!(
            "scores must be rows × candidates with at least one candidate, got {} values for {k} candidates",
            scores.len()
        )));
    }
    let rows = scores.len() / k;
    if sens.len() != k && sens.len() != scores.len() {
        return Err(Error::Invalid(format!(
            "sensitivities must be one row of {k} or one per score ({rows} × {k}), got {} values",
            sens.len()
        )));
    }
    if let Some(u) = at.users {
        if u.len() != rows {
            return Err(Error::Invalid(format!(
                "user_ids has {} entries for {rows} rows of scores",
                u.len()
            )));
        }
    }
    if mode.is_secure() {
        SecureRng::from_os()?; // fail now, not inside a worker
    }
    let id = name_id(mech.name());
    scores
        .par_chunks(k)
        .enumerate()
        .map_init(
            || Draws::new(mode, at.streams).expect("OS entropy was available"),
            |draws, (i, q)| {
                let d = if sens.len() == k {
                    sens
                } else {
                    &sens[i * k..(i + 1) * k]
                };
                let problem = Problem::new(q, d).map_err(|e| row_error(i, e))?;
                let selector = Selector::new(mech, &problem, mode).map_err(|e| row_error(i, e))?;
                let user = at.users.map_or(i as u64, |u| u[i]);
                Ok(selector.sample(draws, id, at.eps_index, user, at.trial))
            },
        )
        .collect()
}

fn row_error(row: usize, e: Error) -> Error {
    Error::Invalid(format!("row {row}: {e}"))
}
