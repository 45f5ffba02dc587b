//! The output of `recsel recommend --ledger` (docs/ledger.md, "The batch command"): one row per
//! request with its outcome, as CSV, Parquet (string columns) or JSON lines:
//!
//! `user,request_id,status,item,epsilon,remaining,retry_after,replayed`
//!
//! * `status` — `recommended` (a private item, charged), `no_candidate` (charged, nothing to
//!   recommend), `fallback` (the public fallback item, 0 ε), `refused` (budget exhausted, no
//!   item), `rejected` (the user's request id was used for a different request, or a field is
//!   invalid);
//! * `epsilon` — what the answer cost (exact decimal; once, even if replayed);
//! * `remaining` — the user's budget left in the window after this request (empty for a replay);
//! * `retry_after` — for `refused` and `fallback`, when the next window starts (RFC 3339, UTC);
//! * `item` — the released item; for a list (`--k K`), its items in order, separated by spaces;
//! * `replayed` — `true` when the request id had been charged before (an earlier attempt of the
//!   same run, or a reused id) and the stored answer was returned.

use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::ledger::{Answer, Outcome, Units};
use crate::recommend::input::FileFormat;
use crate::recommend::ledgered::BatchRequest;

/// One output row.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    /// The user.
    pub user: String,
    /// The request id.
    pub request_id: String,
    /// See the module documentation.
    pub status: &'static str,
    /// The released item, if any.
    pub item: Option<String>,
    /// Its cost.
    pub epsilon: Option<Units>,
    /// Budget left in the window.
    pub remaining: Option<Units>,
    /// When the user may ask again.
    pub retry_after: Option<String>,
    /// Whether the stored answer was returned.
    pub replayed: bool,
}

fn status_of(a: &Answer) -> &'static str {
    match a {
        Answer::Item(_) | Answer::List(_) => "recommended",
        Answer::NoCandidate => "no_candidate",
        Answer::Fallback(_) => "fallback",
    }
}

/// The `item` column of an answer: its item, or a list's items in order separated by spaces.
fn item_text(a: &Answer) -> Option<String> {
    match a {
        Answer::List(l) => Some(l.join(" ")),
        a => a.item().map(str::to_string),
    }
}

/// The row of one request and its outcome.
pub fn row(req: &BatchRequest, outcome: &Outcome) -> LedgerRow {
    let mut r = LedgerRow {
        user: req.user.clone(),
        request_id: req.request_id.clone(),
        status: "refused",
        item: None,
        epsilon: None,
        remaining: None,
        retry_after: None,
        replayed: false,
    };
    match outcome {
        Outcome::Charged {
            answer,
            charged,
            remaining,
            ..
        } => {
            r.status = status_of(answer);
            r.item = item_text(answer);
            r.epsilon = Some(*charged);
            r.remaining = Some(*remaining);
        }
        Outcome::Replayed { event } => {
            r.status = status_of(&event.answer);
            r.item = item_text(&event.answer);
            r.epsilon = Some(event.units);
            r.replayed = true;
        }
        Outcome::Refused {
            remaining,
            retry_after,
            ..
        } => {
            r.remaining = Some(*remaining);
            r.retry_after = retry_after.map(|t| t.to_string());
        }
        Outcome::Fallback {
            item,
            remaining,
            retry_after,
        } => {
            r.status = "fallback";
            r.item = Some(item.clone());
            r.epsilon = Some(Units::ZERO);
            r.remaining = Some(*remaining);
            r.retry_after = retry_after.map(|t| t.to_string());
        }
        Outcome::Rejected { .. } => r.status = "rejected",
    }
    r
}

const COLUMNS: [&str; 8] = [
    "user",
    "request_id",
    "status",
    "item",
    "epsilon",
    "remaining",
    "retry_after",
    "replayed",
];

fn fields(r: &LedgerRow) -> [Option<String>; 8] {
    [
        Some(r.user.clone()),
        Some(r.request_id.clone()),
        Some(r.status.to_string()),
        r.item.clone(),
        r.epsilon.map(|u| u.to_string()),
        r.remaining.map(|u| u.to_string()),
        r.retry_after.clone(),
        Some(r.replayed.to_string()),
    ]
}

/// The output file's bytes.
pub fn ledger_rows_bytes(rows: &[LedgerRow], format: FileFormat) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(rows.len() * 64);
    match format {
        FileFormat::Csv => {
            out.extend_from_slice(COLUMNS.join(",").as_bytes());
            out.push(b'\n');
            for r in rows {
                let f = fields(r);
                let line: Vec<&str> = f.iter().map(|x| x.as_deref().unwrap_or("")).collect();
                out.extend_from_slice(line.join(",").as_bytes());
                out.push(b'\n');
            }
        }
        FileFormat::Jsonl => {
            for r in rows {
                let mut m = serde_json::Map::new();
                for (name, v) in COLUMNS.iter().zip(fields(r)) {
                    let v = match (*name, v) {
                        ("replayed", _) => serde_json::Value::Bool(r.replayed),
                        (_, Some(s)) => serde_json::Value::String(s),
                        (_, None) => serde_json::Value::Null,
                    };
                    m.insert(name.to_string(), v);
                }
                out.extend_from_slice(serde_json::Value::Object(m).to_string().as_bytes());
                out.push(b'\n');
            }
        }
        FileFormat::Parquet => {
            let cols: Vec<Column> = (0..COLUMNS.len())
                .map(|c| {
                    let v: Vec<Option<String>> =
                        rows.iter().map(|r| fields(r)[c].clone()).collect();
                    Column::new(COLUMNS[c].into(), v)
                })
                .collect();
            let mut df = DataFrame::new(rows.len(), cols)
                .map_err(|e| Error::Invalid(format!("building the outcomes table: {e}")))?;
            ParquetWriter::new(&mut out)
                .finish(&mut df)
                .map_err(|e| Error::Invalid(format!("writing Parquet: {e}")))?;
        }
    }
    Ok(out)
}

/// Writes the rows to `path` atomically.
pub fn write_ledger_rows(path: &Path, rows: &[LedgerRow], format: FileFormat) -> Result<()> {
    write_atomic(path, &ledger_rows_bytes(rows, format)?)
}
