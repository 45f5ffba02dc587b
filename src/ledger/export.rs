//! The ledger's export format and a verifying import (docs/ledger.md, "Export format").
//!
//! JSON lines, one object per line, in three parts:
//!
//! 1. a header: `{"format": "recsel-ledger-export", "version": 1, "budget": "1",
//!    "budget_units": 1000000000, "period": "day", "exported": "…Z", "recsel_version": "…"}`;
//! 2. one line per event, in commit order: `{"seq": 1, "user": "u1", "request_id": "r1",
//!    "mechanism": "mgem", "units": 100000000, "epsilon": "0.1", "time": "2026-11-25T09:07:46.123Z",
//!    "time_ms": 1795597666123, "window_ms": 1795564800000, "answer": {"item": "42"}}` — the
//!    answer is `{"item": ID}`, `{"fallback": ID}` or `"no_candidate"`;
//! 3. a trailer: `{"end": true, "events": N, "units": TOTAL}`, so a truncated file is detected.
//!
//! `units` (integers, 10⁻⁹ ε) are authoritative; `epsilon` and `time` are there for people and
//! must agree with them. The import checks every line and replays the log: sequence numbers
//! increase, request ids are unique, each event's window is its period's window of its time, a
//! fallback costs 0, no (user, window) total exceeds the budget, and the trailer's counts match.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use super::{Answer, Event, Ledger, LedgerError, Period, Result, Settings, Timestamp, Units};

/// The header's `format` value.
pub const EXPORT_FORMAT: &str = "recsel-ledger-export";
/// The export layout version.
pub const EXPORT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    budget: String,
    budget_units: u64,
    period: Period,
    exported: String,
    recsel_version: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    seq: u64,
    user: String,
    request_id: String,
    mechanism: String,
    units: u64,
    epsilon: String,
    time: String,
    time_ms: i64,
    window_ms: i64,
    answer: Answer,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    end: bool,
    events: u64,
    units: u64,
}

/// What an export or an import covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Events.
    pub events: u64,
    /// Their total charge.
    pub units: Units,
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plain structs serialise")
}

/// Writes the whole log of `ledger` to `out` (a consistent snapshot).
pub fn export(ledger: &dyn Ledger, out: &mut dyn Write) -> Result<Summary> {
    let s = ledger.settings();
    let io = |e: std::io::Error| LedgerError::Invalid(format!("writing the export: {e}"));
    let header = Header {
        format: EXPORT_FORMAT.into(),
        version: EXPORT_VERSION,
        budget: s.budget.to_string(),
        budget_units: s.budget.get(),
        period: s.period,
        exported: Timestamp::now().to_string(),
        recsel_version: env!("CARGO_PKG_VERSION").into(),
    };
    writeln!(out, "{}", json(&header)).map_err(io)?;
    let mut n = 0u64;
    let mut total = Units::ZERO;
    ledger.log().for_each_event(&mut |e: &Event| {
        let line = Line {
            seq: e.seq,
            user: e.user.clone(),
            request_id: e.request_id.clone(),
            mechanism: e.mechanism.clone(),
            units: e.units.get(),
            epsilon: e.units.to_string(),
            time: e.time.to_string(),
            time_ms: e.time.0,
            window_ms: e.window.0,
            answer: e.answer.clone(),
        };
        writeln!(out, "{}", json(&line)).map_err(io)?;
        n += 1;
        total = total.checked_add(e.units)?;
        Ok(())
    })?;
    let trailer = Trailer {
        end: true,
        events: n,
        units: total.get(),
    };
    writeln!(out, "{}", json(&trailer)).map_err(io)?;
    out.flush().map_err(io)?;
    Ok(Summary {
        events: n,
        units: total,
    })
}

/// An export read and verified, ready to import.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The exported ledger's settings.
    pub settings: Settings,
    /// Its events, in commit order.
    pub events: Vec<Event>,
    /// Counts.
    pub summary: Summary,
}

/// Reads and verifies an export; `source` names it in errors.
pub fn read(input: &mut dyn BufRead, source: &str) -> Result<Verified> {
    let mut lines = input.lines().enumerate();
    let bad = |line: usize, message: String| LedgerError::Import {
        context: format!("{source} line {}", line + 1),
        message,
    };
    let mut next = || -> Result<Option<(usize, String)>> {
        match lines.next() {
            None => Ok(None),
            Some((i, Ok(l))) => Ok(Some((i, l))),
            Some((i, Err(e))) => Err(bad(i, e.to_string())),
        }
    };
    let (i, text) = next()?.ok_or_else(|| bad(0, "the file is empty".into()))?;
    let header: Header =
        serde_json::from_str(&text).map_err(|e| bad(i, format!("not an export header: {e}")))?;
    if header.format != EXPORT_FORMAT || header.version != EXPORT_VERSION {
        return Err(bad(
            i,
            format!(
                "format '{}' version {}; this recsel reads '{EXPORT_FORMAT}' version \
                 {EXPORT_VERSION}",
                header.format, header.version
            ),
        ));
    }
    let budget = Units::new(header.budget_units)?;
    if Units::budget(&header.budget)? != budget {
        return Err(bad(
            i,
            format!(
                "budget '{}' disagrees with budget_units {}",
                header.budget, header.budget_units
            ),
        ));
    }
    let settings = Settings {
        budget,
        period: header.period,
    };
    let mut events = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut windows: std::collections::HashMap<(String, i64), Units> = Default::default();
    let mut total = Units::ZERO;
    let mut last_seq = 0u64;
    loop {
        let (i, text) = next()?.ok_or_else(|| LedgerError::Import {
            context: source.into(),
            message: "no trailer line: the export is cut short".into(),
        })?;
        if text.starts_with("{\"end\"") {
            let t: Trailer =
                serde_json::from_str(&text).map_err(|e| bad(i, format!("bad trailer: {e}")))?;
            if !t.end || t.events != events.len() as u64 || t.units != total.get() {
                return Err(bad(
                    i,
                    format!(
                        "the trailer counts {} events of {} units; the file has {} of {}",
                        t.events,
                        t.units,
                        events.len(),
                        total.get()
                    ),
                ));
            }
            if let Some((j, _)) = next()? {
                return Err(bad(j, "lines after the trailer".into()));
            }
            break;
        }
        let l: Line = serde_json::from_str(&text).map_err(|e| bad(i, format!("bad event: {e}")))?;
        let units = Units::new(l.units)?;
        let time = Timestamp(l.time_ms);
        let checks = [
            (l.seq > last_seq, format!("seq {} after {last_seq}", l.seq)),
            (
                seen.insert(l.request_id.clone()),
                format!("request id '{}' appears twice", l.request_id),
            ),
            (
                !l.user.is_empty() && !l.request_id.is_empty(),
                "an empty user or request id".into(),
            ),
            (
                Units::charge(&l.epsilon).ok() == Some(units),
                format!("epsilon '{}' disagrees with units {}", l.epsilon, l.units),
            ),
            (
                Timestamp::parse(&l.time).ok() == Some(time),
                format!("time '{}' disagrees with time_ms {}", l.time, l.time_ms),
            ),
            (
                settings.period.window(time).start.0 == l.window_ms,
                format!(
                    "window_ms {} is not the {} window of {}",
                    l.window_ms, settings.period, l.time
                ),
            ),
            (
                !l.answer.is_fallback() || units == Units::ZERO,
                "a fallback with a charge".into(),
            ),
        ];
        if let Some((_, why)) = checks.into_iter().find(|(ok, _)| !ok) {
            return Err(bad(i, why));
        }
        let w = windows.entry((l.user.clone(), l.window_ms)).or_default();
        *w = w.checked_add(units)?;
        if *w > budget {
            return Err(bad(
                i,
                format!(
                    "user '{}' spends {} in the window of {}, over the budget {budget}",
                    l.user, *w, l.time
                ),
            ));
        }
        total = total.checked_add(units)?;
        last_seq = l.seq;
        events.push(Event {
            seq: l.seq,
            user: l.user,
            request_id: l.request_id,
            mechanism: l.mechanism,
            units,
            time,
            window: Timestamp(l.window_ms),
            answer: l.answer,
        });
    }
    let summary = Summary {
        events: events.len() as u64,
        units: total,
    };
    Ok(Verified {
        settings,
        events,
        summary,
    })
}

/// Imports a verified export into `ledger`, which must be empty and have the export's settings.
pub fn import(ledger: &dyn Ledger, verified: &Verified) -> Result<Summary> {
    if ledger.settings() != verified.settings {
        return Err(LedgerError::Invalid(format!(
            "{}: the ledger holds {}; the export {}",
            ledger.location(),
            ledger.settings(),
            verified.settings
        )));
    }
    ledger.import_events(&verified.events)?;
    Ok(verified.summary)
}
