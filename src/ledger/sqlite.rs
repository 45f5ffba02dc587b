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
//! served fallback, with its request hash; (user, request id) is unique; indexed by (user,
//! window, request hash) for one release per history), `windows` (the running total per user
//! and window, updated in the same transaction as its events) and `runs` (batch runs: the fingerprint of
//! their command and how often they were attempted).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::store::{
    event_columns, event_table, meta_rows, release_index, settings_from_meta, to_i64, units,
    Dialect, EventRow, Store, StoreTx, TxError, TxResult, WindowTotal,
};
use super::{Event, LedgerError, LedgerLog, RequestHash, Result, Settings, Timestamp, Units};

/// How long a connection waits for another one's write lock before the commit fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// The events table's dialect.
pub(super) const DIALECT: Dialect = Dialect {
    user: "user",
    int: "INTEGER",
    bytes: "BLOB",
    length: "length",
};

/// The tables of a new ledger file.
fn schema() -> String {
    format!(
        "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, {});
CREATE INDEX IF NOT EXISTS events_by_user ON events (user, seq);
{};
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
",
        event_table(DIALECT),
        release_index(DIALECT, "events_by_release", "events")
    )
}

/// A ledger in one SQLite file. Two connections: one for writes (charges, runs, imports) and one
/// for reads, so that a balance can be read while a group commits.
#[derive(Debug)]
pub struct SqliteLedger {
    path: PathBuf,
    settings: Settings,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// The device and inode of the file when it was opened: every commit checks that the path
    /// still names it (a ledger deleted or replaced while in use fails closed).
    identity: Option<(u64, u64)>,
    /// What the file was like at the last commit, checked at the next (docs/ledger.md, "A
    /// ledger changed under a running process").
    watch: Mutex<Watch>,
    /// The first failed check, which sticks: once the file was replaced, truncated, shrunk or
    /// lost events, nothing is charged or read from it again by this process (a restart runs
    /// the full checks of `open_for_charging`).
    broken: std::sync::OnceLock<String>,
}

/// The file's size and newest event at the last commit this process saw.
#[derive(Debug, Default)]
struct Watch {
    size: u64,
    max_seq: i64,
}

/// The 16 bytes every SQLite database file starts with.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The device and inode of the file at `path` now (`None` where the platform has none).
fn file_id(path: &Path) -> std::io::Result<Option<(u64, u64)>> {
    let m = std::fs::metadata(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(Some((m.dev(), m.ino())))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        Ok(None)
    }
}

/// The largest event number stored (0 for none): it only grows, whoever commits.
fn max_seq(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the connection cannot leave a transaction half-applied (an
    // uncommitted transaction rolls back when dropped), so the connection stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        TxError::fatal(e)
    }
}

/// The stored columns of an event, in [`EventRow`] order.
fn row(r: &rusqlite::Row<'_>) -> std::result::Result<EventRow, rusqlite::Error> {
    Ok(EventRow {
        seq: Some(r.get(0)?),
        user: r.get(1)?,
        request_id: r.get(2)?,
        mechanism: r.get(3)?,
        units: r.get(4)?,
        time_ms: r.get(5)?,
        window_start: r.get(6)?,
        answer_kind: r.get(7)?,
        answer_item: r.get(8)?,
        request_hash: r.get(9)?,
    })
}

fn event_from_row(r: &rusqlite::Row<'_>) -> TxResult<Event> {
    row(r)?.event()
}

impl SqliteLedger {
    /// Creates a new ledger file at `path` with `settings`; an error if the path exists (even
    /// an empty file: it is never taken for a new ledger).
    pub fn create(path: &Path, settings: Settings) -> Result<Self> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "the file exists already; a ledger is created only where there is none".into()
                } else {
                    format!("creating the ledger file: {e}")
                };
                Self::store_err(path, why)
            })?;
        let (writer, stored) = Self::connect(path, Some(settings))?;
        Self::with(path, writer, stored)
    }

    /// Opens the ledger at `path`, creating it with `settings` if the file does not exist; an
    /// existing ledger must have been created with the same settings.
    pub fn open(path: &Path, settings: Settings) -> Result<Self> {
        if !path.exists() {
            return Self::create(path, settings);
        }
        let (writer, stored) = Self::connect_existing(path)?;
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
        let (writer, stored) = Self::connect_existing(path)?;
        Self::with(path, writer, stored)
    }

    /// The writer of an existing ledger file: a missing file is [`LedgerError::Missing`], a
    /// 0-byte one (a failed copy, `> ledger.db`) is refused — SQLite would take it for a new,
    /// empty database.
    fn connect_existing(path: &Path) -> Result<(Connection, Settings)> {
        if !path.exists() {
            return Err(LedgerError::Missing {
                location: path.display().to_string(),
            });
        }
        if !path.is_file() {
            return Err(LedgerError::Invalid(format!(
                "{}: no ledger file there",
                path.display()
            )));
        }
        let len = std::fs::metadata(path)
            .map_err(|e| Self::store_err(path, e))?
            .len();
        if len == 0 {
            return Err(Self::store_err(
                path,
                "an empty file (0 bytes) is not a ledger (a failed copy?); restore the ledger \
                 from a backup or an export, or remove the file and create a new ledger with \
                 `recsel ledger init` knowing that every budget starts again",
            ));
        }
        Self::connect(path, None)
    }

    fn with(path: &Path, writer: Connection, settings: Settings) -> Result<Self> {
        let reader = Self::configure(path)?;
        let identity = file_id(path).map_err(|e| Self::store_err(path, e))?;
        let size = std::fs::metadata(path)
            .map_err(|e| Self::store_err(path, e))?
            .len();
        let max_seq = max_seq(&writer).map_err(|e| Self::store_err(path, e))?;
        Ok(SqliteLedger {
            path: path.to_path_buf(),
            settings,
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            identity,
            watch: Mutex::new(Watch { size, max_seq }),
            broken: std::sync::OnceLock::new(),
        })
    }

    /// The checks of the file made at every commit and by [`Store::health`]: the path still
    /// names the file opened, the file is no smaller than at the last commit (SQLite never
    /// shrinks a database file without VACUUM, which recsel does not run) and still starts with
    /// SQLite's header. A failure is logged once and sticks.
    fn check_file(&self, watch: &Watch) -> std::result::Result<(), String> {
        if let Some(why) = self.broken.get() {
            return Err(why.clone());
        }
        let found = self.same_file().and_then(|()| {
            let size = std::fs::metadata(&self.path)
                .map_err(|e| format!("reading {}: {e}", self.path.display()))?
                .len();
            if size < watch.size {
                return Err(format!(
                    "the ledger file {} shrank from {} to {size} bytes while this process had it \
                     open (truncated, or overwritten with an older copy): the charges it held \
                     are gone from it, so nothing is charged or answered from now on. Restart \
                     only after restoring the ledger (docs/ledger.md, \"A ledger changed under \
                     a running process\")",
                    self.path.display(),
                    watch.size
                ));
            }
            if size == 0 {
                // Not checkpointed yet: everything is in the write-ahead log.
                return Ok(());
            }
            let mut head = [0u8; 16];
            let read = std::fs::File::open(&self.path)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
            if read.is_err() || &head != SQLITE_HEADER {
                return Err(format!(
                    "the ledger file {} no longer starts with SQLite's header (overwritten in \
                     place?): nothing is charged or answered from now on",
                    self.path.display()
                ));
            }
            Ok(())
        });
        if let Err(why) = &found {
            self.mark_broken(why.clone());
        }
        found
    }

    /// Records the first failed check, and says so on stderr once.
    fn mark_broken(&self, why: String) {
        if self.broken.set(why.clone()).is_ok() {
            eprintln!("recsel ledger: NOT READY: {why}");
        }
    }

    /// Whether the path still names the file this ledger opened.
    fn same_file(&self) -> std::result::Result<(), String> {
        match file_id(&self.path) {
            Ok(id) if id == self.identity => Ok(()),
            Ok(_) => Err(format!(
                "{} was replaced by another file since this process opened it; charges into the \
                 file it had open would be lost to the next start, so nothing is charged",
                self.path.display()
            )),
            Err(e) => Err(format!(
                "the ledger file {} is gone since this process opened it ({e}); charges into \
                 the unlinked file would be lost to the next start, so nothing is charged",
                self.path.display()
            )),
        }
    }

    pub(super) fn store_err(path: &Path, e: impl std::fmt::Display) -> LedgerError {
        LedgerError::Store {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// A connection with the durability settings, checked (never a non-durable mode).
    pub(super) fn configure(path: &Path) -> Result<Connection> {
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
            tx.execute_batch(&schema()).map_err(e)?;
            for (k, v) in meta_rows(settings) {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                    params![k, v],
                )
                .map_err(e)?;
            }
        }
        let settings = settings_from_meta(&path.display().to_string(), &mut |key| {
            Ok(tx
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()?)
        })
        .map_err(|x| Self::store_err(path, x.message))?;
        tx.commit().map_err(e)?;
        Ok((conn, settings))
    }

    /// The path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> TxResult<T>) -> Result<T> {
        if let Some(why) = self.broken.get() {
            return Err(Self::store_err(&self.path, why));
        }
        f(&lock(&self.reader)).map_err(|e| Self::store_err(&self.path, e.message))
    }
}

/// One write transaction of the embedded store.
struct Tx<'a>(rusqlite::Transaction<'a>);

impl Tx<'_> {
    /// The first event (by `seq`) that the condition `filter` over `args` selects.
    fn first(&self, filter: &str, args: &[&dyn rusqlite::ToSql]) -> TxResult<Option<Event>> {
        let sql = format!(
            "SELECT {} FROM events WHERE {filter} ORDER BY seq LIMIT 1",
            event_columns("user")
        );
        let found = self
            .0
            .prepare_cached(&sql)?
            .query_row(args, row)
            .optional()?;
        found.map(EventRow::event).transpose()
    }
}

impl StoreTx for Tx<'_> {
    fn find(&mut self, user: &str, request_id: &str) -> TxResult<Option<Event>> {
        self.first("user = ?1 AND request_id = ?2", params![user, request_id])
    }

    fn find_release(
        &mut self,
        user: &str,
        w: Timestamp,
        h: &RequestHash,
    ) -> TxResult<Option<Event>> {
        let filter =
            "user = ?1 AND window_start = ?2 AND request_hash = ?3 AND answer_kind <> 'fallback'";
        self.first(filter, params![user, w.0, &h.0[..]])
    }

    fn load_spent(&mut self, keys: &[(String, Timestamp)]) -> TxResult<Vec<Units>> {
        // `BEGIN IMMEDIATE` holds the file's write lock already: plain reads suffice.
        let mut q = self
            .0
            .prepare_cached("SELECT spent FROM windows WHERE user = ?1 AND window_start = ?2")?;
        keys.iter()
            .map(|(user, start)| {
                match q
                    .query_row(params![user, start.0], |r| r.get::<_, i64>(0))
                    .optional()?
                {
                    Some(n) => units(n),
                    None => Ok(Units::ZERO),
                }
            })
            .collect()
    }

    fn latest_window(&mut self, user: &str) -> TxResult<Option<Timestamp>> {
        let start: Option<i64> = self
            .0
            .prepare_cached("SELECT max(window_start) FROM windows WHERE user = ?1")?
            .query_row([user], |r| r.get(0))?;
        Ok(start.map(Timestamp))
    }

    fn save_spent(&mut self, user: &str, window: Timestamp, spent: Units) -> TxResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO windows (user, window_start, spent) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (user, window_start) DO UPDATE SET spent = excluded.spent",
            )?
            .execute(params![user, window.0, to_i64(spent)])?;
        Ok(())
    }

    fn insert(&mut self, r: &EventRow) -> TxResult<bool> {
        let n = self
            .0
            .prepare_cached(
                "INSERT INTO events (seq, request_id, user, mechanism, units, time_ms, \
                 window_start, answer_kind, answer_item, request_hash) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT (user, request_id) DO NOTHING",
            )?
            .execute(params![
                r.seq,
                r.request_id,
                r.user,
                r.mechanism,
                r.units,
                r.time_ms,
                r.window_start,
                r.answer_kind,
                r.answer_item,
                r.request_hash
            ])?;
        Ok(n == 1)
    }

    fn count_events(&mut self) -> TxResult<u64> {
        let n: i64 = self
            .0
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    fn rebuild_windows(&mut self) -> TxResult<()> {
        self.0.execute_batch(
            "DELETE FROM windows; \
             INSERT INTO windows (user, window_start, spent) \
             SELECT user, window_start, sum(units) FROM events WHERE units > 0 \
             GROUP BY user, window_start",
        )?;
        Ok(())
    }

    fn find_run(&mut self, id: &str) -> TxResult<Option<(String, u64)>> {
        Ok(self
            .0
            .query_row(
                "SELECT key, attempts FROM runs WHERE run_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)),
            )
            .optional()?)
    }

    fn touch(&mut self, at: Timestamp) -> TxResult<()> {
        self.0.execute(
            "INSERT INTO meta (key, value) VALUES ('probed', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [at.to_string()],
        )?;
        Ok(())
    }

    fn put_run(&mut self, id: &str, key: &str, at: Timestamp, attempts: u64) -> TxResult<()> {
        if attempts == 1 {
            self.0.execute(
                "INSERT INTO runs (run_id, key, first_ms, last_ms, attempts) \
                 VALUES (?1, ?2, ?3, ?3, 1)",
                params![id, key, at.0],
            )?;
        } else {
            self.0.execute(
                "UPDATE runs SET attempts = ?2, last_ms = ?3 WHERE run_id = ?1",
                params![id, attempts as i64, at.0],
            )?;
        }
        Ok(())
    }
}

impl Store for SqliteLedger {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn location(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn label(&self) -> String {
        self.path.display().to_string()
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    fn transact(&self, body: &mut dyn FnMut(&mut dyn StoreTx) -> TxResult<()>) -> TxResult<()> {
        let mut conn = lock(&self.writer);
        let mut tx = Tx(conn.transaction_with_behavior(TransactionBehavior::Immediate)?);
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        // Under the write lock: the file at the path is still the one open here, whole, and no
        // event this process saw committed is gone.
        self.check_file(&watch).map_err(TxError::fatal)?;
        let before = max_seq(&tx.0)?;
        if before < watch.max_seq {
            let why = format!(
                "the ledger {} lost events while this process had it open (its newest event was \
                 number {}, now {before}): rows were deleted, so nothing is charged or answered \
                 from now on (docs/ledger.md, \"A ledger changed under a running process\")",
                self.path.display(),
                watch.max_seq
            );
            self.mark_broken(why.clone());
            return Err(TxError::fatal(why));
        }
        body(&mut tx)?;
        let after = max_seq(&tx.0)?;
        tx.0.commit()?; // durable (WAL fsync) before anyone sees the outcomes
        watch.max_seq = after;
        if let Ok(m) = std::fs::metadata(&self.path) {
            watch.size = watch.size.max(m.len());
        }
        Ok(())
    }

    fn spent(&self, user: &str, window: Timestamp) -> Result<Units> {
        self.read(|conn| {
            let n = conn
                .prepare_cached("SELECT spent FROM windows WHERE user = ?1 AND window_start = ?2")?
                .query_row(params![user, window.0], |r| r.get::<_, i64>(0))
                .optional()?;
            n.map_or(Ok(Units::ZERO), units)
        })
    }

    fn latest_window_read(&self, user: &str) -> Result<Option<Timestamp>> {
        self.read(|conn| {
            let start: Option<i64> = conn
                .prepare_cached("SELECT max(window_start) FROM windows WHERE user = ?1")?
                .query_row([user], |r| r.get(0))?;
            Ok(start.map(Timestamp))
        })
    }

    fn newest_event_time(&self) -> Result<Option<Timestamp>> {
        self.read(|conn| {
            let t: Option<i64> =
                conn.query_row("SELECT max(time_ms) FROM events", [], |r| r.get(0))?;
            Ok(t.map(Timestamp))
        })
    }

    fn windows(&self) -> Result<(Vec<WindowTotal>, u64)> {
        self.read(|conn| {
            let mut stmt = conn.prepare(
                "SELECT w.user, w.window_start, w.spent, \
                 (SELECT coalesce(sum(units), 0) FROM events v \
                  WHERE v.user = w.user AND v.window_start = w.window_start) \
                 FROM windows w",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(WindowTotal {
                    user: r.get(0)?,
                    start: Timestamp(r.get(1)?),
                    spent: r.get(2)?,
                    events: r.get(3)?,
                })
            })?;
            let windows = rows.collect::<std::result::Result<Vec<_>, _>>()?;
            let orphans: i64 = conn.query_row(
                "SELECT count(*) FROM (SELECT DISTINCT user, window_start FROM events \
                 WHERE units > 0 EXCEPT SELECT user, window_start FROM windows)",
                [],
                |r| r.get(0),
            )?;
            Ok((windows, orphans as u64))
        })
    }

    fn health(&self) -> Result<()> {
        let watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        self.check_file(&watch)
            .map_err(|m| Self::store_err(&self.path, m))
    }

    fn integrity(&self) -> Result<()> {
        self.read(|conn| {
            let mut stmt = conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            let found = rows.collect::<std::result::Result<Vec<_>, _>>()?;
            if found != ["ok"] {
                return Err(TxError::fatal(format!(
                    "the file is damaged (SQLite's integrity check: {}); restore the ledger \
                     from a backup or an export",
                    found.join("; ")
                )));
            }
            Ok(())
        })
    }
}

impl LedgerLog for SqliteLedger {
    fn events(&self, user: &str) -> Result<Vec<Event>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {} FROM events WHERE user = ?1 ORDER BY seq",
                event_columns("user")
            ))?;
            let rows = stmt.query_map([user], row)?;
            rows.map(|r| r?.event()).collect()
        })
    }

    fn event(&self, user: &str, request_id: &str) -> Result<Option<Event>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {} FROM events WHERE user = ?1 AND request_id = ?2",
                event_columns("user")
            ))?;
            stmt.query_row([user, request_id], row)
                .optional()?
                .map(EventRow::event)
                .transpose()
        })
    }

    fn users(&self) -> Result<Vec<String>> {
        self.read(|conn| {
            let mut stmt = conn.prepare("SELECT DISTINCT user FROM events ORDER BY user")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }

    fn for_each_event(&self, f: &mut dyn FnMut(&Event) -> Result<()>) -> Result<()> {
        let conn = lock(&self.reader);
        let err = |e: rusqlite::Error| Self::store_err(&self.path, e);
        // One read transaction: the export is a consistent snapshot while charges go on.
        conn.execute_batch("BEGIN").map_err(err)?;
        let result = (|| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {} FROM events ORDER BY seq",
                    event_columns("user")
                ))
                .map_err(err)?;
            let mut rows = stmt.query([]).map_err(err)?;
            while let Some(r) = rows.next().map_err(err)? {
                let event =
                    event_from_row(r).map_err(|e| Self::store_err(&self.path, e.message))?;
                f(&event)?;
            }
            Ok(())
        })();
        conn.execute_batch("COMMIT").map_err(err)?;
        result
    }
}
