//! The release key (docs/deployment.md, "Signed releases"): an optional HMAC-SHA256 over the
//! SHA-256 digests of every file a release is served from, so that a release edited by anyone
//! without the key is refused.
//!
//! The CRC-32s in `release.json`, `model.json` and `tuning.json` detect accidents (a truncated
//! copy, a file from another fit), not edits: whoever changes a file can recompute its CRC. With
//! a key — the file named by the environment variable [`KEY_ENV`], never the key itself on a
//! command line — `recsel fit` and `recsel tune` write `release.sig` beside the release: the
//! name and SHA-256 of each signed file and the HMAC-SHA256 of that list under the key. Every
//! reader of a release (`Release::read` and the tuning's reader, under `recsel recommend`,
//! `recsel serve`, `recsel privacy`, the audit and Python) run with the key refuses a release
//! without `release.sig`, with another HMAC, or with a file it reads whose digest differs or
//! that the signature does not list. Without the key nothing is checked beyond the CRCs, and
//! every report says that the release is unsigned. This file is the mechanism; which files a
//! release has is said by their readers (`Release::signed_files`, `Tuning::signed_files`).
//!
//! The signed files: `model.json` and the weight files it lists, `release.json` and the files it
//! lists (`calibration.npz`, `privacy.json`), and `tuning.json` and `tuning.npz` when present.
//! The HMAC is over the text `recsel-release-signature 1\n` followed by one line `NAME SHA256\n`
//! per file, sorted by name; the HMAC and the digests are the ledger export's
//! ([`crate::ledger::export`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::ledger::export::{hmac_sha256_hex, hmac_sha256_matches, read_key_file, sha256_hex};

/// The signature's file name, beside `release.json`.
pub const SIGNATURE: &str = "release.sig";
/// The signature's `format` field.
pub const FORMAT: &str = "recsel-release-signature";
/// The signature's layout version.
pub const VERSION: u32 = 1;
/// The environment variable that names the release key's file.
pub const KEY_ENV: &str = "RECSEL_RELEASE_KEY_FILE";

/// One signed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedFile {
    /// File name inside the model directory.
    pub name: String,
    /// SHA-256 of its bytes, 64 hex digits.
    pub sha256: String,
}

/// Content of `release.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub format_version: u32,
    /// The signed files, sorted by name.
    pub files: Vec<SignedFile>,
    /// HMAC-SHA256 of `Signature::message` under the release key, 64 hex digits.
    pub hmac_sha256: String,
}

impl Signature {
    /// The bytes the HMAC covers: the format line, then `NAME SHA256` per file.
    fn message(format_version: u32, files: &[SignedFile]) -> Vec<u8> {
        let mut m = format!("{FORMAT} {format_version}\n");
        for f in files {
            m.push_str(&format!("{} {}\n", f.name, f.sha256));
        }
        m.into_bytes()
    }
}

/// Whether a release was checked against a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Read with the key: `release.sig` verified and every signed file's digest matched.
    Signed {
        /// Files checked.
        files: usize,
    },
    /// Read without a key: only the CRC-32s were checked.
    Unsigned,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Signed { files } => write!(
                f,
                "release signature: verified ({SIGNATURE}: HMAC-SHA256 under the key of \
                 {KEY_ENV} over the SHA-256 of {files} files)"
            ),
            Status::Unsigned => write!(
                f,
                "release signature: UNSIGNED (no {KEY_ENV}): the release's files are checked by \
                 CRC-32 only, which detects accidents, not edits; anyone who can write the model \
                 directory can change this report or the bounds and recompute the CRCs \
                 (docs/deployment.md, \"Signed releases\")"
            ),
        }
    }
}

/// The release key named by [`KEY_ENV`], if set: an unreadable or short key is an error, never
/// taken for no key.
pub fn key_from_env() -> Result<Option<Vec<u8>>> {
    match std::env::var_os(KEY_ENV) {
        None => Ok(None),
        Some(p) if p.is_empty() => Ok(None),
        Some(p) => Ok(Some(
            read_key_file(Path::new(&p)).map_err(|e| Error::Invalid(format!("{KEY_ENV}: {e}")))?,
        )),
    }
}

/// The names listed in the `files` field of the JSON file at `path` (`model.json` lists its
/// weight files, `release.json` its arrays and report).
pub fn listed_files(path: &Path) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    #[derive(Deserialize)]
    struct Listing {
        #[serde(default)]
        files: Vec<Named>,
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let l: Listing = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    Ok(l.files.into_iter().map(|f| f.name).collect())
}

/// `names` sorted, each once, checked to be plain file names.
fn plain(dir: &Path, names: &[String]) -> Result<Vec<String>> {
    let mut names = names.to_vec();
    for n in &names {
        if n.is_empty() || n.contains('/') || n.contains('\\') || n == ".." || n == SIGNATURE {
            return Err(Error::Invalid(format!(
                "{}: a release file may not be named '{n}'",
                dir.display()
            )));
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

fn digest(dir: &Path, name: &str) -> Result<String> {
    let p: PathBuf = dir.join(name);
    let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    Ok(sha256_hex(&bytes))
}

/// Signs the release in `dir` with `key`: writes `release.sig` over the files `names`.
pub fn sign(dir: &Path, key: &[u8], names: &[String]) -> Result<Signature> {
    let files = plain(dir, names)?
        .into_iter()
        .map(|name| {
            Ok(SignedFile {
                sha256: digest(dir, &name)?,
                name,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let hmac_sha256 = hmac_sha256_hex(key, &Signature::message(VERSION, &files))?;
    let sig = Signature {
        format: FORMAT.into(),
        format_version: VERSION,
        files,
        hmac_sha256,
    };
    let json = serde_json::to_vec_pretty(&sig)
        .map_err(|e| Error::Invalid(format!("serialising {SIGNATURE}: {e}")))?;
    write_atomic(&dir.join(SIGNATURE), &json)?;
    Ok(sig)
}

/// Signs the files `names` of the release in `dir` when [`KEY_ENV`] names a key (what `recsel
/// fit` and `recsel tune` call after writing); the status either way.
pub fn sign_if_keyed(dir: &Path, names: &[String]) -> Result<Status> {
    match key_from_env()? {
        Some(key) => Ok(Status::Signed {
            files: sign(dir, &key, names)?.files.len(),
        }),
        None => Ok(Status::Unsigned),
    }
}

/// Checks the files `names` of the release in `dir` against `key`: `release.sig` present and
/// sealed with the key, and each of `names` signed there with its SHA-256 now. The error names
/// the file and what differs.
pub fn verify(dir: &Path, key: &[u8], names: &[String]) -> Result<Status> {
    let path = dir.join(SIGNATURE);
    let refuse = |why: String| {
        Error::Invalid(format!(
            "release {}: {why}; with {KEY_ENV} set, only a release signed with that key is \
             served (sign it by running `recsel fit` or `recsel tune` with the key)",
            dir.display()
        ))
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(format!("no {SIGNATURE}: the release is unsigned")))
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    let sig: Signature =
        serde_json::from_slice(&bytes).map_err(|e| refuse(format!("{}: {e}", path.display())))?;
    if sig.format != FORMAT || sig.format_version != VERSION {
        return Err(refuse(format!(
            "{}: format '{}' version {} (this recsel reads '{FORMAT}' version {VERSION})",
            path.display(),
            sig.format,
            sig.format_version
        )));
    }
    if !hmac_sha256_matches(
        key,
        &Signature::message(sig.format_version, &sig.files),
        &sig.hmac_sha256,
    ) {
        return Err(refuse(format!(
            "{}: the HMAC does not match: the signature was edited, or made with another key",
            path.display()
        )));
    }
    for name in plain(dir, names)? {
        let Some(f) = sig.files.iter().find(|f| f.name == name) else {
            return Err(refuse(format!(
                "{}: not signed by {SIGNATURE} (written after the signature, without the key?)",
                dir.join(&name).display()
            )));
        };
        let now = digest(dir, &name)?;
        if now != f.sha256 {
            return Err(refuse(format!(
                "{}: SHA-256 {now}, but {SIGNATURE} signs {}: the file changed after the release \
                 was signed",
                dir.join(&name).display(),
                f.sha256
            )));
        }
    }
    Ok(Status::Signed {
        files: sig.files.len(),
    })
}

/// Checks the files `names` of the release in `dir` against the key of [`KEY_ENV`] when set
/// ([`verify`]); without a key, [`Status::Unsigned`]. Each reader checks the files it reads:
/// `Release::read` the model and the release, the tuning's reader its two files.
pub fn check(dir: &Path, names: &[String]) -> Result<Status> {
    match key_from_env()? {
        Some(key) => verify(dir, &key, names),
        None => Ok(Status::Unsigned),
    }
}
