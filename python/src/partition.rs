//! Sensitivities and the phases of a `select` run split over partitions of the users (the Ray
//! runner, docs/python.md).

use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use recsel::experiments::select::partition::{self, PartitionResult};
use recsel::experiments::select::{self, SelectConfig};
use recsel::scoring::{
    percentile_counts, sketch_users, ModelScorer, PercentileSketch, PercentileUsers, Sensitivities,
    SensitivityConfig,
};

use crate::convert::{err, invalid, reduce_with, slice, R};
use crate::model::{PyModel, UserRows};

/// Per-item percentiles and sensitivities (picklable).
#[pyclass(module = "recsel._native", frozen, name = "Sensitivities")]
pub(crate) struct PySens {
    pub(crate) sens: Arc<Sensitivities>,
}

#[pymethods]
impl PySens {
    #[new]
    fn new(lower: Vec<f64>, upper: Vec<f64>, delta: Vec<f64>, counts: Vec<u64>) -> R<Self> {
        let n = lower.len();
        if upper.len() != n || delta.len() != n || counts.len() != n {
            return Err(invalid(format!(
                "lower, upper, delta and counts must have one entry per item; got {n}, {}, {}, {}",
                upper.len(),
                delta.len(),
                counts.len()
            )));
        }
        Ok(PySens {
            sens: Arc::new(Sensitivities {
                lower,
                upper,
                delta,
                counts,
            }),
        })
    }

    /// Lower percentile (p1) per item.
    #[getter]
    fn lower<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.sens.lower.clone().into_pyarray(py)
    }
    /// Upper percentile (p99) per item.
    #[getter]
    fn upper<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.sens.upper.clone().into_pyarray(py)
    }
    /// Sensitivity per item: max(upper − lower, floor).
    #[getter]
    fn delta<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.sens.delta.clone().into_pyarray(py)
    }
    /// Scores each item's percentiles ran over.
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.sens.counts.clone().into_pyarray(py)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let s = slf.get();
        let args = PyTuple::new(
            py,
            [
                s.lower(py).into_any(),
                s.upper(py).into_any(),
                s.delta(py).into_any(),
                s.counts(py).into_any(),
            ],
        )?;
        Ok((slf.get_type().into_any(), args))
    }
}

pub(crate) fn sens_config(
    lower: f64,
    upper: f64,
    floor: f64,
    population: &str,
) -> R<SensitivityConfig> {
    Ok(SensitivityConfig::new(lower, upper, floor)
        .map_err(err)?
        .with_population(PercentileUsers::from_name(population).map_err(err)?))
}

/// Per-item sensitivities of a model's scores over user rows (`recsel select`'s step).
#[pyfunction]
#[pyo3(signature = (model, users, lower, upper, floor, population))]
pub(crate) fn sensitivities(
    py: Python<'_>,
    model: &PyModel,
    users: &UserRows,
    lower: f64,
    upper: f64,
    floor: f64,
    population: &str,
) -> R<PySens> {
    check_items(model, users)?;
    let cfg = sens_config(lower, upper, floor, population)?;
    let sens = py.detach(|| {
        let scorer = ModelScorer::new(&model.model, &users.csr);
        recsel::scoring::item_sensitivities(&scorer, &cfg, &|_| {})
    });
    Ok(PySens {
        sens: Arc::new(sens),
    })
}

pub(crate) fn check_items(model: &PyModel, users: &UserRows) -> R<()> {
    if model.model.n_items() != users.csr.cols() {
        return Err(invalid(format!(
            "the user rows have {} item columns, the model {}",
            users.csr.cols(),
            model.model.n_items()
        )));
    }
    Ok(())
}

/// The resolved settings of a `select` run (picklable, for the object store).
#[pyclass(module = "recsel._native", frozen, name = "SelectConfig")]
pub(crate) struct PyConfig {
    pub(crate) cfg: SelectConfig,
    pub(crate) sens: SensitivityConfig,
}

#[pymethods]
impl PyConfig {
    /// Rebuilds a configuration from [`PyConfig::state`] (floats travel as JSON numbers, in
    /// their shortest exact form, so exactly; the candidate list, if any, as its own JSON).
    #[staticmethod]
    fn from_state(state: &Bound<'_, PyTuple>) -> R<Self> {
        let json: String = state.get_item(0)?.extract()?;
        let (lower, upper, floor): (f64, f64, f64) = state.get_item(1)?.extract()?;
        // The candidate policy's list, when the run has one (a state without it has none).
        let candidates: String = match state.len() {
            n if n > 2 => state.get_item(2)?.extract()?,
            _ => "null".into(),
        };
        let cfg: SelectConfig = serde_json::from_str(&json)
            .map_err(|e| invalid(format!("corrupt SelectConfig state: {e}")))?;
        let cfg = cfg.with_candidates_state(&candidates).map_err(err)?;
        let population = cfg.percentile_users.name().to_string();
        Ok(PyConfig {
            sens: sens_config(lower, upper, floor, &population)?,
            cfg,
        })
    }

    /// The state [`PyConfig::from_state`] rebuilds from.
    fn state<'py>(&self, py: Python<'py>) -> R<Bound<'py, PyTuple>> {
        let s = &self.sens;
        PyTuple::new(
            py,
            [
                self.to_json()?.into_pyobject(py)?.into_any(),
                (s.lower, s.upper, s.floor).into_pyobject(py)?.into_any(),
                self.cfg.candidates_state().into_pyobject(py)?.into_any(),
            ],
        )
    }

    /// The configuration as JSON (what `config.json` records under `select`).
    fn to_json(&self) -> R<String> {
        serde_json::to_string(&self.cfg).map_err(|e| invalid(e.to_string()))
    }

    /// The seed of the selection streams.
    #[getter]
    fn seed(&self) -> u64 {
        self.cfg.seed
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let st = slf.get().state(slf.py())?;
        reduce_with(slf.as_any(), "from_state", st.into_any())
    }
}

/// Phase 1 of one partition: per-item score tails (picklable).
#[pyclass(module = "recsel._native", frozen, name = "PercentileSketch")]
pub(crate) struct PySketch {
    pub(crate) sketch: PercentileSketch,
}

#[pymethods]
impl PySketch {
    /// The sketch as bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.sketch.to_bytes())
    }

    /// The sketch from [`PySketch::to_bytes`].
    #[staticmethod]
    fn from_bytes(bytes: &[u8]) -> R<Self> {
        Ok(PySketch {
            sketch: PercentileSketch::from_bytes(bytes).map_err(err)?,
        })
    }

    /// The percentiles and sensitivities of the (merged) sketch.
    fn sensitivities(&self, config: &PyConfig) -> R<PySens> {
        if !self.sketch.is_complete() {
            return Err(invalid(
                "the sketch holds fewer scores than its tails need; merge the sketches of all partitions first"
                    .into(),
            ));
        }
        Ok(PySens {
            sens: Arc::new(self.sketch.sensitivities(&config.sens)),
        })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let b = slf.get().to_bytes(slf.py());
        reduce_with(slf.as_any(), "from_bytes", b.into_any())
    }
}

/// Phase 2 of one partition: its users' rows, counts and scatter sample (picklable).
#[pyclass(module = "recsel._native", frozen, name = "PartitionResult")]
pub(crate) struct PyPart {
    pub(crate) part: PartitionResult,
}

#[pymethods]
impl PyPart {
    /// The result as bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.part.to_bytes())
    }

    /// The result from [`PyPart::to_bytes`].
    #[staticmethod]
    fn from_bytes(bytes: &[u8]) -> R<Self> {
        Ok(PyPart {
            part: PartitionResult::from_bytes(bytes).map_err(err)?,
        })
    }

    /// `(start, end)` of the partition's users.
    #[getter]
    fn users(&self) -> (usize, usize) {
        (self.part.users.start, self.part.users.end)
    }

    /// The partition's rows as columns (name → numpy array), named as in `users.parquet` of
    /// `recsel select` but with the user *index* in `user`: what a task writes as its Parquet
    /// part.
    fn columns<'py>(&self, py: Python<'py>, config: &PyConfig) -> R<Bound<'py, PyDict>> {
        let rows = &self.part.rows;
        let d = PyDict::new(py);
        let f = |g: fn(&select::UserRow) -> f64| rows.iter().map(g).collect::<Vec<f64>>();
        d.set_item(
            "user",
            rows.iter()
                .map(|r| r.user)
                .collect::<Vec<u64>>()
                .into_pyarray(py),
        )?;
        d.set_item(
            "candidates",
            rows.iter()
                .map(|r| r.candidates)
                .collect::<Vec<u32>>()
                .into_pyarray(py),
        )?;
        d.set_item("spearman", f(|r| r.spearman).into_pyarray(py))?;
        d.set_item("pearson", f(|r| r.pearson).into_pyarray(py))?;
        d.set_item("weighted", f(|r| r.weighted).into_pyarray(py))?;
        d.set_item("max_score", f(|r| r.max_score).into_pyarray(py))?;
        let cfg = &config.cfg;
        let ne = cfg.epsilons.len();
        for (what, mean) in [("mean", true), ("mse", false)] {
            for (m, name) in cfg.mechanisms.iter().enumerate() {
                for (e, eps) in cfg.epsilons.iter().enumerate() {
                    let i = m * ne + e;
                    let v: Vec<f64> = rows
                        .iter()
                        .map(|r| if mean { r.mean_selected[i] } else { r.mse[i] })
                        .collect();
                    d.set_item(format!("{what}_{name}_eps{eps}"), v.into_pyarray(py))?;
                }
            }
        }
        Ok(d)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let b = slf.get().to_bytes(slf.py());
        reduce_with(slf.as_any(), "from_bytes", b.into_any())
    }
}

/// Contiguous user ranges of near-equal size.
#[pyfunction]
pub(crate) fn split_users(n_users: usize, parts: usize) -> R<Vec<(usize, usize)>> {
    Ok(partition::split_users(n_users, parts)
        .map_err(err)?
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect())
}

/// How many scores each item's percentiles run over (all partitions together).
#[pyfunction]
pub(crate) fn percentile_counts_of<'py>(
    py: Python<'py>,
    model: &PyModel,
    users: &UserRows,
    config: &PyConfig,
) -> R<Bound<'py, PyArray1<u64>>> {
    check_items(model, users)?;
    let scorer = ModelScorer::new(&model.model, &users.csr);
    Ok(percentile_counts(&scorer, config.sens.population).into_pyarray(py))
}

/// Phase 1: the sketch of users `start..end`.
#[pyfunction]
pub(crate) fn sketch_partition(
    py: Python<'_>,
    model: &PyModel,
    users: &UserRows,
    counts: PyReadonlyArray1<'_, u64>,
    config: &PyConfig,
    start: usize,
    end: usize,
) -> R<PySketch> {
    check_items(model, users)?;
    let counts = slice(&counts, "counts")?;
    if counts.len() != users.csr.cols() || start > end || end > users.csr.rows() {
        return Err(invalid(format!(
            "sketch of users {start}..{end} of {} with {} counts for {} items",
            users.csr.rows(),
            counts.len(),
            users.csr.cols()
        )));
    }
    let sketch = py.detach(|| {
        let scorer = ModelScorer::new(&model.model, &users.csr);
        sketch_users(&scorer, &config.sens, counts, start..end, &|_| {})
    });
    Ok(PySketch { sketch })
}

/// Merges phase-1 sketches (exact).
#[pyfunction]
pub(crate) fn merge_sketches(py: Python<'_>, sketches: Vec<PyRef<'_, PySketch>>) -> R<PySketch> {
    let mut it = sketches.iter();
    let first = it
        .next()
        .ok_or_else(|| invalid("no sketches to merge".into()))?;
    let rest: Vec<&PercentileSketch> = it.map(|s| &s.sketch).collect();
    let first = first.sketch.clone();
    let sketch = py
        .detach(|| rest.into_iter().try_fold(first, |a, b| a.merge(b)))
        .map_err(err)?;
    Ok(PySketch { sketch })
}

/// Phase 2: selection and the candidate pass for users `start..end`.
#[pyfunction]
pub(crate) fn run_partition(
    py: Python<'_>,
    model: &PyModel,
    users: &UserRows,
    sens: &PySens,
    config: &PyConfig,
    start: usize,
    end: usize,
) -> R<PyPart> {
    check_items(model, users)?;
    let part = py
        .detach(|| {
            let scorer = users.scorer(&model.model);
            partition::run_partition(&scorer, &sens.sens, &config.cfg, start..end)
        })
        .map_err(err)?;
    Ok(PyPart { part })
}
