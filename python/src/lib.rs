//! `recsel._native`: the Python binding of the recsel library (docs/python.md).
//!
//! Everything here converts: numpy arrays to slices and back, Python keyword arguments to the
//! library's option tables and parameters, library errors to `recsel.RecselError` with the
//! library's message. The computations are the library's own functions — the ones the `recsel`
//! command line calls — run with the GIL released (`Python::detach`), so rayon parallelises
//! inside each call and other Python threads keep running. The Python-facing API with its
//! docstrings lives in `python/recsel/__init__.py`; this module's names start from there.
//!
//! One file per topic: `convert` (errors, arrays, values), `mechanisms` (the registry, sampling,
//! batches, audits), `model` (models and user rows), `partition` (sensitivities and the phases of
//! a distributed `select`), `select` (a `select` run prepared on the driver), `recommend`
//! (serving), `evaluate` (`tune` and `evaluate`), `statistic` (private statistics), `candidates` (selection from private candidates with a Python function) and `sparse` (the sparse vector on DP queries, the threshold search, the unknown-threshold selection, and `bounds`); this
//! one only registers them.

use pyo3::prelude::*;

mod candidates;
mod convert;
mod evaluate;
mod mechanisms;
mod model;
mod partition;
mod recommend;
mod select;
mod sparse;
mod statistic;

/// The module `recsel._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RecselError", m.py().get_type::<convert::RecselError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(mechanisms::mechanisms_list, m)?)?;
    m.add_function(wrap_pyfunction!(mechanisms::mechanism_params, m)?)?;
    m.add_function(wrap_pyfunction!(mechanisms::sample, m)?)?;
    m.add_function(wrap_pyfunction!(mechanisms::select_batch, m)?)?;
    m.add_function(wrap_pyfunction!(mechanisms::audit, m)?)?;
    m.add_function(wrap_pyfunction!(partition::sensitivities, m)?)?;
    m.add_function(wrap_pyfunction!(partition::split_users, m)?)?;
    m.add_function(wrap_pyfunction!(partition::percentile_counts_of, m)?)?;
    m.add_function(wrap_pyfunction!(partition::sketch_partition, m)?)?;
    m.add_function(wrap_pyfunction!(partition::merge_sketches, m)?)?;
    m.add_function(wrap_pyfunction!(partition::run_partition, m)?)?;
    m.add_function(wrap_pyfunction!(select::select_options, m)?)?;
    m.add_function(wrap_pyfunction!(model::training_privacy_options, m)?)?;
    m.add_function(wrap_pyfunction!(model::release_options, m)?)?;
    m.add_function(wrap_pyfunction!(recommend::recommend_options, m)?)?;
    m.add_function(wrap_pyfunction!(candidates::select_private_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(statistic::statistic_options, m)?)?;
    m.add_function(wrap_pyfunction!(statistic::private_statistic, m)?)?;
    m.add_function(wrap_pyfunction!(statistic::duff_law, m)?)?;
    m.add_function(wrap_pyfunction!(sparse::search_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(sparse::select_unknown_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(sparse::bounds_options, m)?)?;
    m.add_function(wrap_pyfunction!(sparse::bounds, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::tune_options, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::evaluate_options, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::tune, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::evaluate, m)?)?;
    m.add_class::<model::UserRows>()?;
    m.add_class::<model::PyModel>()?;
    m.add_class::<partition::PySens>()?;
    m.add_class::<partition::PyConfig>()?;
    m.add_class::<partition::PySketch>()?;
    m.add_class::<partition::PyPart>()?;
    m.add_class::<select::SelectJob>()?;
    m.add_class::<recommend::PyRecommender>()?;
    m.add_class::<sparse::PySparseVector>()?;
    Ok(())
}
