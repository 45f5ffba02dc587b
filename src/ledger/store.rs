//! What a backend of the ledger provides: its SQL, and nothing of the charge policy.
//!
//! A backend implements [`Store`] (open a durable write transaction, read a window's total, check
//! the stored totals) and, inside a transaction, [`StoreTx`] (look up a request id, load and save
//! running totals, insert events, runs). The policy — validation, replays, windows, charge,
//! fallback or refusal, `retry_after`, imports and batch runs — is written once over these
//! (`policy.rs`), and every [`Store`] is a [`Ledger`](super::Ledger) through it. The layout of a
//! stored event (its columns, the answer's two columns) and of the settings row are here, once.

use super::{Answer, Event, LedgerLog, Period, RequestHash, Result, Settings, Timestamp, Units};

/// The `format` value in a ledger's `meta` table.
pub const FORMAT: &str = "recsel-ledger";
/// The schema version in a ledger's `meta` table: 4 keeps request hashes keyed (HMAC-SHA256
/// under the history key, never stored in the ledger); 3 stores lists (answer kind `list`) and
/// finds a user's release of one request hash in a window by an index (one release per
/// history); 2 keeps each event's request hash and makes request ids unique per user; 1 (ids
/// unique across users, no hashes), 2 and 3 are migrated by `recsel ledger migrate` (which
/// erases the unkeyed hashes) and refused otherwise.
pub const FORMAT_VERSION: u32 = 4;

/// Why a transaction failed: what the store said, and whether running the same transaction
/// again may succeed (a deadlock or a serialisation failure between replicas).
#[derive(Debug, Clone)]
pub struct TxError {
    /// What the store reported.
    pub message: String,
    /// Whether the transaction may simply be run again.
    pub retry: bool,
}

impl TxError {
    /// A failure that running again will not cure (a malformed row, an I/O error).
    pub fn fatal(message: impl std::fmt::Display) -> Self {
        TxError {
            message: message.to_string(),
            retry: false,
        }
    }
}

/// Result of a step inside a transaction.
pub type TxResult<T> = std::result::Result<T, TxError>;

/// One event as stored: the ten columns every backend keeps, in this order (`seq` is assigned
/// by the store when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Commit order; `None` when inserting a new event.
    pub seq: Option<i64>,
    /// The user.
    pub user: String,
    /// The request id.
    pub request_id: String,
    /// The mechanism's name (`fallback` for a fallback).
    pub mechanism: String,
    /// Units charged.
    pub units: i64,
    /// The request's time, ms.
    pub time_ms: i64,
    /// Its window's start, ms.
    pub window_start: i64,
    /// `item`, `list`, `none` or `fallback`.
    pub answer_kind: String,
    /// The item of `item` and `fallback`; the items of `list` as a JSON array of strings.
    pub answer_item: Option<String>,
    /// The request hash's 32 bytes; `None` for an event stored by schema version 1.
    pub request_hash: Option<Vec<u8>>,
}

/// The column names of [`EventRow`] in order, with the user column named `user` (a store whose
/// SQL reserves that word names it otherwise).
pub fn event_columns(user: &str) -> String {
    format!(
        "seq, {user}, request_id, mechanism, units, time_ms, window_start, answer_kind, \
         answer_item, request_hash"
    )
}

/// A store's SQL dialect for the events table: the user column's name (a store whose SQL
/// reserves `user` names it otherwise), the 64-bit integer type, the byte-string type and the
/// function that gives a byte string's length.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The user column.
    pub user: &'static str,
    /// The 64-bit integer type.
    pub int: &'static str,
    /// The byte-string type.
    pub bytes: &'static str,
    /// The length of a byte string.
    pub length: &'static str,
}

/// The request-hash column of the events table (nullable: events of schema version 1 have none).
pub fn hash_column(d: Dialect) -> String {
    format!(
        "request_hash {} CHECK (request_hash IS NULL OR {}(request_hash) = 32)",
        d.bytes, d.length
    )
}

/// The columns of the events table after `seq`, in a store's dialect, with (user, request id)
/// unique: request ids are scoped per user.
pub fn event_table(d: Dialect) -> String {
    format!(
        "request_id TEXT NOT NULL, {user} TEXT NOT NULL, mechanism TEXT NOT NULL, \
         units {int} NOT NULL CHECK (units >= 0), time_ms {int} NOT NULL, \
         window_start {int} NOT NULL, \
         answer_kind TEXT NOT NULL \
         CHECK (answer_kind IN ('item', 'list', 'none', 'fallback')), \
         answer_item TEXT, {hash}, UNIQUE ({user}, request_id)",
        user = d.user,
        int = d.int,
        hash = hash_column(d)
    )
}

/// The index that finds a user's release of one request in a window (one release per history,
/// `StoreTx::find_release`), named `name` in the store's dialect.
pub fn release_index(d: Dialect, name: &str, table: &str) -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS {name} ON {table} ({user}, window_start, request_hash)",
        user = d.user
    )
}

/// An amount as stored (Units::MAX is i64::MAX).
pub fn to_i64(u: Units) -> i64 {
    u.get() as i64
}

/// A stored amount, checked.
pub fn units(n: i64) -> TxResult<Units> {
    u64::try_from(n)
        .ok()
        .and_then(|n| Units::new(n).ok())
        .ok_or_else(|| TxError::fatal(format!("a stored amount is out of range: {n}")))
}

impl EventRow {
    /// The row of `e` (its `seq` kept when `keep_seq`).
    pub fn of(e: &Event, keep_seq: bool) -> Self {
        let (kind, item) = match &e.answer {
            Answer::Item(i) => ("item", Some(i.clone())),
            Answer::List(items) => (
                "list",
                Some(serde_json::to_string(items).expect("a list of strings serialises")),
            ),
            Answer::NoCandidate => ("none", None),
            Answer::Fallback(i) => ("fallback", Some(i.clone())),
        };
        EventRow {
            seq: keep_seq.then_some(e.seq as i64),
            user: e.user.clone(),
            request_id: e.request_id.clone(),
            mechanism: e.mechanism.clone(),
            units: to_i64(e.units),
            time_ms: e.time.0,
            window_start: e.window.0,
            answer_kind: kind.into(),
            answer_item: item,
            request_hash: e.request_hash.map(|h| h.0.to_vec()),
        }
    }

    /// The event of a stored row; an error for a malformed answer or amount.
    pub fn event(self) -> TxResult<Event> {
        let answer = match (self.answer_kind.as_str(), self.answer_item) {
            ("item", Some(i)) => Answer::Item(i),
            ("list", Some(l)) => Answer::List(serde_json::from_str(&l).map_err(|e| {
                TxError::fatal(format!(
                    "a stored list of request id '{}' is malformed: {e}",
                    self.request_id
                ))
            })?),
            ("fallback", Some(i)) => Answer::Fallback(i),
            ("none", None) => Answer::NoCandidate,
            (k, _) => {
                return Err(TxError::fatal(format!(
                    "a stored answer of kind '{k}' is malformed"
                )))
            }
        };
        let request_hash = self
            .request_hash
            .map(|b| {
                RequestHash::from_bytes(&b).ok_or_else(|| {
                    TxError::fatal(format!(
                        "a stored request hash of request id '{}' has {} bytes, not 32",
                        self.request_id,
                        b.len()
                    ))
                })
            })
            .transpose()?;
        Ok(Event {
            request_hash,
            seq: self.seq.unwrap_or(0) as u64,
            user: self.user,
            request_id: self.request_id,
            mechanism: self.mechanism,
            units: units(self.units)?,
            time: Timestamp(self.time_ms),
            window: Timestamp(self.window_start),
            answer,
        })
    }
}

/// The rows of a new ledger's `meta` table.
pub fn meta_rows(settings: Settings) -> Vec<(&'static str, String)> {
    vec![
        ("format", FORMAT.to_string()),
        ("format_version", FORMAT_VERSION.to_string()),
        ("budget_units", settings.budget.get().to_string()),
        ("period", settings.period.name().to_string()),
        ("created", Timestamp::now().to_string()),
    ]
}

/// The schema version stored in a `meta` table (through `get`, as [`settings_from_meta`]); an
/// error if it is not a recsel ledger.
pub fn version_from_meta(get: &mut dyn FnMut(&str) -> TxResult<Option<String>>) -> TxResult<u32> {
    let mut meta = |key: &str| -> TxResult<String> {
        get(key)?.ok_or_else(|| TxError::fatal(format!("meta has no '{key}'")))
    };
    if meta("format")? != FORMAT {
        return Err(TxError::fatal("not a recsel ledger"));
    }
    let version = meta("format_version")?;
    version
        .parse()
        .map_err(|_| TxError::fatal(format!("bad format_version '{version}' in meta")))
}

/// The error of a ledger at `location` whose schema is `version`, not [`FORMAT_VERSION`]: an
/// older one names the command that migrates it; it is never migrated unasked (docs/ledger.md,
/// "Schema versions").
pub fn version_error(version: u32, location: &str) -> TxError {
    if version < FORMAT_VERSION {
        TxError::fatal(format!(
            "ledger schema version {version}; this recsel uses version {FORMAT_VERSION} (request \
             ids scoped per user, each event's request hash kept, keyed with the history key). \
             Nothing was changed. Back the \
             ledger up, then migrate it in one transaction with `recsel ledger migrate --ledger \
             {location}` (docs/ledger.md, \"Schema versions\"); a recsel that reads version \
             {version} cannot open it afterwards"
        ))
    } else {
        TxError::fatal(format!(
            "ledger schema version {version}, written by a newer recsel; this recsel reads \
             version {FORMAT_VERSION}"
        ))
    }
}

/// The settings stored in a `meta` table, read through `get` (which answers `None` for a
/// missing key); a schema version other than [`FORMAT_VERSION`] is refused
/// ([`version_error`], which names `location`). The error says what is wrong, the caller says
/// where.
pub fn settings_from_meta(
    location: &str,
    get: &mut dyn FnMut(&str) -> TxResult<Option<String>>,
) -> TxResult<Settings> {
    let version = version_from_meta(get)?;
    if version != FORMAT_VERSION {
        return Err(version_error(version, location));
    }
    let mut meta = |key: &str| -> TxResult<String> {
        get(key)?.ok_or_else(|| TxError::fatal(format!("meta has no '{key}'")))
    };
    let budget = meta("budget_units")?
        .parse::<u64>()
        .ok()
        .and_then(|n| Units::new(n).ok())
        .ok_or_else(|| TxError::fatal("bad budget_units in meta"))?;
    let period: Period = meta("period")?.parse().map_err(TxError::fatal)?;
    Ok(Settings { budget, period })
}

/// One window as stored and as its events add up, for [`Store::windows`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowTotal {
    /// The user.
    pub user: String,
    /// The window's start.
    pub start: Timestamp,
    /// The stored running total.
    pub spent: i64,
    /// The sum of the window's events.
    pub events: i64,
}

/// The steps of one write transaction of a [`Store`]. Every step sees the earlier steps of the
/// same transaction; nothing is visible to others before [`Store::transact`] commits.
pub trait StoreTx {
    /// The stored event of the user's `request_id`.
    fn find(&mut self, user: &str, request_id: &str) -> TxResult<Option<Event>>;

    /// The running totals of `keys` (user, window start; sorted and distinct), 0 for a window
    /// without one. A store that locks by row locks them here, in this order, for the rest of
    /// the transaction.
    fn load_spent(&mut self, keys: &[(String, Timestamp)]) -> TxResult<Vec<Units>>;

    /// The start of the user's latest window with a stored total, if any.
    fn latest_window(&mut self, user: &str) -> TxResult<Option<Timestamp>>;

    /// The user's charged release (not a fallback) in the window starting at `window` whose
    /// request hash is `hash`, if any: the first, by `seq` (one release per history).
    fn find_release(
        &mut self,
        user: &str,
        window: Timestamp,
        hash: &RequestHash,
    ) -> TxResult<Option<Event>>;

    /// Stores a window's running total.
    fn save_spent(&mut self, user: &str, window: Timestamp, spent: Units) -> TxResult<()>;

    /// Inserts an event (with its `seq` if given); `false` if its (user, request id) is already
    /// stored (committed by another writer since [`StoreTx::find`]).
    fn insert(&mut self, row: &EventRow) -> TxResult<bool>;

    /// How many events are stored.
    fn count_events(&mut self) -> TxResult<u64>;

    /// After an import: every window's total recomputed from the events (and the next `seq`
    /// after the largest stored).
    fn rebuild_windows(&mut self) -> TxResult<()>;

    /// The fingerprint and the attempts of batch run `id`, locked until the commit.
    fn find_run(&mut self, id: &str) -> TxResult<Option<(String, u64)>>;

    /// Records attempt `attempts` of run `id` at `at` (the first inserts it).
    fn put_run(&mut self, id: &str, key: &str, at: Timestamp, attempts: u64) -> TxResult<()>;

    /// Writes the time of a probe (`meta` key `probed`): a durable write that charges nothing.
    fn touch(&mut self, at: Timestamp) -> TxResult<()>;
}

/// A ledger backend: durable transactions and reads, in its own SQL. Every `Store` is a
/// [`Ledger`](super::Ledger) (`policy.rs`); its event log is its [`LedgerLog`].
pub trait Store: LedgerLog + Send + Sync + std::fmt::Debug {
    /// The kind of store (`sqlite`, `postgres`), without a path or credentials.
    fn kind(&self) -> &'static str;

    /// Where the ledger is (`sqlite:PATH`, a URL without its password), for messages.
    fn location(&self) -> String;

    /// How errors name the ledger (the file's path, the redacted URL).
    fn label(&self) -> String;

    /// The budget and the period.
    fn settings(&self) -> Settings;

    /// Runs `body` in one write transaction and commits it durably if `body` succeeds; on an
    /// error nothing of it is kept. Returns only once the commit is on disk.
    fn transact(&self, body: &mut dyn FnMut(&mut dyn StoreTx) -> TxResult<()>) -> TxResult<()>;

    /// A window's running total, read outside any write transaction (0 if none).
    fn spent(&self, user: &str, window: Timestamp) -> Result<Units>;

    /// Every stored window's total beside the sum of its events, and the number of (user,
    /// window) pairs with charges but no stored total.
    fn windows(&self) -> Result<(Vec<WindowTotal>, u64)>;

    /// The start of the user's latest window with a stored total, read outside any write
    /// transaction (what the charge policy's clock rule reads inside one).
    fn latest_window_read(&self, user: &str) -> Result<Option<Timestamp>>;

    /// The time of the newest event stored (the largest request time), if any.
    fn newest_event_time(&self) -> Result<Option<Timestamp>>;

    /// The store's own clock, when it has one apart from this process's (a database server).
    fn server_time(&self) -> Result<Option<Timestamp>> {
        Ok(None)
    }

    /// Whether the store is still the one opened (see [`Ledger::health`](super::Ledger::health)).
    fn health(&self) -> Result<()>;

    /// The store's own consistency check.
    fn integrity(&self) -> Result<()>;
}
