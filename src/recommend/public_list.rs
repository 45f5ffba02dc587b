//! The release's public list (docs/serving.md, "`GET /v1/public-list`"): the first m items of
//! the release's public popularity ranking — the ranking device-side filtering uses and the
//! `popular:N` candidates are cut from. It reads no history and is the same for everyone, so it
//! is 0-DP with respect to served users and charges no ledger; what it learned from is the
//! release's own privacy report, whose entries it names.

use serde::Serialize;

use super::release::Statistics;
use super::{Recommender, MAX_LIST};
use crate::error::{Error, Result};
use crate::model::options::ITEM_UNIVERSE;
use crate::privacy::report::Part;

/// The report parts the public ranking is computed from.
const RANKING_PARTS: &[&str] = &["popularity counts", ITEM_UNIVERSE];

/// A public list and its claim ([`Recommender::public_list`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PublicList {
    /// Item ids, most popular first (ties by column).
    pub items: Vec<String>,
    /// What the list guarantees, in words ([`Recommender::public_list_claim`]).
    pub claim: String,
    /// The served users' ε of one public list: always 0 (no history read).
    pub served_epsilon: f64,
    /// The release's privacy report entries the ranking learned from
    /// ([`Recommender::public_list_sources`]).
    pub learned_from: Vec<Part>,
}

impl Recommender {
    /// The first `min(m, items)` item columns of the release's public popularity ranking (its
    /// `popularity` counts, descending; ties by column). An error for `m` outside
    /// 1..=[`MAX_LIST`] or a release without the popularity counts (format version 1).
    pub fn public_ranking(&self, m: usize) -> Result<Vec<u32>> {
        if m == 0 || m > MAX_LIST {
            return Err(Error::Invalid(format!(
                "m = {m}: a public list has 1 to {MAX_LIST} items"
            )));
        }
        let pop = self.release.popularity.as_deref().ok_or_else(|| {
            Error::Invalid(
                "the public list needs a release that carries the training popularity (release \
                 format version 2 or later; refit with `recsel fit --out`)"
                    .into(),
            )
        })?;
        let n = self.n_items();
        if pop.len() != n {
            return Err(Error::Invalid(format!(
                "{} popularity counts for {n} items",
                pop.len()
            )));
        }
        // The one public ranking (most popular first, ties by column), which `popular:N` and
        // the tuned free lists take their items from.
        Ok(crate::scoring::policy::public_ranking(pop, m.min(n)))
    }

    /// The entries of the release's privacy report the public ranking learned from: the
    /// popularity counts, the item universe where the model records one, and the model weights
    /// when the counts were derived from the DP fit.
    pub fn public_list_sources(&self) -> Vec<Part> {
        let from_fit = matches!(
            self.release.manifest.statistics(),
            Statistics::Private {
                popularity_from_fit: true,
                ..
            }
        );
        self.report
            .parts
            .iter()
            .filter(|p| {
                RANKING_PARTS.contains(&p.part.as_str()) || (from_fit && p.part == "model weights")
            })
            .cloned()
            .collect()
    }

    /// The claim of a public list, in one line: 0-DP for served users (no history, no charge,
    /// the same list for everyone), device-side filtering free, and what the ranking learned
    /// from with each source's guarantee as the release's report states it.
    pub fn public_list_claim(&self) -> String {
        let sources: Vec<String> = self
            .public_list_sources()
            .iter()
            .map(|p| {
                let g = match p.privacy.epsilon {
                    Some(e) => format!("{e}-DP, delta {}", p.privacy.delta),
                    None => "NOT DP".to_string(),
                };
                format!(
                    "{} ({}, {g}: {})",
                    p.part, p.privacy.population, p.privacy.mechanism
                )
            })
            .collect();
        let sources = if sources.is_empty() {
            "nothing the release's privacy report records".to_string()
        } else {
            sources.join("; ")
        };
        format!(
            "public list: 0-DP with respect to served users — the release's public popularity \
             ranking, the same for everyone; no history is sent or read and no ledger is \
             charged; a device that drops the items its user owns and shows the first k spends \
             nothing more (post-processing). The ranking learned from: {sources}"
        )
    }

    /// The public list of `m` items with its claim.
    pub fn public_list(&self, m: usize) -> Result<PublicList> {
        let items = self
            .public_ranking(m)?
            .into_iter()
            .map(|j| self.item_id(j).to_string())
            .collect();
        Ok(PublicList {
            items,
            claim: self.public_list_claim(),
            served_epsilon: 0.0,
            learned_from: self.public_list_sources(),
        })
    }
}
