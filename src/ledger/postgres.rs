//! The shared ledger: one PostgreSQL database that several service replicas charge at once
//! (docs/serving.md, "Several replicas").
//!
//! A group of charges is one transaction. Before it decides anything, the transaction takes the
//! row lock of every (user, window) the group touches, in sorted order, with an upsert that
//! returns the running total (`INSERT … ON CONFLICT … DO UPDATE … RETURNING spent`): two replicas
//! charging one user serialise on that row, so they cannot both spend the last unit, and sorted
//! locking keeps two groups from deadlocking. A request id is unique in the table of events; an
//! id that another replica is committing at the same moment is found by `ON CONFLICT DO NOTHING`
//! once that commit is done, and answered as a replay. The window's total also has a `CHECK`
//! against the budget written when the ledger was created, so the database itself refuses a
//! total over budget.
//!
//! Every session sets `synchronous_commit = on`, so a commit returns only after the server has
//! flushed its write-ahead log; a server running with `fsync = off` is refused.
//!
//! Tables (all prefixed `recsel_`): `meta`, `events`, `windows`, `runs`, as in the embedded store.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use postgres::error::SqlState;
use postgres::{Client, NoTls, Row, Transaction};

use super::{
    Answer, Balance, ChargeRequest, Event, Ledger, LedgerError, Outcome, Rejection, Result, Run,
    Settings, Timestamp, Units,
};

/// The `format` value in `recsel_meta`.
pub const FORMAT: &str = "recsel-ledger";
/// The schema version in `recsel_meta`.
pub const FORMAT_VERSION: u32 = 1;
/// How often a group is retried after a deadlock or serialisation failure.
const RETRIES: usize = 5;
/// Key of the advisory lock held while a ledger is created.
const SETUP_LOCK: i64 = 0x7265_6373_656c_0001;

const EVENT_COLUMNS: &str =
    "seq, user_id, request_id, mechanism, units, time_ms, window_start, answer_kind, answer_item";

/// A ledger in a PostgreSQL database. Two connections, as in the embedded store: one for writes,
/// one for reads.
pub struct PostgresLedger {
    location: String,
    settings: Settings,
    writer: Mutex<Client>,
    reader: Mutex<Client>,
}

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

fn to_i64(u: Units) -> i64 {
    u.get() as i64 // Units::MAX is i64::MAX
}

fn units(n: i64) -> std::result::Result<Units, String> {
    u64::try_from(n)
        .ok()
        .and_then(|n| Units::new(n).ok())
        .ok_or_else(|| format!("a stored amount is out of range: {n}"))
}

fn answer_columns(a: &Answer) -> (&'static str, Option<&str>) {
    match a {
        Answer::Item(i) => ("item", Some(i)),
        Answer::NoCandidate => ("none", None),
        Answer::Fallback(i) => ("fallback", Some(i)),
    }
}

fn event_from_row(r: &Row) -> std::result::Result<Event, String> {
    let kind: String = r.get(7);
    let item: Option<String> = r.get(8);
    let answer = match (kind.as_str(), item) {
        ("item", Some(i)) => Answer::Item(i),
        ("fallback", Some(i)) => Answer::Fallback(i),
        ("none", None) => Answer::NoCandidate,
        (k, _) => return Err(format!("a stored answer of kind '{k}' is malformed")),
    };
    Ok(Event {
        seq: r.get::<_, i64>(0) as u64,
        user: r.get(1),
        request_id: r.get(2),
        mechanism: r.get(3),
        units: units(r.get(4))?,
        time: Timestamp(r.get(5)),
        window: Timestamp(r.get(6)),
        answer,
    })
}

/// Whether a failed transaction may simply be run again.
fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

impl PostgresLedger {
    fn err(&self) -> impl Fn(postgres::Error) -> LedgerError + '_ {
        move |e| store_err(&self.location, e)
    }

    /// Connects to the database of `url`, creating the ledger's tables with `settings` if they
    /// do not exist; an existing ledger must have been created with the same settings.
    pub fn open(url: &str, settings: Settings) -> Result<Self> {
        let ledger = Self::connect_with(url, Some(settings))?;
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
        Self::connect_with(url, None)
    }

    /// The writer's and the reader's connections to the database of `url`, with the ledger's
    /// tables set up (created with `create` if they do not exist) and the settings stored there.
    fn connect_with(url: &str, create: Option<Settings>) -> Result<Self> {
        let location = redact(url);
        let mut writer = connect(url, &location)?;
        let settings = setup(&mut writer, &location, create)?;
        let reader = connect(url, &location)?;
        Ok(PostgresLedger {
            location,
            settings,
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
        })
    }

    /// Recomputes every window's total from the events and compares it with the stored total
    /// and the budget; returns the number of windows checked (for tests and audits).
    pub fn verify(&self) -> Result<usize> {
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
        for r in &rows {
            let (user, start, spent, sum): (String, i64, i64, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            if spent != sum || spent as u64 > self.settings.budget.get() {
                return Err(store_err(
                    &self.location,
                    format!(
                        "user '{user}', window {}: running total {spent} units, events sum \
                         {sum}, budget {}",
                        Timestamp(start),
                        self.settings.budget.get()
                    ),
                ));
            }
        }
        Ok(rows.len())
    }

    fn decide(
        &self,
        tx: &mut Transaction<'_>,
        r: &ChargeRequest,
        spent: &mut BTreeMap<(String, i64), (Units, bool)>,
    ) -> std::result::Result<Outcome, TxError> {
        if let Some(why) = invalid(r) {
            return Ok(Outcome::Rejected {
                reason: Rejection::Invalid(why.into()),
            });
        }
        let find = format!("SELECT {EVENT_COLUMNS} FROM recsel_events WHERE request_id = $1");
        let replay = |tx: &mut Transaction<'_>| -> std::result::Result<Option<Outcome>, TxError> {
            let Some(row) = tx.query_opt(&find, &[&r.request_id])? else {
                return Ok(None);
            };
            let event = event_from_row(&row).map_err(TxError::Bad)?;
            Ok(Some(if event.user != r.user {
                Outcome::Rejected {
                    reason: Rejection::RequestIdOfAnotherUser,
                }
            } else {
                Outcome::Replayed { event }
            }))
        };
        if let Some(o) = replay(tx)? {
            return Ok(o);
        }
        let budget = self.settings.budget;
        let window = self.settings.period.window(r.time);
        let key = (r.user.clone(), window.start.0);
        let (now, _) = spent[&key];
        let remaining = budget.saturating_sub(now);
        let insert = "INSERT INTO recsel_events (request_id, user_id, mechanism, units, time_ms, \
                      window_start, answer_kind, answer_item) \
                      VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                      ON CONFLICT (request_id) DO NOTHING RETURNING seq";
        let charge = r.epsilon <= remaining;
        let (mechanism, cost, answer) = if charge {
            (r.mechanism.as_str(), r.epsilon, r.answer.clone())
        } else {
            match &r.fallback {
                Some(item) => ("fallback", Units::ZERO, Answer::Fallback(item.clone())),
                None => {
                    let retry_after = if r.epsilon > budget { None } else { window.end };
                    return Ok(Outcome::Refused {
                        spent: now,
                        remaining,
                        retry_after,
                    });
                }
            }
        };
        let (kind, item) = answer_columns(&answer);
        let inserted = tx.query_opt(
            insert,
            &[
                &r.request_id,
                &r.user,
                &mechanism,
                &to_i64(cost),
                &r.time.0,
                &window.start.0,
                &kind,
                &item,
            ],
        )?;
        if inserted.is_none() {
            // Another replica committed this request id meanwhile: answer as its replay.
            if let Some(o) = replay(tx)? {
                return Ok(o);
            }
        }
        if !charge {
            let retry_after = if r.epsilon > budget { None } else { window.end };
            return Ok(Outcome::Fallback {
                item: answer.item().unwrap_or_default().to_string(),
                remaining,
                retry_after,
            });
        }
        let after = now
            .checked_add(r.epsilon)
            .expect("spent + charge <= budget");
        spent.insert(key, (after, true));
        Ok(Outcome::Charged {
            answer: r.answer.clone(),
            charged: r.epsilon,
            spent: after,
            remaining: budget.saturating_sub(after),
        })
    }

    fn charge_once(
        &self,
        requests: &[ChargeRequest],
    ) -> std::result::Result<Vec<Outcome>, TxError> {
        let mut c = lock(&self.writer);
        let mut tx = c.transaction()?;
        // Lock every (user, window) of the group, in sorted order, reading its total.
        let mut spent: BTreeMap<(String, i64), (Units, bool)> = BTreeMap::new();
        for r in requests.iter().filter(|r| invalid(r).is_none()) {
            spent.insert(
                (r.user.clone(), self.settings.period.window(r.time).start.0),
                (Units::ZERO, false),
            );
        }
        for ((user, start), value) in spent.iter_mut() {
            let row = tx.query_one(
                "INSERT INTO recsel_windows (user_id, window_start, spent) VALUES ($1, $2, 0) \
                 ON CONFLICT (user_id, window_start) \
                 DO UPDATE SET spent = recsel_windows.spent RETURNING spent",
                &[user, start],
            )?;
            value.0 = units(row.get(0)).map_err(TxError::Bad)?;
        }
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            out.push(self.decide(&mut tx, r, &mut spent)?);
        }
        for ((user, start), (total, dirty)) in &spent {
            if *dirty {
                tx.execute(
                    "UPDATE recsel_windows SET spent = $3 WHERE user_id = $1 AND window_start = $2",
                    &[user, start, &to_i64(*total)],
                )?;
            }
        }
        tx.commit()?; // durable (synchronous_commit = on) before anyone sees `out`
        Ok(out)
    }
}

/// Why a group's transaction failed: the database (perhaps retryable) or a malformed row.
enum TxError {
    Pg(postgres::Error),
    Bad(String),
}

impl From<postgres::Error> for TxError {
    fn from(e: postgres::Error) -> Self {
        TxError::Pg(e)
    }
}

fn invalid(r: &ChargeRequest) -> Option<&'static str> {
    if r.user.is_empty() {
        Some("the user id is empty")
    } else if r.request_id.is_empty() {
        Some("the request id is empty")
    } else if r.answer.is_fallback() {
        Some("a charged answer cannot be a fallback; pass the fallback separately")
    } else if r.fallback.as_deref() == Some("") {
        Some("the fallback item id is empty")
    } else {
        None
    }
}

fn store_err(location: &str, e: impl std::fmt::Display) -> LedgerError {
    LedgerError::Store {
        path: location.to_string(),
        message: e.to_string(),
    }
}

fn connect(url: &str, location: &str) -> Result<Client> {
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
/// race) and returns the stored settings.
fn setup(c: &mut Client, location: &str, create: Option<Settings>) -> Result<Settings> {
    let e = |x: postgres::Error| store_err(location, x);
    let mut tx = c.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])
        .map_err(e)?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('recsel_meta') IS NOT NULL", &[])
        .map_err(e)?
        .get(0);
    if !exists {
        let Some(settings) = create else {
            return Err(store_err(location, "no recsel ledger in this database"));
        };
        let budget = to_i64(settings.budget);
        tx.batch_execute(&format!(
            "CREATE TABLE recsel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE recsel_events (
                 seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                 request_id TEXT NOT NULL UNIQUE,
                 user_id TEXT NOT NULL,
                 mechanism TEXT NOT NULL,
                 units BIGINT NOT NULL CHECK (units >= 0),
                 time_ms BIGINT NOT NULL,
                 window_start BIGINT NOT NULL,
                 answer_kind TEXT NOT NULL CHECK (answer_kind IN ('item', 'none', 'fallback')),
                 answer_item TEXT
             );
             CREATE INDEX recsel_events_by_user ON recsel_events (user_id, seq);
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
             );"
        ))
        .map_err(e)?;
        for (k, v) in [
            ("format", FORMAT.to_string()),
            ("format_version", FORMAT_VERSION.to_string()),
            ("budget_units", settings.budget.get().to_string()),
            ("period", settings.period.name().to_string()),
            ("created", Timestamp::now().to_string()),
        ] {
            tx.execute(
                "INSERT INTO recsel_meta (key, value) VALUES ($1, $2)",
                &[&k, &v],
            )
            .map_err(e)?;
        }
    }
    let mut meta = |key: &str| -> Result<String> {
        tx.query_opt("SELECT value FROM recsel_meta WHERE key = $1", &[&key])
            .map_err(e)?
            .map(|r| r.get(0))
            .ok_or_else(|| store_err(location, format!("recsel_meta has no '{key}'")))
    };
    if meta("format")? != FORMAT {
        return Err(store_err(location, "not a recsel ledger"));
    }
    let version = meta("format_version")?;
    if version != FORMAT_VERSION.to_string() {
        return Err(store_err(
            location,
            format!("ledger format version {version}; this recsel reads {FORMAT_VERSION}"),
        ));
    }
    let budget = meta("budget_units")?
        .parse::<u64>()
        .ok()
        .and_then(|n| Units::new(n).ok())
        .ok_or_else(|| store_err(location, "bad budget_units in recsel_meta"))?;
    let period = meta("period")?
        .parse()
        .map_err(|x| store_err(location, x))?;
    tx.commit().map_err(e)?;
    Ok(Settings { budget, period })
}

impl Ledger for PostgresLedger {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    fn charge(&self, requests: &[ChargeRequest]) -> Result<Vec<Outcome>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let mut attempt = 0;
        loop {
            match self.charge_once(requests) {
                Ok(out) => return Ok(out),
                Err(TxError::Pg(e)) if retryable(&e) && attempt < RETRIES => attempt += 1,
                Err(TxError::Pg(e)) => return Err(store_err(&self.location, e)),
                Err(TxError::Bad(m)) => return Err(store_err(&self.location, m)),
            }
        }
    }

    fn balance(&self, user: &str, at: Timestamp) -> Result<Balance> {
        let window = self.settings.period.window(at);
        let row = lock(&self.reader)
            .query_opt(
                "SELECT spent FROM recsel_windows WHERE user_id = $1 AND window_start = $2",
                &[&user, &window.start.0],
            )
            .map_err(self.err())?;
        let spent = match row {
            Some(r) => units(r.get(0)).map_err(|m| store_err(&self.location, m))?,
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
        let rows = lock(&self.reader)
            .query(
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM recsel_events WHERE user_id = $1 ORDER BY seq"
                ),
                &[&user],
            )
            .map_err(self.err())?;
        rows.iter()
            .map(|r| event_from_row(r).map_err(|m| store_err(&self.location, m)))
            .collect()
    }

    fn event(&self, request_id: &str) -> Result<Option<Event>> {
        lock(&self.reader)
            .query_opt(
                &format!("SELECT {EVENT_COLUMNS} FROM recsel_events WHERE request_id = $1"),
                &[&request_id],
            )
            .map_err(self.err())?
            .map(|r| event_from_row(&r).map_err(|m| store_err(&self.location, m)))
            .transpose()
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
                &format!("SELECT {EVENT_COLUMNS} FROM recsel_events ORDER BY seq"),
                &[],
            )
            .map_err(self.err())?;
        for r in &rows {
            f(&event_from_row(r).map_err(|m| store_err(&self.location, m))?)?;
        }
        tx.commit().map_err(self.err())
    }

    fn import_events(&self, events: &[Event]) -> Result<()> {
        let mut c = lock(&self.writer);
        let e = self.err();
        let mut tx = c.transaction().map_err(&e)?;
        let n: i64 = tx
            .query_one("SELECT count(*) FROM recsel_events", &[])
            .map_err(&e)?
            .get(0);
        if n > 0 {
            return Err(LedgerError::Invalid(format!(
                "{}: the ledger already has {n} events; import only into an empty ledger",
                self.location
            )));
        }
        for ev in events {
            let (kind, item) = answer_columns(&ev.answer);
            tx.execute(
                "INSERT INTO recsel_events (seq, request_id, user_id, mechanism, units, time_ms, \
                 window_start, answer_kind, answer_item) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &(ev.seq as i64),
                    &ev.request_id,
                    &ev.user,
                    &ev.mechanism,
                    &to_i64(ev.units),
                    &ev.time.0,
                    &ev.window.0,
                    &kind,
                    &item,
                ],
            )
            .map_err(&e)?;
        }
        tx.batch_execute(
            "DELETE FROM recsel_windows;
             INSERT INTO recsel_windows (user_id, window_start, spent)
             SELECT user_id, window_start, sum(units) FROM recsel_events WHERE units > 0
             GROUP BY user_id, window_start;
             SELECT setval(pg_get_serial_sequence('recsel_events', 'seq'),
                           coalesce((SELECT max(seq) FROM recsel_events), 0) + 1, false);",
        )
        .map_err(&e)?;
        tx.commit().map_err(&e)
    }

    fn open_run(&self, id: &str, key: &str, at: Timestamp) -> Result<Run> {
        Run::check_id(id)?;
        let mut c = lock(&self.writer);
        let e = self.err();
        let mut tx = c.transaction().map_err(&e)?;
        let found = tx
            .query_opt(
                "SELECT key, attempts FROM recsel_runs WHERE run_id = $1 FOR UPDATE",
                &[&id],
            )
            .map_err(&e)?;
        let attempts = match found.map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))) {
            Some((k, _)) if k != key => return Err(Run::key_mismatch(&self.location, id)),
            Some((_, n)) => {
                tx.execute(
                    "UPDATE recsel_runs SET attempts = $2, last_ms = $3 WHERE run_id = $1",
                    &[&id, &(n + 1), &at.0],
                )
                .map_err(&e)?;
                n as u64 + 1
            }
            None => {
                // A concurrent first attempt of the same id waits on the primary key, then fails
                // here; the command can simply be run again.
                tx.execute(
                    "INSERT INTO recsel_runs (run_id, key, first_ms, last_ms, attempts) \
                     VALUES ($1, $2, $3, $3, 1)",
                    &[&id, &key, &at.0],
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
