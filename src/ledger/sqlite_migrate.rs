//! `recsel ledger migrate` for a ledger file (docs/ledger.md, "Schema versions"): the events
//! table rebuilt at the current schema version in one transaction.

use std::path::Path;

use rusqlite::{OptionalExtension, TransactionBehavior};

use super::sqlite::{SqliteLedger, DIALECT};
use super::store::Store;
use super::store::{event_table, release_index, version_error, version_from_meta, FORMAT_VERSION};
use super::{Ledger, LedgerError, Migrated, Result};

/// Migrates the ledger file at `path` to [`FORMAT_VERSION`] in one transaction (`recsel
/// ledger migrate`): the events table is rebuilt with (user, request id) unique, a
/// request-hash column, the answer kind `list` and the index of one release per history, and
/// the version is written. The stored request hashes are erased: before version 4 they were
/// unkeyed (a dictionary attack on small histories), and a keyed hash cannot be computed from
/// them, so an event stored before the migration matches no request again (one release per
/// history charges those histories again; a replayed request id is answered as an event
/// without a hash). Every event is kept with its sequence number; the event count and every
/// window's total are checked inside the transaction, and anything unexpected rolls it back.
/// A ledger already at the current version is left alone.
pub fn migrate(path: &Path) -> Result<Migrated> {
    if !path.is_file() || std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == 0 {
        return Err(LedgerError::Missing {
            location: path.display().to_string(),
        });
    }
    let mut conn = SqliteLedger::configure(path)?;
    let e = |x: rusqlite::Error| SqliteLedger::store_err(path, x);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(e)?;
    let version = version_from_meta(&mut |key| {
        Ok(tx
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    })
    .map_err(|x| SqliteLedger::store_err(path, x.message))?;
    let count = |tx: &rusqlite::Transaction<'_>| -> rusqlite::Result<(i64, i64)> {
        tx.query_row(
            "SELECT count(*), coalesce(sum(units), 0) FROM events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    };
    let (events, units) = count(&tx).map_err(e)?;
    let done = Migrated {
        location: path.display().to_string(),
        from: version,
        to: FORMAT_VERSION,
        events: events as u64,
    };
    match version {
        v if v == FORMAT_VERSION => return Ok(done),
        1..=3 => {}
        v => return Err(SqliteLedger::store_err(path, version_error(v, "").message)),
    }
    tx.execute_batch(&format!(
        "CREATE TABLE events_new (seq INTEGER PRIMARY KEY, {table});
         INSERT INTO events_new (seq, request_id, user, mechanism, units, time_ms, \
             window_start, answer_kind, answer_item, request_hash) \
         SELECT seq, request_id, user, mechanism, units, time_ms, window_start, \
             answer_kind, answer_item, NULL FROM events ORDER BY seq;
         DROP TABLE events;
         ALTER TABLE events_new RENAME TO events;
         CREATE INDEX events_by_user ON events (user, seq);
         {index};",
        table = event_table(DIALECT),
        index = release_index(DIALECT, "events_by_release", "events"),
    ))
    .map_err(e)?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'format_version'",
        [FORMAT_VERSION.to_string()],
    )
    .map_err(e)?;
    if count(&tx).map_err(e)? != (events, units) {
        return Err(SqliteLedger::store_err(
            path,
            "the migrated events do not add up to the stored ones; nothing was changed",
        ));
    }
    tx.commit().map_err(e)?; // durable, as every commit (synchronous=FULL)
    drop(conn);
    let l = SqliteLedger::open_existing(path)?;
    Store::integrity(&l)?;
    Ledger::verify(&l)?;
    Ok(done)
}
