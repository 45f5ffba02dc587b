//! Users files for `recsel recommend --users FILE` (docs/deployment.md, "Serving"): each user's
//! history as item ids.
//!
//! * `csv` — a header with the columns `user` and `item` (any order, more columns ignored), one
//!   `(user, item)` pair per line, comma separated;
//! * `parquet` — the same two columns (strings or integers);
//! * `jsonl` — one object per line, `{"user": "u1", "items": ["i1", "i2"]}` (ids as strings or
//!   integers).
//!
//! Users keep the order of their first appearance. An item id the model does not know is an error
//! naming the file, the line (or row) and the value.
//!
//! For a run charged to a privacy ledger ([`read_requests`]) a file may also carry a
//! `request_id` (a CSV or Parquet column, a JSON field): the rows of one (user, request id) are
//! one request, so one user may make several requests; rows without one are the user's request
//! whose id the run derives (docs/ledger.md, "Request ids").

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

/// The format of a users file (and of a recommendations file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Comma-separated values with a header.
    Csv,
    /// Apache Parquet.
    Parquet,
    /// JSON lines.
    Jsonl,
}

impl FileFormat {
    /// `csv`, `parquet` or `jsonl`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "csv" => Ok(FileFormat::Csv),
            "parquet" => Ok(FileFormat::Parquet),
            "jsonl" | "json" => Ok(FileFormat::Jsonl),
            _ => Err(Error::UnknownName {
                kind: "file format",
                name: name.into(),
                valid: "csv, parquet, jsonl".into(),
            }),
        }
    }

    /// The format named by `path`'s extension, if it names one.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Self::from_name(&ext).ok()
    }

    /// The format of an input file: `name` when given, else `path`'s extension (an error when
    /// it names no format).
    pub fn for_input(name: Option<&str>, path: &Path) -> Result<Self> {
        match name {
            Some(n) => Self::from_name(n),
            None => Self::from_path(path).ok_or_else(|| {
                Error::Invalid(format!(
                    "cannot tell the format of {} from its extension; pass --format",
                    path.display()
                ))
            }),
        }
    }

    /// The format of an output: `name` when given, else `path`'s extension, else csv (also for
    /// standard output).
    pub fn for_output(name: Option<&str>, path: Option<&Path>) -> Result<Self> {
        match (name, path) {
            (Some(n), _) => Self::from_name(n),
            (None, Some(p)) => Ok(Self::from_path(p).unwrap_or(FileFormat::Csv)),
            (None, None) => Ok(FileFormat::Csv),
        }
    }

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::Csv => "csv",
            FileFormat::Parquet => "parquet",
            FileFormat::Jsonl => "jsonl",
        }
    }
}

/// One request of a users file: the user, the request id if the file gives one, the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRequest {
    /// The user id.
    pub user: String,
    /// The file's `request_id` for these rows, if any.
    pub request_id: Option<String>,
    /// Item columns, sorted, duplicates once.
    pub history: Vec<u32>,
}

/// Groups `(user, item id)` records into histories, resolving item ids with `resolve`; with
/// `request_ids`, records are grouped by (user, request id) instead.
struct Grouper<'a> {
    path: &'a Path,
    resolve: &'a dyn Fn(&str) -> Option<u32>,
    request_ids: bool,
    index: HashMap<(String, Option<String>), usize>,
    users: Vec<UserRequest>,
}

impl Grouper<'_> {
    fn user(&mut self, user: &str, rid: Option<&str>) -> usize {
        let rid = rid.filter(|r| self.request_ids && !r.is_empty());
        let key = (user.to_string(), rid.map(str::to_string));
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.users.push(UserRequest {
            user: user.to_string(),
            request_id: key.1.clone(),
            history: Vec::new(),
        });
        self.index.insert(key, self.users.len() - 1);
        self.users.len() - 1
    }

    fn push(&mut self, at: &str, user: &str, item: &str) -> Result<()> {
        self.push_request(at, user, None, item)
    }

    fn push_request(&mut self, at: &str, user: &str, rid: Option<&str>, item: &str) -> Result<()> {
        if user.is_empty() {
            return Err(self.bad(at, "the user id is empty".into()));
        }
        let j = (self.resolve)(item).ok_or_else(|| {
            self.bad(
                at,
                format!("item '{item}' is not one of the model's item ids"),
            )
        })?;
        let u = self.user(user, rid);
        self.users[u].history.push(j);
        Ok(())
    }

    fn bad(&self, at: &str, message: String) -> Error {
        Error::Parse {
            context: format!("{} {at}", self.path.display()),
            message,
        }
    }

    fn finish(mut self) -> Vec<UserRequest> {
        for r in &mut self.users {
            r.history.sort_unstable();
            r.history.dedup();
        }
        self.users
    }
}

/// Reads the users file `path` in `format`; `resolve` maps an item id to its column.
pub fn read_users(
    path: &Path,
    format: FileFormat,
    resolve: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<(String, Vec<u32>)>> {
    Ok(read_grouped(path, format, resolve, false)?
        .into_iter()
        .map(|r| (r.user, r.history))
        .collect())
}

/// Reads the users file `path` as requests: grouped by (user, `request_id`) where the file has
/// request ids, by user elsewhere; in order of first appearance.
pub fn read_requests(
    path: &Path,
    format: FileFormat,
    resolve: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<UserRequest>> {
    read_grouped(path, format, resolve, true)
}

fn read_grouped(
    path: &Path,
    format: FileFormat,
    resolve: &dyn Fn(&str) -> Option<u32>,
    request_ids: bool,
) -> Result<Vec<UserRequest>> {
    let mut g = Grouper {
        path,
        resolve,
        request_ids,
        index: HashMap::new(),
        users: Vec::new(),
    };
    match format {
        FileFormat::Csv => read_csv(path, &mut g)?,
        FileFormat::Jsonl => read_jsonl(path, &mut g)?,
        FileFormat::Parquet => read_parquet(path, &mut g)?,
    }
    Ok(g.finish())
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

fn read_csv(path: &Path, g: &mut Grouper<'_>) -> Result<()> {
    let text = read_text(path)?;
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = match lines.next() {
        Some((_, h)) => h.split(',').map(str::trim).collect(),
        None => {
            return Err(g.bad(
                "line 1",
                "the file is empty (need a header user,item)".into(),
            ))
        }
    };
    let col = |name: &str| {
        header.iter().position(|h| *h == name).ok_or_else(|| {
            g.bad(
                "line 1",
                format!("no column '{name}' in the header '{}'", header.join(",")),
            )
        })
    };
    let (cu, ci) = (col("user")?, col("item")?);
    let cr = header.iter().position(|h| *h == "request_id");
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {}", i + 1);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != header.len() {
            return Err(g.bad(
                &at,
                format!(
                    "'{line}' has {} fields, the header {}",
                    f.len(),
                    header.len()
                ),
            ));
        }
        g.push_request(&at, f[cu], cr.map(|c| f[c]), f[ci])?;
    }
    Ok(())
}

fn json_id(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn read_jsonl(path: &Path, g: &mut Grouper<'_>) -> Result<()> {
    let text = read_text(path)?;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {}", i + 1);
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| g.bad(&at, format!("'{line}' is not JSON: {e}")))?;
        let user = v.get("user").and_then(json_id).ok_or_else(|| {
            g.bad(
                &at,
                format!("'{line}' has no \"user\" (a string or an integer)"),
            )
        })?;
        let items = v
            .get("items")
            .and_then(|x| x.as_array())
            .ok_or_else(|| g.bad(&at, format!("'{line}' has no \"items\" array")))?;
        let rid = v.get("request_id").and_then(json_id);
        g.user(&user, rid.as_deref());
        for item in items {
            let id = json_id(item)
                .ok_or_else(|| g.bad(&at, format!("item {item} is not a string or an integer")))?;
            g.push_request(&at, &user, rid.as_deref(), &id)?;
        }
    }
    Ok(())
}

fn read_parquet(path: &Path, g: &mut Grouper<'_>) -> Result<()> {
    use polars::prelude::*;
    let perr = |e: PolarsError| Error::Parse {
        context: path.display().to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let df = ParquetReader::new(file)
        .with_columns(Some(vec!["user".into(), "item".into()]))
        .finish()
        .map_err(perr)?;
    let strings = |name: &str| -> Result<Vec<Option<String>>> {
        let s = df
            .column(name)
            .map_err(perr)?
            .as_materialized_series()
            .cast(&DataType::String)
            .map_err(perr)?;
        let ca = s.str().map_err(perr)?;
        Ok(ca
            .downcast_iter()
            .flat_map(|a| a.iter())
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let (users, items) = (strings("user")?, strings("item")?);
    for (r, (u, i)) in users.iter().zip(&items).enumerate() {
        let at = format!("row {}", r + 1);
        match (u, i) {
            (Some(u), Some(i)) => g.push(&at, u, i)?,
            _ => return Err(g.bad(&at, "user or item is null".into())),
        }
    }
    Ok(())
}
