//! A `select` run prepared on the driver: the options filled in from keyword arguments, the run
//! prepared and finished by the library exactly as `recsel select` prepares and finishes it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use recsel::experiments::select::partition::{self, PartitionResult};
use recsel::experiments::select::{self, Placement, SelectOptions};
use recsel::mechanisms::Registry;
use recsel::report::select::{finish, Print, Timings};
use recsel::scoring::SensitivityConfig;

use crate::convert::{err, fill, option_dicts, R};
use crate::model::{PyModel, UserRows};
use crate::partition::{PyConfig, PyPart, PySens};

/// The select job's options (`recsel select`'s, declared once in the library), as dicts
/// ([`option_dicts`]): the keyword arguments [`SelectJob`] accepts.
#[pyfunction]
pub fn select_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<SelectOptions>(py)
}

/// The data, model and configuration of a `select` run, prepared as `recsel select` prepares
/// them (same options, same defaults), and phase 3: merging and writing the outputs.
#[pyclass(module = "recsel._native")]
pub struct SelectJob {
    job: select::SelectJob,
    model: Py<PyModel>,
    users: Py<UserRows>,
    config: Py<PyConfig>,
    log: Vec<String>,
}

#[pymethods]
impl SelectJob {
    /// Loads the data and fits (or reuses) the model exactly as `recsel select` with the same
    /// options does; keyword names are the command line's long options with `_` for `-` (or
    /// the `[select]` table's keys), `out` the output folder.
    #[new]
    #[pyo3(signature = (out=None, **options))]
    fn new(py: Python<'_>, out: Option<PathBuf>, options: Option<&Bound<'_, PyDict>>) -> R<Self> {
        let mut opts = SelectOptions::default();
        fill(&mut opts, "select option", options)?;
        let placement = Placement { out, resume: false };
        let lines = Mutex::new(Vec::new());
        let job = py
            .detach(|| {
                select::SelectJob::prepare(&opts, &placement, &Registry::builtin(), &|s| {
                    lines.lock().expect("log").push(s.to_string())
                })
            })
            .map_err(err)?;
        let data = &job.data;
        // The model folder's `model.json` (the job saved it, or reused a saved one, possibly
        // fitted with DP): its training entry travels with the model.
        let meta_path = job.model_dir.join("model.json");
        let meta: recsel::model::io::ModelMeta = std::fs::read(&meta_path)
            .map_err(|e| recsel::Error::io(&meta_path, e))
            .and_then(|b| {
                serde_json::from_slice(&b)
                    .map_err(|e| recsel::Error::Invalid(format!("{}: {e}", meta_path.display())))
            })
            .map_err(err)?;
        let model = PyModel {
            model: job.model.clone(),
            params: job.model_params,
            dataset: data.name().to_string(),
            item_ids: data.item_ids.clone(),
            training_privacy: meta.training_privacy,
            item_counts: None,
            shift_choice: meta.shift_choice,
        };
        let users = UserRows {
            csr: Arc::new(data.test_input.clone()),
            targets: Some(Arc::new(data.test_target.clone())),
        };
        let cfg = job.config.clone();
        let sens = SensitivityConfig::default().with_population(cfg.percentile_users);
        Ok(SelectJob {
            model: Py::new(py, model)?,
            users: Py::new(py, users)?,
            config: Py::new(py, PyConfig { cfg, sens })?,
            log: lines.into_inner().unwrap_or_default(),
            job,
        })
    }

    /// The fitted (or loaded) model.
    #[getter]
    fn model(&self, py: Python<'_>) -> Py<PyModel> {
        self.model.clone_ref(py)
    }

    /// The test users' input rows.
    #[getter]
    fn users(&self, py: Python<'_>) -> Py<UserRows> {
        self.users.clone_ref(py)
    }

    /// The resolved configuration.
    #[getter]
    fn config(&self, py: Python<'_>) -> Py<PyConfig> {
        self.config.clone_ref(py)
    }

    /// Number of test users.
    #[getter]
    fn n_users(&self) -> usize {
        self.job.data.test_input.rows()
    }

    /// Output directory.
    #[getter]
    fn out(&self) -> PathBuf {
        self.job.out.clone()
    }

    /// What preparing the run did (model reused or fitted, seed drawn), one line each.
    #[getter]
    fn log(&self) -> Vec<String> {
        self.log.clone()
    }

    /// Phase 3: merges the partitions, analyses, writes every output `recsel select` writes into
    /// `out`, and returns the summary `recsel select` prints (JSON when `json`, everything when
    /// `verbose`).
    #[pyo3(signature = (sens, parts, sensitivity_seconds, selection_seconds, start_seconds, json,
                        verbose=false))]
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        py: Python<'_>,
        sens: &PySens,
        parts: Vec<PyRef<'_, PyPart>>,
        sensitivity_seconds: f64,
        selection_seconds: f64,
        start_seconds: f64,
        json: bool,
        verbose: bool,
    ) -> R<String> {
        let parts: Vec<PartitionResult> = parts.iter().map(|p| p.part.clone()).collect();
        let config = self.config.get();
        let t0 = std::time::Instant::now();
        py.detach(|| {
            let merged = partition::merge(parts, self.job.data.test_input.rows())?;
            let analysis = select::analysis_from(
                &config.cfg,
                &sens.sens,
                config.sens.floor,
                merged.counts,
                merged.sample,
                &merged.rows,
            );
            let timings = Timings {
                sensitivity_seconds,
                selection_seconds,
                diagnostics_seconds: t0.elapsed().as_secs_f64(),
                total_seconds: start_seconds + t0.elapsed().as_secs_f64(),
            };
            let print = Print { json, verbose };
            let (rows, skipped) = (&merged.rows, merged.skipped);
            finish(
                &self.job,
                &config.cfg,
                rows,
                skipped,
                &analysis,
                &sens.sens,
                &timings,
                print,
            )
        })
        .map_err(err)
    }
}
