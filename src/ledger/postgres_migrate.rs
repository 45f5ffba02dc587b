//! `recsel ledger migrate` on PostgreSQL (docs/ledger.md, "Schema versions"): every step in one
//! transaction under the set-up's advisory lock.

use postgres::Transaction;

use super::postgres::{connect, redact, store_err, PostgresLedger, DIALECT, SETUP_LOCK};
use super::store::{hash_column, release_index, version_error, version_from_meta, FORMAT_VERSION};
use super::{Ledger, LedgerError, Migrated, Result};

/// Migrates the ledger in the database of `url` to [`FORMAT_VERSION`] in one transaction
/// (`recsel ledger migrate`), under the advisory lock of the set-up: from version 1, the
/// events table gets a request-hash column and its unique request id becomes unique per (user,
/// request id); from versions 1 and 2, the answer kind `list` and the index of one release per
/// history; from versions 2 and 3, the unkeyed request hashes are erased (docs/ledger.md, "The
/// history key"); then the version is written. PostgreSQL's DDL is transactional: anything that
/// fails rolls all of it back. A ledger already at the current version is left alone.
pub fn migrate(url: &str) -> Result<Migrated> {
    let location = redact(url);
    let e = |x: postgres::Error| store_err(&location, x);
    let mut c = connect(url, &location)?;
    let mut tx = c.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])
        .map_err(e)?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('recsel_meta') IS NOT NULL", &[])
        .map_err(e)?
        .get(0);
    if !exists {
        return Err(LedgerError::Missing { location });
    }
    let version = version_from_meta(&mut |key| {
        Ok(tx
            .query_opt("SELECT value FROM recsel_meta WHERE key = $1", &[&key])?
            .map(|r| r.get(0)))
    })
    .map_err(|x| store_err(&location, x.message))?;
    let events: i64 = tx
        .query_one("SELECT count(*) FROM recsel_events", &[])
        .map_err(e)?
        .get(0);
    let done = Migrated {
        location: location.clone(),
        from: version,
        to: FORMAT_VERSION,
        events: events as u64,
    };
    match version {
        v if v == FORMAT_VERSION => return Ok(done),
        1..=3 => {}
        v => return Err(store_err(&location, version_error(v, "").message)),
    }
    if version == 1 {
        v1_to_v2(&mut tx, &location)?;
    }
    if version <= 2 {
        v2_to_v3(&mut tx, &location)?;
    }
    // The unkeyed hashes of versions 2 and 3 are erased (docs/ledger.md, "The history key").
    tx.batch_execute(
        "LOCK TABLE recsel_events IN ACCESS EXCLUSIVE MODE;
         UPDATE recsel_events SET request_hash = NULL;",
    )
    .map_err(e)?;
    tx.execute(
        "UPDATE recsel_meta SET value = $1 WHERE key = 'format_version'",
        &[&FORMAT_VERSION.to_string()],
    )
    .map_err(e)?;
    tx.commit().map_err(e)?;
    drop(c);
    Ledger::verify(&PostgresLedger::open_existing(url)?)?;
    Ok(done)
}

/// The steps from schema version 2 to 3 inside [`migrate`]'s transaction: the
/// answer kind `list` and the index of one release per history.
pub(super) fn v2_to_v3(tx: &mut Transaction<'_>, location: &str) -> Result<()> {
    let old = single_constraint(tx, location, 'c', "answer_kind", "check")?;
    tx.batch_execute(&format!(
        "LOCK TABLE recsel_events IN ACCESS EXCLUSIVE MODE;
         ALTER TABLE recsel_events DROP CONSTRAINT \"{old}\";
         ALTER TABLE recsel_events ADD CHECK \
             (answer_kind IN ('item', 'list', 'none', 'fallback'));
         {release};",
        release = release_index(DIALECT, "recsel_events_by_release", "recsel_events"),
    ))
    .map_err(|x| store_err(location, x))
}

/// The steps from schema version 1 to 2 inside [`migrate`]'s transaction: the
/// request-hash column, and request ids unique per user.
pub(super) fn v1_to_v2(tx: &mut Transaction<'_>, location: &str) -> Result<()> {
    let old = single_constraint(tx, location, 'u', "request_id", "unique")?;
    tx.batch_execute(&format!(
        "LOCK TABLE recsel_events IN ACCESS EXCLUSIVE MODE;
         ALTER TABLE recsel_events ADD COLUMN {hash};
         ALTER TABLE recsel_events DROP CONSTRAINT \"{old}\";
         ALTER TABLE recsel_events ADD UNIQUE (user_id, request_id);",
        hash = hash_column(DIALECT),
    ))
    .map_err(|x| store_err(location, x))
}

/// The name of the one constraint of type `contype` ('c' check, 'u' unique) on the single
/// column `column` of `recsel_events`, whatever it was named; an error (nothing changed) unless
/// there is exactly one.
fn single_constraint(
    tx: &mut Transaction<'_>,
    location: &str,
    contype: char,
    column: &str,
    what: &str,
) -> Result<String> {
    let names: Vec<String> = tx
        .query(
            "SELECT c.conname FROM pg_constraint c \
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) \
             WHERE c.conrelid = 'recsel_events'::regclass AND c.contype = $1::text::\"char\" \
             AND array_length(c.conkey, 1) = 1 AND a.attname::text = $2::text",
            &[&contype.to_string(), &column],
        )
        .map_err(|x| store_err(location, x))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(store_err(
            location,
            format!(
                "expected one {what} constraint on recsel_events.{column}, found {}; nothing \
                 was changed",
                names.len()
            ),
        )),
    }
}
