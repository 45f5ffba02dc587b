//! The tuned list rows of `tuning.json` (docs/utility.md, "Tuning lists"): per list length k and
//! ε, the list `recsel tune --k K` chose — a registry mechanism's list over a public pool, or a
//! free list (a public ranking) — and what it and the best free list are worth in Recall@k on
//! calibration users the choice did not read. A list of `released` = m > k items is filtered on
//! the device to the first k the user does not own (post-processing, no ε).
//!
//! `recsel tune` (`crate::evaluate::tuning::lists`) fills the rows in; serving reads them
//! ([`Tuning::list_choice`]) and never imports the tuner.

use serde::{Deserialize, Serialize};

use super::{refuse_given, same_epsilon, Estimate, Tuning, TUNING};
use crate::error::{Error, Result};
use crate::mechanisms::{check_epsilon, ListForm, MechParams};
use crate::recommend::RecommendConfig;
use crate::scoring::{CandidatePolicy, Prior};

/// The mechanism name of a free list: the first `released` items of a public ranking
/// (`popular:M`: training popularity; `heldout:M`: the release's held-out counts), in the
/// ranking's order; 0-DP, no history needed.
pub const PUBLIC: &str = "public";

/// List lengths m tried per k by default, as multiples of k (1: the list is shown as it is;
/// more: filtered on the device to k).
pub const DEFAULT_LIST_MULTIPLES: [usize; 3] = [1, 2, 3];
/// Registry mechanisms whose lists `recsel tune --k K` tries by default.
pub const DEFAULT_LIST_MECHANISMS: [&str; 2] = ["em", "mgem"];
/// `popular:N` pools a private list is drawn from by default (sizes of at least m).
pub const DEFAULT_LIST_POOLS: [usize; 4] = [30, 100, 300, 1000];

/// What a list of k serves: a mechanism over a pool, the number of items released and the
/// number shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListSpec {
    /// A registry mechanism (peeling at ε/m per round), or [`PUBLIC`].
    pub mechanism: String,
    /// The pool of a private list; the ranking (and its length) of a public one.
    pub candidates: CandidatePolicy,
    /// Items released (m ≥ k); the device shows the first k the user does not own when m > k.
    pub released: usize,
}

impl ListSpec {
    /// Whether it is a free list (0-DP).
    pub fn is_public(&self) -> bool {
        self.mechanism == PUBLIC
    }

    /// For people: `mgem list of 20 over popular:100, filtered on the device to 10`.
    pub fn describe(&self, k: usize) -> String {
        let what = if self.is_public() {
            format!(
                "the public ranking {} (first {} items, 0-DP, no history sent)",
                self.candidates, self.released
            )
        } else {
            format!(
                "{} list of {} over {} (peeling)",
                self.mechanism, self.released, self.candidates
            )
        };
        if self.released > k {
            format!("{what}, filtered on the device to the first {k} not owned")
        } else {
            what
        }
    }
}

/// The choice at one (k, ε).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListRow {
    /// Items shown.
    pub k: usize,
    /// The ε this row serves (requests for ε ≥ it use it, up to the next row of the same k).
    pub epsilon: f64,
    /// What is served: the best private list when it beats the best free list by the margin,
    /// else that free list.
    pub serves: ListSpec,
    /// ε a list spends: `epsilon` for a private list, 0 for a free one.
    pub spends: f64,
    /// Recall@k of what is served on the estimation part of the calibration users.
    pub recall: Estimate,
    /// The best free list, chosen on the selection part.
    pub free: ListSpec,
    /// Its Recall@k on the estimation part.
    pub free_recall: Estimate,
    /// The best private list on the selection part, served or not.
    pub best: ListSpec,
    /// Its Recall@k on the estimation part.
    pub best_recall: Estimate,
    /// Its paired gain over the best free list on the estimation part.
    pub gain: Estimate,
    /// The margin (paired standard errors) the gain had to clear.
    pub margin: f64,
    /// Why, for people.
    pub reason: String,
}

/// What `recsel tune --k K` searched (recorded in `tuning.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListGrid {
    /// List lengths shown (empty: no list rows).
    pub k: Vec<usize>,
    /// Registry mechanisms tried.
    pub mechanisms: Vec<String>,
    /// `popular:N` pools tried (sizes of at least m).
    pub pools: Vec<usize>,
    /// Released lengths m tried, as multiples of k.
    pub multiples: Vec<usize>,
}

impl Default for ListGrid {
    fn default() -> Self {
        ListGrid {
            k: Vec::new(),
            mechanisms: DEFAULT_LIST_MECHANISMS.map(String::from).to_vec(),
            pools: DEFAULT_LIST_POOLS.to_vec(),
            multiples: DEFAULT_LIST_MULTIPLES.to_vec(),
        }
    }
}

impl ListGrid {
    /// Checks it: k ≥ 2, multiples ≥ 1, something to try when k is given.
    pub fn validate(&self) -> Result<()> {
        if self.k.iter().any(|&k| k < 2) {
            return Err(Error::Invalid(format!(
                "list lengths (--k) must be at least 2 (k = 1 is the top-1 tuning), got {:?}",
                self.k
            )));
        }
        if self.multiples.is_empty() || self.multiples.contains(&0) {
            return Err(Error::Invalid(format!(
                "released list lengths are multiples >= 1 of k, got {:?}",
                self.multiples
            )));
        }
        Ok(())
    }
}

impl Tuning {
    /// The list row of length `k` for a requested `epsilon` ([`list_choice`]).
    pub fn list_choice(&self, k: usize, epsilon: f64) -> Result<ListRow> {
        list_choice(&self.lists, k, epsilon)
    }
}

/// The row of `rows` of length `k` for a requested `epsilon`: the largest tuned ε not above it
/// (never spends more than asked); below the smallest, the free list of the smallest row (0 ε).
/// An error when there are no rows of length `k`, saying how to get them.
pub fn list_choice(rows: &[ListRow], k: usize, epsilon: f64) -> Result<ListRow> {
    check_epsilon(epsilon)?;
    let of_k: Vec<&ListRow> = rows.iter().filter(|r| r.k == k).collect();
    if of_k.is_empty() {
        let mut ks: Vec<usize> = rows.iter().map(|r| r.k).collect();
        ks.sort_unstable();
        ks.dedup();
        return Err(Error::Invalid(format!(
            "{TUNING} has no tuned lists of {k} ({}): run `recsel tune --k {k}`, or name a \
             mechanism (--mech) to serve its list without a tuned row",
            if ks.is_empty() {
                "it has lists of no length".to_string()
            } else {
                format!(
                    "it has lists of {}",
                    ks.iter()
                        .map(|k| k.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )));
    }
    let row = of_k
        .iter()
        .filter(|r| r.epsilon <= epsilon || same_epsilon(r.epsilon, epsilon))
        .max_by(|a, b| a.epsilon.total_cmp(&b.epsilon));
    Ok(match row {
        Some(r) => (*r).clone(),
        None => {
            let first = of_k
                .iter()
                .min_by(|a, b| a.epsilon.total_cmp(&b.epsilon))
                .expect("non-empty");
            ListRow {
                epsilon,
                serves: first.free.clone(),
                spends: 0.0,
                recall: first.free_recall,
                gain: Estimate { mean: 0.0, se: 0.0 },
                reason: format!(
                    "eps {epsilon} is below the smallest tuned eps {}: the best free list",
                    first.epsilon
                ),
                ..(*first).clone()
            }
        }
    })
}

/// The configuration a request for the tuned list of `cfg.list_k` items stands for, and its
/// row: the row's mechanism (a public ranking is served as `random` over its items, 0-DP, in
/// the ranking's order), ε and pool, peeling. An error when `cfg` also names candidates or a
/// prior, or `tuning` has no lists of that length.
pub fn resolve_list(tuning: &Tuning, cfg: &RecommendConfig) -> Result<(RecommendConfig, ListRow)> {
    refuse_given(cfg)?;
    let row = tuning.list_choice(cfg.list_k, cfg.params.epsilon)?;
    let public = row.serves.is_public();
    let mut out = cfg.clone();
    out.mechanism = if public {
        "random".into()
    } else {
        row.serves.mechanism.clone()
    };
    out.params = MechParams {
        epsilon: if public {
            cfg.params.epsilon
        } else {
            row.epsilon
        },
        ..cfg.params.clone()
    };
    out.candidates = row.serves.candidates.clone();
    out.prior = Prior::None;
    out.list_form = ListForm::Peeling;
    Ok((out, row))
}
