//! The output of `recsel recommend` (docs/deployment.md, "Serving"): the chosen item id per user
//! and nothing else that depends on the noise, as CSV (`user,item`), Parquet (the same two string
//! columns) or JSON lines (`{"user": ..., "item": ...}`). A user without any candidate (the
//! history covers every item) gets an empty item (CSV) or null.

use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::recommend::input::FileFormat;

/// The recommendations file's bytes.
pub fn recommendations_bytes(rows: &[(&str, Option<&str>)], format: FileFormat) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(rows.len() * 24);
    match format {
        FileFormat::Csv => {
            out.extend_from_slice(b"user,item\n");
            for (u, i) in rows {
                out.extend_from_slice(u.as_bytes());
                out.push(b',');
                out.extend_from_slice(i.unwrap_or("").as_bytes());
                out.push(b'\n');
            }
        }
        FileFormat::Jsonl => {
            for (u, i) in rows {
                let line = serde_json::json!({ "user": u, "item": i });
                out.extend_from_slice(line.to_string().as_bytes());
                out.push(b'\n');
            }
        }
        FileFormat::Parquet => {
            let users: Vec<&str> = rows.iter().map(|r| r.0).collect();
            let items: Vec<Option<&str>> = rows.iter().map(|r| r.1).collect();
            let mut df = DataFrame::new(
                rows.len(),
                vec![
                    Column::new("user".into(), users),
                    Column::new("item".into(), items),
                ],
            )
            .map_err(|e| Error::Invalid(format!("building the recommendations table: {e}")))?;
            ParquetWriter::new(&mut out)
                .finish(&mut df)
                .map_err(|e| Error::Invalid(format!("writing Parquet: {e}")))?;
        }
    }
    Ok(out)
}

/// Writes the recommendations to `path` atomically.
pub fn write_recommendations(
    path: &Path,
    rows: &[(&str, Option<&str>)],
    format: FileFormat,
) -> Result<()> {
    write_atomic(path, &recommendations_bytes(rows, format)?)
}
