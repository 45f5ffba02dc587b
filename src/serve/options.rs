//! The service's options ([`ServeOptions`]), declared once with the option tables of serving:
//! the model, mechanism, ε and candidates ([`ServingOptions`]) and the ledger's settings
//! ([`LedgerOptions`]) are the ones `recsel recommend` takes; the service adds where it listens,
//! its key, its limits and the mechanism's parameters. The command line and a TOML file (the
//! same keys; unknown keys are errors naming them) only fill them in.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ledger::Period;
use crate::mechanisms::{MechValues, Registry};
use crate::options::option_table;
use crate::recommend::options::{LedgerOptions, ServingOptions};
use crate::recommend::RecommendConfig;
use crate::rng::NoiseMode;

pub use crate::recommend::options::Fallback;

use super::ServeError;

/// Where the service listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

option_table! {
    /// Everything `recsel serve` is started with.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct ServeOptions {
        /// The model, the mechanism, ε and the candidates (fixed by the operator; requests
        /// cannot choose them).
        #[flatten]
        pub serving: ServingOptions,
        /// The privacy ledger: a file (the embedded SQLite store, created if missing) or a
        /// postgres:// URL (a ledger shared by several replicas), the budget and its window,
        /// and the fallback of an exhausted user (none: 429 with Retry-After).
        #[flatten]
        pub ledger: LedgerOptions,
        /// Address to listen on (port 0: a free port, printed at start-up).
        #[option(value_name = "ADDR", group = "Service")]
        pub listen: String = DEFAULT_LISTEN.to_string(),
        /// File holding the API key that guards every endpoint but /healthz and /readyz (never
        /// the key itself on a command line). Without it the service takes requests from
        /// anyone who can reach it.
        #[option(value_name = "FILE", group = "Service")]
        pub api_key_file: PathBuf,
        /// Limits on requests.
        #[flatten]
        pub limits: LimitOptions,
        /// Tests only: derive each request's noise from this seed and the request id. The noise
        /// is then predictable; the start-up banner and every response say so.
        #[option(value_name = "SEED", hidden = true, group = "Service")]
        pub insecure_test_seed: u64,
        /// Threads of the pool that scores and selects (default: one per core; on the command
        /// line, the global --threads).
        #[table_only]
        pub threads: Option<usize>,
        /// Parameters of the mechanism (fixed by the operator).
        #[flatten]
        pub params: MechValues,
    }
}

option_table! {
    /// Limits on what one request may hold; each error response names the limit it hit.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct LimitOptions {
        /// Largest request body, in bytes (413 beyond).
        #[option(value_name = "BYTES", group = "Limits")]
        pub max_body_bytes: usize = 1 << 20,
        /// Most items in one history (400 beyond).
        #[option(group = "Limits")]
        pub max_history: usize = 10_000,
        /// Most requests in one batch (400 beyond).
        #[option(group = "Limits")]
        pub max_batch: usize = 256,
        /// Longest user id and request id, in bytes.
        #[option(value_name = "BYTES", group = "Limits")]
        pub max_id_bytes: usize = 128,
        /// Requests waiting for the worker pool or the ledger at once; beyond, 503 and
        /// Retry-After.
        #[option(group = "Limits")]
        pub max_pending: usize = 4096,
        /// Most requests in one durable ledger commit.
        #[option(group = "Limits")]
        pub max_group: usize = 256,
    }
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
        let mut o = ServeOptions::default();
        o.serving.model = Some(model.into());
        o.serving.mechanism = Some(mechanism.into());
        o.serving.epsilon = Some(epsilon);
        o.ledger.ledger = Some(ledger.into());
        o.ledger.budget = Some(budget.into());
        o
    }

    /// Options from a TOML file's text; an unknown key is an error naming it.
    pub fn from_toml(text: &str) -> Result<Self, ServeError> {
        let o: ServeOptions =
            toml::from_str(text).map_err(|e| ServeError::Options(e.to_string()))?;
        Registry::builtin()
            .check_table_keys(&o.params, "the service's options")
            .map_err(|e| ServeError::Options(e.to_string()))?;
        Ok(o)
    }

    /// `over`'s options set over these (the flags over a file).
    pub fn overlaid(&self, over: &ServeOptions) -> Result<Self, ServeError> {
        crate::options::overlay(self, over).map_err(|e| ServeError::Options(e.to_string()))
    }

    /// The recommender's configuration (always the secure path); errors name a missing or bad
    /// option.
    pub fn config(&self) -> Result<RecommendConfig, ServeError> {
        self.ledger.check(true)?;
        if self.ledger.budget.is_none() {
            return Err(ServeError::Options("budget (--budget) is required".into()));
        }
        Ok(self
            .serving
            .config(&self.params, &Registry::builtin(), NoiseMode::Secure)?)
    }

    /// The budget's window (none unless given).
    pub fn period(&self) -> Result<Period, ServeError> {
        Ok(self.ledger.period()?.unwrap_or(Period::None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OptionTable;

    #[test]
    fn options_round_trip_through_toml_and_refuse_unknown_keys() {
        let mut o = ServeOptions::new("models/m", "ledger.db", "10", "mgem", 1.0);
        o.set("fallback", "item:42").unwrap();
        o.set("period", "day").unwrap();
        o.set("beta", "0.1").unwrap();
        o.set("max_history", "3").unwrap();
        let text = toml::to_string(&o).unwrap();
        assert_eq!(ServeOptions::from_toml(&text).unwrap(), o);
        let minimal =
            "model = 'm'\nledger = 'l.db'\nbudget = '5'\nmechanism = 'mgem'\nepsilon = 1\n";
        let m = ServeOptions::from_toml(minimal).unwrap();
        assert!(m.config().is_ok());
        assert_eq!(m.serving.candidates, None); // all
        assert_eq!(m.limits.resolved(), LimitOptions::defaults());
        assert_eq!(m.ledger.fallback(), Fallback::None);
        assert_eq!(m.period().unwrap(), Period::None);
        for bad in ["epsilom = 2\n", "[params]\nepsilon = 2\n"] {
            let err = ServeOptions::from_toml(&format!("{minimal}{bad}")).unwrap_err();
            let key = bad
                .trim_start_matches('[')
                .split([' ', ']'])
                .next()
                .unwrap();
            assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
        }
    }

    #[test]
    fn flags_override_a_file() {
        let file = ServeOptions::new("models/m", "ledger.db", "10", "mgem", 1.0);
        let mut flags = ServeOptions::default();
        flags.set("epsilon", "0.5").unwrap();
        flags.set("gamma", "0.2").unwrap();
        let o = file.overlaid(&flags).unwrap();
        assert_eq!(o.serving.epsilon, Some(0.5));
        assert_eq!(o.serving.mechanism.as_deref(), Some("mgem"));
        assert!(o.params.get("gamma").is_some());
    }
}
