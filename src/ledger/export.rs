//! The ledger's export format and a verifying import (docs/ledger.md, "Export format").
//!
//! JSON lines, one object per line, in three parts:
//!
//! 1. a header: `{"format": "recsel-ledger-export", "version": 4, "budget": "1",
//!    "budget_units": 1000000000, "period": "day", "exported": "…Z", "recsel_version": "…"}`;
//! 2. one line per event, in commit order: `{"seq": 1, "user": "u1", "request_id": "r1",
//!    "mechanism": "mgem", "units": 100000000, "epsilon": "0.1", "time": "2026-11-25T09:07:46.123Z",
//!    "time_ms": 1795597666123, "window_ms": 1795564800000, "answer": {"item": "42"},
//!    "request_hash": HEX}` — the answer is `{"item": ID}`, `{"fallback": ID}` or
//!    `"no_candidate"`; `request_hash` (64 hex digits) is absent for an event stored before
//!    hashes were kept;
//! 3. a trailer: `{"end": true, "events": N, "units": TOTAL, "sha256": HEX}` — the counts detect
//!    a truncated file, and `sha256` is the SHA-256 of every byte before the trailer (each line
//!    with its `\n`), so an edit that keeps the counts (an event deleted and the counts fixed,
//!    an event moved to another user, an item changed) is detected too. With an operator key
//!    the trailer also carries `hmac_sha256`, the HMAC-SHA256 of the same bytes under the key:
//!    only a holder of the key can make an export that imports with it.
//!
//! `units` (integers, 10⁻⁹ ε) are authoritative; `epsilon` and `time` are there for people and
//! must agree with them. The import checks every line and replays the log: sequence numbers
//! increase, (user, request id) pairs are unique, request hashes are well formed, user and request ids hold no control characters, each
//! event's window is its period's window of its time, a fallback costs 0, no (user, window) total
//! exceeds the budget, the trailer's counts match, then the checksum (and the HMAC, when a key is
//! given). Version 3 exports (unkeyed request hashes, written before the history key) import as
//! events without a hash — an unkeyed hash cannot be compared with a keyed one, so those
//! requests are charged again (docs/ledger.md, "The history key"); version 2 exports (no
//! request hashes) import as events without a hash; version 1 exports (no checksum either)
//! still import without a key, unchecked by content.

use std::io::{BufRead, Write};

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    Answer, Event, Ledger, LedgerError, Period, RequestHash, Result, Settings, Timestamp, Units,
};

/// The header's `format` value.
pub const EXPORT_FORMAT: &str = "recsel-ledger-export";
/// The export layout version (2: the trailer carries a checksum; 3: events carry their request
/// hash; 4: the request hashes are keyed, HMAC-SHA256 under the history key).
pub const EXPORT_VERSION: u32 = 4;

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_hash: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    end: bool,
    events: u64,
    units: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hmac_sha256: Option<String>,
}

/// How an export is sealed or checked: the operator's HMAC key, if any, and whether the content
/// checksum is checked on import (`accept_edits` skips it, for a deliberate edit such as a new
/// budget in the header; every other check still runs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Seal<'a> {
    /// The HMAC-SHA256 key: written into the trailer on export, required and checked on import.
    pub key: Option<&'a [u8]>,
    /// Import an export whose checksum does not match (never with a key).
    pub accept_edits: bool,
}

/// The running digests of the lines before the trailer.
struct Digests {
    sha: Sha256,
    mac: Option<Hmac<Sha256>>,
}

impl Digests {
    fn new(key: Option<&[u8]>) -> Result<Self> {
        let mac = key
            .map(|k| {
                Hmac::<Sha256>::new_from_slice(k)
                    .map_err(|e| LedgerError::Invalid(format!("the HMAC key: {e}")))
            })
            .transpose()?;
        Ok(Digests {
            sha: Sha256::new(),
            mac,
        })
    }

    fn line(&mut self, text: &str) {
        for part in [text.as_bytes(), b"\n"] {
            self.sha.update(part);
            if let Some(m) = &mut self.mac {
                m.update(part);
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The least bytes an operator key holds.
pub const MIN_KEY_BYTES: usize = 16;

/// An operator key (the ledger export's HMAC key, the release key): the bytes of the file at
/// `path` without surrounding whitespace, at least [`MIN_KEY_BYTES`]. A key is only ever read
/// from a file, never taken on a command line (where `ps` and shell histories show it).
pub fn read_key_file(path: &std::path::Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| {
        LedgerError::Invalid(format!("reading the key file {}: {e}", path.display()))
    })?;
    let key = bytes.trim_ascii().to_vec();
    if key.len() < MIN_KEY_BYTES {
        return Err(LedgerError::Invalid(format!(
            "{}: a key needs at least {MIN_KEY_BYTES} bytes, found {}",
            path.display(),
            key.len()
        )));
    }
    Ok(key)
}

/// The HMAC-SHA256 of `data` under `key`, as 64 hex digits: how an export's trailer and a
/// release's signature are sealed.
pub fn hmac_sha256_hex(key: &[u8], data: &[u8]) -> Result<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key)
        .map_err(|e| LedgerError::Invalid(format!("the HMAC key: {e}")))?;
    mac.update(data);
    Ok(hex(&mac.finalize().into_bytes()))
}

/// Whether `given` (hex) is the HMAC-SHA256 of `data` under `key` (compared in constant time).
pub fn hmac_sha256_matches(key: &[u8], data: &[u8], given: &str) -> bool {
    let (Ok(mut mac), Some(given)) = (Hmac::<Sha256>::new_from_slice(key), unhex(given)) else {
        return false;
    };
    mac.update(data);
    mac.verify_slice(&given).is_ok()
}

/// The SHA-256 of `data`, as 64 hex digits.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
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

/// Writes the whole log of `ledger` to `out` (a consistent snapshot), with its checksum.
pub fn export(ledger: &dyn Ledger, out: &mut dyn Write) -> Result<Summary> {
    export_sealed(ledger, out, Seal::default())
}

/// [`export`], with the HMAC of `seal.key` in the trailer when given.
pub fn export_sealed(ledger: &dyn Ledger, out: &mut dyn Write, seal: Seal<'_>) -> Result<Summary> {
    let mut digests = Digests::new(seal.key)?;
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
    let text = json(&header);
    digests.line(&text);
    writeln!(out, "{text}").map_err(io)?;
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
            request_hash: e.request_hash.map(|h| h.hex()),
        };
        let text = json(&line);
        digests.line(&text);
        writeln!(out, "{text}").map_err(io)?;
        n += 1;
        total = total.checked_add(e.units)?;
        Ok(())
    })?;
    let trailer = Trailer {
        end: true,
        events: n,
        units: total.get(),
        sha256: Some(hex(&digests.sha.finalize())),
        hmac_sha256: digests.mac.map(|m| hex(&m.finalize().into_bytes())),
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
    /// Whether the trailer carries an HMAC that was not checked (read without a key): the
    /// export was sealed by an operator, and only its checksum vouches for it now.
    pub unchecked_hmac: bool,
}

/// Reads and verifies an export; `source` names it in errors.
pub fn read(input: &mut dyn BufRead, source: &str) -> Result<Verified> {
    read_sealed(input, source, Seal::default())
}

/// [`read`], checking the HMAC of `seal.key` when given (an export without one is refused).
pub fn read_sealed(input: &mut dyn BufRead, source: &str, seal: Seal<'_>) -> Result<Verified> {
    let mut digests = Digests::new(seal.key)?;
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
    digests.line(&text);
    let header: Header =
        serde_json::from_str(&text).map_err(|e| bad(i, format!("not an export header: {e}")))?;
    if header.format != EXPORT_FORMAT || !(1..=EXPORT_VERSION).contains(&header.version) {
        return Err(bad(
            i,
            format!(
                "format '{}' version {}; this recsel reads '{EXPORT_FORMAT}' versions 1 to \
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
    let unchecked_hmac = loop {
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
            check_seal(&t, header.version, digests, seal).map_err(|m| bad(i, m))?;
            break seal.key.is_none() && t.hmac_sha256.is_some();
        }
        digests.line(&text);
        let l: Line = serde_json::from_str(&text).map_err(|e| bad(i, format!("bad event: {e}")))?;
        let units = Units::new(l.units)?;
        let time = Timestamp(l.time_ms);
        let request_hash = match &l.request_hash {
            None => None,
            Some(_) if header.version < 3 => {
                return Err(bad(
                    i,
                    format!(
                        "request_hash in a version {} export (hashes came with version 3)",
                        header.version
                    ),
                ))
            }
            Some(h) => Some(
                RequestHash::from_hex(h)
                    .filter(|x| x.hex() == *h)
                    .ok_or_else(|| {
                        bad(
                            i,
                            format!("request_hash '{h}' is not 64 lowercase hex digits"),
                        )
                    })?,
            )
            // An unkeyed hash (before version 4) is dropped: it matches no keyed one.
            .filter(|_| header.version >= 4),
        };
        let checks = [
            (l.seq > last_seq, format!("seq {} after {last_seq}", l.seq)),
            (
                seen.insert((l.user.clone(), l.request_id.clone())),
                format!(
                    "request id '{}' of user '{}' appears twice",
                    l.request_id, l.user
                ),
            ),
            (
                !l.user.is_empty() && !l.request_id.is_empty(),
                "an empty user or request id".into(),
            ),
            (
                !(l.user.chars().any(char::is_control)
                    || l.request_id.chars().any(char::is_control)),
                format!(
                    "a control character in user {:?} or request id {:?}",
                    l.user, l.request_id
                ),
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
            request_hash,
        });
    };
    let summary = Summary {
        events: events.len() as u64,
        units: total,
    };
    Ok(Verified {
        settings,
        events,
        summary,
        unchecked_hmac,
    })
}

/// The trailer's checksum and HMAC against the digests of the lines read; the error in words.
fn check_seal(
    t: &Trailer,
    version: u32,
    digests: Digests,
    seal: Seal<'_>,
) -> std::result::Result<(), String> {
    if let Some(mac) = digests.mac {
        let given = t
            .hmac_sha256
            .as_deref()
            .ok_or("the export carries no HMAC (hmac_sha256); it was not sealed with a key")?;
        let given = unhex(given).ok_or("hmac_sha256 is not hex")?;
        return mac.verify_slice(&given).map_err(|_| {
            "the HMAC does not match: the export was edited, or sealed with another key".into()
        });
    }
    if version < 2 || seal.accept_edits {
        return Ok(());
    }
    let given = t.sha256.as_deref().ok_or("the trailer carries no sha256")?;
    if given != hex(&digests.sha.finalize()) {
        return Err(
            "the lines' SHA-256 does not match the trailer's sha256: the export was edited or \
             damaged after it was written (import a deliberate edit with --accept-edits)"
                .into(),
        );
    }
    Ok(())
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
