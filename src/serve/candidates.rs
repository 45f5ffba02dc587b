//! The service's candidate policy, parsed and applied in this one place: which items a user's
//! selection problem holds, and what the released item therefore protects.
//!
//! * `all` (the default) — every item of the release, the user's own included: the list does not
//!   depend on the history, so each recommendation is user-level ε-DP;
//! * `history-top:N` — each user's top N items by the user's own scores, the user's items
//!   excluded: which items are candidates depends on the history and is not protected. Only with
//!   `allow_non_private`, and every response says so.

use std::fmt;

use crate::recommend::RecommendConfig;

use super::ServeError;

/// A parsed candidate policy of the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeCandidates {
    /// Every item, the user's own included (user-level ε-DP).
    All,
    /// The user's top N by the user's own scores, own items excluded (membership leaks).
    HistoryTop(usize),
}

impl ServeCandidates {
    /// Parses `all` or `history-top:N`; errors name the text and the valid forms.
    pub fn parse(text: &str) -> Result<Self, ServeError> {
        let bad = |why: &str| ServeError::Options(format!("candidates '{text}': {why}"));
        match text.trim() {
            "all" => Ok(ServeCandidates::All),
            t => match t.split_once(':') {
                Some(("history-top", n)) => match n.trim().parse::<usize>() {
                    Ok(0) | Err(_) => Err(bad("N must be a whole number >= 1")),
                    Ok(n) => Ok(ServeCandidates::HistoryTop(n)),
                },
                _ => Err(bad("write all or history-top:N")),
            },
        }
    }

    /// Whether the list is the same for every history (then the released item is user-level
    /// ε-DP for an ε-DP mechanism).
    pub fn history_independent(&self) -> bool {
        matches!(self, ServeCandidates::All)
    }

    /// Sets the candidates of `cfg` for a release of `n_items` items.
    pub fn apply(&self, cfg: &mut RecommendConfig, n_items: usize) {
        match *self {
            ServeCandidates::All => {
                cfg.top = n_items.max(1);
                cfg.exclude_history = false;
            }
            ServeCandidates::HistoryTop(n) => {
                cfg.top = n;
                cfg.exclude_history = true;
            }
        }
    }
}

impl fmt::Display for ServeCandidates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeCandidates::All => f.write_str("all"),
            ServeCandidates::HistoryTop(n) => write!(f, "history-top:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_print_and_say_whether_they_protect_membership() {
        assert_eq!(ServeCandidates::parse("all").unwrap(), ServeCandidates::All);
        let h = ServeCandidates::parse("history-top:500").unwrap();
        assert_eq!(h.to_string(), "history-top:500");
        assert!(ServeCandidates::All.history_independent());
        assert!(!h.history_independent());
        for bad in ["", "top:5", "history-top:0", "history-top:x"] {
            let e = ServeCandidates::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }
}
