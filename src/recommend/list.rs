//! Lists (docs/serving.md, "Lists"): an ordered list of k distinct items per history, released
//! as one answer with one guarantee — the mechanism's list guarantee ([`TopK::guarantee`]) at
//! the configured ε for the whole list — and device-side filtering, the post-processing a client
//! applies to a released list.
//!
//! A list is drawn on the same candidates, clip ranges, prior and tuned row as a single item; a
//! list of 1 is the single item's path, unchanged. The prior's offsets are scaled by the ε of
//! one round (ε/k for peeling), as they are by the ε of the one selection of a single item.

use std::collections::HashSet;
use std::sync::Arc;

use super::block::{sorted_history, ScoredBlock};
use super::{RecScratch, Recommender, Scope};
use crate::error::{Error, Result};
use crate::mechanisms::{self, ListForm, ListGuarantee, Problem, TopK};
use crate::privacy::report::PrivacyReport;
use crate::privacy::{Population, PopulationPrivacy};
use crate::rng::Draws;

/// The longest list one request may ask for.
pub const MAX_LIST: usize = 1000;

impl Recommender {
    /// The recommender that answers `k` items — the one place every front end (the ledgered
    /// batch, the service's requests and batches, Python) resolves a length in: this one for
    /// the length it was loaded for ([`super::RecommendConfig::list_k`]) and whenever a
    /// mechanism was named (it draws its own mechanism's list of `k`); with the tuned
    /// configuration ([`super::tuned::TUNED`], no mechanism named) the tuned answer of `k` from
    /// the same release and model at the same ε — the tuned list of `k` (`recsel tune --k K`),
    /// or the tuned top-1 row for `k` = 1 — as `--k K` loads it, resolved once per `k` and kept.
    /// Its mechanism, pool, released length, claim, ε, worth and request hash are the answer's.
    /// An error, naming `recsel tune --k K`, when the tuning has no list of `k`: a tuned
    /// recommender does not peel its top-1 row into a list nobody tuned.
    pub fn for_k(self: &Arc<Self>, k: usize) -> Result<Arc<Recommender>> {
        if k == 0 || k > MAX_LIST {
            return Err(Error::Invalid(format!(
                "k = {k}: a list has 1 to {MAX_LIST} items"
            )));
        }
        let Some((dir, cfg)) = self.origin.as_ref().filter(|(_, c)| c.list_k != k) else {
            return Ok(Arc::clone(self));
        };
        if let Some(r) = self
            .answers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&k)
        {
            return r.clone().map_err(Error::Invalid);
        }
        let of_k = super::RecommendConfig {
            list_k: k,
            ..cfg.clone()
        };
        // The release and the report as loaded: a tuned configuration replaces neither.
        let r = Self::load_parts(
            dir,
            &of_k,
            Arc::clone(&self.model),
            self.release.clone(),
            self.report.clone(),
            self.tuning.clone(),
        )
        .map(Arc::new)
        .map_err(|e| e.to_string());
        let mut answers = self.answers.write().unwrap_or_else(|e| e.into_inner());
        answers
            .entry(k)
            .or_insert(r)
            .clone()
            .map_err(Error::Invalid)
    }

    /// The list mechanism of lists of `k` (built once per k and kept): the configured mechanism
    /// and parameters, ε for the whole list, in the configured form. Errors for k outside
    /// 1..=[`MAX_LIST`], a form the mechanism does not support, or a form without a secure path
    /// on the secure path.
    pub fn top_k(&self, k: usize) -> Result<Arc<TopK>> {
        if k == 0 || k > MAX_LIST {
            return Err(Error::Invalid(format!(
                "k = {k}: a list has 1 to {MAX_LIST} items"
            )));
        }
        let m = self.released_len(k)?;
        if let Some(t) = self.lists.read().unwrap_or_else(|e| e.into_inner()).get(&k) {
            return Ok(Arc::clone(t));
        }
        if self.noise.is_secure() && matches!(self.list_form, ListForm::Laplace { .. }) {
            return Err(Error::Invalid(format!(
                "list form '{}' has no secure path: serve lists with --list-form peeling (or \
                 gumbel with em) under --secure",
                self.list_form
            )));
        }
        let spec = mechanisms::spec(self.mech.name())?;
        let t = Arc::new(TopK::new(spec, &self.params, m, self.list_form)?);
        let mut lists = self.lists.write().unwrap_or_else(|e| e.into_inner());
        Ok(Arc::clone(lists.entry(k).or_insert(t)))
    }

    /// The form lists are drawn in.
    pub fn list_form(&self) -> ListForm {
        self.list_form
    }

    /// How many items an answer of `k` releases: `k`, or for a tuned list of `k` its released
    /// length m (the device shows the first `k` the user does not own when m > k). An error for
    /// another length when the recommender serves a tuned list: its row is for its own k.
    pub fn released_len(&self, k: usize) -> Result<usize> {
        match &self.tuned_list {
            Some((r, _)) if r.k == k => Ok(r.serves.released),
            Some((r, _)) => Err(Error::Invalid(format!(
                "this recommender serves the tuned list of {} items (tuning.json); an answer \
                 of {k} is the tuned answer of {k}: ask Recommender::for_k({k})",
                r.k
            ))),
            None if k > 1 && self.origin.is_some() => Err(Error::Invalid(format!(
                "this recommender serves the tuned top-1 row (tuning.json); a list of {k} is \
                 the tuned list of {k}: ask Recommender::for_k({k})"
            ))),
            None => Ok(k),
        }
    }

    /// The tuned list row served, if the recommender was loaded for a tuned list.
    pub fn tuned_list(&self) -> Option<&crate::recommend::tuned::lists::ListRow> {
        self.tuned_list.as_ref().map(|(r, _)| r)
    }

    /// The released items of a public tuned list of `k` (the ranking's first m, whatever the
    /// history), `None` for any other answer; an error for a length it does not serve.
    fn tuned_public_items(&self, k: usize) -> Result<Option<Vec<u32>>> {
        self.released_len(k)?;
        Ok(self
            .tuned_list
            .as_ref()
            .filter(|(r, _)| r.serves.is_public())
            .map(|(_, items)| items.clone()))
    }

    /// The released items of `row` when it serves a public ranking (its first m columns in the
    /// ranking's order, from the release's public counts), else none.
    pub(super) fn public_items(
        &self,
        row: &crate::recommend::tuned::lists::ListRow,
    ) -> Result<Vec<u32>> {
        if !row.serves.is_public() {
            return Ok(Vec::new());
        }
        let r = self.release();
        let (counts, m) = match row.serves.candidates {
            crate::scoring::CandidatePolicy::Popular(m) => (r.popularity.as_deref(), m),
            crate::scoring::CandidatePolicy::Heldout(m) => (r.heldout.as_deref(), m),
            ref c => {
                return Err(Error::Invalid(format!(
                    "a public tuned list ranks popular:N or heldout:N, got '{c}'"
                )))
            }
        };
        let counts = counts.ok_or_else(|| {
            Error::Invalid(format!(
                "the release has no counts for the tuned list '{}'",
                row.serves.candidates
            ))
        })?;
        Ok(crate::scoring::policy::public_ranking(counts, m))
    }

    /// What an answer of `k` items is worth ([`Recommender::worth`] for k = 1 and for the tuned
    /// list it serves; otherwise not measured, naming the tuned list of `k` when there is one).
    pub fn worth_for(&self, k: usize) -> super::Worth {
        if k == 1 || self.tuned_list.as_ref().is_some_and(|(r, _)| r.k == k) {
            return self.worth().clone();
        }
        let rows = self.tuning.as_deref().map_or(&[][..], |t| &t.lists[..]);
        super::worth::untuned_list_worth(self.worth(), rows, k, self.params.epsilon)
    }

    /// The guarantee of a list of `k` on this recommender's candidates, as the mechanism states
    /// it.
    pub fn list_guarantee(&self, k: usize) -> Result<ListGuarantee> {
        Ok(self.top_k(k)?.guarantee(self.list.k(self.n_items())))
    }

    /// The ε one answer of `k` items spends: [`Recommender::epsilon`] for k = 1, else the list's
    /// guarantee ([`Recommender::list_guarantee`]); `None` for a mechanism that is not private.
    /// An error for a list that is only (ε, δ)-DP: serving charges pure ε per answer.
    pub fn list_epsilon(&self, k: usize) -> Result<Option<f64>> {
        if k == 1 {
            return Ok(self.epsilon);
        }
        let g = self.list_guarantee(k)?.charged;
        g.refuse_approximate(
            &format!("{} ({} list)", self.mech.name(), self.list_form),
            "serving (it charges pure eps per answer)",
        )?;
        Ok(g.epsilon_for(self.list.k(self.n_items())))
    }

    /// An ordered list of at most `k` distinct private items for `history` (item columns), best
    /// first: `k` = 1 is [`Recommender::recommend`]; a list has `min(k, candidates)` items.
    pub fn recommend_list(
        &self,
        history: &[u32],
        k: usize,
        user: u64,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Vec<u32>> {
        if let Some(items) = self.tuned_public_items(k)? {
            return Ok(items);
        }
        if k == 1 {
            return Ok(self
                .recommend(history, user, draws, scratch)?
                .into_iter()
                .collect());
        }
        let topk = self.top_k(k)?;
        sorted_history(history, &mut scratch.history);
        self.model
            .score_into(&scratch.history, &mut scratch.scores, &mut scratch.model);
        self.problem_from_scores(scratch, topk.round().epsilon());
        self.select_list(&topk, user, draws, scratch)
    }

    /// [`Recommender::recommend_list`] for history `i` of `block`: the same list for the same
    /// draws, without scoring the history again.
    pub fn recommend_list_scored(
        &self,
        block: &ScoredBlock,
        i: usize,
        k: usize,
        user: u64,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Vec<u32>> {
        if let Some(items) = self.tuned_public_items(k)? {
            return Ok(items);
        }
        if k == 1 {
            return Ok(self
                .recommend_scored(block, i, user, draws, scratch)?
                .into_iter()
                .collect());
        }
        let topk = self.top_k(k)?;
        self.scores_of(block, i, scratch);
        self.problem_from_scores(scratch, topk.round().epsilon());
        self.select_list(&topk, user, draws, scratch)
    }

    fn select_list(
        &self,
        topk: &TopK,
        user: u64,
        draws: &mut Draws,
        scratch: &RecScratch,
    ) -> Result<Vec<u32>> {
        if scratch.q.is_empty() {
            return Ok(Vec::new());
        }
        let mut problem = Problem::new(&scratch.q, self.deltas(scratch))?;
        if self.list.history_independent() {
            problem = problem.with_sens_order(&self.sens_order);
        }
        let picks = topk.sample(&problem, draws, self.mech_id, 0, user, 0)?;
        Ok(picks.into_iter().map(|a| self.column(scratch, a)).collect())
    }

    /// The guarantee of an answer of `k` items in a few words ([`Recommender::guarantee`] for
    /// k = 1): "user-level eps-DP per list of K items (one release)", "0-DP ..." for a tuned
    /// public list, or why it is not.
    pub fn list_guarantee_words(&self, k: usize) -> String {
        if let Some((r, _)) = self
            .tuned_list
            .as_ref()
            .filter(|(r, _)| r.k == k && k > 1 && r.serves.is_public())
        {
            return format!(
                "0-DP with respect to served users per list of {k}: a public ranking, the same \
                 for every user, no history read{}",
                if r.serves.released > k {
                    "; the device drops the items the user owns and shows the first k"
                } else {
                    ""
                }
            );
        }
        match (k, self.scope()) {
            (1, _) => self.guarantee(),
            (_, Scope::UserLevel) => {
                format!("user-level eps-DP per list of {k} distinct items (one release)")
            }
            _ => self.guarantee(),
        }
    }

    /// One line for people about an answer of `k` items ([`Recommender::privacy_statement`] for
    /// k = 1): the list's ε from the mechanism's list guarantee, its form and rounds, and the
    /// rest of the single item's statement (candidates, clip ranges, noise).
    pub fn list_statement(&self, k: usize) -> Result<String> {
        let single = self.privacy_statement();
        if k == 1 {
            return Ok(single);
        }
        if let Some((r, _)) = self
            .tuned_list
            .as_ref()
            .filter(|(r, _)| r.serves.is_public())
        {
            return Ok(format!(
                "privacy: 0-DP: the tuned list of {k} is {} (tuning.json, {}); the same items for \
                 every user, computed from the release's public counts without the history{}",
                r.serves.describe(k),
                r.reason,
                if r.serves.released > k {
                    "; the device drops the items the user owns and shows the first k \
                     (post-processing, no eps)"
                } else {
                    ""
                }
            ));
        }
        let topk = self.top_k(k)?;
        let g = self.list_guarantee(k)?;
        let m = self.released_len(k)?;
        let how = match topk.form() {
            ListForm::Peeling => format!(
                "peeling: {m} rounds of {} at eps {} each over the items not yet chosen, basic \
                 composition",
                self.mech.name(),
                topk.round().epsilon()
            ),
            ListForm::Gumbel => format!(
                "one-shot Gumbel top-{m}, the law of peeling em at eps {} per round",
                topk.round().epsilon()
            ),
            ListForm::Laplace { .. } => format!("one-shot Laplace top-{m} (Qiao, Su & Zhang)"),
        };
        let tighter = match g.tighter_epsilon(1e-9) {
            Some(e) => format!("; also ({e:.4}, 1e-9)-DP by zCDP (reported, not charged)"),
            None => String::new(),
        };
        let scope = match (self.list_epsilon(k)?, self.scope()) {
            (Some(e), Scope::UserLevel) => format!(
                "user-level {e}-DP per list of {k} distinct items ({how}): the whole ordered \
                 list is one release, {e}-DP with respect to the user's whole history{tighter}"
            ),
            _ => format!(
                "{}; the list of {k} is drawn by {how}",
                self.list_guarantee_words(k)
            ),
        };
        let device = match &self.tuned_list {
            Some((r, _)) if r.serves.released > k => format!(
                "the tuned list of {k} (tuning.json) releases {} items; the device drops the \
                 items the user owns and shows the first {k} (post-processing, no eps); ",
                r.serves.released
            ),
            _ => String::new(),
        };
        Ok(format!(
            "privacy: {device}{scope}; {}",
            single
                .split_once("; ")
                .map_or("", |(_, rest)| rest)
                .replace(
                    "n recommendations from one history spend n times that",
                    "n lists for one history spend n times that, unless a ledger answers the \
                     same history again in its period with the stored list",
                )
        ))
    }

    /// `report` (a privacy report of this recommender) with the entry of an answer of `k` items
    /// in place of the single item's (unchanged for k = 1).
    pub fn with_list_privacy(&self, report: PrivacyReport, k: usize) -> Result<PrivacyReport> {
        if k == 1 {
            return Ok(report);
        }
        Ok(report.with("each recommendation", self.list_privacy(k)?))
    }

    /// What an answer of `k` items guarantees the served user, as a report entry
    /// ([`Recommender::serving_privacy`] for k = 1).
    pub fn list_privacy(&self, k: usize) -> Result<PopulationPrivacy> {
        if k == 1 {
            return Ok(self.serving_privacy());
        }
        let mut p = self.serving_privacy();
        if p.epsilon.is_some() {
            p.epsilon = self.list_epsilon(k)?;
            p.unit = format!("user's whole history, per list of {k} items (one release)");
            p.mechanism = match &self.tuned_list {
                Some((r, _)) if r.serves.is_public() => format!(
                    "the tuned list of {k}: {}, the same for every user",
                    r.serves.describe(k)
                ),
                _ => format!(
                    "{} list ({}) of {} over candidates '{}', scores clipped to the release's \
                     ranges",
                    self.mech.name(),
                    self.list_form,
                    self.released_len(k)?,
                    self.policy
                ),
            };
        }
        debug_assert_eq!(p.population, Population::Served);
        Ok(p)
    }
}

/// Device-side filtering (docs/serving.md, "Device-side filtering"): the first `k` items of a
/// released list that are not in `owned`, in the list's order. It runs on the user's device,
/// which holds the history anyway: post-processing of a released list, no ε. With a public list
/// the server needs no history at all.
pub fn device_filter<'a>(released: &'a [String], owned: &HashSet<&str>, k: usize) -> Vec<&'a str> {
    released
        .iter()
        .map(String::as_str)
        .filter(|i| !owned.contains(i))
        .take(k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_filter_drops_owned_items_and_keeps_the_order() {
        let released: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let owned: HashSet<&str> = ["b", "d"].into();
        assert_eq!(device_filter(&released, &owned, 2), vec!["a", "c"]);
        assert_eq!(device_filter(&released, &owned, 10), vec!["a", "c", "e"]);
    }
}
