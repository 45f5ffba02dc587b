//! Models and user rows (picklable: they travel through Ray's object store).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use recsel::data::Csr;
use recsel::model::options::TrainingPrivacyOptions;
use recsel::model::{self, Model, ModelParams};
use recsel::privacy::PopulationPrivacy;
use recsel::recommend::publish::{write_release, Fitted, ReleaseOptions};
use recsel::scoring::ModelScorer;

use crate::convert::{err, fill, invalid, option_dicts, reduce_with, slice, R};

/// The DP-training options of `Model.fit` (`recsel fit`'s `--dp-*`, declared once in the
/// library's `TrainingPrivacyOptions`), as dicts ([`option_dicts`]).
#[pyfunction]
pub fn training_privacy_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<TrainingPrivacyOptions>(py)
}

/// The options of `Model.save_release` (`recsel fit --out`'s release options, declared once in
/// the library's `ReleaseOptions`), as dicts ([`option_dicts`]).
#[pyfunction]
pub fn release_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<ReleaseOptions>(py)
}

/// Full calibration rows split into (history, held-out items), each row by
/// `data::heldout::calibration_row_split` keyed by `seed` and the row itself: the split `recsel
/// fit` makes of its validation users.
fn calibration_split(full: &Csr, seed: u64) -> (Csr, Csr) {
    let (mut hp, mut hi, mut tp, mut ti) = (vec![0usize], Vec::new(), vec![0usize], Vec::new());
    for u in 0..full.rows() {
        let (h, t) =
            recsel::data::heldout::calibration_row_split(recsel::data::row_items(full, u), seed);
        hi.extend_from_slice(&h);
        ti.extend_from_slice(&t);
        hp.push(hi.len());
        tp.push(ti.len());
    }
    let shape = (full.rows(), full.cols());
    let (hn, tn) = (hi.len(), ti.len());
    (
        Csr::new(shape, hp, hi, vec![1.0; hn]),
        Csr::new(shape, tp, ti, vec![1.0; tn]),
    )
}

/// User rows (users × items, the items each user has) as a CSR matrix, from scipy's arrays.
pub(crate) fn csr_from(indptr: &[i64], indices: &[i64], rows: usize, cols: usize) -> R<Csr> {
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
pub(crate) struct UserRows {
    pub(crate) csr: Arc<Csr>,
    /// The users' held-out items (same shape), when known: hit@1 of `select` counts picks among
    /// them. `None`: hit@1 is 0.
    pub(crate) targets: Option<Arc<Csr>>,
}

impl UserRows {
    /// The model scoring these users, with their held-out items when known.
    pub(crate) fn scorer<'a>(&'a self, model: &'a Model) -> ModelScorer<'a> {
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

pub(crate) static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh private directory under the system's temporary directory.
pub(crate) fn temp_dir(what: &str) -> PathBuf {
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
pub(crate) struct PyModel {
    pub(crate) model: Arc<Model>,
    pub(crate) params: ModelParams,
    pub(crate) dataset: String,
    pub(crate) item_ids: Vec<String>,
    /// The training users' privacy of a DP fit (`None`: the training data are treated as
    /// public), as `model.json` records it.
    pub(crate) training_privacy: Option<PopulationPrivacy>,
    /// A DP fit on an item set: every item's noisy count its first stage released, which a
    /// release publishes as its popularity (not kept by `save`/`load`).
    pub(crate) item_counts: Option<Vec<f64>>,
    /// The private choice of a DP fit's shift (`dp_shift_grid`), as `model.json` records it.
    pub(crate) shift_choice: Option<recsel::model::options::ShiftChoice>,
}

impl PyModel {
    fn save_to(&self, dir: &Path) -> recsel::Result<()> {
        model::io::save_with_training_privacy(
            dir,
            &self.model,
            &self.params,
            &self.dataset,
            &self.item_ids,
            self.training_privacy.clone(),
        )?;
        match &self.shift_choice {
            Some(c) => model::io::record_shift_choice(dir, c.clone()),
            None => Ok(()),
        }
    }

    fn load_from(dir: &Path) -> recsel::Result<Self> {
        let (m, meta) = model::io::load(dir)?;
        Ok(PyModel {
            model: Arc::new(m),
            params: meta.params,
            dataset: meta.dataset,
            item_ids: meta.item_ids,
            training_privacy: meta.training_privacy,
            item_counts: None,
            shift_choice: meta.shift_choice,
        })
    }
}

#[pymethods]
impl PyModel {
    /// Fits a model on training rows (users × items, scipy CSR arrays). `options` are the
    /// DP-training options ([`training_privacy_options`]), filled into the library's table and
    /// fitted through `TrainingPrivacyOptions::fit`, the function `recsel fit` calls. A DP fit
    /// keeps at most the cap's number of each user's interactions, chosen by `cap_seed` and the
    /// user's own items (default: the split seed `recsel fit` keys them by when not given).
    /// With `dp_shift_grid`, the shift is chosen privately on the calibration users' rows
    /// (`calibration_indptr`, `calibration_indices`, `calibration_rows`: full rows on the same
    /// columns, each split into history and held-out items as `recsel fit` splits its
    /// validation users, by `cap_seed`) through `evaluate::shift::fit_rows`.
    #[staticmethod]
    #[pyo3(signature = (indptr, indices, rows, cols, method, l2, density, item_ids=None,
                        cap_seed=None, calibration_indptr=None, calibration_indices=None,
                        calibration_rows=None, **options))]
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
        cap_seed: Option<u64>,
        calibration_indptr: Option<PyReadonlyArray1<'_, i64>>,
        calibration_indices: Option<PyReadonlyArray1<'_, i64>>,
        calibration_rows: Option<usize>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> R<Self> {
        let mut dp = TrainingPrivacyOptions::default();
        fill(&mut dp, "fit option", options)?;
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
        // Which interactions a user above the cap keeps must not depend on any other user (a
        // key from the whole data, such as a hash of it, would let one user change everyone
        // else's rows): a public seed, by default the one `recsel fit` uses.
        let cap_seed =
            cap_seed.unwrap_or_else(|| recsel::data::DataOptions::default().split_seed());
        let calibration = match (calibration_indptr, calibration_indices, calibration_rows) {
            (Some(p), Some(i), Some(r)) => {
                let full = csr_from(
                    slice(&p, "calibration_indptr")?,
                    slice(&i, "calibration_indices")?,
                    r,
                    cols,
                )?;
                Some(calibration_split(&full, cap_seed))
            }
            (None, None, None) => None,
            _ => {
                return Err(invalid(
                    "calibration_indptr, calibration_indices and calibration_rows go together"
                        .into(),
                ))
            }
        };
        let fitted = py
            .detach(|| {
                recsel::evaluate::shift::fit_rows(
                    &dp,
                    &train,
                    &params,
                    cap_seed,
                    calibration,
                    &|_| {},
                )
            })
            .map_err(err)?;
        Ok(PyModel {
            model: Arc::new(fitted.model),
            params,
            dataset: "python".into(),
            item_ids,
            training_privacy: fitted.training_privacy,
            item_counts: fitted.selection.map(|s| s.noisy_counts),
            shift_choice: fitted.shift_choice,
        })
    }

    /// Writes a model directory with its release — the files `recsel fit --out` writes, through
    /// the same library function (`recommend::publish::write_release`) — so that `recsel
    /// recommend`, `recsel serve` and `Recommender` serve it. `train` (scipy CSR arrays) are the
    /// rows the model was fitted on: the release's counts come from them and, with exact
    /// statistics, its clip ranges (there are no other users to calibrate on). `options` are the
    /// release options ([`release_options`]). Returns the release's privacy report as JSON text.
    #[pyo3(signature = (dir, indptr, indices, rows, cols, **options))]
    #[allow(clippy::too_many_arguments)]
    fn save_release(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i64>,
        rows: usize,
        cols: usize,
        options: Option<&Bound<'_, PyDict>>,
    ) -> R<String> {
        let mut opts = ReleaseOptions::default();
        fill(&mut opts, "release option", options)?;
        let plan = opts.plan().map_err(err)?;
        let train = csr_from(
            slice(&indptr, "indptr")?,
            slice(&indices, "indices")?,
            rows,
            cols,
        )?;
        let release = py
            .detach(|| {
                let data = recsel::data::Dataset::from_training_rows(
                    &self.dataset,
                    train,
                    self.item_ids.clone(),
                )?;
                let fitted = Fitted {
                    model: &self.model,
                    params: &self.params,
                    training_privacy: self.training_privacy.as_ref(),
                    item_counts: self.item_counts.as_deref(),
                    item_universe: None,
                    shift_choice: self.shift_choice.as_ref(),
                };
                write_release(&dir, fitted, &data, &plan, &|_| {})
            })
            .map_err(err)?;
        Ok(release.privacy.map(|r| r.to_json()).unwrap_or_default())
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

    /// The training users' privacy entry of `model.json` as JSON text (the library's
    /// `PopulationPrivacy`), or `None` when the model was fitted without DP.
    #[getter]
    fn training_privacy_json(&self) -> R<Option<String>> {
        self.training_privacy
            .as_ref()
            .map(|p| serde_json::to_string(p).map_err(|e| invalid(e.to_string())))
            .transpose()
    }

    /// The private shift choice of a DP fit with `dp_shift_grid` as JSON text (the grid, the
    /// chosen shift and the calibration users' entry; never the scores), or `None`.
    #[getter]
    fn shift_choice_json(&self) -> R<Option<String>> {
        self.shift_choice
            .as_ref()
            .map(|c| serde_json::to_string(c).map_err(|e| invalid(e.to_string())))
            .transpose()
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
