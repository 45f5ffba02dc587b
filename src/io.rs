//! File-system helpers below every stage: atomic writes and output folders.
//!
//! Every file recsel writes — tables, plots, configurations, model files, resumable chunks — goes
//! through [`write_atomic`]: the bytes go to a hidden temporary file in the same folder, which is then
//! renamed over the target, so an interrupted run never leaves a half-written file behind.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A hidden temporary path beside `path` (same folder, so the rename is atomic), keeping its
/// extension.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}{ext}", std::process::id()))
}

/// Writes `bytes` to `path` atomically (temporary file + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_path(path);
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// Creates `dir` and its parents.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))
}

/// Peak resident memory of this process in MB (VmHWM, Linux), if the kernel reports it.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
