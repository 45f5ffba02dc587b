//! Where the interactions come from: a named data set of the paper or a file with its columns,
//! and the preprocessing and split settings a user sets on top of the data set's protocol.

use std::path::{Path, PathBuf};

pub use super::descriptor::Format;
use super::synthetic::SyntheticShape;
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

    /// The name [`NamedDataset::parse`] reads (`synthetic` for every shape).
    pub fn option_name(&self) -> &'static str {
        match self {
            NamedDataset::Ml20m => "ml20m",
            NamedDataset::Netflix => "netflix",
            NamedDataset::AmazonBook => "amazon-book",
            NamedDataset::Synthetic(_) => "synthetic",
        }
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
    /// Share of the users that are test users (and the validation users' share where the
    /// protocol has them), each user drawn by a keyed hash of their id.
    pub test_users: Option<f64>,
    /// Validation (calibration) users held out of the fit and never served (docs/utility.md,
    /// "Protocols"). `None` keeps the protocol's: as many as test users for MovieLens and Netflix,
    /// none for synthetic small data and for LightGCN files (the paper's protocol, every user's
    /// train row fitted on). On LightGCN files any other value holds that many validation users
    /// and as many test users (or `test_users`) out of the fit.
    pub validation_users: Option<super::heldout::ValidationUsers>,
    /// A declared item catalogue (one id per line): the data set's columns are its items, in
    /// its order (docs/training-privacy.md, "The item universe"). `None`: the items of the data.
    pub catalogue: Option<PathBuf>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            delimiter: b',',
            min_rating: None,
            min_user_items: None,
            test_users: None,
            validation_users: None,
            catalogue: None,
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

pub(super) const ML20M_HELP: &str =
    "download MovieLens 20M from https://grouplens.org/datasets/movielens/20m/ \
(ml-20m.zip) and put ratings.csv there (Kaggle's 'movielens-20m-dataset' rating.csv also works)";
pub(super) const NETFLIX_HELP: &str =
    "download the Netflix Prize data (Kaggle: netflix-inc/netflix-prize-data) \
and put combined_data_1.txt … combined_data_4.txt there";
pub(super) const AMAZON_HELP: &str =
    "download train.txt and test.txt of amazon-book from the LightGCN \
repository (github.com/gusye1234/LightGCN-PyTorch, folder data/amazon-book) and put them there";

pub(super) fn missing(what: &Path, help: &str) -> Error {
    Error::Invalid(format!(
        "dataset not found: {} does not exist; {help} (see data/README.md)",
        what.display()
    ))
}
