//! The service's options ([`ServeOptions`]), declared once with the option tables of serving:
//! the model, mechanism, ε and candidates ([`ServingOptions`]) and the ledger's settings
//! ([`LedgerOptions`]) are the ones `recsel recommend` takes; the service adds where it listens,
//! its key, its limits and the mechanism's parameters. The command line and a TOML file (the
//! same keys; unknown keys are errors naming them) only fill them in.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ledger::{Period, Units};
use crate::mechanisms::{MechValues, Registry};
use crate::options::option_table;
use crate::recommend::options::{LedgerOptions, ServingOptions};
use crate::recommend::RecommendConfig;
use crate::rng::NoiseMode;

pub use crate::recommend::options::Fallback;

use super::ServeError;

/// What [`ServeOptions`] resolve to, every option checked: the recommender's configuration and
/// the ledger with its budget and period.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The recommender's configuration (the secure path).
    pub recommend: RecommendConfig,
    /// The ledger's location (an SQLite file or a PostgreSQL URL).
    pub ledger: String,
    /// The budget per user and period (more than zero).
    pub budget: Units,
    /// The budget's window.
    pub period: Period,
}

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
        /// Host names the Host header of a request may carry, comma-separated (a defence against
        /// DNS rebinding: a page whose name resolves to this address is refused). Default: the
        /// listen address and localhost, checked only when no API key is required.
        #[option(value_name = "HOST,...", group = "Service")]
        pub allowed_hosts: String,
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
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
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
        /// Open connections at most; a connection beyond is answered 503 and closed at once.
        #[option(group = "Limits")]
        pub max_connections: usize = 512,
        /// Seconds a request head may take from its first byte to its end (the connection is
        /// closed beyond).
        #[option(value_name = "SECONDS", group = "Limits")]
        pub header_timeout: f64 = 10.0,
        /// Seconds a request body may take to arrive whole once its head is read (408 beyond),
        /// and a response may wait for the client to take it (the connection is closed beyond).
        #[option(value_name = "SECONDS", group = "Limits")]
        pub body_timeout: f64 = 30.0,
        /// Seconds a kept-alive connection may wait for its next request (closed beyond).
        #[option(value_name = "SECONDS", group = "Limits")]
        pub idle_timeout: f64 = 75.0,
        /// Seconds after SIGTERM or SIGINT for the requests in flight to be answered; the
        /// connections still open then are closed (a charge already committed stays committed,
        /// and the same request id gets its answer back).
        #[option(value_name = "SECONDS", group = "Limits")]
        pub shutdown_timeout: f64 = 10.0,
        /// Milliseconds every answer of POST /v1/recommend and /v1/recommend/batch takes at
        /// least (0: answer at once). Hides from an observer of response times whether a
        /// request was charged, refused or replayed (docs/serving.md, "Timing").
        #[option(value_name = "MS", group = "Limits")]
        pub min_response_ms: f64 = 0.0,
    }
}

impl LimitOptions {
    /// Checks every limit: counts at least 1, times finite and > 0 (a pad >= 0), at most a day.
    /// The error names the option and its value.
    pub fn check(&self) -> Result<(), ServeError> {
        let counts = [
            ("max_body_bytes", self.max_body_bytes()),
            ("max_history", self.max_history()),
            ("max_batch", self.max_batch()),
            ("max_id_bytes", self.max_id_bytes()),
            ("max_pending", self.max_pending()),
            ("max_group", self.max_group()),
            ("max_connections", self.max_connections()),
        ];
        if let Some((name, v)) = counts.iter().find(|(_, v)| *v == 0) {
            return Err(ServeError::Options(format!(
                "{name} (--{}) must be at least 1, got {v}",
                name.replace('_', "-")
            )));
        }
        let times = [
            ("header_timeout", self.header_timeout(), false),
            ("body_timeout", self.body_timeout(), false),
            ("idle_timeout", self.idle_timeout(), false),
            ("shutdown_timeout", self.shutdown_timeout(), false),
            ("min_response_ms", self.min_response_ms(), true),
        ];
        for (name, v, zero_ok) in times {
            // At most a day: a longer timeout is a mistake, and Duration takes any such value.
            let ok = v.is_finite() && v <= 86_400_000.0 && (v > 0.0 || (zero_ok && v == 0.0));
            if !ok {
                return Err(ServeError::Options(format!(
                    "{name} (--{}) must be a finite number {}, got {v}",
                    name.replace('_', "-"),
                    if zero_ok { ">= 0" } else { "> 0" }
                )));
            }
        }
        Ok(())
    }

    /// `header_timeout` as a duration ([`LimitOptions::check`] first).
    pub fn header_timeout_duration(&self) -> Duration {
        seconds(self.header_timeout())
    }

    /// `body_timeout` as a duration.
    pub fn body_timeout_duration(&self) -> Duration {
        seconds(self.body_timeout())
    }

    /// `idle_timeout` as a duration.
    pub fn idle_timeout_duration(&self) -> Duration {
        seconds(self.idle_timeout())
    }

    /// `shutdown_timeout` as a duration.
    pub fn shutdown_timeout_duration(&self) -> Duration {
        seconds(self.shutdown_timeout())
    }

    /// `min_response_ms` as a duration.
    pub fn min_response(&self) -> Duration {
        seconds(self.min_response_ms() / 1e3)
    }
}

/// Seconds as a duration; a value `check` refuses (negative, not finite) reads as 0.
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO)
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

    /// Every option checked once and resolved (the recommender always on the secure path):
    /// [`run`](super::run) resolves them before it binds, and [`Service::load`](super::service::Service::load)
    /// reads only the result. Errors name a missing or bad option.
    pub fn config(&self) -> Result<ServeConfig, ServeError> {
        self.ledger.check(true)?;
        self.limits.check()?;
        let budget = match self.ledger.budget()? {
            None => return Err(ServeError::Options("budget (--budget) is required".into())),
            Some(b) if b == Units::ZERO => {
                return Err(ServeError::Options(format!(
                    "budget (--budget) is {}: no recommendation could ever be answered; give \
                     a budget of at least one recommendation's eps",
                    self.ledger.budget.as_deref().unwrap_or("0")
                )))
            }
            Some(b) => b,
        };
        let recommend =
            self.serving
                .config(&self.params, &Registry::builtin(), NoiseMode::Secure)?;
        Ok(ServeConfig {
            recommend,
            ledger: self
                .ledger
                .ledger
                .clone()
                .ok_or_else(|| ServeError::Options("ledger (--ledger) is required".into()))?,
            budget,
            period: self.period()?,
        })
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
    fn limits_that_cannot_hold_are_refused_naming_the_option() {
        for (key, value) in [
            ("max_connections", "0"),
            ("header_timeout", "0"),
            ("body_timeout", "-1"),
            ("idle_timeout", "inf"),
            ("shutdown_timeout", "NaN"),
            ("min_response_ms", "-5"),
        ] {
            let mut o = ServeOptions::new("m", "l.db", "10", "mgem", 1.0);
            o.set(key, value).unwrap();
            let e = o.limits.check().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(&key.replace('_', "-")), "{e}");
        }
        let mut o = ServeOptions::new("m", "l.db", "0", "mgem", 1.0);
        assert!(o.config().unwrap_err().to_string().contains("budget"));
        o.set("budget", "1").unwrap();
        o.set("min_response_ms", "2.5").unwrap();
        o.limits.check().unwrap();
        assert_eq!(o.limits.min_response(), Duration::from_micros(2500));
        assert_eq!(
            o.limits.shutdown_timeout_duration(),
            Duration::from_secs(10)
        );
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
