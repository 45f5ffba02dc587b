//! The service's options ([`ServeOptions`]): one serde value, its defaults written once here, that
//! the command line (and a TOML file) only fill in.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ledger::Period;
use crate::mechanisms::MechParams;

use super::ServeError;

/// Where the service listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The candidate policy unless told otherwise: every item (user-level ε-DP).
pub const DEFAULT_CANDIDATES: &str = "all";

/// Everything `recsel serve` is started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeOptions {
    /// Model directory with its release artifact (`recsel fit ... --out DIR`).
    pub model: PathBuf,
    /// The privacy ledger: a file path (the embedded SQLite store, created if missing) or a
    /// `postgres://` URL (a ledger shared by several replicas).
    pub ledger: String,
    /// ε each user may spend per period (decimal, rounded down to 10⁻⁹). An existing ledger must
    /// hold the same budget.
    pub budget: String,
    /// The budget's window (UTC calendar): `day`, `week`, `month` or `none` (the ledger's whole
    /// life, the default).
    #[serde(default = "default_period")]
    pub period: Period,
    /// Registry name of the selection mechanism (fixed by the operator; requests cannot choose),
    /// or `tuned`: the row of the model directory's `tuning.json` for ε (`recsel tune`).
    pub mechanism: String,
    /// The mechanism's parameters, ε among them (fixed by the operator).
    #[serde(default)]
    pub params: MechParams,
    /// Candidate policy (`all`, the default; `popular:N`, `pool:FILE`; `history-top:N` only with
    /// `allow_non_private`): [`crate::scoring::CandidatePolicy`].
    #[serde(default = "default_candidates")]
    pub candidates: String,
    /// Accept a policy or mechanism that is not user-level ε-DP; every response then says so.
    #[serde(default)]
    pub allow_non_private: bool,
    /// Address to listen on (`127.0.0.1:0` picks a free port, printed at start-up).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Threads of the pool that scores and selects (default: one per core).
    #[serde(default)]
    pub threads: Option<usize>,
    /// File holding the API key that guards every endpoint but health (never the key itself on
    /// a command line). Without it the service takes requests from anyone who can reach it.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// What a user whose budget is exhausted gets.
    #[serde(default)]
    pub fallback: Fallback,
    /// Limits on requests.
    #[serde(default)]
    pub limits: Limits,
    /// Tests only: derive each request's noise from this seed and the request id. The noise is
    /// then predictable; the start-up banner and every response say so.
    #[serde(default)]
    pub insecure_test_seed: Option<u64>,
}

fn default_period() -> Period {
    Period::None
}

fn default_candidates() -> String {
    DEFAULT_CANDIDATES.into()
}

fn default_listen() -> String {
    DEFAULT_LISTEN.into()
}

impl ServeOptions {
    /// The options of a service of `model` charging `ledger` with `budget` per user, selecting
    /// with `mechanism` at `epsilon`; everything else at its default.
    pub fn new(
        model: impl Into<PathBuf>,
        ledger: &str,
        budget: &str,
        mechanism: &str,
        epsilon: f64,
    ) -> Self {
        ServeOptions {
            model: model.into(),
            ledger: ledger.into(),
            budget: budget.into(),
            period: default_period(),
            mechanism: mechanism.into(),
            params: MechParams {
                epsilon,
                ..MechParams::default()
            },
            candidates: default_candidates(),
            allow_non_private: false,
            listen: default_listen(),
            threads: None,
            api_key_file: None,
            fallback: Fallback::default(),
            limits: Limits::default(),
            insecure_test_seed: None,
        }
    }

    /// Options from a TOML file's text (unknown keys are errors).
    pub fn from_toml(text: &str) -> Result<Self, ServeError> {
        toml::from_str(text).map_err(|e| ServeError::Options(e.to_string()))
    }
}

/// Limits on what one request may hold; each error response names the limit it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
    /// Most items in one history (400 beyond).
    pub max_history: usize,
    /// Most requests in one batch (400 beyond).
    pub max_batch: usize,
    /// Longest user id and request id, in bytes.
    pub max_id_bytes: usize,
    /// Requests waiting for the worker pool or the ledger at once; beyond, 503 and Retry-After.
    pub max_pending: usize,
    /// Most requests in one durable ledger commit.
    pub max_group: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1 << 20,
            max_history: 10_000,
            max_batch: 256,
            max_id_bytes: 128,
            max_pending: 4096,
            max_group: 256,
        }
    }
}

/// What an exhausted user gets instead of a refusal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Fallback {
    /// Nothing: 429 with `Retry-After` at the window's end.
    #[default]
    None,
    /// The most popular training item of the release (public, 0 ε).
    Popular,
    /// A public item chosen by the operator (0 ε).
    Item(String),
}

impl FromStr for Fallback {
    type Err = ServeError;

    fn from_str(s: &str) -> Result<Self, ServeError> {
        match s {
            "none" => Ok(Fallback::None),
            "popular" => Ok(Fallback::Popular),
            _ => match s.strip_prefix("item:") {
                Some(id) if !id.is_empty() => Ok(Fallback::Item(id.into())),
                _ => Err(ServeError::Options(format!(
                    "fallback '{s}': write none, popular or item:ID"
                ))),
            },
        }
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::None => f.write_str("none"),
            Fallback::Popular => f.write_str("popular"),
            Fallback::Item(id) => write!(f, "item:{id}"),
        }
    }
}

impl Serialize for Fallback {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fallback {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_through_toml_and_refuse_unknown_keys() {
        let mut o = ServeOptions::new("models/m", "ledger.db", "10", "mgem", 1.0);
        o.fallback = Fallback::Item("42".into());
        o.period = Period::Day;
        let text = toml::to_string(&o).unwrap();
        assert_eq!(ServeOptions::from_toml(&text).unwrap(), o);
        let minimal = "model = 'm'\nledger = 'l.db'\nbudget = '5'\nmechanism = 'mgem'\n";
        let m = ServeOptions::from_toml(minimal).unwrap();
        assert_eq!(m.candidates, "all");
        assert_eq!(m.listen, DEFAULT_LISTEN);
        assert_eq!(m.limits, Limits::default());
        assert_eq!(m.fallback, Fallback::None);
        let err = ServeOptions::from_toml(&format!("{minimal}epsilon = 2\n")).unwrap_err();
        assert!(err.to_string().contains("epsilon"), "{err}");
    }

    #[test]
    fn fallbacks_parse_and_print_alike() {
        for s in ["none", "popular", "item:7"] {
            assert_eq!(s.parse::<Fallback>().unwrap().to_string(), s);
        }
        assert!("item:".parse::<Fallback>().is_err());
        assert!("most".parse::<Fallback>().is_err());
    }
}
