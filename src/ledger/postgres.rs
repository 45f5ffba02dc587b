//! The shared ledger: one PostgreSQL database that several service replicas charge at once
//! (docs/serving.md, "Several replicas").
//!
//! A group of charges is one transaction. Before it decides anything, the transaction takes the
//! row lock of every (user, window) the group touches, in sorted order, with an upsert that
//! returns the running total (`INSERT … ON CONFLICT … DO UPDATE … RETURNING spent`): two replicas
//! charging one user serialise on that row, so they cannot both spend the last unit, and sorted
//! locking keeps two groups from deadlocking. A (user, request id) is unique in the table of
//! events; one that another replica is committing at the same moment is found by `ON CONFLICT DO NOTHING`
//! once that commit is done, and answered as a replay. The window's total also has a `CHECK`
//! against the budget written when the ledger was created, so the database itself refuses a
//! total over budget.
//!
//! Every session sets `synchronous_commit = on`, so a commit returns only after the server has
//! flushed its write-ahead log; a server running with `fsync = off` is refused.
//!
//! Tables (all prefixed `recsel_`): `meta`, `events`, `windows`, `runs`, as in the embedded store.
//! This file is the store's SQL only; the charge policy is `policy.rs`, shared with SQLite.

use std::sync::{Mutex, MutexGuard};

use postgres::error::SqlState;
use postgres::{Client, NoTls, Row, Transaction};

use super::store::{
    event_columns, event_table, meta_rows, release_index, settings_from_meta, to_i64, units,
    Dialect, EventRow, Store, StoreTx, TxError, TxResult, WindowTotal,
};
use super::{Event, LedgerError, LedgerLog, RequestHash, Result, Settings, Timestamp, Units};

/// Key of the advisory lock held while a ledger is created or migrated.
pub(super) const SETUP_LOCK: i64 = 0x7265_6373_656c_0001;

/// The events table's dialect (`user` is reserved in PostgreSQL).
pub(super) const DIALECT: Dialect = Dialect {
    user: "user_id",
    int: "BIGINT",
    bytes: "BYTEA",
    length: "octet_length",
};

/// A ledger in a PostgreSQL database. Two connections, as in the embedded store: one for writes,
/// one for reads.
pub struct PostgresLedger {
    location: String,
    settings: Settings,
    writer: Mutex<Client>,
    reader: Mutex<Client>,
    /// The ledger's identity row (`meta` key `created`, written once when the ledger is
    /// created) as it was at connection: every commit checks it is still there, unchanged (a
    /// ledger dropped and created again, or another database behind the URL, fails closed).
    identity: String,
    /// The newest event number this process saw committed: it only grows, whoever commits.
    max_seq: Mutex<i64>,
    /// The first failed check, which sticks (docs/ledger.md, "A ledger changed under a running
    /// process").
    broken: std::sync::OnceLock<String>,
}

/// The identity row and the newest event number, read in one statement.
const IDENTITY: &str = "SELECT (SELECT value FROM recsel_meta WHERE key = 'created'), \
     (SELECT coalesce(max(seq), 0)::BIGINT FROM recsel_events)";

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger")
            .field("location", &self.location)
            .field("settings", &self.settings)
            .finish()
    }
}

fn lock(m: &Mutex<Client>) -> MutexGuard<'_, Client> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((cred, host)) => match cred.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The stored columns of an event, in [`EventRow`] order.
fn row(r: &Row) -> EventRow {
    EventRow {
        seq: Some(r.get(0)),
        user: r.get(1),
        request_id: r.get(2),
        mechanism: r.get(3),
        units: r.get(4),
        time_ms: r.get(5),
        window_start: r.get(6),
        answer_kind: r.get(7),
        answer_item: r.get(8),
        request_hash: r.get(9),
    }
}

impl From<postgres::Error> for TxError {
    /// A deadlock or a serialisation failure may simply be run again.
    fn from(e: postgres::Error) -> Self {
        let retry = matches!(
            e.code(),
            Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::T_R_SERIALIZATION_FAILURE
        );
        TxError {
            message: e.to_string(),
            retry,
        }
    }
}

impl PostgresLedger {
    fn err(&self) -> impl Fn(postgres::Error) -> LedgerError + '_ {
        move |e| store_err(&self.location, e)
    }

    /// Connects to the database of `url`, creating the ledger's tables with `settings` if they
    /// do not exist; an existing ledger must have been created with the same settings.
    pub fn open(url: &str, settings: Settings) -> Result<Self> {
        let ledger = Self::connect_with(url, Some(settings), false)?;
        if ledger.settings != settings {
            return Err(LedgerError::SettingsMismatch {
                path: ledger.location,
                stored: ledger.settings,
                given: settings,
            });
        }
        Ok(ledger)
    }

    /// Connects to an existing ledger in the database of `url`, with the settings stored in it
    /// (for inspection and export).
    pub fn open_existing(url: &str) -> Result<Self> {
        Self::connect_with(url, None, false)
    }

    /// Creates a new ledger in the database of `url`; an error if it holds one already (checked
    /// under the set-up's advisory lock, so of two processes creating at once one fails).
    pub fn create(url: &str, settings: Settings) -> Result<Self> {
        Self::connect_with(url, Some(settings), true)
    }

    /// Whether the database of `url` holds a ledger.
    pub fn exists(url: &str) -> Result<bool> {
        let location = redact(url);
        let mut c = connect(url, &location)?;
        Ok(
            c.query_one("SELECT to_regclass('recsel_meta') IS NOT NULL", &[])
                .map_err(|e| store_err(&location, e))?
                .get(0),
        )
    }

    /// The writer's and the reader's connections to the database of `url`, with the ledger's
    /// tables set up (created with `create` if they do not exist) and the settings stored there.
    fn connect_with(url: &str, create: Option<Settings>, new_only: bool) -> Result<Self> {
        let location = redact(url);
        let mut writer = connect(url, &location)?;
        let settings = setup(&mut writer, &location, create, new_only)?;
        let reader = connect(url, &location)?;
        let row = writer
            .query_one(IDENTITY, &[])
            .map_err(|e| store_err(&location, e))?;
        let identity: Option<String> = row.get(0);
        let identity = identity
            .ok_or_else(|| store_err(&location, "the ledger's meta has no 'created' row"))?;
        Ok(PostgresLedger {
            location,
            settings,
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            identity,
            max_seq: Mutex::new(row.get(1)),
            broken: std::sync::OnceLock::new(),
        })
    }
}

impl PostgresLedger {
    fn events_where(&self, filter: &str, args: &[&str]) -> Result<Vec<Event>> {
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
            .iter()
            .map(|a| a as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = lock(&self.reader)
            .query(
                &format!(
                    "SELECT {} FROM recsel_events {filter} ORDER BY seq",
                    event_columns("user_id")
                ),
                &params,
            )
            .map_err(self.err())?;
        rows.iter()
            .map(|r| {
                row(r)
                    .event()
                    .map_err(|e| store_err(&self.location, e.message))
            })
            .collect()
    }
}

/// One write transaction of the shared store.
struct Tx<'a>(Transaction<'a>);

impl StoreTx for Tx<'_> {
    fn find_release(
        &mut self,
        user: &str,
        window: Timestamp,
        hash: &RequestHash,
    ) -> TxResult<Option<Event>> {
        let found = self.0.query_opt(
            &format!(
                "SELECT {} FROM recsel_events WHERE user_id = $1 AND window_start = $2 \
                 AND request_hash = $3 AND answer_kind <> 'fallback' ORDER BY seq LIMIT 1",
                event_columns("user_id")
            ),
            &[&user, &window.0, &&hash.0[..]],
        )?;
        found.map(|r| row(&r).event()).transpose()
    }

    fn find(&mut self, user: &str, request_id: &str) -> TxResult<Option<Event>> {
        let found = self.0.query_opt(
            &format!(
                "SELECT {} FROM recsel_events WHERE user_id = $1 AND request_id = $2",
                event_columns("user_id")
            ),
            &[&user, &request_id],
        )?;
        found.map(|r| row(&r).event()).transpose()
    }

    fn load_spent(&mut self, keys: &[(String, Timestamp)]) -> TxResult<Vec<Units>> {
        // Takes the row lock of every (user, window), in the caller's sorted order, reading its
        // total: two replicas charging one user serialise here, and sorted locking keeps two
        // groups from deadlocking.
        keys.iter()
            .map(|(user, start)| {
                let r = self.0.query_one(
                    "INSERT INTO recsel_windows (user_id, window_start, spent) \
                     VALUES ($1, $2, 0) ON CONFLICT (user_id, window_start) \
                     DO UPDATE SET spent = recsel_windows.spent RETURNING spent",
                    &[user, &start.0],
                )?;
                units(r.get(0))
            })
            .collect()
    }

    fn latest_window(&mut self, user: &str) -> TxResult<Option<Timestamp>> {
        let start: Option<i64> = self
            .0
            .query_one(
                "SELECT max(window_start) FROM recsel_windows WHERE user_id = $1 AND spent > 0",
                &[&user],
            )?
            .get(0);
        Ok(start.map(Timestamp))
    }

    fn save_spent(&mut self, user: &str, window: Timestamp, spent: Units) -> TxResult<()> {
        self.0.execute(
            "UPDATE recsel_windows SET spent = $3 WHERE user_id = $1 AND window_start = $2",
            &[&user, &window.0, &to_i64(spent)],
        )?;
        Ok(())
    }

    fn insert(&mut self, r: &EventRow) -> TxResult<bool> {
        // A request id that another replica is committing at the same moment is found here once
        // that commit is done.
        let inserted = self.0.query_opt(
            "INSERT INTO recsel_events (seq, request_id, user_id, mechanism, units, time_ms, \
             window_start, answer_kind, answer_item, request_hash) \
             VALUES (coalesce($1, nextval(pg_get_serial_sequence('recsel_events', 'seq'))), \
                     $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (user_id, request_id) DO NOTHING RETURNING seq",
            &[
                &r.seq,
                &r.request_id,
                &r.user,
                &r.mechanism,
                &r.units,
                &r.time_ms,
                &r.window_start,
                &r.answer_kind,
                &r.answer_item,
                &r.request_hash,
            ],
        )?;
        Ok(inserted.is_some())
    }

    fn count_events(&mut self) -> TxResult<u64> {
        let n: i64 = self
            .0
            .query_one("SELECT count(*) FROM recsel_events", &[])?
            .get(0);
        Ok(n as u64)
    }

    fn rebuild_windows(&mut self) -> TxResult<()> {
        self.0.batch_execute(
            "DELETE FROM recsel_windows;
             INSERT INTO recsel_windows (user_id, window_start, spent)
             SELECT user_id, window_start, sum(units) FROM recsel_events WHERE units > 0
             GROUP BY user_id, window_start;
             SELECT setval(pg_get_serial_sequence('recsel_events', 'seq'),
                           coalesce((SELECT max(seq) FROM recsel_events), 0) + 1, false);",
        )?;
        Ok(())
    }

    fn find_run(&mut self, id: &str) -> TxResult<Option<(String, u64)>> {
        let found = self.0.query_opt(
            "SELECT key, attempts FROM recsel_runs WHERE run_id = $1 FOR UPDATE",
            &[&id],
        )?;
        Ok(found.map(|r| (r.get(0), r.get::<_, i64>(1) as u64)))
    }

    fn touch(&mut self, at: Timestamp) -> TxResult<()> {
        self.0.execute(
            "INSERT INTO recsel_meta (key, value) VALUES ('probed', $1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&at.to_string()],
        )?;
        Ok(())
    }

    fn put_run(&mut self, id: &str, key: &str, at: Timestamp, attempts: u64) -> TxResult<()> {
        if attempts == 1 {
            // A concurrent first attempt of the same id waits on the primary key, then fails
            // here; the command can simply be run again.
            self.0.execute(
                "INSERT INTO recsel_runs (run_id, key, first_ms, last_ms, attempts) \
                 VALUES ($1, $2, $3, $3, 1)",
                &[&id, &key, &at.0],
            )?;
        } else {
            self.0.execute(
                "UPDATE recsel_runs SET attempts = $2, last_ms = $3 WHERE run_id = $1",
                &[&id, &(attempts as i64), &at.0],
            )?;
        }
        Ok(())
    }
}

pub(super) fn store_err(location: &str, e: impl std::fmt::Display) -> LedgerError {
    LedgerError::Store {
        path: location.to_string(),
        message: e.to_string(),
    }
}

pub(super) fn connect(url: &str, location: &str) -> Result<Client> {
    let mut c = Client::connect(url, NoTls).map_err(|e| store_err(location, e))?;
    c.batch_execute(
        "SET synchronous_commit = on; SET default_transaction_isolation = 'read committed'",
    )
    .map_err(|e| store_err(location, e))?;
    let fsync: String = c
        .query_one("SHOW fsync", &[])
        .map_err(|e| store_err(location, e))?
        .get(0);
    if fsync != "on" {
        return Err(store_err(
            location,
            "the server runs with fsync = off, so a commit is not durable; a ledger needs fsync = on",
        ));
    }
    Ok(c)
}

/// Creates the tables if needed (under an advisory lock, so replicas starting together do not
/// race) and returns the stored settings; with `new_only`, a ledger already there is an error.
fn setup(
    c: &mut Client,
    location: &str,
    create: Option<Settings>,
    new_only: bool,
) -> Result<Settings> {
    let e = |x: postgres::Error| store_err(location, x);
    let mut tx = c.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])
        .map_err(e)?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('recsel_meta') IS NOT NULL", &[])
        .map_err(e)?
        .get(0);
    if exists && new_only {
        return Err(store_err(
            location,
            "this database holds a recsel ledger already; a ledger is created only where there \
             is none",
        ));
    }
    if !exists {
        let Some(settings) = create else {
            return Err(LedgerError::Missing {
                location: location.to_string(),
            });
        };
        let budget = to_i64(settings.budget);
        tx.batch_execute(&format!(
            "CREATE TABLE recsel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE recsel_events (
                 seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, {events}
             );
             CREATE INDEX recsel_events_by_user ON recsel_events (user_id, seq);
             {release};
             CREATE TABLE recsel_windows (
                 user_id TEXT NOT NULL,
                 window_start BIGINT NOT NULL,
                 spent BIGINT NOT NULL CHECK (spent >= 0 AND spent <= {budget}),
                 PRIMARY KEY (user_id, window_start)
             );
             CREATE TABLE recsel_runs (
                 run_id TEXT PRIMARY KEY,
                 key TEXT NOT NULL,
                 first_ms BIGINT NOT NULL,
                 last_ms BIGINT NOT NULL,
                 attempts BIGINT NOT NULL CHECK (attempts >= 1)
             );",
            events = event_table(DIALECT),
            release = release_index(DIALECT, "recsel_events_by_release", "recsel_events"),
        ))
        .map_err(e)?;
        for (k, v) in meta_rows(settings) {
            tx.execute(
                "INSERT INTO recsel_meta (key, value) VALUES ($1, $2)",
                &[&k, &v],
            )
            .map_err(e)?;
        }
    }
    let settings = settings_from_meta(location, &mut |key| {
        Ok(tx
            .query_opt("SELECT value FROM recsel_meta WHERE key = $1", &[&key])?
            .map(|r| r.get(0)))
    })
    .map_err(|x| store_err(location, x.message))?;
    tx.commit().map_err(e)?;
    Ok(settings)
}

impl Store for PostgresLedger {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn label(&self) -> String {
        self.location.clone()
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    fn transact(&self, body: &mut dyn FnMut(&mut dyn StoreTx) -> TxResult<()>) -> TxResult<()> {
        if let Some(why) = self.broken.get() {
            return Err(TxError::fatal(why));
        }
        let mut c = lock(&self.writer);
        let mut tx = Tx(c.transaction()?);
        let mut seen = self.max_seq.lock().unwrap_or_else(|e| e.into_inner());
        let row = tx.0.query_one(IDENTITY, &[])?;
        let identity: Option<String> = row.get(0);
        let now: i64 = row.get(1);
        let broken = if identity.as_deref() != Some(self.identity.as_str()) {
            Some(format!(
                "{}: the ledger's identity row (meta 'created' = {}) is now {:?}: the ledger was \
                 dropped and created again, or the URL names another database; nothing is \
                 charged or answered from now on",
                self.location, self.identity, identity
            ))
        } else if now < *seen {
            Some(format!(
                "{}: the ledger lost events while this process had it open (its newest event \
                 was number {}, now {now}): rows were deleted, so nothing is charged or \
                 answered from now on",
                self.location, *seen
            ))
        } else {
            None
        };
        if let Some(why) = broken {
            if self.broken.set(why.clone()).is_ok() {
                eprintln!("recsel ledger: NOT READY: {why}");
            }
            return Err(TxError::fatal(why));
        }
        body(&mut tx)?;
        let after: i64 =
            tx.0.query_one(
                "SELECT coalesce(max(seq), 0)::BIGINT FROM recsel_events",
                &[],
            )?
            .get(0);
        tx.0.commit()?; // durable (synchronous_commit = on) before anyone sees the outcomes
        *seen = (*seen).max(after);
        Ok(())
    }

    fn spent(&self, user: &str, window: Timestamp) -> Result<Units> {
        let row = lock(&self.reader)
            .query_opt(
                "SELECT spent FROM recsel_windows WHERE user_id = $1 AND window_start = $2",
                &[&user, &window.0],
            )
            .map_err(self.err())?;
        row.map_or(Ok(Units::ZERO), |r| units(r.get(0)))
            .map_err(|e| store_err(&self.location, e.message))
    }

    fn latest_window_read(&self, user: &str) -> Result<Option<Timestamp>> {
        let start: Option<i64> = lock(&self.reader)
            .query_one(
                "SELECT max(window_start) FROM recsel_windows WHERE user_id = $1",
                &[&user],
            )
            .map_err(self.err())?
            .get(0);
        Ok(start.map(Timestamp))
    }

    fn newest_event_time(&self) -> Result<Option<Timestamp>> {
        let t: Option<i64> = lock(&self.reader)
            .query_one("SELECT max(time_ms) FROM recsel_events", &[])
            .map_err(self.err())?
            .get(0);
        Ok(t.map(Timestamp))
    }

    fn server_time(&self) -> Result<Option<Timestamp>> {
        // The database server's clock, which every replica shares.
        let ms: i64 = lock(&self.reader)
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT",
                &[],
            )
            .map_err(self.err())?
            .get(0);
        Ok(Some(Timestamp(ms)))
    }

    fn windows(&self) -> Result<(Vec<WindowTotal>, u64)> {
        let mut c = lock(&self.reader);
        let rows = c
            .query(
                "SELECT w.user_id, w.window_start, w.spent, \
                 (SELECT coalesce(sum(units), 0)::BIGINT FROM recsel_events v \
                  WHERE v.user_id = w.user_id AND v.window_start = w.window_start) \
                 FROM recsel_windows w",
                &[],
            )
            .map_err(self.err())?;
        let windows = rows
            .iter()
            .map(|r| WindowTotal {
                user: r.get(0),
                start: Timestamp(r.get(1)),
                spent: r.get(2),
                events: r.get(3),
            })
            .collect();
        let orphans: i64 = c
            .query_one(
                "SELECT count(*) FROM (SELECT DISTINCT user_id, window_start FROM recsel_events \
                 WHERE units > 0 EXCEPT SELECT user_id, window_start FROM recsel_windows) o",
                &[],
            )
            .map_err(self.err())?
            .get(0);
        Ok((windows, orphans as u64))
    }

    fn health(&self) -> Result<()> {
        // The database is named by its URL, not by a file that can be unlinked under us; a
        // server that is gone, or a ledger replaced or emptied, fails the next commit, and
        // that failure sticks here.
        match self.broken.get() {
            Some(why) => Err(store_err(&self.location, why)),
            None => Ok(()),
        }
    }

    fn integrity(&self) -> Result<()> {
        // PostgreSQL checks its own pages (and the windows' CHECK against the budget); the
        // ledger's own check is `verify`.
        Ok(())
    }
}

impl LedgerLog for PostgresLedger {
    fn events(&self, user: &str) -> Result<Vec<Event>> {
        self.events_where("WHERE user_id = $1", &[user])
    }

    fn event(&self, user: &str, request_id: &str) -> Result<Option<Event>> {
        Ok(self
            .events_where(
                "WHERE user_id = $1 AND request_id = $2",
                &[user, request_id],
            )?
            .pop())
    }

    fn users(&self) -> Result<Vec<String>> {
        let rows = lock(&self.reader)
            .query(
                "SELECT DISTINCT user_id FROM recsel_events ORDER BY user_id",
                &[],
            )
            .map_err(self.err())?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn for_each_event(&self, f: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()> {
        let mut c = lock(&self.reader);
        // One snapshot: the export is consistent while charges go on.
        let mut tx = c
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.err())?;
        let rows = tx
            .query(
                &format!(
                    "SELECT {} FROM recsel_events ORDER BY seq",
                    event_columns("user_id")
                ),
                &[],
            )
            .map_err(self.err())?;
        for r in &rows {
            f(&row(r)
                .event()
                .map_err(|e| store_err(&self.location, e.message))?)?;
        }
        tx.commit().map_err(self.err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_left_out_of_messages() {
        assert_eq!(
            redact("postgres://recsel:s3cret@db:5432/ledger"),
            "postgres://recsel:***@db:5432/ledger"
        );
        assert_eq!(
            redact("postgres://recsel@127.0.0.1:5433/x"),
            "postgres://recsel@127.0.0.1:5433/x"
        );
    }
}
