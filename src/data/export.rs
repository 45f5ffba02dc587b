//! Writes a split [`Dataset`] as a LightGCN directory (`train.txt`, `test.txt`: lines
//! `user item item …`), the format [`load_lightgcn`](super::load::load_lightgcn) and the Python
//! SANSA reference read, so that both can be fitted and evaluated on the very same interactions.
//!
//! LightGCN files carry their own protocol (docs/protocol.md, step 3, Amazon Books): the model is
//! fitted on every row of `train.txt`, and every user with a `test.txt` row is a test user scored
//! from their `train.txt` row. The export keeps the split it is given: the training users' rows,
//! then each test user's input row, go to `train.txt` (users numbered in that order, from 0), and
//! the test users' held-out targets go to `test.txt`. The validation users are left out (no fit
//! uses them). Read back, the test users, their inputs and targets are the data set's own; the
//! fitted rows are the training rows plus the test users' inputs, as LightGCN's protocol has it.

use std::io::Write;
use std::path::Path;

use super::{Csr, Dataset};
use crate::error::{Error, Result};
use crate::io::{ensure_dir, temp_path};

/// Counts of what [`write_lightgcn`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LightGcnExport {
    /// Users in `train.txt` (training users, then test users).
    pub users: usize,
    /// Test users (lines of `test.txt`).
    pub test_users: usize,
    /// Item columns of the data set (ids `0..items`).
    pub items: usize,
    /// Interactions in `train.txt`.
    pub train_interactions: usize,
    /// Interactions in `test.txt`.
    pub test_interactions: usize,
}

/// Writes `ds` into `dir` as `train.txt` and `test.txt` (module docs); each file goes to a
/// temporary name first and is renamed into place, so an interrupted export leaves no file that
/// looks complete. Item ids are the data set's column indices.
pub fn write_lightgcn(ds: &Dataset, dir: &Path) -> Result<LightGcnExport> {
    ensure_dir(dir)?;
    let n_train = ds.train.rows();
    let n_test = ds.test_input.rows();
    let train_rows = (0..n_train)
        .map(|u| (u, &ds.train, u))
        .chain((0..n_test).map(|t| (n_train + t, &ds.test_input, t)));
    let train_interactions = write_rows(&dir.join("train.txt"), train_rows)?;
    let test_rows = (0..n_test).map(|t| (n_train + t, &ds.test_target, t));
    let test_interactions = write_rows(&dir.join("test.txt"), test_rows)?;
    Ok(LightGcnExport {
        users: n_train + n_test,
        test_users: n_test,
        items: ds.n_items(),
        train_interactions,
        test_interactions,
    })
}

/// Writes one line `user item item …` per (user id, matrix, row) with a non-empty row; returns the
/// number of items written.
fn write_rows<'a>(
    path: &Path,
    rows: impl Iterator<Item = (usize, &'a Csr, usize)>,
) -> Result<usize> {
    let tmp = temp_path(path);
    let io = |e| Error::io(&tmp, e);
    let file = std::fs::File::create(&tmp).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut written = 0;
    for (user, m, row) in rows {
        let Some(view) = m.outer_view(row) else {
            continue;
        };
        let items = view.indices();
        if items.is_empty() {
            continue;
        }
        write!(out, "{user}").map_err(io)?;
        for item in items {
            write!(out, " {item}").map_err(io)?;
        }
        out.write_all(b"\n").map_err(io)?;
        written += items.len();
    }
    out.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(written)
}
