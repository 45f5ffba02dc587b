//! Loaders (docs/protocol.md, step 1).
//!
//! Tabular files (MovieLens `ratings.csv`, generic CSV and Parquet) are read with polars, projected
//! to the needed columns. The Netflix Prize `combined_data_N.txt` files and LightGCN `train.txt` /
//! `test.txt` are not tables (a `MovieID:` line heads a block; a line holds a variable number of
//! items), so they are parsed line by line here. Every malformed line is reported with its file,
//! line number and content; duplicate (user, item) pairs are kept in [`RawInteractions`] and counted
//! once when the matrix is built.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use polars::prelude::*;

pub use super::descriptor::Format;
use super::descriptor::{Descriptor, PaperModel, Protocol};
use super::preprocess::preprocess_owned;
use super::split::split_owned;
use super::synthetic::{self, SyntheticShape};
use super::{csr_from_pairs, select_rows, Dataset, RawInteractions};
use crate::{Error, Result};

/// The named datasets of the paper (`--dataset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedDataset {
    /// MovieLens 20M, read from `<data-dir>/ml20m/`.
    Ml20m,
    /// Netflix Prize, read from `<data-dir>/netflix/`.
    Netflix,
    /// Amazon-Book in the LightGCN split, read from `<data-dir>/amazon-book/`.
    AmazonBook,
    /// Generated interactions of the given shape.
    Synthetic(SyntheticShape),
}

impl NamedDataset {
    /// Parses a `--dataset` value; `shape` is used for `synthetic`.
    pub fn parse(name: &str, shape: SyntheticShape) -> Result<Self> {
        Ok(match name {
            "ml20m" => NamedDataset::Ml20m,
            "netflix" => NamedDataset::Netflix,
            "amazon-book" => NamedDataset::AmazonBook,
            "synthetic" => NamedDataset::Synthetic(shape),
            _ => {
                return Err(Error::UnknownName {
                    kind: "dataset",
                    name: name.to_string(),
                    valid: "ml20m, netflix, amazon-book, synthetic".into(),
                })
            }
        })
    }
}

/// Column names of a generic table.
#[derive(Debug, Clone)]
pub struct Columns {
    /// User id column.
    pub user: String,
    /// Item id column.
    pub item: String,
    /// Optional rating column (then ratings ≥ `min_rating` are kept).
    pub rating: Option<String>,
}

/// Options a user sets on top of a protocol's defaults (docs/protocol.md, "Data sets"): the
/// field separator of a CSV file, the rating cut-off (or none, for implicit data), the minimum
/// number of items per user and the number of test users. `None` keeps the protocol's value.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// Field separator of `--format csv` files (default `,`).
    pub delimiter: u8,
    /// Rating cut-off: `Some(Some(r))` keeps ratings ≥ r, `Some(None)` keeps every record
    /// (implicit data such as clicks), `None` the protocol's (4 when there is a rating column).
    pub min_rating: Option<Option<f32>>,
    /// Keep users with at least this many distinct items (protocol: 5).
    pub min_user_items: Option<usize>,
    /// Number of test users (and as many validation users where the protocol has them).
    pub test_users: Option<usize>,
    /// Validation (calibration) users held out of the fit and never served (docs/utility.md,
    /// "Protocols"). `None` keeps the protocol's: as many as test users for MovieLens and Netflix,
    /// none for synthetic small data and for LightGCN files (the paper's protocol, every user's
    /// train row fitted on). On LightGCN files any other value holds that many validation users
    /// and as many test users (or `test_users`) out of the fit.
    pub validation_users: Option<super::heldout::ValidationUsers>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            delimiter: b',',
            min_rating: None,
            min_user_items: None,
            test_users: None,
            validation_users: None,
        }
    }
}

/// Where the interactions come from.
#[derive(Debug, Clone)]
pub enum DataSource {
    /// A named dataset under a data directory.
    Named {
        /// Which dataset.
        dataset: NamedDataset,
        /// The data directory (default `data/`).
        data_dir: PathBuf,
    },
    /// A file or directory in a given format.
    Path {
        /// The format.
        format: Format,
        /// File (or directory for `lightgcn`, `netflix`, `movielens`).
        path: PathBuf,
        /// Column names for `csv` / `parquet`.
        columns: Option<Columns>,
    },
}

impl DataSource {
    /// Whether the source is a LightGCN directory (its own train/test split, no preprocessing).
    pub fn is_lightgcn(&self) -> bool {
        matches!(
            self,
            DataSource::Named {
                dataset: NamedDataset::AmazonBook,
                ..
            } | DataSource::Path {
                format: Format::LightGcn,
                ..
            }
        )
    }
}

const ML20M_HELP: &str =
    "download MovieLens 20M from https://grouplens.org/datasets/movielens/20m/ \
(ml-20m.zip) and put ratings.csv there (Kaggle's 'movielens-20m-dataset' rating.csv also works)";
const NETFLIX_HELP: &str =
    "download the Netflix Prize data (Kaggle: netflix-inc/netflix-prize-data) \
and put combined_data_1.txt … combined_data_4.txt there";
const AMAZON_HELP: &str = "download train.txt and test.txt of amazon-book from the LightGCN \
repository (github.com/gusye1234/LightGCN-PyTorch, folder data/amazon-book) and put them there";

fn missing(what: &Path, help: &str) -> Error {
    Error::Invalid(format!(
        "dataset not found: {} does not exist; {help} (see data/README.md)",
        what.display()
    ))
}

/// Loads, preprocesses (docs/protocol.md, "Preprocessing") and splits ("Split") a data source into a
/// [`Dataset`]. The data set's [`Descriptor`] decides which preprocessing and split apply.
pub fn load_dataset(source: &DataSource, seed: u64) -> Result<Dataset> {
    load_dataset_with(source, seed, &LoadOptions::default())
}

/// [`load_dataset`] with a user's [`LoadOptions`] on top of the protocol's defaults. Options that
/// do not apply (preprocessing or split options for LightGCN files, which carry their own split)
/// are errors rather than silently ignored.
pub fn load_dataset_with(source: &DataSource, seed: u64, opts: &LoadOptions) -> Result<Dataset> {
    let lightgcn = matches!(
        source,
        DataSource::Named {
            dataset: NamedDataset::AmazonBook,
            ..
        } | DataSource::Path {
            format: Format::LightGcn,
            ..
        }
    );
    let held_out = super::heldout::lightgcn_option(opts, seed)?;
    if lightgcn
        && (opts.min_rating.is_some()
            || opts.min_user_items.is_some()
            || (opts.test_users.is_some() && held_out.is_none()))
    {
        return Err(Error::Invalid(
            "--min-rating, --min-user-items and --test-users do not apply to LightGCN files: \
             they carry their own train/test split and are not preprocessed (--test-users \
             applies with --validation-users, which holds users out of the fit)"
                .into(),
        ));
    }
    match source {
        DataSource::Named { dataset, data_dir } => match dataset {
            NamedDataset::Ml20m => {
                let dir = data_dir.join("ml20m");
                let file = find_movielens_file(&dir)
                    .ok_or_else(|| missing(&dir.join("ratings.csv"), ML20M_HELP))?;
                let d = Descriptor::new("ml20m", Some(Format::MovieLens), Protocol::MovieLens)
                    .with_paper_model(PaperModel::ML20M);
                from_records(d, load_movielens(&file)?, seed, opts)
            }
            NamedDataset::Netflix => {
                let dir = data_dir.join("netflix");
                let files = netflix_files(&dir);
                if files.is_empty() {
                    return Err(missing(&dir.join("combined_data_1.txt"), NETFLIX_HELP));
                }
                let d = Descriptor::new("netflix", Some(Format::Netflix), Protocol::Netflix)
                    .with_paper_model(PaperModel::NETFLIX);
                from_records(d, load_netflix(&files)?, seed, opts)
            }
            NamedDataset::AmazonBook => {
                let dir = data_dir.join("amazon-book");
                for f in ["train.txt", "test.txt"] {
                    if !dir.join(f).is_file() {
                        return Err(missing(&dir.join(f), AMAZON_HELP));
                    }
                }
                let mut ds = load_lightgcn_with(&dir, "amazon-book", held_out)?;
                ds.descriptor = ds.descriptor.with_paper_model(PaperModel::AMAZON_BOOK);
                Ok(ds)
            }
            NamedDataset::Synthetic(shape) => {
                let mut d = Descriptor::new(
                    format!("synthetic-{}", shape.name()),
                    None,
                    Protocol::Synthetic(*shape),
                );
                // Data shaped like a paper data set gets that data set's model settings.
                d.paper_model = match shape {
                    SyntheticShape::Small => None,
                    SyntheticShape::Ml20m => Some(PaperModel::ML20M),
                    SyntheticShape::Netflix => Some(PaperModel::NETFLIX),
                };
                from_records(d, synthetic::generate(*shape, seed), seed, opts)
            }
        },
        DataSource::Path {
            format,
            path,
            columns,
        } => {
            if !path.exists() {
                return Err(Error::Invalid(format!("{} does not exist", path.display())));
            }
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "data".into());
            match format {
                Format::MovieLens => {
                    let file = if path.is_dir() {
                        find_movielens_file(path)
                            .ok_or_else(|| missing(&path.join("ratings.csv"), ML20M_HELP))?
                    } else {
                        path.clone()
                    };
                    let d = Descriptor::new(name, Some(*format), Protocol::MovieLens);
                    from_records(d, load_movielens(&file)?, seed, opts)
                }
                Format::Netflix => {
                    let files = if path.is_dir() {
                        netflix_files(path)
                    } else {
                        vec![path.clone()]
                    };
                    if files.is_empty() {
                        return Err(missing(&path.join("combined_data_1.txt"), NETFLIX_HELP));
                    }
                    let d = Descriptor::new(name, Some(*format), Protocol::Netflix);
                    from_records(d, load_netflix(&files)?, seed, opts)
                }
                Format::LightGcn => {
                    let dir = lightgcn_dir(path);
                    let name = dir
                        .file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or(name);
                    load_lightgcn_with(&dir, &name, held_out)
                }
                Format::Csv | Format::Parquet => {
                    let cols = columns.clone().ok_or_else(|| {
                        Error::Invalid(
                            "--format csv/parquet needs --user-col and --item-col".into(),
                        )
                    })?;
                    let raw = load_table_with(path, *format, &cols, opts.delimiter)?;
                    let d = Descriptor::new(name, Some(*format), Protocol::Table);
                    from_records(d, raw, seed, opts)
                }
            }
        }
    }
}

/// Checks, without loading the data, that `source` can be read: the files exist, and a CSV or
/// Parquet table has the named columns (`recsel run --check`). Errors say what is missing where.
pub fn check_source(source: &DataSource, opts: &LoadOptions) -> Result<()> {
    let exists = |p: &Path, help: &str| {
        if p.exists() {
            Ok(())
        } else {
            Err(missing(p, help))
        }
    };
    match source {
        DataSource::Named { dataset, data_dir } => match dataset {
            NamedDataset::Ml20m => {
                let dir = data_dir.join("ml20m");
                find_movielens_file(&dir)
                    .map(|_| ())
                    .ok_or_else(|| missing(&dir.join("ratings.csv"), ML20M_HELP))
            }
            NamedDataset::Netflix => {
                let dir = data_dir.join("netflix");
                if netflix_files(&dir).is_empty() {
                    return Err(missing(&dir.join("combined_data_1.txt"), NETFLIX_HELP));
                }
                Ok(())
            }
            NamedDataset::AmazonBook => {
                let dir = data_dir.join("amazon-book");
                exists(&dir.join("train.txt"), AMAZON_HELP)?;
                exists(&dir.join("test.txt"), AMAZON_HELP)
            }
            NamedDataset::Synthetic(_) => Ok(()),
        },
        DataSource::Path {
            format,
            path,
            columns,
        } => {
            if !path.exists() {
                return Err(Error::Invalid(format!("{} does not exist", path.display())));
            }
            match format {
                Format::MovieLens if path.is_dir() => find_movielens_file(path)
                    .map(|_| ())
                    .ok_or_else(|| missing(&path.join("ratings.csv"), ML20M_HELP)),
                Format::Netflix if path.is_dir() && netflix_files(path).is_empty() => {
                    Err(missing(&path.join("combined_data_1.txt"), NETFLIX_HELP))
                }
                Format::LightGcn => {
                    let dir = lightgcn_dir(path);
                    exists(&dir.join("train.txt"), "a LightGCN directory has train.txt")?;
                    exists(&dir.join("test.txt"), "a LightGCN directory has test.txt")
                }
                Format::Csv | Format::Parquet => {
                    let cols = columns.as_ref().ok_or_else(|| {
                        Error::Invalid("csv/parquet input needs user and item columns".into())
                    })?;
                    let header: Vec<String> = if *format == Format::Csv {
                        use std::io::BufRead;
                        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                        let mut line = String::new();
                        std::io::BufReader::new(file)
                            .read_line(&mut line)
                            .map_err(|e| Error::io(path, e))?;
                        line.trim_end_matches(['\r', '\n'])
                            .split(char::from(opts.delimiter))
                            .map(|h| h.trim().trim_matches('"').to_string())
                            .collect()
                    } else {
                        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                        let schema = ParquetReader::new(file)
                            .schema()
                            .map_err(|e| polars_error(path, e))?;
                        schema.iter_names().map(|n| n.to_string()).collect()
                    };
                    let wanted = [Some(&cols.user), Some(&cols.item), cols.rating.as_ref()];
                    for name in wanted.into_iter().flatten() {
                        if !header.iter().any(|h| h == name) {
                            return Err(Error::Parse {
                                context: format!("{} header", path.display()),
                                message: format!(
                                    "no column '{name}' (columns: {}; separator {:?})",
                                    header.join(", "),
                                    char::from(opts.delimiter)
                                ),
                            });
                        }
                    }
                    Ok(())
                }
                _ => Ok(()),
            }
        }
    }
}

/// Preprocesses and splits records as the descriptor's protocol says, with the user's options on
/// top.
fn from_records(
    descriptor: Descriptor,
    raw: RawInteractions,
    seed: u64,
    opts: &LoadOptions,
) -> Result<Dataset> {
    let mut pre = descriptor.preprocess(raw.ratings.is_some());
    if let Some(cut) = opts.min_rating {
        pre.min_rating = cut;
    }
    if let Some(n) = opts.min_user_items {
        pre.min_user_interactions = n;
    }
    let matrix = preprocess_owned(raw, &pre)?;
    let mut split_cfg = descriptor
        .split(seed)
        .expect("record-based protocols have a split");
    if let Some(n) = opts.test_users {
        if n == 0 {
            return Err(Error::Invalid(
                "--test-users must be at least 1, got 0".into(),
            ));
        }
        if split_cfg.validation_users > 0 {
            split_cfg.validation_users = n;
        }
        split_cfg.test_users = n;
    }
    match opts.validation_users {
        Some(super::heldout::ValidationUsers::Count(n)) => split_cfg.validation_users = n,
        Some(v @ super::heldout::ValidationUsers::Fold { .. }) => {
            return Err(Error::Invalid(format!(
                "validation users '{v}': cross-fitting folds apply to LightGCN files only"
            )))
        }
        _ => {}
    }
    split_owned(descriptor, matrix, &split_cfg)
}

/// The LightGCN directory `--path` names: the path itself, or the folder of a file in it.
fn lightgcn_dir(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    }
}

fn find_movielens_file(dir: &Path) -> Option<PathBuf> {
    ["ratings.csv", "rating.csv"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
}

fn netflix_files(dir: &Path) -> Vec<PathBuf> {
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

fn polars_error(path: &Path, e: PolarsError) -> Error {
    Error::Parse {
        context: path.display().to_string(),
        message: e.to_string(),
    }
}

fn read_polars(path: &Path, format: Format, columns: &[&str], delimiter: u8) -> Result<DataFrame> {
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
fn locate_csv_problem(path: &Path, numeric: &[&str], delimiter: u8) -> Result<Option<Error>> {
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
    let mut train = read_lightgcn_file(&dir.join("train.txt"))?;
    let mut test = read_lightgcn_file(&dir.join("test.txt"))?;
    let n_users = train
        .iter()
        .chain(&test)
        .map(|p| p.0 as usize + 1)
        .max()
        .unwrap_or(0);
    let n_items = train
        .iter()
        .chain(&test)
        .map(|p| p.1 as usize + 1)
        .max()
        .unwrap_or(0);
    let train_m = csr_from_pairs(n_users, n_items, &mut train);
    let test_m = csr_from_pairs(n_users, n_items, &mut test);
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
    let mut full: Vec<(u32, u32)> = Vec::with_capacity(train.len() + test.len());
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
        item_ids: (0..n_items).map(|i| i.to_string()).collect(),
        test_user_ids: g.test.iter().map(|u| u.to_string()).collect(),
    };
    ds.validate()?;
    Ok(ds)
}

/// The paper's LightGCN protocol (see [`load_lightgcn`]).
fn load_lightgcn_paper(dir: &Path, name: &str) -> Result<Dataset> {
    let mut train = read_lightgcn_file(&dir.join("train.txt"))?;
    let mut test = read_lightgcn_file(&dir.join("test.txt"))?;
    let n_users = train
        .iter()
        .chain(&test)
        .map(|p| p.0 as usize + 1)
        .max()
        .unwrap_or(0);
    let n_items = train
        .iter()
        .chain(&test)
        .map(|p| p.1 as usize + 1)
        .max()
        .unwrap_or(0);
    let train_m = csr_from_pairs(n_users, n_items, &mut train);
    let test_m = csr_from_pairs(n_users, n_items, &mut test);
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
        item_ids: (0..n_items).map(|i| i.to_string()).collect(),
        test_user_ids: test_users.iter().map(|u| u.to_string()).collect(),
    };
    ds.validate()?;
    Ok(ds)
}
