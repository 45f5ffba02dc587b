//! Private statistics (docs/statistics.md): `recsel statistic` from keyword arguments, on a numpy
//! array or on the column the options name, and the exact output law of Duff.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use recsel::column_statistic::{PrivateStatistic, StatisticOptions};

use crate::convert::{err, fill, invalid, option_dicts, slice, R};

/// The options of `recsel statistic` (declared once in the library), as dicts.
#[pyfunction]
pub fn statistic_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<StatisticOptions>(py)
}

/// One private release (the function `recsel statistic` calls): JSON text with the value and the
/// guarantee, and the non-private true value as a second item for the caller to show only when
/// asked.
#[pyfunction]
#[pyo3(signature = (values, seed, **options))]
pub fn private_statistic(
    py: Python<'_>,
    values: Option<PyReadonlyArray1<'_, f64>>,
    seed: u64,
    options: Option<&Bound<'_, PyDict>>,
) -> R<(String, f64)> {
    let mut opts = StatisticOptions::default();
    fill(&mut opts, "statistic option", options)?;
    let column = match &values {
        Some(v) => Some(("array".to_string(), slice(v, "values")?.to_vec())),
        None => None,
    };
    let r = py.detach(|| opts.release(column, seed)).map_err(err)?;
    let text = serde_json::to_string(&r).map_err(|e| invalid(e.to_string()))?;
    Ok((text, r.true_value_not_private))
}

/// Two arrays of the same length.
type Pair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// Duff's exact output law on `values` over its grid: (grid values, probabilities).
#[pyfunction]
#[pyo3(signature = (values, **options))]
pub fn duff_law<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    options: Option<&Bound<'py, PyDict>>,
) -> R<Pair<'py>> {
    let mut opts = StatisticOptions::default();
    fill(&mut opts, "statistic option", options)?;
    let mut params = opts.params().map_err(err)?;
    params.method = recsel::column_statistic::Method::Duff;
    let PrivateStatistic::Duff(duff) = PrivateStatistic::new(&params).map_err(err)? else {
        return Err(invalid("not a Duff mechanism".into()));
    };
    let v = slice(&values, "values")?;
    let law = py.detach(|| duff.law(v));
    let grid: Vec<f64> = (0..duff.grid().points())
        .map(|g| duff.grid().value(g))
        .collect();
    Ok((grid.into_pyarray(py), law.into_pyarray(py)))
}
