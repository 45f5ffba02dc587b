//! Every user's selection problem (candidate ids, scores, Δ) as a table (`--dump-problems`).

use std::path::{Path, PathBuf};

use super::super::table::{Table, Values};
use crate::error::Result;
use crate::experiments::select::{SelectConfig, UserProblem};
use crate::scoring::Sensitivities;

/// Computes every user's problem of `cfg` ([`crate::experiments::select::all_problems`]) and writes
/// them with [`write_problems`]; returns the paths written.
pub fn dump_problems<S: crate::scoring::UserScorer>(
    path: &Path,
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    data: &crate::data::Dataset,
) -> Result<Vec<PathBuf>> {
    let problems = crate::experiments::select::all_problems(scorer, sens, cfg, &|_| {});
    write_problems(path, &problems, &data.test_user_ids, &data.item_ids)
}

/// Writes every user's selection problem (`recsel select --dump-problems FILE.parquet`,
/// docs/protocol.md, "Exported problems") in long format, one row per (user, candidate): `user`
/// (test user id), `user_index`, `rank` (0 = best model score), `item` (item id), `item_index`,
/// `score` (as the mechanisms see it: clipped when the run clips) and `sensitivity` (Δ_j). `path`
/// must end in `.parquet`; the same table is written beside it as `.csv`. Returns the paths.
pub fn write_problems(
    path: &Path,
    problems: &[(usize, UserProblem)],
    user_ids: &[String],
    item_ids: &[String],
) -> Result<Vec<PathBuf>> {
    let stem = match (path.extension(), path.file_stem()) {
        (Some(e), Some(s)) if e == "parquet" => s.to_string_lossy().into_owned(),
        _ => {
            return Err(crate::error::Error::Invalid(format!(
                "--dump-problems: {} must end in .parquet",
                path.display()
            )))
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    crate::io::ensure_dir(dir)?;
    let rows = || {
        problems
            .iter()
            .flat_map(|(u, p)| (0..p.items.len()).map(move |r| (*u, p, r)))
    };
    Table::default()
        .with(
            "user",
            Values::Str(rows().map(|(u, _, _)| user_ids[u].clone()).collect()),
        )
        .with(
            "user_index",
            Values::U64(rows().map(|(u, _, _)| u as u64).collect()),
        )
        .with(
            "rank",
            Values::U64(rows().map(|(_, _, r)| r as u64).collect()),
        )
        .with(
            "item",
            Values::Str(
                rows()
                    .map(|(_, p, r)| item_ids[p.items[r] as usize].clone())
                    .collect(),
            ),
        )
        .with(
            "item_index",
            Values::U64(rows().map(|(_, p, r)| u64::from(p.items[r])).collect()),
        )
        .with(
            "score",
            Values::F64(rows().map(|(_, p, r)| p.scores[r]).collect()),
        )
        .with(
            "sensitivity",
            Values::F64(rows().map(|(_, p, r)| p.sens[r]).collect()),
        )
        .write(dir, &stem)
}
