//! The readers of each file format (docs/protocol.md, step 1): tabular files (MovieLens
//! `ratings.csv`, generic CSV and Parquet) with polars, projected to the needed columns; the
//! Netflix Prize `combined_data_N.txt` files and LightGCN `train.txt` / `test.txt`, which are not
//! tables, line by line. Every malformed line is reported with its file, line number and content.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use polars::prelude::*;

use super::descriptor::{Descriptor, Format, Protocol};
use super::source::Columns;
use super::{csr_from_pairs, select_rows, Dataset, RawInteractions};
use crate::{Error, Result};

/// The LightGCN directory `--path` names: the path itself, or the folder of a file in it.
pub(super) fn lightgcn_dir(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    }
}

pub(super) fn find_movielens_file(dir: &Path) -> Option<PathBuf> {
    ["ratings.csv", "rating.csv"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
}

pub(super) fn netflix_files(dir: &Path) -> Vec<PathBuf> {
    (1..=4)
        .map(|i| dir.join(format!("combined_data_{i}.txt")))
        .filter(|p| p.is_file())
        .collect()
}

fn parse_error(path: &Path, line: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        context: format!("{} line {line}", path.display()),
        message: message.into(),
    }
}

pub(super) fn polars_error(path: &Path, e: PolarsError) -> Error {
    Error::Parse {
        context: path.display().to_string(),
        message: e.to_string(),
    }
}

pub(super) fn read_polars(
    path: &Path,
    format: Format,
    columns: &[&str],
    delimiter: u8,
) -> Result<DataFrame> {
    let projection: Arc<[PlSmallStr]> = columns.iter().map(|c| PlSmallStr::from_str(c)).collect();
    match format {
        Format::Parquet => {
            let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
            ParquetReader::new(file)
                .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
                .finish()
                .map_err(|e| polars_error(path, e))
        }
        _ => CsvReadOptions::default()
            .with_has_header(true)
            .map_parse_options(|o| o.with_separator(delimiter))
            .with_columns(Some(projection))
            .with_infer_schema_length(Some(10_000))
            .try_into_reader_with_file_path(Some(path.to_path_buf()))
            .and_then(|r| r.finish())
            .map_err(|e| polars_error(path, e)),
    }
}

/// Finds the first line of a headed CSV whose field count differs from the header's or whose
/// `numeric` columns do not parse as numbers. Used to turn a polars failure into a message naming
/// the line.
pub(super) fn locate_csv_problem(
    path: &Path,
    numeric: &[&str],
    delimiter: u8,
) -> Result<Option<Error>> {
    let sep = char::from(delimiter);
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut lines = std::io::BufReader::new(file).lines();
    let header = match lines.next() {
        Some(h) => h.map_err(|e| Error::io(path, e))?,
        None => {
            return Ok(Some(parse_error(
                path,
                1,
                "the file is empty (expected a header line)",
            )))
        }
    };
    let names: Vec<&str> = header.trim_end_matches('\r').split(sep).collect();
    let mut idx = Vec::new();
    for n in numeric {
        match names.iter().position(|h| h.trim_matches('"') == *n) {
            Some(i) => idx.push((i, *n)),
            None => {
                return Ok(Some(parse_error(
                    path,
                    1,
                    format!("header has no column '{n}': {header:?}"),
                )))
            }
        }
    }
    for (k, line) in lines.enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let line_no = k + 2;
        let content = line.trim_end_matches('\r');
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content.split(sep).collect();
        if fields.len() != names.len() {
            return Ok(Some(parse_error(
                path,
                line_no,
                format!(
                    "expected {} fields separated by {sep:?}, found {}: {content:?}",
                    names.len(),
                    fields.len()
                ),
            )));
        }
        for &(i, n) in &idx {
            if fields[i].trim().trim_matches('"').parse::<f64>().is_err() {
                return Ok(Some(parse_error(
                    path,
                    line_no,
                    format!("column '{n}' is not a number: {content:?}"),
                )));
            }
        }
    }
    Ok(None)
}

/// Extracts an integer column; `None` when it is not integer-typed or has nulls.
fn int_column(df: &DataFrame, name: &str) -> Option<Vec<i64>> {
    let col = df.column(name).ok()?;
    if !col.dtype().is_integer() {
        return None;
    }
    let s = col.as_materialized_series().cast(&DataType::Int64).ok()?;
    let ca = s.i64().ok()?;
    if ca.null_count() > 0 {
        return None;
    }
    Some(
        ca.downcast_iter()
            .flat_map(|a| a.values().iter().copied())
            .collect(),
    )
}

fn float_column(df: &DataFrame, name: &str) -> Option<Vec<f32>> {
    let col = df.column(name).ok()?;
    if !col.dtype().is_primitive_numeric() {
        return None;
    }
    let s = col.as_materialized_series().cast(&DataType::Float64).ok()?;
    let ca = s.f64().ok()?;
    if ca.null_count() > 0 {
        return None;
    }
    Some(
        ca.downcast_iter()
            .flat_map(|a| a.values().iter().map(|&x| x as f32))
            .collect(),
    )
}

/// Reads MovieLens `ratings.csv` / Kaggle `rating.csv` (columns `userId`, `movieId`, `rating`).
pub fn load_movielens(path: &Path) -> Result<RawInteractions> {
    let cols = ["userId", "movieId", "rating"];
    let df = read_polars(path, Format::MovieLens, &cols, b',');
    let parsed = df.ok().and_then(|df| {
        Some((
            int_column(&df, "userId")?,
            int_column(&df, "movieId")?,
            float_column(&df, "rating")?,
        ))
    });
    match parsed {
        Some((u, i, r)) => Ok(RawInteractions::from_raw_ids(&u, &i, Some(r))),
        None => Err(
            locate_csv_problem(path, &cols, b',')?.unwrap_or_else(|| Error::Parse {
                context: path.display().to_string(),
                message: "could not read columns userId, movieId, rating as numbers".into(),
            }),
        ),
    }
}

/// Reads a generic CSV or Parquet table. Id columns may be integers or strings.
pub fn load_table(path: &Path, format: Format, cols: &Columns) -> Result<RawInteractions> {
    load_table_with(path, format, cols, b',')
}

/// [`load_table`] with another field separator for CSV files (e.g. `b'\t'`).
pub fn load_table_with(
    path: &Path,
    format: Format,
    cols: &Columns,
    delimiter: u8,
) -> Result<RawInteractions> {
    let mut names = vec![cols.user.as_str(), cols.item.as_str()];
    if let Some(r) = &cols.rating {
        names.push(r.as_str());
    }
    let df = match read_polars(path, format, &names, delimiter) {
        Ok(df) => df,
        Err(e) => {
            if format == Format::Csv {
                let numeric: Vec<&str> = cols.rating.iter().map(|s| s.as_str()).collect();
                if let Some(located) = locate_csv_problem(path, &numeric, delimiter)? {
                    return Err(located);
                }
            }
            return Err(e);
        }
    };
    let ids = |name: &str| -> Result<(Vec<u32>, Vec<String>)> {
        let col = df.column(name).map_err(|e| polars_error(path, e))?;
        if col.null_count() > 0 {
            let s = col.as_materialized_series();
            let row = (0..s.len())
                .find(|&i| s.get(i).map(|v| v.is_null()).unwrap_or(true))
                .unwrap_or(0);
            return Err(parse_error(
                path,
                row + 2,
                format!("column '{name}' is empty"),
            ));
        }
        if let Some(v) = int_column(&df, name) {
            let (codes, uniq) = super::compact_ids(&v);
            return Ok((codes, uniq.iter().map(|x| x.to_string()).collect()));
        }
        let s = col
            .as_materialized_series()
            .cast(&DataType::String)
            .map_err(|e| polars_error(path, e))?;
        let ca = s.str().map_err(|e| polars_error(path, e))?;
        let mut map: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut labels = Vec::new();
        let mut codes = Vec::with_capacity(ca.len());
        for v in ca.downcast_iter().flat_map(|a| a.iter()) {
            let v = v.unwrap_or("");
            let next = map.len() as u32;
            let c = *map.entry(v).or_insert_with(|| {
                labels.push(v.to_string());
                next
            });
            codes.push(c);
        }
        // Codes in sorted id order, as for integer ids: the columns (and a release's item
        // list) must not follow the order in which the file first mentions each id — that
        // order is a fact about the data.
        let mut order: Vec<u32> = (0..labels.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| labels[a as usize].cmp(&labels[b as usize]));
        let mut recode = vec![0u32; labels.len()];
        for (new, &old) in order.iter().enumerate() {
            recode[old as usize] = new as u32;
        }
        codes.iter_mut().for_each(|c| *c = recode[*c as usize]);
        let labels = order.iter().map(|&o| labels[o as usize].clone()).collect();
        Ok((codes, labels))
    };
    let (users, user_ids) = ids(&cols.user)?;
    let (items, item_ids) = ids(&cols.item)?;
    let ratings = match &cols.rating {
        Some(r) => Some(float_column(&df, r).ok_or_else(|| {
            locate_csv_problem(path, &[r.as_str()], delimiter)
                .ok()
                .flatten()
                .unwrap_or_else(|| Error::Parse {
                    context: path.display().to_string(),
                    message: format!("rating column '{r}' is not numeric or has empty values"),
                })
        })?),
        None => None,
    };
    Ok(RawInteractions {
        users,
        items,
        ratings,
        user_ids,
        item_ids,
    })
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Reads Netflix Prize `combined_data_N.txt` files.
pub fn load_netflix(paths: &[PathBuf]) -> Result<RawInteractions> {
    let mut users = Vec::new();
    let mut items = Vec::new();
    let mut ratings = Vec::new();
    for path in paths {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let text = std::str::from_utf8(&bytes).map_err(|e| Error::Parse {
            context: path.display().to_string(),
            message: format!("not UTF-8 text: {e}"),
        })?;
        let mut movie: Option<i64> = None;
        for (k, line) in text.lines().enumerate() {
            let line_no = k + 1;
            let content = line.trim_end_matches('\r');
            if content.trim().is_empty() {
                continue;
            }
            if let Some(id) = content.strip_suffix(':') {
                match parse_u64(id) {
                    Some(m) => movie = Some(m as i64),
                    None => {
                        return Err(parse_error(
                            path,
                            line_no,
                            format!("expected 'MovieID:', found {content:?}"),
                        ))
                    }
                }
                continue;
            }
            let Some(m) = movie else {
                return Err(parse_error(
                    path,
                    line_no,
                    format!("rating line before any 'MovieID:' line: {content:?}"),
                ));
            };
            let mut fields = content.split(',');
            let (c, r, d) = (fields.next(), fields.next(), fields.next());
            let ok = match (
                c.and_then(parse_u64),
                r.and_then(parse_u64),
                d,
                fields.next(),
            ) {
                (Some(c), Some(r), Some(_), None) => Some((c, r)),
                _ => None,
            };
            let Some((c, r)) = ok else {
                return Err(parse_error(
                    path,
                    line_no,
                    format!("expected 'CustomerID,Rating,Date', found {content:?}"),
                ));
            };
            users.push(c as i64);
            items.push(m);
            ratings.push(r as f32);
        }
    }
    Ok(RawInteractions::from_raw_ids(&users, &items, Some(ratings)))
}

/// Parses one LightGCN file into (user, item) pairs; returns the pairs and the largest ids seen.
pub fn read_lightgcn_file(path: &Path) -> Result<Vec<(u32, u32)>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Error::Parse {
        context: path.display().to_string(),
        message: format!("not UTF-8 text: {e}"),
    })?;
    let mut pairs = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let mut tokens = line.split_whitespace();
        let Some(first) = tokens.next() else { continue };
        let bad = || {
            parse_error(
                path,
                k + 1,
                format!("expected 'user item item ...' with integer ids, found {line:?}"),
            )
        };
        let u = parse_u64(first)
            .filter(|&v| v < u32::MAX as u64)
            .ok_or_else(bad)? as u32;
        for t in tokens {
            let i = parse_u64(t)
                .filter(|&v| v < u32::MAX as u64)
                .ok_or_else(bad)? as u32;
            pairs.push((u, i));
        }
    }
    Ok(pairs)
}

/// Reads a LightGCN directory (`train.txt`, `test.txt`). Ids are used as they are (they are dense
/// in the published files); every user with at least one test item is a test user, scored from
/// their training row (docs/protocol.md, step 3, Amazon Books).
pub fn load_lightgcn(dir: &Path, name: &str) -> Result<Dataset> {
    load_lightgcn_with(dir, name, None)
}

/// [`load_lightgcn`], or with `held_out` the held-out-users protocol (docs/utility.md,
/// "Protocols"; [`super::heldout::held_out_groups`]): test and validation users are left out of
/// the fit, each keeping its train row as history and its test row as held-out items; every
/// other user is fitted on its full row (train and test), and the fitted users' test rows give
/// [`Dataset::heldout_popularity`].
pub fn load_lightgcn_with(
    dir: &Path,
    name: &str,
    held_out: Option<super::heldout::LightGcnHeldOut>,
) -> Result<Dataset> {
    let Some(h) = held_out else {
        return load_lightgcn_paper(dir, name);
    };
    let (train_m, test_m) = read_lightgcn_pair(dir)?;
    let (n_users, n_items) = (train_m.rows(), train_m.cols());
    let has = |m: &super::Csr, u: usize| m.outer_view(u).is_some_and(|r| r.nnz() > 0);
    let eligible: Vec<usize> = (0..n_users)
        .filter(|&u| has(&train_m, u) && has(&test_m, u))
        .collect();
    let g = super::heldout::held_out_groups(
        n_users,
        &eligible,
        h.validation,
        h.test_users,
        h.seed,
        h.fold,
    )?;
    let mut full: Vec<(u32, u32)> = Vec::with_capacity(train_m.nnz() + test_m.nnz());
    let mut heldout = vec![0u64; n_items];
    for &u in &g.fit {
        for m in [&train_m, &test_m] {
            if let Some(r) = m.outer_view(u) {
                full.extend(r.indices().iter().map(|&j| (u as u32, j)));
            }
        }
        if let Some(r) = test_m.outer_view(u) {
            for &j in r.indices() {
                heldout[j as usize] += 1;
            }
        }
    }
    let fit_full = csr_from_pairs(n_users, n_items, &mut full);
    let ds = Dataset {
        descriptor: Descriptor::new(name, Some(Format::LightGcn), Protocol::LightGcn),
        train: select_rows(&fit_full, &g.fit),
        test_input: select_rows(&train_m, &g.test),
        test_target: select_rows(&test_m, &g.test),
        validation: select_rows(&train_m, &g.validation),
        validation_target: select_rows(&test_m, &g.validation),
        heldout_popularity: Some(heldout),
        heldout_rows: Some(select_rows(&test_m, &g.fit)),
        item_ids: (0..n_items).map(|i| i.to_string()).collect(),
        test_user_ids: g.test.iter().map(|u| u.to_string()).collect(),
        validation_user_ids: g.validation.iter().map(|u| u.to_string()).collect(),
        split_rule: g.rule.clone(),
    };
    ds.validate()?;
    Ok(ds)
}

/// `train.txt` and `test.txt` of a LightGCN folder as two user × item matrices of the same shape
/// (users and items numbered as in the files, up to the largest id in either).
fn read_lightgcn_pair(dir: &Path) -> Result<(super::Csr, super::Csr)> {
    let mut train = read_lightgcn_file(&dir.join("train.txt"))?;
    let mut test = read_lightgcn_file(&dir.join("test.txt"))?;
    let size = |f: fn(&(u32, u32)) -> u32| {
        train
            .iter()
            .chain(&test)
            .map(|p| f(p) as usize + 1)
            .max()
            .unwrap_or(0)
    };
    let (n_users, n_items) = (size(|p| p.0), size(|p| p.1));
    Ok((
        csr_from_pairs(n_users, n_items, &mut train),
        csr_from_pairs(n_users, n_items, &mut test),
    ))
}

/// The paper's LightGCN protocol (see [`load_lightgcn`]).
fn load_lightgcn_paper(dir: &Path, name: &str) -> Result<Dataset> {
    let (train_m, test_m) = read_lightgcn_pair(dir)?;
    let (n_users, n_items) = (train_m.rows(), train_m.cols());
    let test_users: Vec<usize> = (0..n_users)
        .filter(|&u| test_m.outer_view(u).is_some_and(|r| r.nnz() > 0))
        .collect();
    let test_input = select_rows(&train_m, &test_users);
    let test_target = select_rows(&test_m, &test_users);
    let validation = select_rows(&train_m, &[]);
    let ds = Dataset {
        descriptor: Descriptor::new(name, Some(Format::LightGcn), Protocol::LightGcn),
        train: train_m,
        test_input,
        test_target,
        validation,
        validation_target: select_rows(&test_m, &[]),
        heldout_popularity: None,
        heldout_rows: None,
        item_ids: (0..n_items).map(|i| i.to_string()).collect(),
        test_user_ids: test_users.iter().map(|u| u.to_string()).collect(),
        validation_user_ids: Vec::new(),
        split_rule: super::split::SplitRule::files(),
    };
    ds.validate()?;
    Ok(ds)
}
