//! `recsel._native`: the Python binding of the recsel library (docs/python.md).
//!
//! Everything here converts: numpy arrays to slices and back, Python keyword arguments to the
//! library's parameter structs, library errors to `recsel.RecselError` with the library's message.
//! The computations are the library's own functions — the ones the `recsel` command line calls —
//! run with the GIL released (`Python::detach`), so rayon parallelises inside each call and other
//! Python threads keep running. The Python-facing API with its docstrings lives in
//! `python/recsel/__init__.py`; this module's names start from there.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use recsel::data::{Csr, DataSource, Format, LoadOptions, NamedDataset};
use recsel::experiments::partition::{self, PartitionResult};
use recsel::experiments::real::{self, SelectConfig};
use recsel::mechanisms::batch::{self, BatchStreams};
use recsel::mechanisms::{self, MechParams, Problem};
use recsel::model::{self, Model, ModelParams};
use recsel::report::select::{finish_select, SelectRun, Timings};
use recsel::rng::{NoiseMode, Streams};
use recsel::scoring::{
    percentile_counts, sketch_users, ModelScorer, PercentileSketch, PercentileUsers, Sensitivities,
    SensitivityConfig,
};
use recsel::stats::Chooser;

mod candidates;

pyo3::create_exception!(
    _native,
    RecselError,
    pyo3::exceptions::PyValueError,
    "An error reported by the recsel library; the message is the library's."
);

/// The library's error as a Python exception with the library's message.
fn err(e: recsel::Error) -> PyErr {
    RecselError::new_err(e.to_string())
}

fn invalid(msg: String) -> PyErr {
    RecselError::new_err(msg)
}

type R<T> = PyResult<T>;

/// `__reduce__` of an object that its class's static method `ctor` rebuilds from `arg` (the
/// picklable classes travel as bytes or a state tuple, e.g. through Ray's object store).
fn reduce_with<'py>(
    slf: &Bound<'py, PyAny>,
    ctor: &str,
    arg: Bound<'py, PyAny>,
) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    Ok((
        slf.get_type().getattr(ctor)?,
        PyTuple::new(slf.py(), [arg])?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Parameters

/// Mechanism parameters from keyword arguments (`gamma`, `beta`, `eta`, `c`, `chooser`, `draws`);
/// unknown keywords are an error naming them.
fn mech_params(epsilon: f64, params: Option<&Bound<'_, PyDict>>) -> R<MechParams> {
    let mut p = MechParams::default().with_epsilon(epsilon);
    if let Some(d) = params {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            match key.as_str() {
                "gamma" => p.gamma = v.extract()?,
                "beta" => p.beta = v.extract()?,
                "eta" => p.eta = v.extract()?,
                "c" => p.c = v.extract()?,
                "draws" => p.draws = v.extract()?,
                "chooser" => p.chooser = Chooser::from_name(&v.extract::<String>()?).map_err(err)?,
                other => {
                    return Err(invalid(format!(
                        "unknown mechanism parameter '{other}'; valid: gamma, beta, eta, c, chooser, draws"
                    )))
                }
            }
        }
    }
    Ok(p)
}

fn build_mech(name: &str, params: &MechParams) -> R<Box<dyn mechanisms::Mechanism>> {
    let spec = mechanisms::spec(name).map_err(err)?;
    spec.build(params)
        .map_err(|e| invalid(format!("invalid parameters for {}: {e}", spec.name)))
}

fn mode(secure: bool, mech: &dyn mechanisms::Mechanism) -> R<NoiseMode> {
    let m = NoiseMode::from_flag(secure);
    if secure {
        mech.secure_epsilon().map_err(err)?;
    }
    Ok(m)
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> R<&'a [T]> {
    a.as_slice()
        .map_err(|_| invalid(format!("{what} must be a contiguous 1-D array")))
}

// ---------------------------------------------------------------------------------------------
// Mechanisms: the registry, one selection, counts, batches, audits

/// The registry: one dict per mechanism (name, guarantee, private, params, summary,
/// audit_reference).
#[pyfunction]
fn mechanisms_list(py: Python<'_>) -> R<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for s in mechanisms::REGISTRY {
        let d = PyDict::new(py);
        d.set_item("name", s.name)?;
        d.set_item("guarantee", s.guarantee)?;
        d.set_item("private", s.private)?;
        d.set_item("params", s.params.to_vec())?;
        d.set_item("summary", s.summary)?;
        d.set_item("audit_reference", s.audit_reference)?;
        out.append(d)?;
    }
    Ok(out)
}

/// Counts of `n` selections (the function `recsel sample` calls).
#[pyfunction]
#[pyo3(signature = (mech, scores, sens, eps, n, seed, secure, params=None))]
#[allow(clippy::too_many_arguments)]
fn sample<'py>(
    py: Python<'py>,
    mech: &str,
    scores: PyReadonlyArray1<'py, f64>,
    sens: PyReadonlyArray1<'py, f64>,
    eps: f64,
    n: u64,
    seed: u64,
    secure: bool,
    params: Option<&Bound<'py, PyDict>>,
) -> R<Bound<'py, PyArray1<u64>>> {
    let m = build_mech(mech, &mech_params(eps, params)?)?;
    let md = mode(secure, &*m)?;
    if n == 0 {
        return Err(invalid("n must be at least 1, got 0".into()));
    }
    let (q, d) = (slice(&scores, "scores")?, slice(&sens, "sens")?);
    let counts = py
        .detach(|| {
            let problem = Problem::new(q, d)?;
            batch::sample_counts(&*m, &problem, md, Streams::new(seed), n, &|_| {})
        })
        .map_err(err)?;
    Ok(counts.into_pyarray(py))
}

/// One selection per row (the streams `recsel select` uses).
#[pyfunction]
#[pyo3(signature = (mech, scores, sens, eps, seed, user_ids, eps_index, trial, secure, params=None))]
#[allow(clippy::too_many_arguments)]
fn select_batch<'py>(
    py: Python<'py>,
    mech: &str,
    scores: PyReadonlyArray2<'py, f64>,
    sens: PyReadonlyArray1<'py, f64>,
    eps: f64,
    seed: u64,
    user_ids: Option<PyReadonlyArray1<'py, u64>>,
    eps_index: u32,
    trial: u32,
    secure: bool,
    params: Option<&Bound<'py, PyDict>>,
) -> R<Bound<'py, PyArray1<i64>>> {
    let m = build_mech(mech, &mech_params(eps, params)?)?;
    let md = mode(secure, &*m)?;
    let k = scores.shape()[1];
    let q = scores
        .as_slice()
        .map_err(|_| invalid("scores must be a C-contiguous 2-D array".into()))?;
    let d = slice(&sens, "sens")?;
    let users = match &user_ids {
        Some(u) => Some(slice(u, "user_ids")?),
        None => None,
    };
    let at = BatchStreams {
        streams: Streams::new(seed),
        users,
        eps_index,
        trial,
    };
    let picks = py
        .detach(|| batch::select_batch(&*m, q, k, d, md, &at))
        .map_err(err)?;
    Ok(picks
        .into_iter()
        .map(|i| i as i64)
        .collect::<Vec<_>>()
        .into_pyarray(py))
}

/// The audit report as JSON text (the Python side parses it into a dict).
#[pyfunction]
#[pyo3(signature = (mech, scores, sens, eps, samples, alpha, seed, pairs, secure, params=None))]
#[allow(clippy::too_many_arguments)]
fn audit(
    py: Python<'_>,
    mech: &str,
    scores: Vec<f64>,
    sens: Vec<f64>,
    eps: f64,
    samples: u64,
    alpha: f64,
    seed: u64,
    pairs: Option<PathBuf>,
    secure: bool,
    params: Option<&Bound<'_, PyDict>>,
) -> R<String> {
    let m = build_mech(mech, &mech_params(eps, params)?)?;
    let md = mode(secure, &*m)?;
    let report = py
        .detach(|| {
            let config = recsel::audit::AuditConfig::new(samples, alpha, seed)?.with_noise(md);
            let pairs = match &pairs {
                Some(p) => recsel::audit::read_pairs(p)?,
                None => recsel::audit::builtin_pairs(&scores, &sens, seed)?,
            };
            recsel::audit::audit(&*m, &pairs, &config, &|_| {})
        })
        .map_err(err)?;
    let mut v = serde_json::to_value(&report).map_err(|e| invalid(e.to_string()))?;
    v["verdict"] = report.verdict().into();
    Ok(v.to_string())
}

// ---------------------------------------------------------------------------------------------
// Models and user rows

/// User rows (users × items, the items each user has) as a CSR matrix, from scipy's arrays.
fn csr_from(indptr: &[i64], indices: &[i64], rows: usize, cols: usize) -> R<Csr> {
    if indptr.len() != rows + 1 {
        return Err(invalid(format!(
            "indptr has {} entries for {rows} rows (expected {})",
            indptr.len(),
            rows + 1
        )));
    }
    let ip: Vec<usize> = indptr.iter().map(|&p| p.max(0) as usize).collect();
    let mut ix = Vec::with_capacity(indices.len());
    for (n, &i) in indices.iter().enumerate() {
        if i < 0 || i as usize >= cols {
            return Err(invalid(format!(
                "column index {i} at position {n} is outside 0..{cols}"
            )));
        }
        ix.push(i as u32);
    }
    let data = vec![1.0f32; ix.len()];
    Csr::try_new((rows, cols), ip, ix, data)
        .map_err(|(_, _, _, e)| invalid(format!("invalid CSR structure: {e:?}")))
}

/// Rows of users: what a model scores from (picklable, for Ray's object store).
#[pyclass(module = "recsel._native", frozen)]
struct UserRows {
    csr: Arc<Csr>,
    /// The users' held-out items (same shape), when known: hit@1 of `select` counts picks among
    /// them. `None`: hit@1 is 0.
    targets: Option<Arc<Csr>>,
}

impl UserRows {
    /// The model scoring these users, with their held-out items when known.
    fn scorer<'a>(&'a self, model: &'a Model) -> ModelScorer<'a> {
        let s = ModelScorer::new(model, &self.csr);
        match &self.targets {
            Some(t) => s.with_targets(t),
            None => s,
        }
    }

    fn csr_arrays(csr: &Csr) -> (Vec<i64>, Vec<i64>) {
        let ip = csr
            .indptr()
            .raw_storage()
            .iter()
            .map(|&p| p as i64)
            .collect();
        let ix = csr.indices().iter().map(|&i| i64::from(i)).collect();
        (ip, ix)
    }
}

#[pymethods]
impl UserRows {
    #[new]
    #[pyo3(signature = (indptr, indices, rows, cols, target_indptr=None, target_indices=None))]
    fn new(
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i64>,
        rows: usize,
        cols: usize,
        target_indptr: Option<PyReadonlyArray1<'_, i64>>,
        target_indices: Option<PyReadonlyArray1<'_, i64>>,
    ) -> R<Self> {
        let csr = csr_from(
            slice(&indptr, "indptr")?,
            slice(&indices, "indices")?,
            rows,
            cols,
        )?;
        let targets = match (target_indptr, target_indices) {
            (Some(p), Some(i)) => Some(Arc::new(csr_from(
                slice(&p, "target_indptr")?,
                slice(&i, "target_indices")?,
                rows,
                cols,
            )?)),
            (None, None) => None,
            _ => {
                return Err(invalid(
                    "target_indptr and target_indices come together".into(),
                ))
            }
        };
        Ok(UserRows {
            csr: Arc::new(csr),
            targets,
        })
    }

    /// Number of users.
    #[getter]
    fn n_users(&self) -> usize {
        self.csr.rows()
    }

    /// Number of items.
    #[getter]
    fn n_items(&self) -> usize {
        self.csr.cols()
    }

    /// `(indptr, indices, (rows, cols))` for `scipy.sparse.csr_matrix`.
    fn arrays<'py>(&self, py: Python<'py>) -> R<Bound<'py, PyTuple>> {
        let ip: Vec<i64> = self
            .csr
            .indptr()
            .raw_storage()
            .iter()
            .map(|&p| p as i64)
            .collect();
        let ix: Vec<i64> = self.csr.indices().iter().map(|&i| i64::from(i)).collect();
        PyTuple::new(
            py,
            [
                ip.into_pyarray(py).into_any(),
                ix.into_pyarray(py).into_any(),
                (self.csr.rows(), self.csr.cols())
                    .into_pyobject(py)?
                    .into_any(),
            ],
        )
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let t = slf.get().arrays(py)?;
        let (rows, cols): (usize, usize) = t.get_item(2)?.extract()?;
        let (tp, ti) = match &slf.get().targets {
            Some(c) => {
                let (p, i) = UserRows::csr_arrays(c);
                (p.into_pyarray(py).into_any(), i.into_pyarray(py).into_any())
            }
            None => (py.None().into_bound(py), py.None().into_bound(py)),
        };
        let args = PyTuple::new(
            py,
            [
                t.get_item(0)?,
                t.get_item(1)?,
                rows.into_pyobject(py)?.into_any(),
                cols.into_pyobject(py)?.into_any(),
                tp,
                ti,
            ],
        )?;
        Ok((slf.get_type().into_any(), args))
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh private directory under the system's temporary directory.
fn temp_dir(what: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!(
        "recsel-{what}-{}-{}-{nanos}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A fitted model with what its files record.
#[pyclass(module = "recsel._native", frozen, name = "Model")]
struct PyModel {
    model: Arc<Model>,
    params: ModelParams,
    dataset: String,
    fingerprint: u64,
    item_ids: Vec<String>,
}

impl PyModel {
    fn save_to(&self, dir: &Path) -> recsel::Result<()> {
        model::io::save(
            dir,
            &self.model,
            &self.params,
            &self.dataset,
            self.fingerprint,
            &self.item_ids,
        )
    }

    fn load_from(dir: &Path) -> recsel::Result<Self> {
        let (m, meta) = model::io::load(dir, None)?;
        let fingerprint = u64::from_str_radix(&meta.data_fingerprint, 16).unwrap_or(0);
        Ok(PyModel {
            model: Arc::new(m),
            params: meta.params,
            dataset: meta.dataset,
            fingerprint,
            item_ids: meta.item_ids,
        })
    }
}

#[pymethods]
impl PyModel {
    /// Fits a model on training rows (users × items, scipy CSR arrays).
    #[staticmethod]
    #[pyo3(signature = (indptr, indices, rows, cols, method, l2, density, item_ids=None))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i64>,
        rows: usize,
        cols: usize,
        method: &str,
        l2: f64,
        density: f64,
        item_ids: Option<Vec<String>>,
    ) -> R<Self> {
        let train = csr_from(
            slice(&indptr, "indptr")?,
            slice(&indices, "indices")?,
            rows,
            cols,
        )?;
        let params = ModelParams::new(model::Method::parse(method).map_err(err)?, l2, density)
            .map_err(err)?;
        let item_ids = item_ids.unwrap_or_else(|| (0..cols).map(|j| j.to_string()).collect());
        if item_ids.len() != cols {
            return Err(invalid(format!(
                "item_ids has {} entries for {cols} items",
                item_ids.len()
            )));
        }
        // The fingerprint a saved model records: the training matrix and item ids, hashed as
        // the command line hashes a data set.
        let mut h = recsel::data::Fnv64::new();
        h.write(&(rows as u64).to_le_bytes());
        h.write(&(cols as u64).to_le_bytes());
        for &p in train.indptr().raw_storage() {
            h.write(&(p as u64).to_le_bytes());
        }
        for &i in train.indices() {
            h.write(&i.to_le_bytes());
        }
        for id in &item_ids {
            h.write(id.as_bytes());
            h.write(&[0]);
        }
        let (m, _) = py
            .detach(|| model::fit(&train, &params, &|_| {}))
            .map_err(err)?;
        Ok(PyModel {
            model: Arc::new(m),
            params,
            dataset: "python".into(),
            fingerprint: h.finish(),
            item_ids,
        })
    }

    /// Loads a model directory (`recsel fit --out DIR`, `Model.save`).
    #[staticmethod]
    fn load(py: Python<'_>, dir: PathBuf) -> R<Self> {
        py.detach(|| PyModel::load_from(&dir)).map_err(err)
    }

    /// Saves into a model directory (`model.json`, and `w.npz`/`w_r.npz` or `b.npy`).
    fn save(&self, py: Python<'_>, dir: PathBuf) -> R<()> {
        py.detach(|| self.save_to(&dir)).map_err(err)
    }

    /// Scores of every item for each user row: a dense `rows × items` array.
    fn score<'py>(&self, py: Python<'py>, users: &UserRows) -> R<Bound<'py, PyArray2<f64>>> {
        let n = self.model.n_items();
        if users.csr.cols() != n {
            return Err(invalid(format!(
                "the user rows have {} item columns, the model {n}",
                users.csr.cols()
            )));
        }
        let csr = users.csr.clone();
        let model = self.model.clone();
        let out = py.detach(move || {
            use rayon::prelude::*;
            let scorer = ModelScorer::new(&model, &csr);
            let mut out = vec![0.0f64; csr.rows() * n];
            use recsel::scoring::UserScorer as _;
            out.par_chunks_mut(n.max(1))
                .enumerate()
                .for_each_init(|| scorer.scratch(), |s, (u, row)| scorer.score(u, row, s));
            out
        });
        out.into_pyarray(py).reshape([users.csr.rows(), n])
    }

    /// Number of items.
    #[getter]
    fn n_items(&self) -> usize {
        self.model.n_items()
    }

    /// Method, λ and density as a dict.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> R<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("method", self.params.method.name())?;
        d.set_item("l2", self.params.l2)?;
        d.set_item("density", self.params.density)?;
        Ok(d)
    }

    /// The item ids recorded with the model.
    #[getter]
    fn item_ids(&self) -> Vec<String> {
        self.item_ids.clone()
    }

    /// The model's files as bytes (for pickling; the same files `save` writes).
    fn to_bytes<'py>(&self, py: Python<'py>) -> R<Bound<'py, PyBytes>> {
        let dir = temp_dir("model");
        let bytes = py
            .detach(|| -> recsel::Result<Vec<u8>> {
                self.save_to(&dir)?;
                let mut b = Vec::new();
                let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .map_err(|e| recsel::Error::io(&dir, e))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                names.sort();
                for p in names {
                    let name = p
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .to_string();
                    let data = std::fs::read(&p).map_err(|e| recsel::Error::io(&p, e))?;
                    b.extend_from_slice(&(name.len() as u64).to_le_bytes());
                    b.extend_from_slice(name.as_bytes());
                    b.extend_from_slice(&(data.len() as u64).to_le_bytes());
                    b.extend_from_slice(&data);
                }
                let _ = std::fs::remove_dir_all(&dir);
                Ok(b)
            })
            .map_err(err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The model from [`PyModel::to_bytes`].
    #[staticmethod]
    fn from_bytes(py: Python<'_>, bytes: &[u8]) -> R<Self> {
        let dir = temp_dir("model");
        py.detach(|| -> recsel::Result<Self> {
            std::fs::create_dir_all(&dir).map_err(|e| recsel::Error::io(&dir, e))?;
            let mut r = recsel::scoring::ByteReader::new(bytes, "pickled model");
            while r.remaining() > 0 {
                let n = r.count()?;
                let name = String::from_utf8_lossy(r.take(n)?).to_string();
                if name.contains('/') || name.contains('\\') || name.starts_with('.') {
                    return Err(r.bad(&format!("file name '{name}'")));
                }
                let n = r.count()?;
                let p = dir.join(&name);
                std::fs::write(&p, r.take(n)?).map_err(|e| recsel::Error::io(&p, e))?;
            }
            let m = PyModel::load_from(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            m
        })
        .map_err(err)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let b = slf.get().to_bytes(slf.py())?;
        reduce_with(slf.as_any(), "from_bytes", b.into_any())
    }
}

// ---------------------------------------------------------------------------------------------
// Sensitivities and the phases of a distributed `select`

/// Per-item percentiles and sensitivities (picklable).
#[pyclass(module = "recsel._native", frozen, name = "Sensitivities")]
struct PySens {
    sens: Arc<Sensitivities>,
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

fn sens_config(lower: f64, upper: f64, floor: f64, population: &str) -> R<SensitivityConfig> {
    Ok(SensitivityConfig::new(lower, upper, floor)
        .map_err(err)?
        .with_population(PercentileUsers::from_name(population).map_err(err)?))
}

/// Per-item sensitivities of a model's scores over user rows (`recsel select`'s step).
#[pyfunction]
#[pyo3(signature = (model, users, lower, upper, floor, population))]
fn sensitivities(
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

fn check_items(model: &PyModel, users: &UserRows) -> R<()> {
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
struct PyConfig {
    cfg: SelectConfig,
    sens: SensitivityConfig,
}

#[pymethods]
impl PyConfig {
    /// Rebuilds a configuration from [`PyConfig::state`] (floats travel as Python floats, so
    /// exactly).
    #[staticmethod]
    fn from_state(state: &Bound<'_, PyTuple>) -> R<Self> {
        let mechanisms: Vec<String> = state.get_item(0)?.extract()?;
        let epsilons: Vec<f64> = state.get_item(1)?.extract()?;
        let f: Vec<f64> = state.get_item(2)?.extract()?;
        let chooser: String = state.get_item(3)?.extract()?;
        let (draws, trials, top): (u64, u32, usize) = state.get_item(4)?.extract()?;
        let (clip, population, seed): (bool, String, u64) = state.get_item(5)?.extract()?;
        let (fingerprint, secure): (String, bool) = state.get_item(6)?.extract()?;
        if f.len() != 8 {
            return Err(invalid("corrupt SelectConfig state".into()));
        }
        let params = MechParams {
            epsilon: f[0],
            gamma: f[1],
            beta: f[2],
            eta: f[3],
            c: f[4],
            chooser: Chooser::from_name(&chooser).map_err(err)?,
            draws,
            // The binding runs the built-in mechanisms only, which declare no extra parameters.
            extra: Default::default(),
        };
        let pop = PercentileUsers::from_name(&population).map_err(err)?;
        Ok(PyConfig {
            cfg: SelectConfig {
                mechanisms,
                params,
                epsilons,
                trials,
                top,
                candidates: None,
                clip,
                percentile_users: pop,
                seed,
                source_fingerprint: fingerprint,
                noise: NoiseMode::from_flag(secure),
                registry: Default::default(),
            },
            sens: sens_config(f[5], f[6], f[7], &population)?,
        })
    }

    /// The state [`PyConfig::from_state`] rebuilds from.
    fn state<'py>(&self, py: Python<'py>) -> R<Bound<'py, PyTuple>> {
        let (c, p, s) = (&self.cfg, &self.cfg.params, &self.sens);
        let f = vec![
            p.epsilon, p.gamma, p.beta, p.eta, p.c, s.lower, s.upper, s.floor,
        ];
        PyTuple::new(
            py,
            [
                c.mechanisms.clone().into_pyobject(py)?.into_any(),
                c.epsilons.clone().into_pyobject(py)?.into_any(),
                f.into_pyobject(py)?.into_any(),
                p.chooser.name().into_pyobject(py)?.into_any(),
                (p.draws, c.trials, c.top).into_pyobject(py)?.into_any(),
                (c.clip, c.percentile_users.name(), c.seed)
                    .into_pyobject(py)?
                    .into_any(),
                (c.source_fingerprint.clone(), c.noise.is_secure())
                    .into_pyobject(py)?
                    .into_any(),
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
struct PySketch {
    sketch: PercentileSketch,
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
struct PyPart {
    part: PartitionResult,
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
        let f = |g: fn(&real::UserRow) -> f64| rows.iter().map(g).collect::<Vec<f64>>();
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
fn split_users(n_users: usize, parts: usize) -> R<Vec<(usize, usize)>> {
    Ok(partition::split_users(n_users, parts)
        .map_err(err)?
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect())
}

/// How many scores each item's percentiles run over (all partitions together).
#[pyfunction]
fn percentile_counts_of<'py>(
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
fn sketch_partition(
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
fn merge_sketches(py: Python<'_>, sketches: Vec<PyRef<'_, PySketch>>) -> R<PySketch> {
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
fn run_partition(
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

// ---------------------------------------------------------------------------------------------
// Serving: the library's Recommender

/// Private recommendations from a model folder written by `recsel fit --out DIR` (model and
/// release artifact; docs/deployment.md): the library's `recsel::recommend::Recommender`, the
/// same one `recsel recommend` runs.
#[pyclass(module = "recsel._native", name = "Recommender", frozen)]
struct PyRecommender {
    rec: recsel::recommend::Recommender,
    secure: bool,
}

#[pymethods]
impl PyRecommender {
    #[new]
    #[pyo3(signature = (model_dir, mech, eps, *, candidates="all", secure=false,
                        allow_non_private=false, **params))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model_dir: PathBuf,
        mech: &str,
        eps: f64,
        candidates: &str,
        secure: bool,
        allow_non_private: bool,
        params: Option<&Bound<'_, PyDict>>,
    ) -> R<Self> {
        if let Some(d) = params {
            for old in ["top", "include_history"] {
                if d.contains(old)? {
                    return Err(invalid(format!(
                        "'{old}' was replaced by candidates=: \"all\" (the default, every item), \
                         \"popular:N\", \"pool:FILE\", or \"history-top:N\" with \
                         allow_non_private=True (the old top=N; docs/deployment.md)"
                    )));
                }
            }
        }
        let p = mech_params(eps, params)?;
        let policy = recsel::scoring::CandidatePolicy::parse(candidates).map_err(err)?;
        let mut cfg =
            recsel::recommend::RecommendConfig::new(mech, p, NoiseMode::from_flag(secure))
                .with_candidates(policy);
        cfg.allow_non_private = allow_non_private;
        let rec = py
            .detach(|| recsel::recommend::Recommender::load(&model_dir, &cfg))
            .map_err(err)?;
        Ok(PyRecommender { rec, secure })
    }

    /// The one-line privacy statement `recsel recommend` prints.
    #[getter]
    fn privacy_statement(&self) -> String {
        self.rec.privacy_statement()
    }

    /// The ε the selection guarantees for the policy's candidates (`None` for a mechanism that is
    /// not private); it covers the whole history only when `user_level`.
    #[getter]
    fn epsilon(&self) -> Option<f64> {
        self.rec.epsilon()
    }

    /// The candidate policy, as given (`"all"`, `"popular:N"`, ...), or as tuned.
    #[getter]
    fn candidates(&self) -> String {
        self.rec.candidate_policy().to_string()
    }

    /// With `mech="tuned"`, what the model folder's `tuning.json` chose for `eps` (as the privacy
    /// statement says it); `None` otherwise.
    #[getter]
    fn tuned(&self) -> Option<String> {
        self.rec.tuned().map(|t| t.describe())
    }

    /// The mechanism served (with `mech="tuned"`: `krr`, or `random` over the one fixed item).
    #[getter]
    fn mechanism(&self) -> String {
        self.rec.mechanism().name().to_string()
    }

    /// Whether each recommendation is user-level ε-DP (an ε-DP mechanism on a history-independent
    /// candidate list).
    #[getter]
    fn user_level(&self) -> bool {
        self.rec.user_level()
    }

    /// One private item id per `(user_id, [item ids of the history])`, in order (`None` when a
    /// history covers every item). Seeded streams are keyed by the user id, so the result equals
    /// `recsel recommend --seed SEED` for the same users; without a seed (or in secure mode) the
    /// randomness comes from the OS.
    #[pyo3(signature = (users, *, seed=None))]
    fn recommend(
        &self,
        py: Python<'_>,
        users: Vec<(String, Vec<String>)>,
        seed: Option<u64>,
    ) -> R<Vec<Option<String>>> {
        let rows = users
            .into_iter()
            .map(|(id, h)| {
                let items = self
                    .rec
                    .history(h.iter().map(String::as_str))
                    .map_err(err)?;
                Ok((id, items))
            })
            .collect::<R<Vec<(String, Vec<u32>)>>>()?;
        let seed = match (self.secure, seed) {
            (true, Some(_)) => {
                return Err(invalid(
                    "a secure recommender takes no seed (its draws come from the OS)".into(),
                ))
            }
            (_, Some(s)) => s,
            (_, None) => Streams::from_entropy().seed(),
        };
        let picks = py
            .detach(|| self.rec.recommend_all(&rows, seed, &|_| {}))
            .map_err(err)?;
        Ok(picks
            .into_iter()
            .map(|p| p.map(|j| self.rec.item_id(j).to_string()))
            .collect())
    }
}

// ---------------------------------------------------------------------------------------------
// A `select` run prepared on the driver

/// The data, model and configuration of a `select` run, prepared as `recsel select` prepares
/// them (same options, same defaults), and phase 3: merging and writing the outputs.
#[pyclass(module = "recsel._native")]
struct SelectJob {
    data: recsel::data::Dataset,
    model: Py<PyModel>,
    users: Py<UserRows>,
    config: Py<PyConfig>,
    params: ModelParams,
    data_seed: u64,
    scatter_eps: f64,
    out: PathBuf,
    log: Vec<String>,
    /// Where the data came from, how it was loaded and the model folder: the rerunnable
    /// `[select]` table of `config.toml` (as `recsel select` writes it).
    source: (recsel::data::DataSource, recsel::data::LoadOptions, PathBuf),
}

fn opt<'py, T: FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> R<Option<T>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => match v.extract::<T>() {
            Ok(x) => Ok(Some(x)),
            Err(e) => {
                let e: PyErr = e.into();
                Err(invalid(format!("option {key}: {e}")))
            }
        },
        _ => Ok(None),
    }
}

const JOB_OPTIONS: &[&str] = &[
    "dataset",
    "shape",
    "data_dir",
    "format",
    "path",
    "user_col",
    "item_col",
    "rating_col",
    "delimiter",
    "min_rating",
    "min_user_items",
    "test_users",
    "validation_users",
    "data_seed",
    "method",
    "l2",
    "density",
    "mech",
    "eps",
    "trials",
    "top",
    "clip",
    "percentile_users",
    "gamma",
    "beta",
    "eta",
    "c",
    "chooser",
    "draws",
    "seed",
    "secure",
    "out",
    "model_dir",
    "scatter_eps",
];

fn data_source(o: &Bound<'_, PyDict>) -> R<DataSource> {
    use recsel::data::load::Columns;
    use recsel::data::synthetic::SyntheticShape;
    if let Some(name) = opt::<String>(o, "dataset")? {
        let shape = SyntheticShape::parse(&opt::<String>(o, "shape")?.unwrap_or("small".into()))
            .map_err(err)?;
        return Ok(DataSource::Named {
            dataset: NamedDataset::parse(&name, shape).map_err(err)?,
            data_dir: opt::<PathBuf>(o, "data_dir")?.unwrap_or_else(|| PathBuf::from("data")),
        });
    }
    match (opt::<String>(o, "format")?, opt::<PathBuf>(o, "path")?) {
        (Some(f), Some(path)) => {
            let format = Format::parse(&f).map_err(err)?;
            let columns = match (opt::<String>(o, "user_col")?, opt::<String>(o, "item_col")?) {
                (Some(user), Some(item)) => Some(Columns {
                    user,
                    item,
                    rating: opt(o, "rating_col")?,
                }),
                _ if matches!(format, Format::Csv | Format::Parquet) => {
                    return Err(invalid(format!("format {f} needs user_col and item_col")))
                }
                _ => None,
            };
            Ok(DataSource::Path {
                format,
                path,
                columns,
            })
        }
        _ => Err(invalid(
            "give dataset=NAME, or format=FORMAT and path=PATH".into(),
        )),
    }
}

fn load_options(o: &Bound<'_, PyDict>) -> R<LoadOptions> {
    let delimiter = match opt::<String>(o, "delimiter")?.as_deref().unwrap_or(",") {
        "\\t" | "\t" | "tab" => b'\t',
        d if d.len() == 1 && d.is_ascii() => d.as_bytes()[0],
        d => {
            return Err(invalid(format!(
                "delimiter must be one ASCII character, \\t or tab, got '{d}'"
            )))
        }
    };
    let min_rating = match o.get_item("min_rating")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => {
            let bad = || invalid(format!("min_rating must be a number or 'none', got {v}"));
            let r: f32 = match v.extract::<String>() {
                Ok(s) if s.trim() == "none" => return load_rest(o, delimiter, Some(None)),
                Ok(s) => s.trim().parse().map_err(|_| bad())?,
                Err(_) => v.extract().map_err(|_| bad())?,
            };
            if !r.is_finite() {
                return Err(bad());
            }
            Some(Some(r))
        }
    };
    load_rest(o, delimiter, min_rating)
}

fn load_rest(
    o: &Bound<'_, PyDict>,
    delimiter: u8,
    min_rating: Option<Option<f32>>,
) -> R<LoadOptions> {
    Ok(LoadOptions {
        delimiter,
        min_rating,
        min_user_items: opt(o, "min_user_items")?,
        test_users: opt(o, "test_users")?,
        validation_users: match o.get_item("validation_users")? {
            Some(v) if !v.is_none() => {
                Some(recsel::data::ValidationUsers::parse(&v.str()?.to_string()).map_err(err)?)
            }
            _ => None,
        },
    })
}

#[pymethods]
impl SelectJob {
    /// Loads the data and fits (or reuses) the model exactly as `recsel select` with the same
    /// options does; keyword names are the command line's long options with `_` for `-`.
    #[new]
    #[pyo3(signature = (**options))]
    fn new(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> R<Self> {
        let empty = PyDict::new(py);
        let o = options.unwrap_or(&empty);
        for k in o.keys() {
            let k: String = k.extract()?;
            if !JOB_OPTIONS.contains(&k.as_str()) {
                return Err(invalid(format!(
                    "unknown select option '{k}'; valid: {}",
                    JOB_OPTIONS.join(", ")
                )));
            }
        }
        let src = data_source(o)?;
        let load_opts = load_options(o)?;
        let data_seed: u64 = opt(o, "data_seed")?.unwrap_or(42);
        let names: Vec<String> = {
            let secure = opt::<bool>(o, "secure")?.unwrap_or(false);
            let list = opt::<String>(o, "mech")?.unwrap_or_else(|| "all".into());
            mechanisms::parse_list(&list)
                .map_err(err)?
                .iter()
                .filter(|s| !(secure && list == "all" && s.name.starts_with("rnmh")))
                .map(|s| s.name.to_string())
                .collect()
        };
        let epsilons: Vec<f64> = match o.get_item("eps")? {
            Some(v) if !v.is_none() => match v.extract::<String>() {
                Ok(s) => s
                    .split(',')
                    .enumerate()
                    .map(|(i, t)| {
                        t.trim().parse::<f64>().map_err(|_| {
                            invalid(format!(
                                "eps: item {} is '{}', not a number",
                                i + 1,
                                t.trim()
                            ))
                        })
                    })
                    .collect::<R<_>>()?,
                Err(_) => v.extract()?,
            },
            _ => real::PAPER_EPSILONS.to_vec(),
        };
        let mut log = Vec::new();
        let data = py
            .detach(|| recsel::data::load_dataset_with(&src, data_seed, &load_opts))
            .map_err(|e| invalid(format!("loading the data: {e}")))?;
        let paper = data.descriptor.paper_model;
        let method: String =
            opt(o, "method")?.unwrap_or_else(|| paper.map_or("exact", |p| p.method).to_string());
        let l2: f64 = opt(o, "l2")?.unwrap_or(paper.map_or(200.0, |p| p.l2));
        let density: f64 = opt(o, "density")?.unwrap_or(paper.map_or(0.01, |p| p.density));
        let params = ModelParams::new(model::Method::parse(&method).map_err(err)?, l2, density)
            .map_err(err)?;
        let out: PathBuf =
            opt(o, "out")?.unwrap_or_else(|| PathBuf::from(format!("out/select-{}", data.name())));
        let model_dir: PathBuf = opt(o, "model_dir")?.unwrap_or_else(|| out.join("model"));
        let lines = std::sync::Mutex::new(Vec::new());
        let m = py
            .detach(|| {
                recsel::io::ensure_dir(&out)?;
                real::model_for(&model_dir, &data, &params, &|s| {
                    lines.lock().expect("log").push(s.to_string())
                })
            })
            .map_err(|e| {
                invalid(format!(
                    "preparing the model in {}: {e}",
                    model_dir.display()
                ))
            })?;
        log.extend(lines.into_inner().unwrap_or_default());
        let mut mp = MechParams {
            gamma: data.descriptor.gamma(),
            ..MechParams::default()
        };
        if let Some(g) = opt(o, "gamma")? {
            mp.gamma = g;
        }
        if let Some(b) = opt(o, "beta")? {
            mp.beta = b;
        }
        if let Some(h) = opt(o, "eta")? {
            mp.eta = h;
        }
        if let Some(c) = opt(o, "c")? {
            mp.c = c;
        }
        if let Some(ch) = opt::<String>(o, "chooser")? {
            mp.chooser = Chooser::from_name(&ch).map_err(err)?;
        }
        if let Some(t) = opt(o, "draws")? {
            mp.draws = t;
        }
        let secure = opt::<bool>(o, "secure")?.unwrap_or(false);
        let seed = match opt::<u64>(o, "seed")? {
            Some(s) => s,
            None if secure => 0,
            None => {
                let s = Streams::from_entropy().seed();
                log.push(format!("no seed given; using seed {s} (from OS entropy)"));
                s
            }
        };
        let population: String = opt(o, "percentile_users")?.unwrap_or_else(|| "all".to_string());
        let cfg = SelectConfig {
            mechanisms: names,
            params: mp,
            epsilons,
            trials: opt(o, "trials")?.unwrap_or(50),
            top: opt(o, "top")?.unwrap_or(500),
            candidates: None,
            clip: opt(o, "clip")?.unwrap_or(false),
            percentile_users: PercentileUsers::from_name(&population).map_err(err)?,
            seed,
            source_fingerprint: real::source_fingerprint(&data, &params),
            noise: NoiseMode::from_flag(secure),
            registry: Default::default(),
        };
        cfg.build().map_err(err)?;
        let sens = SensitivityConfig::default().with_population(cfg.percentile_users);
        let model = PyModel {
            model: Arc::new(m),
            params,
            dataset: data.name().to_string(),
            fingerprint: data.fingerprint(),
            item_ids: data.item_ids.clone(),
        };
        let users = UserRows {
            csr: Arc::new(data.test_input.clone()),
            targets: Some(Arc::new(data.test_target.clone())),
        };
        Ok(SelectJob {
            model: Py::new(py, model)?,
            users: Py::new(py, users)?,
            config: Py::new(py, PyConfig { cfg, sens })?,
            params,
            data_seed,
            scatter_eps: opt(o, "scatter_eps")?.unwrap_or(1.0),
            out,
            log,
            data,
            source: (src, load_opts, model_dir),
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
        self.data.test_input.rows()
    }

    /// Output directory.
    #[getter]
    fn out(&self) -> PathBuf {
        self.out.clone()
    }

    /// What preparing the run did (model reused or fitted, seed drawn), one line each.
    #[getter]
    fn log(&self) -> Vec<String> {
        self.log.clone()
    }

    /// Phase 3: merges the partitions, analyses, writes every output `recsel select` writes into
    /// `out`, and returns the summary `recsel select` prints (JSON when `json`).
    #[pyo3(signature = (sens, parts, sensitivity_seconds, selection_seconds, start_seconds, json))]
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
    ) -> R<String> {
        let parts: Vec<PartitionResult> = parts.iter().map(|p| p.part.clone()).collect();
        let config = self.config.get();
        let model = self.model.get();
        let t0 = std::time::Instant::now();
        py.detach(|| {
            let merged = partition::merge(parts, self.data.test_input.rows())?;
            let analysis = real::analysis_from(
                &config.cfg,
                &sens.sens,
                config.sens.floor,
                merged.counts,
                merged.sample,
                &merged.rows,
            );
            let run = SelectRun {
                dataset: self.data.name(),
                data_seed: self.data_seed,
                model: self.params,
                select: &config.cfg,
                scatter_eps: self.scatter_eps,
                users: merged.rows.len(),
                users_without_candidates: merged.skipped,
                // The same rerunnable `[select]` table as `recsel select` writes.
                source: Some((&self.source.0, &self.source.1, &self.source.2)),
            };
            let timings = Timings {
                sensitivity_seconds,
                selection_seconds,
                diagnostics_seconds: t0.elapsed().as_secs_f64(),
                total_seconds: start_seconds + t0.elapsed().as_secs_f64(),
            };
            let text = finish_select(
                &self.out,
                &run,
                &merged.rows,
                &analysis,
                &sens.sens,
                &self.data.test_user_ids,
                &self.data.item_ids,
                &timings,
                json,
            )?;
            // The public baselines beside the mechanisms, as `recsel select` prints them.
            let scorer = ModelScorer::new(&model.model, &self.data.test_input)
                .with_targets(&self.data.test_target);
            recsel::experiments::baselines::add_to_summary(
                &scorer,
                &config.cfg,
                &merged.rows,
                &recsel::scoring::policy::popularity(&self.data.train),
                recsel::data::calibration_users(&self.data, self.data_seed)
                    .map(|c| recsel::scoring::policy::popularity(&c.heldout))
                    .as_deref(),
                &self.out,
                text,
                json,
            )
        })
        .map_err(err)
    }
}

/// The module `recsel._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RecselError", m.py().get_type::<RecselError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(mechanisms_list, m)?)?;
    m.add_function(wrap_pyfunction!(sample, m)?)?;
    m.add_function(wrap_pyfunction!(select_batch, m)?)?;
    m.add_function(wrap_pyfunction!(audit, m)?)?;
    m.add_function(wrap_pyfunction!(sensitivities, m)?)?;
    m.add_function(wrap_pyfunction!(split_users, m)?)?;
    m.add_function(wrap_pyfunction!(percentile_counts_of, m)?)?;
    m.add_function(wrap_pyfunction!(sketch_partition, m)?)?;
    m.add_function(wrap_pyfunction!(merge_sketches, m)?)?;
    m.add_function(wrap_pyfunction!(run_partition, m)?)?;
    m.add_function(wrap_pyfunction!(candidates::select_private_candidates, m)?)?;
    m.add_class::<UserRows>()?;
    m.add_class::<PyModel>()?;
    m.add_class::<PySens>()?;
    m.add_class::<PyConfig>()?;
    m.add_class::<PySketch>()?;
    m.add_class::<PyPart>()?;
    m.add_class::<SelectJob>()?;
    m.add_class::<PyRecommender>()?;
    Ok(())
}
