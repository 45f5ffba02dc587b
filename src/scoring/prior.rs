//! Public per-item priors (docs/priors.md): an offset computed from public data only, added to the
//! clipped scores of the candidates before the mechanism sees them.
//!
//! A prior is a public count `c_o ≥ 0` per item (the training popularity of the release, the
//! held-out counts of the users fitted on, or a file of counts) and a weight `W ≥ 0`. With
//! `ℓ_o = ln((1 + c_o)/(1 + c_max))` (≤ 0; `c_max` the largest count over all items) the offset of
//! candidate o in a problem with sensitivities `Δ_a` and ε is
//!
//! ```text
//! b_o = W · (2 Δ_max / ε) · ℓ_o,        Δ_max = max over the candidates of Δ_a,
//! ```
//!
//! so that `W` is measured in units of the noise scale `2Δ/ε` of the noisy-max family: the
//! exponential mechanism on `q + b` is exactly `P(o) ∝ (1 + c_o)^W · exp(ε q_o / (2Δ))` — a base
//! measure `μ_o ∝ (1 + c_o)^W` — and `W = 0` is no prior at all. `b` depends on public values only
//! (the counts, W, ε and the release's Δ), the same for every history, so `q + b` has the
//! per-item sensitivities of `q` and every mechanism's guarantee carries over (docs/priors.md,
//! "Why the guarantee holds").
//!
//! `own-history:W` is the known leak the end-to-end audit must flag: the offset `W·(2Δ_max/ε)` on
//! the served user's own items. It is not private and needs `allow_non_private`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A per-item prior: its public counts and weight. Parsed from `none`, `popularity:W`,
/// `heldout:W`, `file:PATH:W` or `own-history:W`; shown the same way.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Prior {
    /// No prior: the mechanism sees the clipped scores.
    #[default]
    None,
    /// The training popularity stored in the release (interactions per item).
    Popularity(f64),
    /// How many users fitted on hold each item out (a release that carries those counts).
    Heldout(f64),
    /// Public counts from a file: `ITEM COUNT` per line (see [`read_prior_file`]).
    File(PathBuf, f64),
    /// The served user's own items boosted: NOT private, the audit's known leak.
    OwnHistory(f64),
}

/// The valid forms, for error messages.
const FORMS: &str = "none, popularity:W, heldout:W, file:PATH:W, own-history:W";

impl Prior {
    /// Parses the forms of [`Prior`]; W must be a finite number ≥ 0. Errors name the text.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        let bad = |message: String| Error::Parse {
            context: format!("prior '{text}'"),
            message,
        };
        let weight = |w: &str| -> Result<f64> {
            match w.trim().parse::<f64>() {
                Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
                Ok(_) => Err(bad(format!(
                    "the weight W must be a finite number >= 0, got '{w}'"
                ))),
                Err(_) => Err(bad(format!("'{w}' is not a weight (a number >= 0)"))),
            }
        };
        if text == "none" {
            return Ok(Prior::None);
        }
        match text.split_once(':') {
            Some(("popularity", w)) => Ok(Prior::Popularity(weight(w)?)),
            Some(("heldout", w)) => Ok(Prior::Heldout(weight(w)?)),
            Some(("own-history", w)) => Ok(Prior::OwnHistory(weight(w)?)),
            Some(("file", rest)) => match rest.rsplit_once(':') {
                Some((path, w)) if !path.trim().is_empty() => {
                    Ok(Prior::File(PathBuf::from(path.trim()), weight(w)?))
                }
                _ => Err(bad("a file prior is file:PATH:W (W the weight)".into())),
            },
            _ => Err(Error::UnknownName {
                kind: "prior",
                name: text.into(),
                valid: FORMS.into(),
            }),
        }
    }

    /// The weight W (0 for `none`).
    pub fn weight(&self) -> f64 {
        match self {
            Prior::None => 0.0,
            Prior::Popularity(w) | Prior::Heldout(w) | Prior::OwnHistory(w) => *w,
            Prior::File(_, w) => *w,
        }
    }

    /// Whether the offset is the same for every history (every prior but `own-history`).
    pub fn history_independent(&self) -> bool {
        !matches!(self, Prior::OwnHistory(_))
    }

    /// Resolves the prior against a model's `n_items` item columns: `popularity` and `heldout`
    /// (counts per column, from the release) for the priors that read them, `item_index`
    /// (item id → column) for a file. `None` when the prior changes nothing (`none`, or W = 0).
    /// Errors name what is missing or wrong.
    pub fn resolve(
        &self,
        n_items: usize,
        popularity: Option<&[u64]>,
        heldout: Option<&[u64]>,
        item_index: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Option<ResolvedPrior>> {
        if self.weight() == 0.0 {
            return Ok(None);
        }
        let counts = |c: Option<&[u64]>, what: &str| -> Result<Vec<f64>> {
            let c = c.ok_or_else(|| {
                Error::Invalid(format!(
                    "prior '{self}' needs {what}, which this release does not carry"
                ))
            })?;
            if c.len() != n_items {
                return Err(Error::Invalid(format!(
                    "prior '{self}': {} counts for {n_items} items",
                    c.len()
                )));
            }
            Ok(c.iter().map(|&x| x as f64).collect())
        };
        let log_mass = match self {
            Prior::None => return Ok(None),
            Prior::OwnHistory(_) => Vec::new(),
            Prior::Popularity(_) => {
                log_masses(&counts(popularity, "the training popularity of the items")?)
            }
            Prior::Heldout(_) => log_masses(&counts(
                heldout,
                "how often the users fitted on hold each item out",
            )?),
            Prior::File(path, _) => log_masses(&read_prior_file(path, n_items, item_index)?),
        };
        Ok(Some(ResolvedPrior {
            prior: self.clone(),
            log_mass,
        }))
    }
}

/// `ℓ_j = ln((1 + c_j)/(1 + c_max))` of every count.
fn log_masses(counts: &[f64]) -> Vec<f64> {
    let top = counts.iter().copied().fold(0.0f64, f64::max);
    counts
        .iter()
        .map(|&c| (1.0 + c).ln() - (1.0 + top).ln())
        .collect()
}

impl fmt::Display for Prior {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prior::None => write!(f, "none"),
            Prior::Popularity(w) => write!(f, "popularity:{w}"),
            Prior::Heldout(w) => write!(f, "heldout:{w}"),
            Prior::File(p, w) => write!(f, "file:{}:{w}", p.display()),
            Prior::OwnHistory(w) => write!(f, "own-history:{w}"),
        }
    }
}

impl FromStr for Prior {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

// A prior as an option's value (`--prior PRIOR`, a table's `prior` key).
crate::options::text_option_value!(Prior, "PRIOR");

impl Serialize for Prior {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Prior {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Reads a file of public counts: one `ITEM COUNT` per line (separated by whitespace or a
/// comma; surrounding whitespace trimmed), COUNT a finite number ≥ 0; blank lines and lines
/// starting with `#` are skipped. Items not listed count 0. An unknown id, an id given twice or a
/// bad count is an error naming the file and the line; a file without any item is an error.
pub fn read_prior_file(
    path: &Path,
    n_items: usize,
    item_index: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut counts = vec![0.0; n_items];
    let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |message: String| Error::Parse {
            context: format!("prior file {} line {}", path.display(), i + 1),
            message,
        };
        let mut fields = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|f| !f.is_empty());
        let (Some(id), Some(count), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(at(format!(
                "'{line}' is not ITEM COUNT (an item id and a count)"
            )));
        };
        let j = item_index(id)
            .ok_or_else(|| at(format!("item '{id}' is not one of the model's item ids")))?;
        let c = match count.parse::<f64>() {
            Ok(c) if c.is_finite() && c >= 0.0 => c,
            _ => {
                return Err(at(format!(
                    "count '{count}' of item '{id}' is not a finite number >= 0"
                )))
            }
        };
        if let Some(first) = seen.insert(j, i + 1) {
            return Err(at(format!("item '{id}' is already on line {first}")));
        }
        counts[j as usize] = c;
    }
    if seen.is_empty() {
        return Err(Error::Invalid(format!(
            "prior file {} holds no item (one 'ITEM COUNT' per line)",
            path.display()
        )));
    }
    Ok(counts)
}

/// The factor of `ℓ` in a public prior's offsets, `W·(2Δ_max/ε)`: what
/// [`ResolvedPrior::add_offsets`] multiplies each `ℓ` by, for weight `weight`, the largest Δ of the
/// problem's candidates and ε.
pub fn offset_scale(weight: f64, max_delta: f64, epsilon: f64) -> f64 {
    weight * 2.0 * max_delta / epsilon
}

/// A prior resolved against a model's items: what adds the offsets to a problem's scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedPrior {
    /// The prior as given.
    pub prior: Prior,
    /// `ℓ_j ≤ 0` per item column (empty for `own-history`, whose ℓ is 1 on the user's items).
    pub log_mass: Vec<f64>,
}

impl ResolvedPrior {
    /// The weight W (> 0).
    pub fn weight(&self) -> f64 {
        self.prior.weight()
    }

    /// Whether the offsets are the same for every history.
    pub fn history_independent(&self) -> bool {
        self.prior.history_independent()
    }

    /// Adds the offsets `b_a = W·(2Δ_max/ε)·ℓ_{column(a)}` to the scores `q` of a problem whose
    /// candidates have the sensitivities `deltas` (Δ_max their largest) and the item columns
    /// `column(a)`, at ε `epsilon`; `history` (sorted item columns) is read by `own-history` only.
    pub fn add_offsets(
        &self,
        q: &mut [f64],
        deltas: &[f64],
        column: impl Fn(usize) -> u32,
        epsilon: f64,
        history: &[u32],
    ) {
        let max_delta = deltas.iter().copied().fold(0.0f64, f64::max);
        let scale = offset_scale(self.weight(), max_delta, epsilon);
        match self.prior {
            Prior::OwnHistory(_) => {
                for (a, v) in q.iter_mut().enumerate() {
                    if history.binary_search(&column(a)).is_ok() {
                        *v += scale;
                    }
                }
            }
            _ => {
                for (a, v) in q.iter_mut().enumerate() {
                    *v += scale * self.log_mass[column(a) as usize];
                }
            }
        }
    }

    /// The base measure of the exponential mechanism this prior gives over `items`: `μ_o ∝
    /// e^{W ℓ_o} = ((1 + c_o)/(1 + c_max))^W`, normalised (the `own-history` prior: `e^W` on
    /// `history`, 1 elsewhere).
    pub fn base_measure(&self, items: &[u32], history: &[u32]) -> Vec<f64> {
        let w = self.weight();
        let m: Vec<f64> = items
            .iter()
            .map(|&j| match self.prior {
                Prior::OwnHistory(_) => {
                    if history.binary_search(&j).is_ok() {
                        w.exp()
                    } else {
                        1.0
                    }
                }
                _ => (w * self.log_mass[j as usize]).exp(),
            })
            .collect();
        let total: f64 = m.iter().sum();
        m.into_iter().map(|x| x / total).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priors_parse_and_print_back() {
        for text in [
            "none",
            "popularity:1",
            "popularity:0.5",
            "heldout:2",
            "file:some/counts.txt:3",
            "file:C:/data/counts.tsv:0.25",
            "own-history:4",
        ] {
            let p = Prior::parse(text).unwrap();
            assert_eq!(p.to_string(), text);
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Prior>(&json).unwrap(), p);
        }
        assert_eq!(
            Prior::parse("file:C:/x:2").unwrap(),
            Prior::File("C:/x".into(), 2.0)
        );
        assert!(!Prior::OwnHistory(1.0).history_independent());
        for (bad, want) in [
            ("pop:1", "valid names: none, popularity:W"),
            ("popularity:-1", "finite number >= 0"),
            ("popularity:inf", "finite number >= 0"),
            ("popularity:x", "'x' is not a weight"),
            ("file:counts.txt", "file:PATH:W"),
            ("file::2", "file:PATH:W"),
        ] {
            let e = Prior::parse(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn offsets_are_the_stated_scale() {
        let counts = [9u64, 0, 3];
        let p = Prior::Popularity(2.0)
            .resolve(3, Some(&counts), None, &|_| None)
            .unwrap()
            .unwrap();
        let mut q = vec![0.5, 0.5, 0.5];
        p.add_offsets(&mut q, &[0.1, 0.2, 0.1], |a| a as u32, 4.0, &[]);
        // W · 2Δ_max/ε = 2 · 0.4/4 = 0.2.
        let want = [0.5, 0.5 + 0.2 * (0.1f64).ln(), 0.5 + 0.2 * (0.4f64).ln()];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        let mu = p.base_measure(&[0, 1, 2], &[]);
        let raw = [1.0, 0.01, 0.16];
        let total: f64 = raw.iter().sum();
        for (m, r) in mu.iter().zip(raw) {
            assert!((m - r / total).abs() < 1e-12, "{mu:?}");
        }
        // W = 0 resolves to no prior; a missing source is an error naming the prior.
        assert!(Prior::Popularity(0.0)
            .resolve(3, Some(&counts), None, &|_| None)
            .unwrap()
            .is_none());
        let e = Prior::Heldout(1.0)
            .resolve(3, Some(&counts), None, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("prior 'heldout:1'"), "{e}");
    }

    #[test]
    fn prior_files_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counts.txt");
        let index = |id: &str| {
            ["a", "b", "c"]
                .iter()
                .position(|x| *x == id)
                .map(|j| j as u32)
        };
        std::fs::write(&path, "# public counts\nc 4\n\n a,1.5 \n").unwrap();
        assert_eq!(
            read_prior_file(&path, 3, &index).unwrap(),
            vec![1.5, 0.0, 4.0]
        );
        for (text, want) in [
            ("a 1\nzzz 2\n", "line 2"),
            ("a 1\nb -2\n", "count '-2'"),
            ("a 1\nb\n", "not ITEM COUNT"),
            ("a 1\nb 2\na 3\n", "already on line 1"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = read_prior_file(&path, 3, &index).unwrap_err().to_string();
            assert!(e.contains("counts.txt") && e.contains(want), "{text}: {e}");
        }
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(read_prior_file(&path, 3, &index).is_err());
    }
}
