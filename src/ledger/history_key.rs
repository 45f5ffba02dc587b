//! The secret key of the ledger's request hashes (docs/ledger.md, "The history key").
//!
//! A request hash covers the canonical history (`LedgeredRecommender::request_hash`). Unkeyed,
//! anyone who holds the ledger could hash guesses of a user's history and compare — a
//! dictionary attack that is cheap on small histories. Keyed with HMAC-SHA256 under a secret
//! that is not in the ledger, a stored hash says nothing to whoever lacks the key: without it,
//! testing a guess means guessing the key as well.
//!
//! The key is a file: `--history-key-file FILE`, or for a ledger file `LEDGER.history-key`
//! beside it, made with 32 random bytes from the operating system (mode 0600) when the ledger
//! holds no event yet. A charging command fails closed: a key that is missing for a ledger
//! that holds events, unreadable, too short, or readable by group or others stops it before
//! anything is charged. A new key means nothing stored matches any more: every history is
//! charged again (and a stored request id asked again with the new key is a different
//! request).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::export::read_key_file;
use super::{Ledger, LedgerError, Location, RequestHash, Result};

/// The file name suffix of the key beside a ledger file (`LEDGER.history-key`).
pub const KEY_SUFFIX: &str = ".history-key";

/// Bytes of a key made by [`HistoryKey::create`].
const NEW_KEY_BYTES: usize = 32;

/// The secret key of request hashes. Its bytes are never printed (`Debug` shows its id).
#[derive(Clone, PartialEq, Eq)]
pub struct HistoryKey(Vec<u8>);

impl fmt::Debug for HistoryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HistoryKey(id {})", self.id())
    }
}

impl HistoryKey {
    /// A key of these bytes (at least the 16 bytes every operator key holds).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < super::export::MIN_KEY_BYTES {
            return Err(LedgerError::Invalid(format!(
                "a history key needs at least {} bytes, got {}",
                super::export::MIN_KEY_BYTES,
                bytes.len()
            )));
        }
        Ok(HistoryKey(bytes.to_vec()))
    }

    /// The key in the file at `path` (its bytes without surrounding whitespace). Refused when
    /// the file is missing, unreadable, shorter than 16 bytes, or (on Unix) readable or
    /// writable by group or others.
    pub fn read(path: &Path) -> Result<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(m) = std::fs::metadata(path) {
                let mode = m.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(LedgerError::Invalid(format!(
                        "the history key {} has mode {mode:03o}: a key must be readable by its \
                         owner only (chmod 600 {})",
                        path.display(),
                        path.display()
                    )));
                }
            }
        }
        let bytes = read_key_file(path).map_err(|e| {
            LedgerError::Invalid(format!(
                "the history key (the secret of the ledger's request hashes): {e}"
            ))
        })?;
        Self::from_bytes(&bytes)
    }

    /// A new key of 32 random bytes from the operating system, written (as 64 hex digits) to a
    /// new file at `path` with mode 0600 and synced; an error if anything is there already.
    pub fn create(path: &Path) -> Result<Self> {
        use rand::TryRngCore;
        let mut bytes = [0u8; NEW_KEY_BYTES];
        rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|e| {
            LedgerError::Invalid(format!("cannot read OS entropy for a history key: {e}"))
        })?;
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let io = |e: std::io::Error| {
            LedgerError::Invalid(format!("writing the history key {}: {e}", path.display()))
        };
        let mut f = o.open(path).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        Self::from_bytes(text.as_bytes())
    }

    /// Where the key of the ledger file at `ledger` lives by default: `LEDGER.history-key`.
    pub fn beside(ledger: &Path) -> PathBuf {
        let mut name = ledger.as_os_str().to_owned();
        name.push(KEY_SUFFIX);
        PathBuf::from(name)
    }

    /// A short public name of the key (the first 8 bytes of its HMAC of a fixed text, hex), so
    /// that messages and `/v1/model` can say which key is in use without showing it.
    pub fn id(&self) -> String {
        let mut m = self.mac();
        m.update(b"recsel history key id");
        m.finalize().into_bytes()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// An HMAC-SHA256 under this key, empty.
    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }
}

/// Where a charging command's key comes from ([`resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `--history-key-file FILE`.
    Given(PathBuf),
    /// The file beside the ledger, which was there.
    Beside(PathBuf),
    /// The file beside the ledger, made now (the ledger held no event).
    Created(PathBuf),
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Given(p) => write!(f, "{} (--history-key-file)", p.display()),
            KeySource::Beside(p) => write!(f, "{} (beside the ledger)", p.display()),
            KeySource::Created(p) => write!(
                f,
                "{} (made now, mode 0600, beside the new ledger: back it up with the ledger)",
                p.display()
            ),
        }
    }
}

/// The history key of a charging command on the ledger `ledger` at `spec`: the file `given`
/// (`--history-key-file`), else for a ledger file the key beside it — made now if it is not
/// there and the ledger holds no event. Fails closed: a given file that cannot be read, a
/// missing key beside a ledger that holds events (its stored hashes would never match again,
/// and a key given by mistake elsewhere must not be replaced silently), and a PostgreSQL
/// ledger without `--history-key-file` (every replica must use the same key).
pub fn resolve(
    ledger: &dyn Ledger,
    spec: &str,
    given: Option<&Path>,
) -> Result<(HistoryKey, KeySource)> {
    if let Some(p) = given {
        return Ok((HistoryKey::read(p)?, KeySource::Given(p.to_path_buf())));
    }
    match Location::parse(spec) {
        Location::Postgres(_) => Err(LedgerError::Invalid(
            "a PostgreSQL ledger needs --history-key-file FILE: the secret key of its request \
             hashes, the same file on every replica (docs/ledger.md, \"The history key\"); make \
             one with `openssl rand -hex 32 > FILE && chmod 600 FILE`"
                .into(),
        )),
        Location::Sqlite(path) => {
            let beside = HistoryKey::beside(&path);
            if beside.exists() {
                return Ok((HistoryKey::read(&beside)?, KeySource::Beside(beside)));
            }
            if !ledger.log().users()?.is_empty() {
                return Err(LedgerError::Invalid(format!(
                    "the history key {} of ledger {} is missing, and the ledger holds events: \
                     nothing is charged without it (fail closed). Restore the key, or give \
                     --history-key-file FILE; a new key matches nothing stored, so every \
                     history is charged again (docs/ledger.md, \"The history key\")",
                    beside.display(),
                    path.display()
                )));
            }
            let key = HistoryKey::create(&beside)?;
            Ok((key, KeySource::Created(beside)))
        }
    }
}

/// A [`RequestHash`] built part by part (each part length-prefixed, as [`RequestHash::of`]):
/// plain SHA-256, or HMAC-SHA256 under a [`HistoryKey`] ([`RequestHasher::keyed`]) — what a
/// request hash that covers a history must be, so that the ledger's rows cannot be tested
/// against guessed histories (docs/ledger.md, "The history key").
#[derive(Clone)]
pub struct RequestHasher(HasherState);

#[derive(Clone)]
enum HasherState {
    Plain(sha2::Sha256),
    Keyed(hmac::Hmac<sha2::Sha256>),
}

impl RequestHasher {
    /// An empty hasher, unkeyed (plain SHA-256).
    pub fn new() -> Self {
        use sha2::Digest;
        RequestHasher(HasherState::Plain(sha2::Sha256::new()))
    }

    /// An empty hasher keyed with `key` (HMAC-SHA256).
    pub fn keyed(key: &HistoryKey) -> Self {
        RequestHasher(HasherState::Keyed(key.mac()))
    }

    /// Whether this hasher is keyed.
    pub fn is_keyed(&self) -> bool {
        matches!(self.0, HasherState::Keyed(_))
    }

    fn update(&mut self, bytes: &[u8]) {
        use hmac::Mac;
        use sha2::Digest;
        match &mut self.0 {
            HasherState::Plain(h) => h.update(bytes),
            HasherState::Keyed(m) => m.update(bytes),
        }
    }

    /// Adds one part.
    pub fn part(&mut self, bytes: &[u8]) {
        self.update(&(bytes.len() as u64).to_le_bytes());
        self.update(bytes);
    }

    /// The hash of the parts added.
    pub fn finish(self) -> RequestHash {
        use hmac::Mac;
        use sha2::Digest;
        match self.0 {
            HasherState::Plain(h) => RequestHash(h.finalize().into()),
            HasherState::Keyed(m) => RequestHash(m.finalize().into_bytes().into()),
        }
    }
}

impl Default for RequestHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RequestHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestHasher")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_key_is_private_to_its_owner_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("recsel-hkey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("k");
        let _ = std::fs::remove_file(&p);
        let k = HistoryKey::create(&p).unwrap();
        assert_eq!(HistoryKey::read(&p).unwrap(), k);
        assert!(HistoryKey::create(&p).is_err(), "never overwrites a key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = HistoryKey::read(&p).unwrap_err().to_string();
            assert!(e.contains("chmod 600"), "{e}");
        }
        assert!(!format!("{k:?}").contains(&String::from_utf8_lossy(&k.0).to_string()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
