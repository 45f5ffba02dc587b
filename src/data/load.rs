//! Loaders (docs/protocol.md, step 1).
//!
//! Tabular files (MovieLens `ratings.csv`, generic CSV and Parquet) are read with polars, projected
//! to the needed columns. The Netflix Prize `combined_data_N.txt` files and LightGCN `train.txt` /
//! `test.txt` are not tables (a `MovieID:` line heads a block; a line holds a variable number of
//! items), so they are parsed line by line here. Every malformed line is reported with its file,
//! line number and content; duplicate (user, item) pairs are kept in [`RawInteractions`] and counted
//! once when the matrix is built.

use std::path::Path;

use polars::prelude::{ParquetReader, SerReader};

use super::descriptor::{Descriptor, PaperModel, Protocol};
use super::preprocess::preprocess_owned;
use super::readers::{find_movielens_file, lightgcn_dir, netflix_files, polars_error};
pub use super::readers::{
    load_lightgcn, load_lightgcn_with, load_movielens, load_netflix, load_table, load_table_with,
    read_lightgcn_file,
};
use super::source::{missing, AMAZON_HELP, ML20M_HELP, NETFLIX_HELP};
pub use super::source::{Columns, DataSource, Format, LoadOptions, NamedDataset};
use super::split::split_owned;
use super::synthetic::{self, SyntheticShape};
use super::{Dataset, RawInteractions};
use crate::{Error, Result};

/// Loads, preprocesses (docs/protocol.md, "Preprocessing") and splits ("Split") a data source into a
/// [`Dataset`]. The data set's [`Descriptor`] decides which preprocessing and split apply.
pub fn load_dataset(source: &DataSource, seed: u64) -> Result<Dataset> {
    load_dataset_with(source, seed, &LoadOptions::default())
}

/// [`load_dataset`] with a user's [`LoadOptions`] on top of the protocol's defaults. Options that
/// do not apply (preprocessing or split options for LightGCN files, which carry their own split)
/// are errors rather than silently ignored.
pub fn load_dataset_with(source: &DataSource, seed: u64, opts: &LoadOptions) -> Result<Dataset> {
    let data = load_items_of_data(source, seed, opts)?;
    match &opts.catalogue {
        Some(path) => Ok(data.on_catalogue(&super::universe::read_catalogue(path)?).0),
        None => Ok(data),
    }
}

/// [`load_dataset_with`] before a catalogue: the items of the data.
fn load_items_of_data(source: &DataSource, seed: u64, opts: &LoadOptions) -> Result<Dataset> {
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
    if let Some(x) = opts.test_users {
        if !(x > 0.0 && x < 1.0) {
            return Err(Error::Invalid(format!(
                "--test-users is the share of the users that are test users, in (0, 1), got {x}"
            )));
        }
        if split_cfg.validation_share > 0.0 {
            split_cfg.validation_share = x;
        }
        split_cfg.test_share = x;
    }
    match opts.validation_users {
        Some(super::heldout::ValidationUsers::Share(x)) => split_cfg.validation_share = x,
        // The protocol's share, and where the protocol holds none out (synthetic small) the test
        // users' share: `auto` always gives users to calibrate and tune on.
        Some(super::heldout::ValidationUsers::Auto) if split_cfg.validation_share == 0.0 => {
            split_cfg.validation_share = split_cfg.test_share
        }
        Some(v @ super::heldout::ValidationUsers::Fold { .. }) => {
            return Err(Error::Invalid(format!(
                "validation users '{v}': cross-fitting folds apply to LightGCN files only"
            )))
        }
        _ => {}
    }
    split_owned(descriptor, matrix, &split_cfg)
}
