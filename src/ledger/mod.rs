//! The per-user privacy ledger (docs/ledger.md): every user's budget per period, every charge as an
//! event, and the answer each request released, kept durably so that a charge is on disk before
//! its answer leaves.
//!
//! * [`units`] — budgets and charges as integers ([`Units`], 10⁻⁹ ε), converted once;
//! * [`time`] — instants ([`Timestamp`]) and the budget's UTC periods ([`Period`], [`Window`]);
//! * the [`Ledger`] trait — charge a group of requests in one durable commit, balances, imports,
//!   batch runs — and its administrative half [`LedgerLog`] (event logs, for inspection and the
//!   export); [`open`] chooses the backend from the ledger's [`Location`];
//! * [`store`] — what a backend provides (`Store`: transactions and reads in its own SQL), and
//!   `policy.rs`, the one charge policy every store is a [`Ledger`] through; the backends are
//!   [`SqliteLedger`] (`sqlite`, the embedded default) and [`PostgresLedger`] (`postgres`, the
//!   database several service replicas share);
//! * [`GroupCommitter`] (`group`) — a thread that joins requests arriving together into one
//!   commit, for the batch path and the server;
//! * [`export`] — the JSON-lines export format and a verifying import;
//! * [`composition`] — how charges compose: basic composition for every mechanism, and a tighter
//!   zCDP accountant only for mechanisms with a proof (the exponential mechanism).
//!
//! A charge is decided in one transaction per group: a request whose (user, request id) is already
//! in the ledger is a replay (its stored answer comes back and nothing is charged) when its
//! [`RequestHash`] is the stored one, and rejected otherwise; else it is charged if
//! the user's window has room, else refused — or, if the caller offered a public fallback item,
//! answered with that item at 0 ε. Callers receive outcomes only after the commit is durable.

pub mod composition;
pub mod export;
mod group;
pub mod history_key;
mod policy;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_migrate;
mod sqlite;
mod sqlite_migrate;
pub mod store;
pub mod time;
pub mod units;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use group::{CommitStats, GroupCommitter};
pub use history_key::{HistoryKey, RequestHasher};
#[cfg(feature = "postgres")]
pub use postgres::PostgresLedger;
pub use sqlite::SqliteLedger;
pub use time::{check_clock, Period, Timestamp, Window, CLOCK_TOLERANCE};
pub use units::Units;

/// Errors of the ledger. A refused request is not an error (it is an [`Outcome`]); these are
/// failures of the store, of the settings or of input.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LedgerError {
    /// An amount of ε that cannot be converted (negative, not a number, too large).
    #[error("{0}")]
    Units(String),
    /// The ledger file was created with other settings than the ones given.
    #[error(
        "{path}: this ledger holds a budget of {stored}; the command asks for {given}. A ledger's \
         budget and period are fixed when it is created (docs/ledger.md, \"Settings\"): pass the \
         stored values, or start a new ledger file"
    )]
    SettingsMismatch {
        /// The ledger.
        path: String,
        /// Its settings.
        stored: Settings,
        /// The settings asked for.
        given: Settings,
    },
    /// The store failed (I/O, a locked or corrupt file); nothing of the failed group was charged.
    #[error("ledger {path}: {message}")]
    Store {
        /// The ledger.
        path: String,
        /// What the store reported.
        message: String,
    },
    /// No ledger at the location, and the command did not ask to create one.
    #[error(
        "{location}: no ledger there. Create it with `recsel ledger init --ledger {location} \
         --budget EPS [--period day|week|month|none]` (or pass --create-ledger). A ledger is \
         never created unasked: one that vanished (deleted, a volume not mounted) would \
         otherwise come back empty and grant every user's budget again"
    )]
    Missing {
        /// The location, as given (a URL without its password).
        location: String,
    },
    /// An export that cannot be imported, with its line.
    #[error("{context}: {message}")]
    Import {
        /// Where (file and line).
        context: String,
        /// What is wrong.
        message: String,
    },
    /// Anything else a caller can cause, in words.
    #[error("{0}")]
    Invalid(String),
}

impl From<LedgerError> for crate::error::Error {
    fn from(e: LedgerError) -> Self {
        crate::error::Error::Invalid(e.to_string())
    }
}

/// Result alias of the ledger.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;

/// A ledger's fixed settings: every user's budget per window, and the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// ε each user may spend in one window.
    pub budget: Units,
    /// The window.
    pub period: Period,
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.period {
            Period::None => write!(f, "{} eps per user (period none)", self.budget),
            p => write!(f, "{} eps per user per {p}", self.budget),
        }
    }
}

/// What a request released, as stored with its charge (so that a replay returns it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// An item chosen by the private mechanism (charged).
    Item(String),
    /// An ordered list of distinct items chosen by the private mechanism as one release
    /// (charged once).
    List(Vec<String>),
    /// The mechanism had no candidate (the history covers every item); charged like an item.
    NoCandidate,
    /// The operator's public fallback item, released when the budget was exhausted (0 ε).
    Fallback(String),
}

impl Answer {
    /// The item id released, if any (a list's first item).
    pub fn item(&self) -> Option<&str> {
        match self {
            Answer::Item(i) | Answer::Fallback(i) => Some(i),
            Answer::List(l) => l.first().map(String::as_str),
            Answer::NoCandidate => None,
        }
    }

    /// Every item id released, in order (one for an item or a fallback, none for
    /// [`Answer::NoCandidate`]).
    pub fn items(&self) -> Vec<&str> {
        match self {
            Answer::Item(i) | Answer::Fallback(i) => vec![i.as_str()],
            Answer::List(l) => l.iter().map(String::as_str).collect(),
            Answer::NoCandidate => Vec::new(),
        }
    }

    /// Whether this is the public fallback.
    pub fn is_fallback(&self) -> bool {
        matches!(self, Answer::Fallback(_))
    }
}

/// The SHA-256 of everything that determines a request's answer (docs/ledger.md, "Request ids
/// and idempotency"): stored with its event, so that a later request with the same (user,
/// request id) is a replay only if it asks the same question. What goes in is the caller's
/// business (the recommender hashes the canonical history and the serving configuration); the
/// ledger compares 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHash(pub [u8; 32]);

impl RequestHash {
    /// The SHA-256 of `parts`, each prefixed with its length (so no two lists of parts share an
    /// encoding).
    pub fn of(parts: &[&[u8]]) -> Self {
        let mut h = RequestHasher::new();
        for p in parts {
            h.part(p);
        }
        h.finish()
    }

    /// 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The hash of 64 hex digits (either case); `None` for anything else.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(RequestHash(out))
    }

    /// The hash of 32 stored bytes; `None` for another length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(RequestHash(bytes.try_into().ok()?))
    }
}

impl fmt::Debug for RequestHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestHash({})", self.hex())
    }
}

impl fmt::Display for RequestHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl Serialize for RequestHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for RequestHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RequestHash::from_hex(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("'{text}' is not a request hash (64 hex digits)"))
        })
    }
}

/// One request to charge: who, which request, what it spends, and the answer it will release if
/// it is charged.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeRequest {
    /// The user whose budget pays.
    pub user: String,
    /// The caller's idempotency key, scoped to the user: the same (user, id) always gets the same
    /// answer, charged once; another user's id is another request.
    pub request_id: String,
    /// What determines the answer ([`RequestHash`]): a stored (user, id) whose hash differs is
    /// rejected ([`Rejection::DifferentRequest`]), not replayed.
    pub request_hash: RequestHash,
    /// Registry name of the mechanism (for the log).
    pub mechanism: String,
    /// ε of this request.
    pub epsilon: Units,
    /// When the request was made; its window is the period's window of this instant.
    pub time: Timestamp,
    /// The private answer, released only if the charge commits ([`Answer::Item`] or
    /// [`Answer::NoCandidate`]).
    pub answer: Answer,
    /// A public item to release instead, at 0 ε, when the budget is exhausted.
    pub fallback: Option<String>,
    /// One release per history (docs/ledger.md, "One release per history"): when set, a charged
    /// release of the same user in the same window with the same `request_hash` (the same
    /// canonical history and serving configuration) is answered again, whatever the request id,
    /// as [`Outcome::Replayed`] — nothing charged, nothing stored: a release repeated is
    /// post-processing of it.
    pub once_per_history: bool,
}

/// The ledger's decision on one [`ChargeRequest`], returned only after it is durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Charged: release `answer`.
    Charged {
        /// The answer stored with the charge.
        answer: Answer,
        /// This request's charge.
        charged: Units,
        /// The user's total in this window, this charge included.
        spent: Units,
        /// What is left in this window.
        remaining: Units,
    },
    /// The user's request id was charged before for the same request (the same hash, or an event
    /// stored before hashes were kept) — or, with [`ChargeRequest::once_per_history`], the same
    /// history was released to the user in this window under another request id: release the
    /// stored answer again; nothing charged.
    Replayed {
        /// The stored event of the first request with this id.
        event: Event,
    },
    /// The budget is exhausted and there was no fallback: release nothing.
    Refused {
        /// The user's total in this window.
        spent: Units,
        /// What is left (less than the request's ε).
        remaining: Units,
        /// When the next window starts; `None` when none will have room (period `none`, or a
        /// request larger than the whole budget).
        retry_after: Option<Timestamp>,
    },
    /// The budget is exhausted: release the public fallback item (logged, 0 ε).
    Fallback {
        /// The fallback item.
        item: String,
        /// What is left in this window.
        remaining: Units,
        /// As for [`Outcome::Refused`].
        retry_after: Option<Timestamp>,
    },
    /// The request cannot be taken; nothing charged, nothing released.
    Rejected {
        /// Why.
        reason: Rejection,
    },
}

/// Why a request was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The user's request id was stored for a different request (another [`RequestHash`]: another
    /// history or configuration); its stored answer is not shown and nothing is charged.
    DifferentRequest,
    /// A field is invalid (an empty user or request id, a charge answer that is a fallback).
    Invalid(String),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::DifferentRequest => f.write_str(
                "the request id was already used for a different request (another history or \
                 serving configuration); nothing is charged or released",
            ),
            Rejection::Invalid(m) => f.write_str(m),
        }
    }
}

impl Outcome {
    /// The answer to release: `Some` for [`Outcome::Charged`], [`Outcome::Replayed`] and
    /// [`Outcome::Fallback`].
    pub fn answer(&self) -> Option<Answer> {
        match self {
            Outcome::Charged { answer, .. } => Some(answer.clone()),
            Outcome::Replayed { event } => Some(event.answer.clone()),
            Outcome::Fallback { item, .. } => Some(Answer::Fallback(item.clone())),
            Outcome::Refused { .. } | Outcome::Rejected { .. } => None,
        }
    }

    /// A short name: `charged`, `replayed`, `refused`, `fallback`, `rejected`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Charged { .. } => "charged",
            Outcome::Replayed { .. } => "replayed",
            Outcome::Refused { .. } => "refused",
            Outcome::Fallback { .. } => "fallback",
            Outcome::Rejected { .. } => "rejected",
        }
    }
}

/// One entry of a user's log: a charged request or a served fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Commit order in this ledger (1, 2, …).
    pub seq: u64,
    /// The user.
    pub user: String,
    /// The request id.
    pub request_id: String,
    /// The mechanism's registry name (empty for a fallback).
    pub mechanism: String,
    /// What it cost (0 for a fallback).
    pub units: Units,
    /// When the request was made.
    pub time: Timestamp,
    /// Start of its window.
    pub window: Timestamp,
    /// What it released.
    pub answer: Answer,
    /// What determined the answer; `None` for an event stored before hashes were kept (ledger
    /// schema version 1), whose replays are not checked.
    pub request_hash: Option<RequestHash>,
}

/// A user's standing in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balance {
    /// The window.
    pub window: Window,
    /// The budget per window.
    pub budget: Units,
    /// Spent in the window.
    pub spent: Units,
    /// `budget − spent`, or 0 when the window is closed (`closed_by`).
    pub remaining: Units,
    /// The start of a later window this user was charged in, if there is one: the window is
    /// closed (a charge into it is refused as a clock that went backwards), so nothing remains.
    pub closed_by: Option<Timestamp>,
}

/// A batch run of `recsel recommend --ledger`: its request ids are `<run id>/<user>`, so every
/// attempt of one run (a rerun after a crash) asks for the same ids and is charged once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The run id.
    pub id: String,
    /// Attempts recorded so far, this one included (more than 1: earlier attempts' charges are
    /// replayed, not repeated).
    pub attempts: u64,
}

impl Run {
    /// Checks a run id before a backend records it: non-empty and without '/', so that
    /// `<run id>/<user>` splits back into the two.
    pub(crate) fn check_id(id: &str) -> Result<()> {
        if id.is_empty() || id.contains('/') {
            return Err(LedgerError::Invalid(format!(
                "run id '{id}' must be non-empty and without '/'"
            )));
        }
        Ok(())
    }

    /// The error of a run id recorded in the ledger at `location` with another key: its request
    /// ids would replay answers computed for other inputs.
    pub(crate) fn key_mismatch(location: &dyn fmt::Display, id: &str) -> LedgerError {
        LedgerError::Invalid(format!(
            "{location}: run id '{id}' was used with another users file or configuration; its \
             request ids would replay answers computed for other inputs. Choose another run id"
        ))
    }
}

/// A durable per-user privacy ledger: the charging half. Object-safe: the server holds an
/// `Arc<dyn Ledger>`, and a backend is chosen at start-up from the ledger's location ([`open`]).
/// Every [`store::Store`] (the embedded SQLite store, the PostgreSQL store) is a `Ledger` through
/// the one charge policy (`policy.rs`).
///
/// Every method that writes commits durably before it returns.
pub trait Ledger: Send + Sync + fmt::Debug {
    /// Where the ledger is (`sqlite:PATH`, or the URL without its password), for messages.
    fn location(&self) -> String;

    /// The kind of store (`sqlite`, `postgres`), without a path or credentials.
    fn kind(&self) -> &'static str;

    /// The budget and the period.
    fn settings(&self) -> Settings;

    /// Decides every request of `requests`, in order, in ONE durable commit, and returns one
    /// outcome per request. Requests of one group see each other: two requests of one user are
    /// charged one after the other, and a request id repeated within the group is a replay of
    /// its first occurrence. An `Err` means the whole group failed and nothing was charged.
    fn charge(&self, requests: &[ChargeRequest]) -> Result<Vec<Outcome>>;

    /// The user's balance in the window that contains `at`.
    fn balance(&self, user: &str, at: Timestamp) -> Result<Balance>;

    /// Recomputes every window's total from the events and compares it with the stored running
    /// total and the budget; returns the number of windows checked.
    fn verify(&self) -> Result<usize>;

    /// Adds `events` (already verified by [`export::read`]) to an empty ledger in one commit,
    /// keeping their sequence numbers. An error if the ledger already has events.
    fn import_events(&self, events: &[Event]) -> Result<()>;

    /// Records an attempt of the batch run `id` whose command has the fingerprint `key`
    /// (durably, before any of its charges). An error if `id` was used before with another
    /// key: its request ids would replay answers computed for other inputs.
    fn open_run(&self, id: &str, key: &str, at: Timestamp) -> Result<Run>;

    /// The event log: the administrative half.
    fn log(&self) -> &dyn LedgerLog;

    /// Whether the ledger is still the one that was opened: for a file, that the open file is
    /// still the file at its path (not deleted, not replaced). Cheap; every commit checks it too.
    fn health(&self) -> Result<()>;

    /// The store's own consistency check (SQLite's `integrity_check`; nothing for a database
    /// server, which keeps its own).
    fn integrity(&self) -> Result<()>;

    /// One empty durable write, to learn whether commits succeed again after failures.
    fn probe(&self) -> Result<()>;

    /// The time of the newest event stored, if any (for [`check_clock`]).
    fn newest_event_time(&self) -> Result<Option<Timestamp>> {
        Ok(None)
    }

    /// The ledger's own clock when it has one apart from this process's: a database server's,
    /// which every replica shares (for [`check_clock`]).
    fn server_time(&self) -> Result<Option<Timestamp>> {
        Ok(None)
    }
}

/// The administrative half of a ledger: its event log, read (for `recsel ledger show` and the
/// export). A backend implements it in its own SQL.
pub trait LedgerLog: Send + Sync {
    /// The user's events, in commit order (every window).
    fn events(&self, user: &str) -> Result<Vec<Event>>;

    /// The stored event of the user's request id, if it was charged (ids are scoped per user).
    fn event(&self, user: &str, request_id: &str) -> Result<Option<Event>>;

    /// Every user with at least one event, sorted.
    fn users(&self) -> Result<Vec<String>>;

    /// Calls `f` on every event in commit order, in one consistent snapshot (for the export).
    fn for_each_event(&self, f: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()>;
}

/// Where a ledger is: a file (the embedded SQLite store) or a `postgres://` URL (a database
/// shared by several service replicas). The one place that tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL.
    Postgres(String),
}

impl Location {
    /// The location named by `spec`: a `postgres://` or `postgresql://` URL, else a path.
    pub fn parse(spec: &str) -> Location {
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Location::Postgres(spec.to_string())
        } else {
            Location::Sqlite(PathBuf::from(spec))
        }
    }

    /// The location as written, for messages (a URL without its password).
    pub fn display(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            #[cfg(feature = "postgres")]
            Location::Postgres(u) => self::postgres::redact(u),
            #[cfg(not(feature = "postgres"))]
            Location::Postgres(_) => "a postgres:// URL".to_string(),
        }
    }

    /// Whether a ledger (or, for a file, anything) is there.
    pub fn exists(&self) -> Result<bool> {
        match self {
            Location::Sqlite(p) => Ok(p.exists()),
            #[cfg(feature = "postgres")]
            Location::Postgres(u) => PostgresLedger::exists(u),
            #[cfg(not(feature = "postgres"))]
            Location::Postgres(_) => Err(no_postgres()),
        }
    }

    /// Creates a new ledger there with `settings`; an error if anything is there already.
    pub fn create(&self, settings: Settings) -> Result<Arc<dyn Ledger>> {
        Ok(match self {
            Location::Sqlite(p) => Arc::new(SqliteLedger::create(p, settings)?),
            #[cfg(feature = "postgres")]
            Location::Postgres(u) => Arc::new(PostgresLedger::create(u, settings)?),
            #[cfg(not(feature = "postgres"))]
            Location::Postgres(_) => return Err(no_postgres()),
        })
    }

    /// Connects to the ledger there: created with `create` (tables only where there are none),
    /// else an existing ledger with its stored settings.
    fn connect(&self, create: Option<Settings>) -> Result<Arc<dyn Ledger>> {
        Ok(match self {
            Location::Sqlite(p) => match create {
                Some(s) => Arc::new(SqliteLedger::open(p, s)?),
                None => Arc::new(SqliteLedger::open_existing(p)?),
            },
            #[cfg(feature = "postgres")]
            Location::Postgres(u) => match create {
                Some(s) => Arc::new(PostgresLedger::open(u, s)?),
                None => Arc::new(PostgresLedger::open_existing(u)?),
            },
            #[cfg(not(feature = "postgres"))]
            Location::Postgres(_) => return Err(no_postgres()),
        })
    }
}

/// A `postgres://` location in a build without the PostgreSQL backend.
#[cfg(not(feature = "postgres"))]
fn no_postgres() -> LedgerError {
    LedgerError::Invalid(
        "this recsel was built without the PostgreSQL ledger (cargo feature `postgres`): use a \
         ledger file, or a build with the feature"
            .into(),
    )
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Self {
        match p.to_str() {
            Some(s) => Location::parse(s),
            None => Location::Sqlite(p.to_path_buf()),
        }
    }
}

/// Opens the ledger named by `spec` with `settings`: a file path (the embedded SQLite store,
/// created if missing) or a `postgres://` URL (a database shared by several service replicas;
/// its tables are created if missing). An existing ledger must have the same settings.
pub fn open(spec: &str, settings: Settings) -> Result<Arc<dyn Ledger>> {
    Location::parse(spec).connect(Some(settings))
}

/// Opens an existing ledger with the settings stored in it (for inspection and export): a file,
/// or a `postgres://` URL in place of the path.
pub fn open_existing(path: &Path) -> Result<Arc<dyn Ledger>> {
    Location::from(path).connect(None)
}

/// What a charging command (`recsel serve`, `recsel recommend --ledger`) does with `--ledger
/// FILE|URL [--budget B] [--period P] [--create-ledger]`, failing closed:
///
/// * an existing ledger is opened with its stored settings — a budget or period given that
///   differs from them is [`LedgerError::SettingsMismatch`] — and checked before it is used: the
///   store's integrity check ([`Ledger::integrity`]) and every window's total against its events
///   ([`Ledger::verify`]); a 0-byte file is refused, not taken for a new ledger;
/// * a missing ledger is created (with `budget`, required then, and `period`, default
///   [`Period::None`]) only when `create` is set, else [`LedgerError::Missing`], which says how
///   to create one: a ledger that vanished is never silently replaced by an empty one.
pub fn open_for_charging(
    spec: &str,
    budget: Option<Units>,
    period: Option<Period>,
    create: bool,
) -> Result<Arc<dyn Ledger>> {
    let location = Location::parse(spec);
    if location.exists()? {
        let l = location.connect(None)?;
        let stored = l.settings();
        let given = Settings {
            budget: budget.unwrap_or(stored.budget),
            period: period.unwrap_or(stored.period),
        };
        if given != stored {
            return Err(LedgerError::SettingsMismatch {
                path: location.display(),
                stored,
                given,
            });
        }
        l.integrity()?;
        l.verify()?;
        check_clock(&*l, Timestamp::now())?;
        return Ok(l);
    }
    if !create {
        return Err(LedgerError::Missing {
            location: location.display(),
        });
    }
    let Some(budget) = budget else {
        return Err(LedgerError::Invalid(format!(
            "{} does not exist: creating a ledger needs a budget (--budget EPS)",
            location.display()
        )));
    };
    let settings = Settings {
        budget,
        period: period.unwrap_or(Period::None),
    };
    match location {
        // Replicas started together with --create-ledger: one creates the tables (under the
        // set-up's advisory lock), the others find them and open them with the same settings.
        Location::Postgres(_) => {
            let l = location.connect(Some(settings))?;
            check_clock(&*l, Timestamp::now())?;
            Ok(l)
        }
        Location::Sqlite(_) => location.create(settings),
    }
}

/// Removes a ledger that a charging command has just created ([`open_for_charging`] with
/// `create`) when the command then refuses to start: an SQLite file and its write-ahead files,
/// only while it holds no event. A PostgreSQL ledger is left in its database (its tables are
/// the operator's to drop). The ledger is closed first.
pub fn discard_new(ledger: Arc<dyn Ledger>) -> Result<()> {
    if !ledger.log().users()?.is_empty() {
        return Err(LedgerError::Invalid(format!(
            "{}: not removed: it holds events",
            ledger.location()
        )));
    }
    let Some(path) = ledger.location().strip_prefix("sqlite:").map(PathBuf::from) else {
        return Ok(());
    };
    drop(ledger);
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(LedgerError::Invalid(format!(
                    "removing {}: {e}",
                    Path::new(&p).display()
                )))
            }
        }
    }
    Ok(())
}

/// What [`migrate`] did: the ledger, its schema version before and after, and how many events it
/// holds (all kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The ledger (a URL without its password).
    pub location: String,
    /// The schema version found.
    pub from: u32,
    /// The schema version now ([`store::FORMAT_VERSION`]; equal to `from` when there was
    /// nothing to do).
    pub to: u32,
    /// Events kept.
    pub events: u64,
}

/// Migrates the ledger at `spec` (a file or a `postgres://` URL) to the current schema version
/// in one transaction (`recsel ledger migrate`); a ledger already current is left alone. Every
/// other way of opening a ledger refuses an older one with a message that names this command:
/// a schema change is made only when the operator asks (docs/ledger.md, "Schema versions").
pub fn migrate(spec: &str) -> Result<Migrated> {
    match Location::parse(spec) {
        Location::Sqlite(p) => sqlite_migrate::migrate(&p),
        #[cfg(feature = "postgres")]
        Location::Postgres(u) => postgres_migrate::migrate(&u),
        #[cfg(not(feature = "postgres"))]
        Location::Postgres(_) => Err(no_postgres()),
    }
}

/// Creates a new ledger at `spec` (a file that must not exist yet, or a `postgres://` database
/// without one) with `budget` per `period` (default [`Period::None`]): `recsel ledger init`.
pub fn create(spec: &str, budget: Units, period: Option<Period>) -> Result<Arc<dyn Ledger>> {
    Location::parse(spec).create(Settings {
        budget,
        period: period.unwrap_or(Period::None),
    })
}
