//! The options of `recsel statistic` (and of `recsel.statistic` in Python): which statistic of
//! which column, by which method, at which ε, on which public range (docs/statistics.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Method, Neighbours, PrivateStatistic, Statistic, StatisticParams};
use crate::data::load::load_dataset_with;
use crate::data::options::DataOptions;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::mechanisms::Guarantee;
use crate::options::option_table;
use crate::rng::Streams;

option_table! {
    /// The options of `recsel statistic`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct StatisticOptions {
        /// The statistic: median, quantile (at --q), count (records >= --at-least) or mean
        /// (the mean of the values clipped to --lo, --hi).
        #[option(value_name = "NAME", choices = &["median", "quantile", "count", "mean"], group = "Statistic")]
        pub statistic: String = "median".to_string(),
        /// Level of --statistic quantile, in [0, 1].
        #[option(group = "Statistic")]
        pub q: f64 = 0.5,
        /// Threshold of --statistic count: the records with value >= it are counted.
        #[option(group = "Statistic")]
        pub at_least: f64 = 1.0,
        /// Release method: duff (the exponential mechanism over the dataset distance), em (the
        /// standard exponential-mechanism quantile), smooth-cauchy, smooth-laplace (smooth
        /// sensitivity of the quantile), laplace (the global sensitivity) or smooth-cauchy-nrs07
        /// (smooth-cauchy with NRS07's constants, three times the noise).
        #[option(value_name = "METHOD", choices = Method::NAMES, group = "Privacy")]
        pub method: String = "duff".to_string(),
        /// ε of the release (finite, > 0).
        #[option(flag = "eps", value_name = "E", group = "Privacy")]
        pub epsilon: f64 = 1.0,
        /// δ of --method smooth-laplace, in (0, 1).
        #[option(group = "Privacy")]
        pub delta: f64 = 1e-6,
        /// Lower end of the public range: values are clipped to [lo, hi] and outputs lie in it
        /// (for a count: the outputs are the integers of the range). It must not be read off the
        /// data.
        #[option(group = "Privacy")]
        pub lo: f64,
        /// Upper end of the public range.
        #[option(group = "Privacy")]
        pub hi: f64,
        /// Duff's output grid: this many evenly spaced values of [lo, hi].
        #[option(group = "Privacy")]
        pub points: usize = 1001,
        /// Neighbouring data sets: replace (one record changed, n public) or add-remove (one
        /// record more or fewer; Duff on quantiles and counts).
        #[option(value_name = "REL", choices = &["replace", "add-remove"], group = "Privacy")]
        pub neighbours: String = "replace".to_string(),
        /// A CSV file with a header line: the column --column is the data (one record a row).
        #[option(value_name = "FILE", conflicts = &["dataset", "format", "path"], group = "Column")]
        pub values: PathBuf,
        /// Column of --values, by name.
        #[option(value_name = "NAME", group = "Column")]
        pub column: String,
        /// Or a data set (--dataset, or --format with --path): the column is each training
        /// user's number of interactions.
        #[flatten]
        pub data: DataOptions,
        /// Seed of the random stream (default: fresh entropy).
        #[option(group = "Privacy")]
        pub seed: u64,
    }
}

impl StatisticOptions {
    /// The validated mechanism parameters.
    pub fn params(&self) -> Result<StatisticParams> {
        let statistic = match self.statistic().as_str() {
            "median" => Statistic::MEDIAN,
            "quantile" => Statistic::Quantile(self.q()),
            "count" => Statistic::Count {
                at_least: self.at_least(),
            },
            "mean" => Statistic::ClippedMean,
            other => {
                return Err(Error::UnknownName {
                    kind: "statistic",
                    name: other.to_string(),
                    valid: "median, quantile, count, mean".into(),
                })
            }
        };
        let (Some(lo), Some(hi)) = (self.lo, self.hi) else {
            return Err(Error::Invalid(
                "give the public range with lo and hi (--lo, --hi); it must not come from the data"
                    .into(),
            ));
        };
        Ok(StatisticParams {
            method: Method::from_name(&self.method())?,
            statistic,
            epsilon: self.epsilon(),
            delta: self.delta(),
            lo,
            hi,
            points: self.points(),
            neighbours: Neighbours::from_name(&self.neighbours())?,
        })
    }

    /// The column: the CSV column, or each user's number of interactions in the data set. Also
    /// a name for it.
    pub fn column(&self) -> Result<(String, Vec<f64>)> {
        match (&self.values, &self.column) {
            (Some(path), Some(col)) => {
                Ok((format!("{}:{col}", path.display()), read_column(path, col)?))
            }
            (Some(_), None) => Err(Error::Invalid(
                "values (--values) needs column (--column)".into(),
            )),
            (None, _) => {
                let source = self.data.source()?;
                let ds =
                    load_dataset_with(&source, self.data.split_seed(), &self.data.load_options()?)?;
                Ok((
                    format!("{}: training interactions per user", ds.name()),
                    interactions_per_user(&ds),
                ))
            }
        }
    }
}

/// One release as a front end reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatisticOutcome {
    /// Where the column came from.
    pub column: String,
    /// Its number of records.
    pub records: usize,
    /// The statistic's label.
    pub statistic: String,
    /// The method's name.
    pub method: &'static str,
    /// The private value.
    pub value: f64,
    /// Its guarantee.
    pub guarantee: Guarantee,
    /// The neighbour relation.
    pub neighbours: &'static str,
    /// The public range.
    pub range: [f64; 2],
    /// The seed of the stream.
    pub seed: u64,
    /// The exact value: NOT private, never serialised; a front end shows it only when asked.
    #[serde(skip)]
    pub true_value_not_private: f64,
}

impl StatisticOptions {
    /// One release on `column` (name and values; `None`: read the column these options name) with
    /// the stream of `seed`.
    pub fn release(
        &self,
        column: Option<(String, Vec<f64>)>,
        seed: u64,
    ) -> Result<StatisticOutcome> {
        let params = self.params()?;
        let mech = PrivateStatistic::new(&params)?;
        let (name, values) = match column {
            Some(c) => c,
            None => self.column()?,
        };
        let mut rng = Streams::new(seed).stream(0, 0, 0, 0);
        let r = mech.release(&values, &mut rng)?;
        Ok(StatisticOutcome {
            column: name,
            records: values.len(),
            statistic: params.statistic.label(),
            method: params.method.name(),
            value: r.value,
            guarantee: r.guarantee,
            neighbours: params.neighbours.name(),
            range: [params.lo, params.hi],
            seed,
            true_value_not_private: params.statistic.value(&values, params.lo, params.hi),
        })
    }
}

/// Every training user's number of interactions in a data set: the rows the model would be
/// fitted on (for LightGCN files in the paper's protocol, every user's `train.txt` row).
pub fn interactions_per_user(ds: &Dataset) -> Vec<f64> {
    (0..ds.train.rows())
        .map(|r| ds.train.outer_view(r).map_or(0, |v| v.nnz()) as f64)
        .collect()
}

/// The numbers of column `column` of a CSV file with a header line (comma separated); a row
/// whose field is empty or not a number is an error naming the line.
pub fn read_column(path: &Path, column: &str) -> Result<Vec<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| Error::Invalid(format!("{}: empty file", path.display())))?;
    let idx = header
        .split(',')
        .position(|h| h.trim().trim_matches('"') == column)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no column '{column}' (columns: {header})",
                path.display()
            ))
        })?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let field = line
            .split(',')
            .nth(idx)
            .unwrap_or("")
            .trim()
            .trim_matches('"');
        let v: f64 = field.parse().map_err(|_| {
            Error::Invalid(format!(
                "{} line {}: column '{column}' is '{field}', not a number",
                path.display(),
                i + 2
            ))
        })?;
        if !v.is_finite() {
            return Err(Error::Invalid(format!(
                "{} line {}: column '{column}' is {v}",
                path.display(),
                i + 2
            )));
        }
        out.push(v);
    }
    Ok(out)
}
