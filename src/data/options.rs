//! Where the interactions come from and how they are prepared, as options (`recsel fit`,
//! `export` and `select` take them; a pipeline's `[select]` table has the same keys).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::descriptor::Format;
use super::heldout::ValidationUsers;
use super::load::{Columns, DataSource, LoadOptions, NamedDataset};
use super::synthetic::SyntheticShape;
use crate::error::{Error, Result};
use crate::options::{option_table, Kind, OptionValue};

option_table! {
    /// The data options: a named data set or a file, and the preprocessing and split settings.
    /// Unset options take the data set's protocol (docs/protocol.md, "Data sets").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct DataOptions {
        /// Named dataset: ml20m, netflix, amazon-book (read from `<data-dir>/<name>/`) or
        /// synthetic.
        #[option(value_name = "NAME", group = "Data")]
        pub dataset: String,
        /// Shape of --dataset synthetic.
        #[option(value_name = "SHAPE", choices = &["small", "ml20m", "netflix"], group = "Data")]
        pub shape: String = "small".to_string(),
        /// Directory holding the named datasets.
        #[option(value_name = "DIR", group = "Data")]
        pub data_dir: PathBuf = PathBuf::from("data"),
        /// Format of --path.
        #[option(
            value_name = "FORMAT",
            choices = &["movielens", "netflix", "lightgcn", "csv", "parquet"],
            group = "Data"
        )]
        pub format: String,
        /// File (or directory for movielens, netflix, lightgcn) to read.
        #[option(value_name = "PATH", group = "Data")]
        pub path: PathBuf,
        /// User column of a csv/parquet file.
        #[option(value_name = "NAME", group = "Data")]
        pub user_col: String,
        /// Item column of a csv/parquet file.
        #[option(value_name = "NAME", group = "Data")]
        pub item_col: String,
        /// Rating column of a csv/parquet file (then ratings >= 4 are kept, see --min-rating).
        #[option(value_name = "NAME", group = "Data")]
        pub rating_col: String,
        /// Field separator of a csv file: one character, or `\t` / `tab` for tab-separated
        /// files.
        #[option(value_name = "C", group = "Data")]
        pub delimiter: String = ",".to_string(),
        /// Keep ratings >= R, or `none` to keep every record (implicit data such as clicks).
        /// Default: 4 when the data has ratings (the paper's preprocessing).
        #[option(group = "Data")]
        pub min_rating: RatingCut,
        /// Keep users with at least N distinct items (default 5; 0 keeps everyone).
        #[option(group = "Data")]
        pub min_user_items: usize,
        /// Share of the users that are test users (default 0.1). Each user is a test,
        /// validation or training user by a keyed hash of their own id and the split seed, so
        /// one user never moves another between groups; the group sizes vary with the data
        /// (docs/privacy-report.md, "Populations").
        #[option(value_name = "SHARE", group = "Data")]
        pub test_users: f64,
        /// Validation (calibration) users held out of the fit and never served: `auto` or a
        /// share of the users in [0, 1) (default: the protocol's — the test users' share for
        /// MovieLens and Netflix, none for synthetic small data and LightGCN files). `auto` on
        /// record data: the test users' share. On LightGCN files a share holds that share of the
        /// users with a test item out as validation users and as many as test users (or
        /// --test-users); `auto` is 0.1 (docs/utility.md, "Protocols").
        #[option(group = "Data")]
        pub validation_users: ValidationUsers,
        /// Seed of the train/test split (which users are test and validation users, and which
        /// items of theirs are held out) and of synthetic data.
        #[option(group = "Data")]
        pub split_seed: u64 = 42,
        /// A public item catalogue, one item id per line: the release's items are these, in this
        /// order — an item of the data outside it is dropped, an item of it without interactions
        /// kept (it scores 0). Declared public, so a DP fit spends nothing on choosing items.
        /// Default: the items of the data (a DP fit then releases its items by DP partition
        /// selection; docs/training-privacy.md, "The item universe").
        #[option(value_name = "FILE", group = "Data")]
        pub catalogue: PathBuf,
    }
}

/// A rating cut-off: a number, or the word `"none"` (keep every record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RatingCut {
    /// Keep ratings ≥ this.
    Value(f64),
    /// `"none"`.
    Word(String),
}

impl OptionValue for RatingCut {
    const KIND: Kind = Kind::Text;
    const VALUE_NAME: &'static str = "R|none";

    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "none" => Ok(RatingCut::Word("none".into())),
            t => match t.parse::<f32>() {
                Ok(v) if v.is_finite() => Ok(RatingCut::Value(f64::from(v))),
                _ => Err(format!("'{t}' is not a number or 'none'")),
            },
        }
    }

    fn show(&self) -> String {
        match self {
            RatingCut::Value(v) => v.to_string(),
            RatingCut::Word(w) => w.clone(),
        }
    }
}

impl DataOptions {
    /// A data source is named: `dataset`, or `format` with `path`.
    pub fn check(&self) -> Result<()> {
        match (&self.dataset, &self.format, &self.path) {
            (Some(_), None, None) | (None, Some(_), Some(_)) => Ok(()),
            (Some(_), _, _) => Err(Error::Invalid(
                "give either dataset (--dataset) or format and path (--format, --path), not both"
                    .into(),
            )),
            _ => Err(Error::Invalid(
                "give dataset=NAME (--dataset), or format=FORMAT and path=PATH (--format, --path)"
                    .into(),
            )),
        }
    }

    /// The data source these options name.
    pub fn source(&self) -> Result<DataSource> {
        self.check()?;
        if let Some(name) = &self.dataset {
            let shape = SyntheticShape::parse(&self.shape())?;
            return Ok(DataSource::Named {
                dataset: NamedDataset::parse(name, shape)?,
                data_dir: self.data_dir(),
            });
        }
        let (f, path) = (self.format.as_deref().unwrap_or(""), self.path.clone());
        let format = Format::parse(f)?;
        let columns = match (&self.user_col, &self.item_col) {
            (Some(u), Some(i)) => Some(Columns {
                user: u.clone(),
                item: i.clone(),
                rating: self.rating_col.clone(),
            }),
            _ if matches!(format, Format::Csv | Format::Parquet) => {
                return Err(Error::Invalid(format!(
                    "format {f} needs user_col and item_col (--user-col, --item-col)"
                )))
            }
            _ => None,
        };
        Ok(DataSource::Path {
            format,
            path: path.unwrap_or_default(),
            columns,
        })
    }

    /// The preprocessing and split options.
    pub fn load_options(&self) -> Result<LoadOptions> {
        let delimiter = match self.delimiter().as_str() {
            "\\t" | "\t" | "tab" => b'\t',
            d if d.len() == 1 && d.is_ascii() => d.as_bytes()[0],
            d => {
                return Err(Error::Invalid(format!(
                    "delimiter (--delimiter) must be one ASCII character, \\t or tab, got '{d}'"
                )))
            }
        };
        let min_rating = match &self.min_rating {
            None => None,
            Some(RatingCut::Word(w)) if w == "none" => Some(None),
            Some(RatingCut::Value(v)) if v.is_finite() => Some(Some(*v as f32)),
            Some(r) => {
                return Err(Error::Invalid(format!(
                    "min_rating (--min-rating) must be a number or 'none', got '{}'",
                    r.show()
                )))
            }
        };
        Ok(LoadOptions {
            delimiter,
            min_rating,
            min_user_items: self.min_user_items,
            test_users: self.test_users,
            validation_users: self.validation_users,
            catalogue: self.catalogue.clone(),
        })
    }

    /// These options with every value the run used written out, as a table that reads the same
    /// data again from any working directory: the named data set (its directory made absolute)
    /// or the file (absolute) with its columns, the preprocessing settings as resolved and the
    /// split's seed.
    pub fn recorded(source: &DataSource, load: &LoadOptions, split_seed: u64) -> DataOptions {
        let mut t = DataOptions::default();
        match source {
            DataSource::Named { dataset, data_dir } => {
                t.dataset = Some(dataset.option_name().to_string());
                match dataset {
                    NamedDataset::Synthetic(shape) => t.shape = Some(shape.name().to_string()),
                    _ => t.data_dir = Some(absolute(data_dir)),
                }
            }
            DataSource::Path {
                format,
                path,
                columns,
            } => {
                t.format = Some(format.name().to_string());
                t.path = Some(absolute(path));
                if let Some(c) = columns {
                    t.user_col = Some(c.user.clone());
                    t.item_col = Some(c.item.clone());
                    t.rating_col = c.rating.clone();
                }
                if *format == Format::Csv {
                    t.delimiter = Some((load.delimiter as char).to_string());
                }
            }
        }
        t.min_rating = load.min_rating.map(|r| match r {
            Some(v) => RatingCut::Value(f64::from(v)),
            None => RatingCut::Word("none".into()),
        });
        t.min_user_items = load.min_user_items;
        t.test_users = load.test_users;
        t.validation_users = load.validation_users;
        t.split_seed = Some(split_seed);
        t.catalogue = load.catalogue.as_deref().map(absolute);
        t
    }
}

/// `p` made absolute (as it is when it exists), else as given.
pub fn absolute(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
