//! `recsel serve`: a private recommendation service over HTTP/JSON (docs/serving.md).
//!
//! One user, one history, one item back: the history is scored and one item selected by the
//! operator's mechanism at the operator's ε over the operator's candidate policy (every item by
//! default: user-level ε-DP), on a worker pool off the async runtime; the pick is charged to the
//! user's budget in the privacy ledger through its group committer, and the response leaves only
//! after the charge is durable. A request id that was charged before gets its stored answer back
//! and is charged nothing; an exhausted user gets 429 with `Retry-After`, or the operator's public
//! fallback item at 0 ε.
//!
//! * [`options`] — [`ServeOptions`], everything the service is started with (serde; the command
//!   line only fills it in);
//! * [`api`] — request checking (each error names its field) and the error body;
//! * [`service`] — the loaded model, ledger and worker pool;
//! * [`metrics`] — the Prometheus counters;
//! * `guard` — what every request passes first: the API key, the Host allow-list, the body's
//!   media type, length and deadline, and the JSON shape of every error;
//! * `conn` — the accept loop, the connection limit, the timeouts of a connection and the
//!   shutdown deadline;
//! * `http` — the routes, readiness and the start and stop of the service ([`run`]).

pub mod api;
mod conn;
mod guard;
mod http;
pub mod metrics;
pub mod options;
pub mod service;

pub use http::{run, Served};
pub use options::{Fallback, LimitOptions, ServeConfig, ServeOptions};

use crate::ledger::LedgerError;

/// Errors of starting or running the service (a bad request is not one: it is answered).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Options that cannot be served.
    #[error("{0}")]
    Options(String),
    /// The model, the release or the mechanism.
    #[error(transparent)]
    Model(#[from] crate::error::Error),
    /// The ledger.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A file or socket, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// Anything else that should not happen.
    #[error("{0}")]
    Internal(String),
}

/// Reads the API key from `path`: the file's text without surrounding whitespace, at least 16
/// bytes of visible ASCII.
pub fn read_api_key(path: &std::path::Path) -> Result<Vec<u8>, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::Io {
        context: format!("reading the API key file {}", path.display()),
        source,
    })?;
    let key = text.trim();
    if key.len() < 16 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ServeError::Options(format!(
            "{}: an API key is at least 16 visible ASCII characters (e.g. `openssl rand -hex \
             32`), got {} characters",
            path.display(),
            key.len()
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(path) {
            if m.permissions().mode() & 0o004 != 0 {
                eprintln!(
                    "recsel serve: warning: {} is readable by every user of this machine \
                     (chmod 600 it)",
                    path.display()
                );
            }
        }
    }
    Ok(key.as_bytes().to_vec())
}

/// Compares two byte strings in time that depends only on their lengths (the key's length is
/// not secret; its bytes are).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_equal_only_when_equal() {
        assert!(constant_time_eq(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!constant_time_eq(b"abcdefghijklmnop", b"abcdefghijklmnoq"));
        assert!(!constant_time_eq(b"abcdefghijklmnop", b"abcdefghijklmno"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn a_short_or_missing_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        std::fs::write(&p, "short\n").unwrap();
        assert!(read_api_key(&p).unwrap_err().to_string().contains("16"));
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        assert_eq!(read_api_key(&p).unwrap(), b"0123456789abcdef0123");
        assert!(read_api_key(&dir.path().join("none")).is_err());
    }
}
