//! Candidate policies (docs/deployment.md, "Candidate policies"): which items one user's selection
//! problem holds.
//!
//! | policy | candidates | what the released item protects |
//! |---|---|---|
//! | `all` | every item, the user's own included | the whole history (user-level ε-DP, clipped scores) |
//! | `popular:N` | the N most popular training items (fixed in the release) | the whole history |
//! | `heldout:N` | the N items most often held out by the users fitted on (fixed in the release) | the whole history |
//! | `pool:FILE` | a public list of item ids from the operator | the whole history |
//! | `history-top:N` | the user's top N by the user's own scores, own items excluded | only the choice *among* the list; its membership leaks |
//!
//! The first three lists do not depend on the history, so any two users' clipped score vectors
//! over them are neighbours (`|q_j − q'_j| ≤ Δ_j`) and the selection's ε covers the whole
//! history. `history-top:N` is the paper's protocol (`recsel select`'s default): the list is a
//! function of the history, and an item outside one user's list has probability 0 for that user.
//!
//! A policy is parsed from its name ([`CandidatePolicy::parse`]) and resolved against the item
//! columns of a model ([`CandidatePolicy::resolve`]) into a [`CandidateList`], which builds each
//! user's candidate items.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which items are a user's candidates. Parsed from `all`, `popular:N`, `heldout:N`, `pool:FILE`
/// or `history-top:N` ([`CandidatePolicy::parse`]); shown the same way.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CandidatePolicy {
    /// Every item of the release, the user's own items included: the list does not depend on the
    /// history. The default of serving.
    #[default]
    All,
    /// The N most popular items of the training data (interaction counts stored in the release;
    /// ties by item column), the user's own included.
    Popular(usize),
    /// The N items most often held out by the users the model was fitted on (counts stored in the
    /// release, from data whose training rows have a held-out part; ties by item column), the
    /// user's own included.
    Heldout(usize),
    /// A public list of item ids read from a file (one id per line; see [`read_pool`]).
    Pool(PathBuf),
    /// The user's top N items by the user's own scores, the user's items excluded: the paper's
    /// protocol. Candidate membership depends on the history and is not protected.
    HistoryTop(usize),
}

/// The valid forms, for error messages.
const FORMS: &str = "all, popular:N, heldout:N, pool:FILE, history-top:N";

impl CandidatePolicy {
    /// Parses `all`, `popular:N`, `heldout:N`, `pool:FILE` or `history-top:N` (N ≥ 1); errors
    /// name the text.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        let bad = |message: String| Error::Parse {
            context: format!("candidate policy '{text}'"),
            message,
        };
        let count = |n: &str| -> Result<usize> {
            match n.trim().parse::<usize>() {
                Ok(0) => Err(bad("the number of candidates must be at least 1".into())),
                Ok(n) => Ok(n),
                Err(_) => Err(bad(format!("'{n}' is not a number of candidates"))),
            }
        };
        if text == "all" {
            return Ok(CandidatePolicy::All);
        }
        match text.split_once(':') {
            Some(("popular", n)) => Ok(CandidatePolicy::Popular(count(n)?)),
            Some(("heldout", n)) => Ok(CandidatePolicy::Heldout(count(n)?)),
            Some(("history-top", n)) => Ok(CandidatePolicy::HistoryTop(count(n)?)),
            Some(("pool", f)) if !f.trim().is_empty() => {
                Ok(CandidatePolicy::Pool(PathBuf::from(f.trim())))
            }
            Some(("pool", _)) => Err(bad("pool needs a file: pool:FILE".into())),
            _ => Err(Error::UnknownName {
                kind: "candidate policy",
                name: text.into(),
                valid: FORMS.into(),
            }),
        }
    }

    /// Whether the candidate list is the same for every history (`all`, `popular`, `pool`): only
    /// then is the released item ε-DP with respect to the user's whole history.
    pub fn history_independent(&self) -> bool {
        !matches!(self, CandidatePolicy::HistoryTop(_))
    }

    /// Resolves the policy against a model's `n_items` item columns: `popularity` (interaction
    /// counts per column, from the release) for `popular:N`, `item_index` (item id → column) for
    /// `pool:FILE`. Errors name what is missing or wrong.
    pub fn resolve(
        &self,
        n_items: usize,
        popularity: Option<&[u64]>,
        item_index: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<CandidateList> {
        self.resolve_with(n_items, popularity, None, item_index)
    }

    /// [`CandidatePolicy::resolve`], with the held-out counts (`heldout`, per column) that
    /// `heldout:N` ranks by.
    pub fn resolve_with(
        &self,
        n_items: usize,
        popularity: Option<&[u64]>,
        heldout: Option<&[u64]>,
        item_index: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<CandidateList> {
        Ok(match self {
            CandidatePolicy::Heldout(n) => {
                let counts = heldout.ok_or_else(|| {
                    Error::Invalid(format!(
                        "candidates '{self}' need how often the users fitted on hold each item \
                         out, which this release or data does not carry (it needs data whose \
                         training rows have a held-out part: LightGCN files with \
                         --validation-users)"
                    ))
                })?;
                CandidateList::Fixed(
                    most_popular(counts, *n, n_items).map_err(|e| {
                        Error::Invalid(e.to_string().replace("popular:", "heldout:"))
                    })?,
                )
            }
            CandidatePolicy::All => CandidateList::All,
            CandidatePolicy::HistoryTop(n) => CandidateList::HistoryTop(*n),
            CandidatePolicy::Popular(n) => {
                let counts = popularity.ok_or_else(|| {
                    Error::Invalid(format!(
                        "candidates '{self}' need the training popularity of the items, which \
                         this release does not carry"
                    ))
                })?;
                CandidateList::Fixed(most_popular(counts, *n, n_items)?)
            }
            CandidatePolicy::Pool(path) => CandidateList::Fixed(read_pool(path, item_index)?),
        })
    }
}

impl fmt::Display for CandidatePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CandidatePolicy::All => write!(f, "all"),
            CandidatePolicy::Popular(n) => write!(f, "popular:{n}"),
            CandidatePolicy::Heldout(n) => write!(f, "heldout:{n}"),
            CandidatePolicy::Pool(p) => write!(f, "pool:{}", p.display()),
            CandidatePolicy::HistoryTop(n) => write!(f, "history-top:{n}"),
        }
    }
}

impl FromStr for CandidatePolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

// A policy as an option's value (`--candidates POLICY`, a table's `candidates` key): parsed when
// given, so a bad policy is an error naming the option.
crate::options::text_option_value!(CandidatePolicy, "POLICY");

impl Serialize for CandidatePolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CandidatePolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The `n` most popular item columns by `counts` (descending; ties by column ascending). An error
/// when `n` exceeds the number of items or the counts do not cover every item.
pub fn most_popular(counts: &[u64], n: usize, n_items: usize) -> Result<Vec<u32>> {
    if counts.len() != n_items {
        return Err(Error::Invalid(format!(
            "{} popularity counts for {n_items} items",
            counts.len()
        )));
    }
    if n > n_items {
        return Err(Error::Invalid(format!(
            "candidates 'popular:{n}' ask for more items than the {n_items} the model has \
             (use 'all' for every item)"
        )));
    }
    let mut order = public_ranking(counts, n);
    order.sort_unstable();
    Ok(order)
}

/// The first `n` item columns of the public ranking by `counts`: descending count, ties by
/// column ascending (the order `popular:N` and `heldout:N` take their top N in).
pub fn public_ranking(counts: &[u64], n: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..counts.len() as u32).collect();
    order.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
    order.truncate(n);
    order
}

/// Reads a pool file: one item id per line (surrounding whitespace trimmed); blank lines and lines
/// starting with `#` are skipped. An id the model does not know, or an id given twice, is an error
/// naming the file and the line; an empty pool is an error. Returns the columns, ascending.
pub fn read_pool(path: &Path, item_index: &dyn Fn(&str) -> Option<u32>) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let id = line.trim();
        if id.is_empty() || id.starts_with('#') {
            continue;
        }
        let at = |message: String| Error::Parse {
            context: format!("{} line {}", path.display(), i + 1),
            message,
        };
        let j = item_index(id)
            .ok_or_else(|| at(format!("item '{id}' is not one of the model's item ids")))?;
        if let Some(first) = seen.insert(j, i + 1) {
            return Err(at(format!("item '{id}' is already on line {first}")));
        }
        items.push(j);
    }
    if items.is_empty() {
        return Err(Error::Invalid(format!(
            "pool file {} holds no item ids (one id per line)",
            path.display()
        )));
    }
    items.sort_unstable();
    Ok(items)
}

/// A policy resolved against a model's items: what builds each user's candidate list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CandidateList {
    /// Every item column.
    All,
    /// A fixed list of columns (ascending), the same for every user.
    Fixed(Vec<u32>),
    /// The user's top N by score, the user's items excluded.
    HistoryTop(usize),
}

impl CandidateList {
    /// The number of candidates every user gets (at most, for `HistoryTop`: fewer when the
    /// history leaves fewer items).
    pub fn k(&self, n_items: usize) -> usize {
        match self {
            CandidateList::All => n_items,
            CandidateList::Fixed(items) => items.len(),
            CandidateList::HistoryTop(n) => (*n).min(n_items),
        }
    }

    /// Whether the list is the same for every history.
    pub fn history_independent(&self) -> bool {
        !matches!(self, CandidateList::HistoryTop(_))
    }

    /// One user's candidates, best (unclipped) score first, ties by column: the user's top N
    /// without `history` (sorted ascending) for `HistoryTop`, else the whole list, the history
    /// included.
    pub fn items(&self, scores: &[f64], history: &[u32]) -> Vec<u32> {
        match self {
            CandidateList::HistoryTop(n) => super::top_candidates(scores, history, *n),
            CandidateList::All => crate::numerics::best_k(scores, &[], scores.len()),
            CandidateList::Fixed(list) => {
                let sub: Vec<f64> = list.iter().map(|&j| scores[j as usize]).collect();
                crate::numerics::best_k(&sub, &[], sub.len())
                    .into_iter()
                    .map(|i| list[i as usize])
                    .collect()
            }
        }
    }
}

/// A policy with its resolved list, as a run configuration holds it: serialised as the policy's
/// name only (`"all"`, `"popular:100"`, ...), so a configuration records what was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPolicy {
    /// The policy as given.
    pub policy: CandidatePolicy,
    /// Its list for the run's items.
    pub list: CandidateList,
}

impl Serialize for ResolvedPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.policy.serialize(s)
    }
}

/// Interactions per item column of `rows` (users × items): the training popularity that
/// `popular:N` ranks by.
pub fn popularity(rows: &crate::data::Csr) -> Vec<u64> {
    let mut counts = vec![0u64; rows.cols()];
    for &j in rows.indices() {
        counts[j as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for text in [
            "all",
            "popular:100",
            "pool:some/file.txt",
            "history-top:500",
        ] {
            let p = CandidatePolicy::parse(text).unwrap();
            assert_eq!(p.to_string(), text);
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<CandidatePolicy>(&json).unwrap(), p);
        }
        assert_eq!(CandidatePolicy::default(), CandidatePolicy::All);
        assert!(!CandidatePolicy::HistoryTop(5).history_independent());
        assert!(CandidatePolicy::Popular(5).history_independent());
        for (bad, want) in [
            ("top:5", "valid names: all, popular:N"),
            ("popular:0", "at least 1"),
            ("history-top:x", "'x' is not a number"),
            ("pool:", "pool needs a file"),
        ] {
            let e = CandidatePolicy::parse(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn most_popular_orders_by_count_then_column() {
        let counts = [3, 9, 3, 0, 9];
        assert_eq!(most_popular(&counts, 2, 5).unwrap(), vec![1, 4]);
        assert_eq!(most_popular(&counts, 3, 5).unwrap(), vec![0, 1, 4]);
        assert!(most_popular(&counts, 6, 5).is_err());
    }

    #[test]
    fn lists_build_candidates() {
        let scores = [0.5, 3.0, 1.0, 2.0];
        let all = CandidateList::All;
        assert_eq!(all.items(&scores, &[1]), vec![1, 3, 2, 0]);
        let fixed = CandidateList::Fixed(vec![0, 2, 3]);
        assert_eq!(fixed.items(&scores, &[3]), vec![3, 2, 0]);
        assert_eq!(
            CandidateList::HistoryTop(2).items(&scores, &[1]),
            vec![3, 2]
        );
        assert_eq!(fixed.k(4), 3);
        assert_eq!(CandidateList::HistoryTop(9).k(4), 4);
    }

    #[test]
    fn pool_files_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool.txt");
        let index = |id: &str| {
            ["a", "b", "c"]
                .iter()
                .position(|x| *x == id)
                .map(|j| j as u32)
        };
        std::fs::write(&path, "# public pool\nc\n\n a \n").unwrap();
        assert_eq!(read_pool(&path, &index).unwrap(), vec![0, 2]);
        std::fs::write(&path, "a\nb\nzzz\n").unwrap();
        let e = read_pool(&path, &index).unwrap_err().to_string();
        assert!(e.contains("pool.txt line 3") && e.contains("'zzz'"), "{e}");
        std::fs::write(&path, "a\nb\na\n").unwrap();
        let e = read_pool(&path, &index).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("already on line 1"),
            "{e}"
        );
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(read_pool(&path, &index).is_err());
    }
}
