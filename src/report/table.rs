//! Tidy tables written as CSV and Parquet through polars.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{Error, Result};
use crate::experiments::synthetic::{CorrRow, MseRow};
use crate::experiments::twocand::HgRow;
use crate::io::write_atomic;

/// One typed column.
#[derive(Debug, Clone)]
pub enum Values {
    /// Text.
    Str(Vec<String>),
    /// Floating point.
    F64(Vec<f64>),
    /// Counts.
    U64(Vec<u64>),
    /// Flags.
    Bool(Vec<bool>),
}

/// A table as named columns of equal length.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// `(name, values)` in output order.
    pub columns: Vec<(String, Values)>,
}

fn polars_err(context: &str, e: PolarsError) -> Error {
    Error::Parse {
        context: context.to_string(),
        message: e.to_string(),
    }
}

impl Table {
    /// Adds a column.
    pub fn with(mut self, name: impl Into<String>, values: Values) -> Self {
        self.columns.push((name.into(), values));
        self
    }

    fn frame(&self) -> Result<DataFrame> {
        let height = self.columns.first().map_or(0, |(_, v)| match v {
            Values::Str(x) => x.len(),
            Values::F64(x) => x.len(),
            Values::U64(x) => x.len(),
            Values::Bool(x) => x.len(),
        });
        let cols: Vec<Column> = self
            .columns
            .iter()
            .map(|(name, v)| match v {
                Values::Str(x) => Column::new(name.as_str().into(), x),
                Values::F64(x) => Column::new(name.as_str().into(), x),
                Values::U64(x) => Column::new(name.as_str().into(), x),
                Values::Bool(x) => Column::new(name.as_str().into(), x),
            })
            .collect();
        DataFrame::new(height, cols).map_err(|e| polars_err("building a table", e))
    }

    /// Writes `<dir>/<stem>.csv` and `<dir>/<stem>.parquet`; returns their paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
        let mut df = self.frame()?;
        let mut csv = Vec::new();
        CsvWriter::new(&mut csv)
            .include_header(true)
            .finish(&mut df)
            .map_err(|e| polars_err("writing CSV", e))?;
        let mut parquet = Vec::new();
        ParquetWriter::new(&mut parquet)
            .finish(&mut df)
            .map_err(|e| polars_err("writing Parquet", e))?;
        let (pc, pp) = (
            dir.join(format!("{stem}.csv")),
            dir.join(format!("{stem}.parquet")),
        );
        write_atomic(&pc, &csv)?;
        write_atomic(&pp, &parquet)?;
        Ok(vec![pc, pp])
    }
}

/// The tidy MSE table: scenario, mechanism, private, guarantee, epsilon, mse, se, trials.
pub fn mse_table(rows: &[MseRow]) -> Table {
    Table::default()
        .with(
            "scenario",
            Values::Str(rows.iter().map(|r| r.scenario.clone()).collect()),
        )
        .with(
            "mechanism",
            Values::Str(rows.iter().map(|r| r.mechanism.clone()).collect()),
        )
        .with(
            "private",
            Values::Bool(rows.iter().map(|r| r.private).collect()),
        )
        .with(
            "guarantee",
            Values::Str(rows.iter().map(|r| r.guarantee.clone()).collect()),
        )
        .with(
            "epsilon",
            Values::F64(rows.iter().map(|r| r.epsilon).collect()),
        )
        .with("mse", Values::F64(rows.iter().map(|r| r.mse).collect()))
        .with("se", Values::F64(rows.iter().map(|r| r.se).collect()))
        .with(
            "trials",
            Values::U64(rows.iter().map(|r| r.trials).collect()),
        )
}

/// The share sweep of fig 18: `rows` of scenarios `share<b>(<s>)` as (scenario, share, mechanism,
/// private, epsilon, mse, se, trials).
pub fn share_table(rows: &[(u8, f64, &MseRow)]) -> Table {
    Table::default()
        .with(
            "scenario",
            Values::Str(rows.iter().map(|r| r.0.to_string()).collect()),
        )
        .with("share", Values::F64(rows.iter().map(|r| r.1).collect()))
        .with(
            "mechanism",
            Values::Str(rows.iter().map(|r| r.2.mechanism.clone()).collect()),
        )
        .with(
            "private",
            Values::Bool(rows.iter().map(|r| r.2.private).collect()),
        )
        .with(
            "epsilon",
            Values::F64(rows.iter().map(|r| r.2.epsilon).collect()),
        )
        .with("mse", Values::F64(rows.iter().map(|r| r.2.mse).collect()))
        .with("se", Values::F64(rows.iter().map(|r| r.2.se).collect()))
        .with(
            "trials",
            Values::U64(rows.iter().map(|r| r.2.trials).collect()),
        )
}

/// The correlation table: scenario, group, spearman, pearson, weighted.
pub fn corr_table(rows: &[CorrRow]) -> Table {
    Table::default()
        .with(
            "scenario",
            Values::Str(rows.iter().map(|r| r.scenario.clone()).collect()),
        )
        .with(
            "group",
            Values::Str(rows.iter().map(|r| r.group.clone()).collect()),
        )
        .with(
            "spearman",
            Values::F64(rows.iter().map(|r| r.spearman).collect()),
        )
        .with(
            "pearson",
            Values::F64(rows.iter().map(|r| r.pearson).collect()),
        )
        .with(
            "weighted",
            Values::F64(rows.iter().map(|r| r.weighted).collect()),
        )
}

/// The head-to-head table of the two-candidate grids.
pub fn hg_table(rows: &[HgRow]) -> Table {
    let f = |g: fn(&HgRow) -> f64| Values::F64(rows.iter().map(g).collect());
    Table::default()
        .with(
            "figure",
            Values::U64(rows.iter().map(|r| u64::from(r.figure)).collect()),
        )
        .with(
            "mechanism",
            Values::Str(rows.iter().map(|r| r.mechanism.clone()).collect()),
        )
        .with("gamma", f(|r| r.gamma))
        .with("epsilon", f(|r| r.epsilon))
        .with("gap", f(|r| r.gap))
        .with("delta1", f(|r| r.delta1))
        .with("delta2", f(|r| r.delta2))
        .with("hg", f(|r| r.hg))
        .with("se", f(|r| r.se))
        .with("hg_exact", f(|r| r.hg_exact))
        .with(
            "trials",
            Values::U64(rows.iter().map(|r| r.trials).collect()),
        )
}

/// A table of serialisable rows (structs of numbers, strings and flags), one column per field in
/// alphabetical order of the field names: unsigned integers become counts, other numbers floating
/// point.
pub fn to_table<T: serde::Serialize>(rows: &[T]) -> Result<Table> {
    let as_json = |r: &T| {
        serde_json::to_value(r).map_err(|e| Error::Parse {
            context: "building a table".into(),
            message: e.to_string(),
        })
    };
    let values: Vec<serde_json::Value> = rows.iter().map(as_json).collect::<Result<_>>()?;
    let Some(first) = values.first().and_then(|v| v.as_object()) else {
        return Ok(Table::default());
    };
    let mut t = Table::default();
    for (name, v0) in first {
        let field = |v: &serde_json::Value| v.get(name).cloned().unwrap_or_default();
        let col = match v0 {
            serde_json::Value::String(_) => Values::Str(
                values
                    .iter()
                    .map(|v| field(v).as_str().unwrap_or_default().to_string())
                    .collect(),
            ),
            serde_json::Value::Bool(_) => Values::Bool(
                values
                    .iter()
                    .map(|v| field(v).as_bool().unwrap_or_default())
                    .collect(),
            ),
            serde_json::Value::Number(n) if n.is_u64() => Values::U64(
                values
                    .iter()
                    .map(|v| field(v).as_u64().unwrap_or_default())
                    .collect(),
            ),
            _ => Values::F64(
                values
                    .iter()
                    .map(|v| field(v).as_f64().unwrap_or(f64::NAN))
                    .collect(),
            ),
        };
        t = t.with(name.clone(), col);
    }
    Ok(t)
}
