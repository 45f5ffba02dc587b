//! What a private recommendation is worth (docs/utility.md): `recsel tune` and `recsel
//! evaluate` from keyword arguments, the library's option tables filled in exactly as the
//! command line fills them.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use recsel::evaluate::options::{EvaluateOptions, TuneOptions};
use recsel::mechanisms::Registry;
use recsel::report::evaluate::write_utility;

use crate::convert::{err, fill, invalid, option_dicts, R};

/// The options of `recsel tune` (declared once in the library), as dicts.
#[pyfunction]
pub fn tune_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<TuneOptions>(py)
}

/// The options of `recsel evaluate` (declared once in the library), as dicts.
#[pyfunction]
pub fn evaluate_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<EvaluateOptions>(py)
}

/// `recsel tune`: tunes on the model folder's calibration users and writes `tuning.json`
/// there; returns the tuning as JSON text.
#[pyfunction]
#[pyo3(signature = (**options))]
pub fn tune(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> R<String> {
    let mut opts = TuneOptions::default();
    fill(&mut opts, "tune option", options)?;
    let tuning = py.detach(|| opts.run(&|_| {}, &|_| {})).map_err(err)?;
    serde_json::to_string(&tuning).map_err(|e| invalid(e.to_string()))
}

/// `recsel evaluate`: the utility table (JSON text); with `out`, also every file `recsel
/// evaluate --out` writes there.
#[pyfunction]
#[pyo3(signature = (out=None, **options))]
pub fn evaluate(
    py: Python<'_>,
    out: Option<PathBuf>,
    options: Option<&Bound<'_, PyDict>>,
) -> R<String> {
    let mut opts = EvaluateOptions::default();
    fill(&mut opts, "evaluate option", options)?;
    let (name, table) = py
        .detach(|| opts.run(&Registry::builtin(), &|_| {}, &|_| {}))
        .map_err(err)?;
    if let Some(dir) = out {
        let title = format!("{name}: hit@1 of private recommendations against eps");
        py.detach(|| write_utility(&dir, &title, &table))
            .map_err(err)?;
    }
    serde_json::to_string(&table).map_err(|e| invalid(e.to_string()))
}
