//! Serving: the library's Recommender.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use recsel::mechanisms::Registry;
use recsel::recommend::RecommendOptions;
use recsel::rng::Streams;

use crate::convert::{err, fill, invalid, option_dicts, R};

/// The options of the `Recommender` (`recsel recommend`'s, declared once in the library), as
/// dicts ([`option_dicts`]).
#[pyfunction]
pub fn recommend_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<RecommendOptions>(py)
}

/// Private recommendations from a model folder written by `recsel fit --out DIR` (model and
/// release artifact; docs/deployment.md): the library's `recsel::recommend::Recommender`, the
/// same one `recsel recommend` runs.
#[pyclass(module = "recsel._native", name = "Recommender", frozen)]
pub(crate) struct PyRecommender {
    rec: std::sync::Arc<recsel::recommend::Recommender>,
    /// Items per answer when a call names no `k` (the constructor's `k`, default 1).
    k: usize,
    /// The random source given to the constructor: `secure`, and the seed a call without its
    /// own uses.
    noise: recsel::mechanisms::NoiseOptions,
}

#[pymethods]
impl PyRecommender {
    #[new]
    #[pyo3(signature = (model_dir, mech, eps, **options))]
    fn new(
        py: Python<'_>,
        model_dir: PathBuf,
        mech: &str,
        eps: f64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> R<Self> {
        let mut opts = RecommendOptions::default();
        opts.serving.model = Some(model_dir);
        opts.serving.mechanism = Some(mech.to_string());
        opts.serving.epsilon = Some(eps);
        fill(&mut opts, "Recommender option", options)?;
        let cfg = opts.config(&Registry::builtin()).map_err(err)?;
        if opts.charges_a_ledger() {
            return Err(invalid(
                "the Python Recommender does not charge a privacy ledger: charge one with \
                 `recsel recommend --ledger FILE` or serve through `recsel serve` \
                 (docs/ledger.md)"
                    .into(),
            ));
        }
        let dir = opts.model_dir().map_err(err)?;
        let rec = py
            .detach(|| recsel::recommend::Recommender::load(dir, &cfg))
            .map_err(err)?;
        // Said once, loudly, when the served configuration is below the free baseline.
        let worth = rec.worth();
        if worth.below_free {
            let msg = std::ffi::CString::new(worth.text()).map_err(|e| invalid(e.to_string()))?;
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            PyErr::warn(py, category.as_any(), &msg, 1)?;
        }
        Ok(PyRecommender {
            rec: std::sync::Arc::new(rec),
            k: opts.serving.list_len().map_err(err)?,
            noise: opts.noise.clone(),
        })
    }

    /// The release's privacy report as text: every population (training, calibration, served
    /// per recommendation), its unit, eps, delta and mechanism, and what is not DP — the report
    /// `recsel recommend` and `recsel serve` print.
    #[getter]
    fn privacy_report(&self) -> String {
        self.rec.privacy_report().to_string()
    }

    /// The same report as JSON text (`json.loads` gives the dict `GET /v1/model` shows).
    #[getter]
    fn privacy_report_json(&self) -> String {
        self.rec.privacy_report().to_json()
    }

    /// The one-line privacy statement `recsel recommend` prints.
    #[getter]
    fn privacy_statement(&self) -> String {
        self.rec.privacy_statement()
    }

    /// What the served configuration is worth on the calibration users beside the best free
    /// option (the most popular or the most held-out item), both estimated on calibration users
    /// the tuning did not choose on, from the folder's `tuning.json`, or "not measured": the line
    /// `recsel recommend` prints. It starts with `WARNING:` (and constructing the Recommender
    /// warned) when the configuration does not beat that option by the tuning's margin.
    #[getter]
    fn worth(&self) -> String {
        self.rec.worth().text()
    }

    /// Whether the served configuration does not beat the best free option by the tuning's
    /// margin (paired s.e.) on the calibration users (`worth` names that option).
    #[getter]
    fn worth_below_free(&self) -> bool {
        self.rec.worth().below_free
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

    /// The public per-item prior added to the clipped scores, as given (`"none"`,
    /// `"popularity:W"`, ...; docs/priors.md). A weight of 0 reads `"none"`: no prior.
    #[getter]
    fn prior(&self) -> String {
        self.rec
            .prior()
            .map_or_else(|| "none".to_string(), |p| p.prior.to_string())
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
    /// candidate list, with no prior that depends on the history).
    #[getter]
    fn user_level(&self) -> bool {
        self.rec.user_level()
    }

    /// One private item id per `(user_id, [item ids of the history])`, in order (`None` when a
    /// history covers every item). Seeded streams are keyed by the user id, so the result equals
    /// `recsel recommend --seed SEED` for the same users; without a seed (this call's, else the
    /// constructor's) or in secure mode the randomness comes from the OS. With `k` > 1, a list
    /// of `k` distinct items per user, each list one release at the Recommender's eps, returned
    /// with its claim (`recommend_list_release`); `k` = 1 is the single item, and `k` = None the
    /// constructor's `k`. The answer of `k` is the library's (`Recommender::for_k`): with the
    /// tuned configuration, the tuned list of `k` (`recsel tune --k K`), refused without one.
    #[pyo3(signature = (users, *, k=None, seed=None))]
    fn recommend<'py>(
        &self,
        py: Python<'py>,
        users: Vec<(String, Vec<String>)>,
        k: Option<usize>,
        seed: Option<u64>,
    ) -> R<Bound<'py, PyAny>> {
        match k.unwrap_or(self.k) {
            1 => Ok(self.single(py, users, seed)?.into_pyobject(py)?.into_any()),
            k => Ok(self.list_release(py, users, k, seed)?.into_any()),
        }
    }

    /// An ordered list of `k` distinct private item ids per `(user_id, [item ids of the
    /// history])`, in order, each list one release at the Recommender's eps (the mechanism's
    /// list guarantee; k = 1 is `recommend`'s item). Seeded streams as `recommend`.
    #[pyo3(signature = (users, *, k, seed=None))]
    fn recommend_lists(
        &self,
        py: Python<'_>,
        users: Vec<(String, Vec<String>)>,
        k: usize,
        seed: Option<u64>,
    ) -> R<Vec<Vec<String>>> {
        self.lists(py, &users, k, seed)
    }

    /// The privacy statement of a list of `k` (the line `recsel recommend --k K` prints).
    fn list_statement(&self, k: usize) -> R<String> {
        self.of_k(k)?.list_statement(k).map_err(err)
    }
}

impl PyRecommender {
    /// The recommender that answers `k` items (the library's `Recommender::for_k`).
    fn of_k(&self, k: usize) -> R<std::sync::Arc<recsel::recommend::Recommender>> {
        self.rec.for_k(k).map_err(err)
    }

    /// The seed of a call: its own, else the constructor's, else the OS's (refused on the secure
    /// path, which takes none).
    fn call_seed(&self, seed: Option<u64>) -> R<u64> {
        let noise = recsel::mechanisms::NoiseOptions {
            seed: seed.or(self.noise.seed),
            ..self.noise.clone()
        };
        noise
            .seed_or(|| Streams::from_entropy().seed())
            .map_err(err)
    }

    /// One item per user (`recommend` with k = None or 1).
    fn single(
        &self,
        py: Python<'_>,
        users: Vec<(String, Vec<String>)>,
        seed: Option<u64>,
    ) -> R<Vec<Option<String>>> {
        let rec = self.of_k(1)?;
        let rows = users
            .into_iter()
            .map(|(id, h)| {
                let items = rec.history(h.iter().map(String::as_str)).map_err(err)?;
                Ok((id, items))
            })
            .collect::<R<Vec<(String, Vec<u32>)>>>()?;
        let seed = self.call_seed(seed)?;
        let picks = py
            .detach(|| rec.recommend_all(&rows, seed, &|_| {}))
            .map_err(err)?;
        Ok(picks
            .into_iter()
            .map(|p| p.map(|j| rec.item_id(j).to_string()))
            .collect())
    }

    /// The lists of `k` items, one per user, drawn by the library's `recommend_list`.
    fn lists(
        &self,
        py: Python<'_>,
        users: &[(String, Vec<String>)],
        k: usize,
        seed: Option<u64>,
    ) -> R<Vec<Vec<String>>> {
        let seed = self.call_seed(seed)?;
        let rec = &self.of_k(k)?;
        py.detach(|| {
            let mut draws = rec.draws_seeded(seed)?;
            let mut scratch = rec.scratch();
            users
                .iter()
                .map(|(id, h)| {
                    let items = rec.history(h.iter().map(String::as_str))?;
                    let key = recsel::recommend::user_key(id);
                    let l = rec.recommend_list(&items, k, key, &mut draws, &mut scratch)?;
                    Ok(l.into_iter().map(|j| rec.item_id(j).to_string()).collect())
                })
                .collect::<recsel::Result<Vec<Vec<String>>>>()
        })
        .map_err(err)
    }

    /// `recommend` with k > 1: the lists and their claim, as the library states it — `k`,
    /// `lists`, `epsilon` (the list's, `Recommender::list_epsilon`), `guarantee` (its few
    /// words), `claim` (the line `recsel recommend --k K` prints) and `privacy` (the report
    /// entry of a list, `Recommender::list_privacy`, as JSON text).
    fn list_release<'py>(
        &self,
        py: Python<'py>,
        users: Vec<(String, Vec<String>)>,
        k: usize,
        seed: Option<u64>,
    ) -> R<Bound<'py, PyDict>> {
        let rec = self.of_k(k)?;
        let claim = rec.list_statement(k).map_err(err)?;
        let epsilon = rec.list_epsilon(k).map_err(err)?;
        let privacy = rec.list_privacy(k).map_err(err)?;
        let released = rec.released_len(k).map_err(err)?;
        let lists = self.lists(py, &users, k, seed)?;
        let d = PyDict::new(py);
        d.set_item("k", k)?;
        d.set_item("lists", lists)?;
        d.set_item("epsilon", epsilon)?;
        d.set_item("guarantee", rec.list_guarantee_words(k))?;
        // A tuned list of m > k items: the device shows the first k the user does not own
        // (`recsel.device_filter`).
        d.set_item("device_filter", (released > k).then_some(k))?;
        d.set_item("claim", claim)?;
        d.set_item(
            "privacy",
            serde_json::to_string(&privacy).map_err(|e| invalid(e.to_string()))?,
        )?;
        Ok(d)
    }
}
