//! Recommendations for several histories whose scores are computed together: the model's
//! weights are read once per block of users instead of once per user (docs/sansa.md, "Scoring"),
//! and every user's scores are bit for bit those of [`Recommender::recommend`], so the picks are
//! too. A server that has several requests waiting scores them as one block, then selects for
//! each with the random source that request would have used alone.

use crate::error::Result;
use crate::model::Scratch;
use crate::rng::Draws;

use super::{RecScratch, Recommender};

/// Fewer histories than this are scored one at a time: a block is scored in lanes of at least
/// 8 users, and 8 lanes cost about as much as scoring five or six users alone.
pub const MIN_BLOCK: usize = 6;

/// The scores of a block of histories ([`Recommender::score_block`]), with the scratch space
/// that computes them; reused across blocks.
#[derive(Debug, Default)]
pub struct ScoredBlock {
    /// The histories, sorted and without duplicates.
    histories: Vec<Vec<u32>>,
    /// One row of every item's raw score per history (empty when the block was scored one
    /// history at a time).
    scores: Vec<f64>,
    model: Option<Scratch>,
}

impl ScoredBlock {
    /// Number of histories scored.
    pub fn len(&self) -> usize {
        self.histories.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.histories.is_empty()
    }
}

/// `history` sorted, without duplicates, into `out`: the items a user is scored on.
pub(super) fn sorted_history(history: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.extend_from_slice(history);
    out.sort_unstable();
    out.dedup();
}

impl Recommender {
    /// Scores `histories` (item columns) together into `block`, when there are at least
    /// [`MIN_BLOCK`] of them (fewer are scored by [`Recommender::recommend_scored`] itself, one at
    /// a time, which is cheaper), in passes of the model's lanes.
    pub fn score_block(&self, histories: &[&[u32]], block: &mut ScoredBlock) {
        block.histories.resize_with(histories.len(), Vec::new);
        for (h, out) in histories.iter().zip(&mut block.histories) {
            sorted_history(h, out);
        }
        block.scores.clear();
        if histories.len() < MIN_BLOCK {
            return;
        }
        let n = self.model.n_items();
        block.scores.resize(histories.len() * n, 0.0);
        let users: Vec<&[u32]> = block.histories.iter().map(Vec::as_slice).collect();
        let scratch = block.model.get_or_insert_with(|| Scratch::new(n));
        // 32 lanes cost about as much as 20 users in lanes of 8 (`cargo bench --bench
        // scoring`): more than 16 users take one pass of 32 lanes, fewer passes of 8, and a
        // remainder too small for 8 lanes is scored one user at a time.
        let (mut rest, mut rows) = (&users[..], &mut block.scores[..]);
        while !rest.is_empty() {
            let take = match rest.len() {
                17.. => rest.len().min(crate::model::SCORE_LANES),
                8..=16 => 8,
                r => r,
            };
            let (now, later) = rest.split_at(take);
            let (out, more) = std::mem::take(&mut rows).split_at_mut(take * n);
            if take >= MIN_BLOCK {
                self.model.score_block(now, out, scratch);
            } else {
                for (items, row) in now.iter().zip(out.chunks_mut(n)) {
                    self.model.score_into(items, row, scratch);
                }
            }
            (rest, rows) = (later, more);
        }
    }

    /// [`Recommender::recommend`] for history `i` of `block`: the same pick for the same draws,
    /// without scoring the history again.
    pub fn recommend_scored(
        &self,
        block: &ScoredBlock,
        i: usize,
        user: u64,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Option<u32>> {
        self.scores_of(block, i, scratch);
        self.problem_from_scores(scratch, self.prior_epsilon);
        self.select(user, draws, scratch)
    }

    /// The raw scores of history `i` of `block` into `scratch` (its `history` and `scores`).
    pub(super) fn scores_of(&self, block: &ScoredBlock, i: usize, scratch: &mut RecScratch) {
        let history = &block.histories[i];
        scratch.history.clear();
        scratch.history.extend_from_slice(history);
        if block.scores.is_empty() {
            self.model
                .score_into(&scratch.history, &mut scratch.scores, &mut scratch.model);
        } else {
            let n = scratch.scores.len();
            scratch
                .scores
                .copy_from_slice(&block.scores[i * n..(i + 1) * n]);
        }
    }
}
