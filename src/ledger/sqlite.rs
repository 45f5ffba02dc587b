//! The embedded ledger: one SQLite file in WAL mode with `synchronous=FULL` (docs/ledger.md,
//! "The store").
//!
//! With `synchronous=FULL` a commit returns only after the write-ahead log is on disk (one fsync
//! per commit; SQLite's default for WAL, `NORMAL`, may lose the last commits on power loss and is
//! never used). A group of charges is one `BEGIN IMMEDIATE` transaction: the write lock is taken
//! at the start, so two connections — threads or processes — never interleave their read of a
//! balance with the other's write, and a connection that finds the lock held waits (up to
//! [`BUSY_TIMEOUT`]) instead of failing.
//!
//! Tables: `meta` (format, version, budget, period), `events` (one row per charged request or
//! served fallback; the request id is unique), `windows` (the running total per user and window,
//! updated in the same transaction as its events) and `runs` (batch runs: the fingerprint of
//! their command and how often they were attempted).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{
    Answer, Balance, ChargeRequest, Event, Ledger, LedgerError, Outcome, Rejection, Result, Run,
    Settings, Timestamp, Units,
};

/// The `format` value in `meta`.
pub const FORMAT: &str = "recsel-ledger";
/// The schema version in `meta`.
pub const FORMAT_VERSION: u32 = 1;
/// How long a connection waits for another one's write lock before the commit fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE,
    user TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units >= 0),
    time_ms INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    answer_kind TEXT NOT NULL CHECK (answer_kind IN ('item', 'none', 'fallback')),
    answer_item TEXT
);
CREATE INDEX IF NOT EXISTS events_by_user ON events (user, seq);
CREATE TABLE IF NOT EXISTS windows (
    user TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    spent INTEGER NOT NULL CHECK (spent >= 0),
    PRIMARY KEY (user, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    first_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL
);
";

const EVENT_COLUMNS: &str =
    "seq, user, request_id, mechanism, units, time_ms, window_start, answer_kind, answer_item";

/// A ledger in one SQLite file. Two connections: one for writes (charges, runs, imports) and one
/// for reads, so that a balance can be read while a group commits.
#[derive(Debug)]
pub struct SqliteLedger {
    path: PathBuf,
    settings: Settings,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the connection cannot leave a transaction half-applied (an
    // uncommitted transaction rolls back when dropped), so the connection stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn to_i64(u: Units) -> i64 {
    u.get() as i64 // Units::MAX is i64::MAX
}

fn from_i64(n: i64) -> std::result::Result<Units, rusqlite::Error> {
    u64::try_from(n)
        .ok()
        .and_then(|n| Units::new(n).ok())
        .ok_or(rusqlite::Error::IntegralValueOutOfRange(0, n))
}

fn answer_columns(a: &Answer) -> (&'static str, Option<&str>) {
    match a {
        Answer::Item(i) => ("item", Some(i)),
        Answer::NoCandidate => ("none", None),
        Answer::Fallback(i) => ("fallback", Some(i)),
    }
}

fn event_from_row(r: &rusqlite::Row<'_>) -> std::result::Result<Event, rusqlite::Error> {
    let kind: String = r.get(7)?;
    let item: Option<String> = r.get(8)?;
    let answer = match (kind.as_str(), item) {
        ("item", Some(i)) => Answer::Item(i),
        ("fallback", Some(i)) => Answer::Fallback(i),
        ("none", None) => Answer::NoCandidate,
        (k, _) => {
            return Err(rusqlite::Error::InvalidColumnType(
                7,
                format!("answer_kind '{k}'"),
                rusqlite::types::Type::Text,
            ))
        }
    };
    Ok(Event {
        seq: r.get::<_, i64>(0)? as u64,
        user: r.get(1)?,
        request_id: r.get(2)?,
        mechanism: r.get(3)?,
        units: from_i64(r.get(4)?)?,
        time: Timestamp(r.get(5)?),
        window: Timestamp(r.get(6)?),
        answer,
    })
}

impl SqliteLedger {
    /// Opens the ledger at `path`, creating it with `settings` if the file does not exist; an
    /// existing ledger must have been created with the same settings.
    pub fn open(path: &Path, settings: Settings) -> Result<Self> {
        let (writer, stored) = Self::connect(path, Some(settings))?;
        if stored != settings {
            return Err(LedgerError::SettingsMismatch {
                path: path.display().to_string(),
                stored,
                given: settings,
            });
        }
        Self::with(path, writer, stored)
    }

    /// Opens an existing ledger with the settings stored in it.
    pub fn open_existing(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(LedgerError::Invalid(format!(
                "{}: no ledger file there",
                path.display()
            )));
        }
        let (writer, stored) = Self::connect(path, None)?;
        Self::with(path, writer, stored)
    }

    fn with(path: &Path, writer: Connection, settings: Settings) -> Result<Self> {
        let reader = Self::configure(path)?;
        Ok(SqliteLedger {
            path: path.to_path_buf(),
            settings,
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
        })
    }

    fn store_err(path: &Path, e: impl std::fmt::Display) -> LedgerError {
        LedgerError::Store {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        move |e| Self::store_err(&self.path, e)
    }

    /// A connection with the durability settings, checked (never a non-durable mode).
    fn configure(path: &Path) -> Result<Connection> {
        let e = |x: rusqlite::Error| Self::store_err(path, x);
        let conn = Connection::open(path).map_err(e)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(e)?;
        conn.execute_batch("PRAGMA synchronous=FULL").map_err(e)?;
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") || sync != 2 {
            return Err(Self::store_err(
                path,
                format!("could not set WAL mode with synchronous=FULL (got {mode}, {sync})"),
            ));
        }
        Ok(conn)
    }

    /// The writer connection and the stored settings; with `create`, a new or empty file is
    /// initialised with them.
    fn connect(path: &Path, create: Option<Settings>) -> Result<(Connection, Settings)> {
        let mut conn = Self::configure(path)?;
        let e = |x: rusqlite::Error| Self::store_err(path, x);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        let has_meta: bool = tx
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(e)?
            > 0;
        let tables: i64 = tx
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .map_err(e)?;
        if !has_meta {
            let Some(settings) = create else {
                return Err(Self::store_err(path, "not a recsel ledger (no meta table)"));
            };
            if tables > 0 {
                return Err(Self::store_err(
                    path,
                    "an SQLite database that is not a recsel ledger; refusing to add tables to it",
                ));
            }
            tx.execute_batch(SCHEMA).map_err(e)?;
            let created = Timestamp::now().to_string();
            for (k, v) in [
                ("format", FORMAT.to_string()),
                ("format_version", FORMAT_VERSION.to_string()),
                ("budget_units", settings.budget.get().to_string()),
                ("period", settings.period.name().to_string()),
                ("created", created),
            ] {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                    params![k, v],
                )
                .map_err(e)?;
            }
        }
        let meta = |key: &str| -> Result<String> {
            tx.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(e)?
                .ok_or_else(|| Self::store_err(path, format!("meta has no '{key}'")))
        };
        if meta("format")? != FORMAT {
            return Err(Self::store_err(path, "not a recsel ledger"));
        }
        let version = meta("format_version")?;
        if version != FORMAT_VERSION.to_string() {
            return Err(Self::store_err(
                path,
                format!("ledger format version {version}; this recsel reads {FORMAT_VERSION}"),
            ));
        }
        let budget = meta("budget_units")?
            .parse::<u64>()
            .ok()
            .and_then(|n| Units::new(n).ok())
            .ok_or_else(|| Self::store_err(path, "bad budget_units in meta"))?;
        let period = meta("period")?
            .parse()
            .map_err(|x| Self::store_err(path, x))?;
        tx.commit().map_err(e)?;
        Ok((conn, Settings { budget, period }))
    }

    /// The path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Recomputes every window's total from the events and compares it with the stored running
    /// total; returns the number of windows checked. For tests and `recsel ledger show --verify`.
    pub fn verify(&self) -> Result<usize> {
        let conn = lock(&self.reader);
        let e = self.err();
        let mut stmt = conn
            .prepare(
                "SELECT w.user, w.window_start, w.spent, \
                 (SELECT coalesce(sum(units), 0) FROM events v \
                  WHERE v.user = w.user AND v.window_start = w.window_start) \
                 FROM windows w",
            )
            .map_err(&e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(&e)?;
        let mut n = 0;
        for row in rows {
            let (user, start, spent, sum) = row.map_err(&e)?;
            if spent != sum || spent as u64 > self.settings.budget.get() {
                return Err(Self::store_err(
                    &self.path,
                    format!(
                        "user '{user}', window {}: running total {spent} units, events sum \
                         {sum}, budget {}",
                        Timestamp(start),
                        self.settings.budget.get()
                    ),
                ));
            }
            n += 1;
        }
        let orphans: i64 = conn
            .query_row(
                "SELECT count(*) FROM (SELECT DISTINCT user, window_start FROM events \
                 WHERE units > 0 EXCEPT SELECT user, window_start FROM windows)",
                [],
                |r| r.get(0),
            )
            .map_err(&e)?;
        if orphans > 0 {
            return Err(Self::store_err(
                &self.path,
                format!("{orphans} windows have charges but no running total"),
            ));
        }
        Ok(n)
    }

    fn decide(
        &self,
        tx: &rusqlite::Transaction<'_>,
        r: &ChargeRequest,
    ) -> std::result::Result<Outcome, rusqlite::Error> {
        let invalid = |m: &str| {
            Ok(Outcome::Rejected {
                reason: Rejection::Invalid(m.into()),
            })
        };
        if r.user.is_empty() {
            return invalid("the user id is empty");
        }
        if r.request_id.is_empty() {
            return invalid("the request id is empty");
        }
        if r.answer.is_fallback() {
            return invalid("a charged answer cannot be a fallback; pass the fallback separately");
        }
        if r.fallback.as_deref() == Some("") {
            return invalid("the fallback item id is empty");
        }
        let mut find = tx.prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE request_id = ?1"
        ))?;
        if let Some(event) = find.query_row([&r.request_id], event_from_row).optional()? {
            if event.user != r.user {
                return Ok(Outcome::Rejected {
                    reason: Rejection::RequestIdOfAnotherUser,
                });
            }
            return Ok(Outcome::Replayed { event });
        }
        let budget = self.settings.budget;
        let window = self.settings.period.window(r.time);
        let mut spent_q =
            tx.prepare_cached("SELECT spent FROM windows WHERE user = ?1 AND window_start = ?2")?;
        let spent = match spent_q
            .query_row(params![r.user, window.start.0], |row| row.get::<_, i64>(0))
            .optional()?
        {
            Some(n) => from_i64(n)?,
            None => Units::ZERO,
        };
        let remaining = budget.saturating_sub(spent);
        let mut insert = tx.prepare_cached(
            "INSERT INTO events (request_id, user, mechanism, units, time_ms, window_start, \
             answer_kind, answer_item) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        if r.epsilon <= remaining {
            let after = spent
                .checked_add(r.epsilon)
                .expect("spent + charge <= budget");
            let (kind, item) = answer_columns(&r.answer);
            insert.execute(params![
                r.request_id,
                r.user,
                r.mechanism,
                to_i64(r.epsilon),
                r.time.0,
                window.start.0,
                kind,
                item
            ])?;
            tx.prepare_cached(
                "INSERT INTO windows (user, window_start, spent) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (user, window_start) DO UPDATE SET spent = excluded.spent",
            )?
            .execute(params![r.user, window.start.0, to_i64(after)])?;
            return Ok(Outcome::Charged {
                answer: r.answer.clone(),
                charged: r.epsilon,
                spent: after,
                remaining: budget.saturating_sub(after),
            });
        }
        // Refused. A request larger than the whole budget never fits; otherwise the next window
        // has room (it starts empty).
        let retry_after = if r.epsilon > budget { None } else { window.end };
        match &r.fallback {
            Some(item) => {
                insert.execute(params![
                    r.request_id,
                    r.user,
                    "fallback",
                    0i64,
                    r.time.0,
                    window.start.0,
                    "fallback",
                    item
                ])?;
                Ok(Outcome::Fallback {
                    item: item.clone(),
                    remaining,
                    retry_after,
                })
            }
            None => Ok(Outcome::Refused {
                spent,
                remaining,
                retry_after,
            }),
        }
    }
}

impl Ledger for SqliteLedger {
    fn location(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    fn charge(&self, requests: &[ChargeRequest]) -> Result<Vec<Outcome>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = lock(&self.writer);
        let e = self.err();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            out.push(self.decide(&tx, r).map_err(&e)?);
        }
        tx.commit().map_err(&e)?; // durable (WAL fsync) before anyone sees `out`
        Ok(out)
    }

    fn balance(&self, user: &str, at: Timestamp) -> Result<Balance> {
        let window = self.settings.period.window(at);
        let conn = lock(&self.reader);
        let spent = conn
            .prepare_cached("SELECT spent FROM windows WHERE user = ?1 AND window_start = ?2")
            .and_then(|mut s| {
                s.query_row(params![user, window.start.0], |r| r.get::<_, i64>(0))
                    .optional()
            })
            .map_err(self.err())?;
        let spent = match spent {
            Some(n) => from_i64(n).map_err(self.err())?,
            None => Units::ZERO,
        };
        Ok(Balance {
            window,
            budget: self.settings.budget,
            spent,
            remaining: self.settings.budget.saturating_sub(spent),
        })
    }

    fn events(&self, user: &str) -> Result<Vec<Event>> {
        let conn = lock(&self.reader);
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE user = ?1 ORDER BY seq"
            ))
            .map_err(self.err())?;
        let rows = stmt.query_map([user], event_from_row).map_err(self.err())?;
        rows.collect::<std::result::Result<_, _>>()
            .map_err(self.err())
    }

    fn event(&self, request_id: &str) -> Result<Option<Event>> {
        let conn = lock(&self.reader);
        conn.prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE request_id = ?1"
        ))
        .and_then(|mut s| s.query_row([request_id], event_from_row).optional())
        .map_err(self.err())
    }

    fn users(&self) -> Result<Vec<String>> {
        let conn = lock(&self.reader);
        let mut stmt = conn
            .prepare("SELECT DISTINCT user FROM events ORDER BY user")
            .map_err(self.err())?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(self.err())?;
        rows.collect::<std::result::Result<_, _>>()
            .map_err(self.err())
    }

    fn for_each_event(&self, f: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()> {
        let conn = lock(&self.reader);
        // One read transaction: the export is a consistent snapshot while charges go on.
        conn.execute_batch("BEGIN").map_err(self.err())?;
        let result = (|| {
            let mut stmt = conn
                .prepare(&format!("SELECT {EVENT_COLUMNS} FROM events ORDER BY seq"))
                .map_err(self.err())?;
            let mut rows = stmt.query([]).map_err(self.err())?;
            while let Some(row) = rows.next().map_err(self.err())? {
                f(&event_from_row(row).map_err(self.err())?)?;
            }
            Ok(())
        })();
        conn.execute_batch("COMMIT").map_err(self.err())?;
        result
    }

    fn import_events(&self, events: &[Event]) -> Result<()> {
        let mut conn = lock(&self.writer);
        let e = self.err();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let n: i64 = tx
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .map_err(&e)?;
        if n > 0 {
            return Err(LedgerError::Invalid(format!(
                "{}: the ledger already has {n} events; import only into an empty ledger",
                self.path.display()
            )));
        }
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO events (seq, request_id, user, mechanism, units, time_ms, \
                     window_start, answer_kind, answer_item) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(&e)?;
            for ev in events {
                let (kind, item) = answer_columns(&ev.answer);
                insert
                    .execute(params![
                        ev.seq as i64,
                        ev.request_id,
                        ev.user,
                        ev.mechanism,
                        to_i64(ev.units),
                        ev.time.0,
                        ev.window.0,
                        kind,
                        item
                    ])
                    .map_err(&e)?;
            }
            tx.execute_batch(
                "INSERT INTO windows (user, window_start, spent) \
                 SELECT user, window_start, sum(units) FROM events WHERE units > 0 \
                 GROUP BY user, window_start",
            )
            .map_err(&e)?;
        }
        tx.commit().map_err(&e)
    }

    fn open_run(&self, id: &str, key: &str, at: Timestamp) -> Result<Run> {
        Run::check_id(id)?;
        let mut conn = lock(&self.writer);
        let e = self.err();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&e)?;
        let found: Option<(String, i64)> = tx
            .query_row(
                "SELECT key, attempts FROM runs WHERE run_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(&e)?;
        let attempts = match found {
            Some((k, _)) if k != key => return Err(Run::key_mismatch(&self.path.display(), id)),
            Some((_, n)) => {
                tx.execute(
                    "UPDATE runs SET attempts = ?2, last_ms = ?3 WHERE run_id = ?1",
                    params![id, n + 1, at.0],
                )
                .map_err(&e)?;
                n as u64 + 1
            }
            None => {
                tx.execute(
                    "INSERT INTO runs (run_id, key, first_ms, last_ms, attempts) \
                     VALUES (?1, ?2, ?3, ?3, 1)",
                    params![id, key, at.0],
                )
                .map_err(&e)?;
                1
            }
        };
        tx.commit().map_err(&e)?;
        Ok(Run {
            id: id.to_string(),
            attempts,
        })
    }
}
