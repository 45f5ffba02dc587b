//! The sparse vector for DP queries from Python (docs/sparse-vector.md): `recsel.SparseVector`, a
//! stream that answers queries one at a time (Algorithms 3 and 4), `recsel.search_threshold`
//! (Algorithm 5) and `recsel.select_unknown_threshold` (Theorem 4.7), each the library's own
//! function. A query given as a Python callable gets a fresh 63-bit seed per run from the
//! stream's seeded generator, so a seeded run is reproducible; the first exception it raises is
//! re-raised unchanged once the library call returns (a run that raised counts as a score below
//! every threshold until then, and nothing is released).
//!
//! Also `recsel.bounds` (docs/bounds.md): the utility bounds of `recsel bounds`.

use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use recsel::mechanisms::private_candidates::sparse_vector::{
    Answer, SparseVector, SvtParams, SvtStream, UnknownThreshold,
};
use recsel::mechanisms::private_candidates::Statement;
use recsel::numerics::bounds::{utility_bounds, BoundsOptions, GemBoundReading};
use recsel::rng::{child_seed, name_id, Rng, Streams};

use crate::convert::{err, fill, invalid, option_dicts, R};

/// (ε, δ, source) of a statement.
fn statement(py: Python<'_>, s: &Statement) -> R<Py<PyTuple>> {
    Ok(PyTuple::new(
        py,
        [
            s.epsilon.into_pyobject(py)?.into_any(),
            s.delta.into_pyobject(py)?.into_any(),
            s.source.into_pyobject(py)?.into_any(),
        ],
    )?
    .unbind())
}

/// The sparse vector of the keyword arguments: the exact oracle without `samples`, the
/// estimated one (m = `samples` runs per query, slack η, smoothing c or the library's default)
/// with it.
#[allow(clippy::too_many_arguments)]
fn sparse_vector(
    eps0: f64,
    percentile: f64,
    epsilon: f64,
    max_queries: u64,
    samples: Option<u64>,
    slack: f64,
    smoothing: Option<f64>,
    delta0: f64,
) -> R<SparseVector> {
    let params = match samples {
        None => {
            if smoothing.is_some() {
                return Err(invalid(
                    "smoothing applies to estimated percentiles: pass samples too".to_string(),
                ));
            }
            SvtParams::exact(eps0, percentile, epsilon, max_queries)
        }
        Some(m) => {
            let p = SvtParams::estimated(eps0, percentile, epsilon, max_queries, m, slack);
            match smoothing {
                Some(c) => p.with_smoothing(c),
                None => p,
            }
        }
    };
    params.with_delta0(delta0).check().map_err(err)
}

/// The generator of a seeded stream.
fn generator(seed: u64) -> Rng {
    Streams::new(seed).stream(name_id("sparse-vector"), 0, 0, 0)
}

/// A Python query `fn_(seed) -> float` as the library's infallible run: the first error is kept
/// in `failed` and the run scores NaN (below every threshold).
fn scored<'a, 'py>(
    fn_: &'a Bound<'py, PyAny>,
    failed: &'a RefCell<Option<PyErr>>,
) -> impl FnMut(&mut Rng) -> f64 + 'a {
    move |r: &mut Rng| {
        if failed.borrow().is_some() {
            return f64::NAN;
        }
        let seed = child_seed(r);
        match fn_.call1((seed,)).and_then(|v| v.extract::<f64>()) {
            Ok(s) => s,
            Err(e) => {
                *failed.borrow_mut() = Some(e);
                f64::NAN
            }
        }
    }
}

fn callable(fn_: &Bound<'_, PyAny>, what: &str) -> R<()> {
    if fn_.is_callable() {
        Ok(())
    } else {
        Err(invalid(format!("fn must be callable: {what}")))
    }
}

/// One stream of the sparse vector: answers "above" (`True`) or "below" (`False`) until the
/// first "above", at most `max_queries` times.
#[pyclass(name = "SparseVector", module = "recsel._native", unsendable)]
pub struct PySparseVector {
    stream: SvtStream<'static>,
    rng: Rng,
}

#[pymethods]
impl PySparseVector {
    #[new]
    #[pyo3(signature = (eps0, percentile, epsilon, max_queries, samples=None, slack=0.5,
                        smoothing=None, delta0=0.0, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        eps0: f64,
        percentile: f64,
        epsilon: f64,
        max_queries: u64,
        samples: Option<u64>,
        slack: f64,
        smoothing: Option<f64>,
        delta0: f64,
        seed: u64,
    ) -> R<Self> {
        let svt = sparse_vector(
            eps0,
            percentile,
            epsilon,
            max_queries,
            samples,
            slack,
            smoothing,
            delta0,
        )?;
        let mut rng = generator(seed);
        let stream = svt.into_stream(&mut rng);
        Ok(PySparseVector { stream, rng })
    }

    /// (ε, δ, source) of the stream.
    #[getter]
    fn guarantee(&self, py: Python<'_>) -> R<Py<PyTuple>> {
        statement(py, &self.stream.sparse_vector().guarantee())
    }

    /// Every statement that holds, strongest δ first.
    #[getter]
    fn statements(&self, py: Python<'_>) -> R<Vec<Py<PyTuple>>> {
        self.stream
            .sparse_vector()
            .statements()
            .iter()
            .map(|s| statement(py, s))
            .collect()
    }

    /// Queries answered so far.
    #[getter]
    fn asked(&self) -> u64 {
        self.stream.asked()
    }

    /// Whether the stream has answered "above" (and answers nothing more).
    #[getter]
    fn stopped(&self) -> bool {
        self.stream.stopped()
    }

    /// π(p): the probability that a query of percentile p is answered "above".
    fn pass_probability(&self, p: f64) -> f64 {
        self.stream.sparse_vector().pass_probability(p)
    }

    /// Algorithm 3: a query whose exact percentile is `p`.
    fn test_percentile(&mut self, p: f64) -> R<bool> {
        let a = self.stream.test_percentile(p, &mut self.rng).map_err(err)?;
        Ok(a == Answer::Above)
    }

    /// Algorithm 4 on a count the caller drew: `count` of the m runs scored at least τ.
    fn test_count(&mut self, count: u64) -> R<bool> {
        let a = self.stream.test_count(count, &mut self.rng).map_err(err)?;
        Ok(a == Answer::Above)
    }

    /// Algorithm 4: runs `fn_(seed) -> score` m times and answers whether its percentile at
    /// `tau` reaches the target.
    fn test(&mut self, fn_: Bound<'_, PyAny>, tau: f64) -> R<bool> {
        callable(&fn_, "fn(seed) -> score")?;
        let failed = RefCell::new(None);
        let a = self
            .stream
            .test(scored(&fn_, &failed), tau, &mut self.rng)
            .map_err(err)?;
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        Ok(a == Answer::Above)
    }
}

/// Algorithm 5: the first threshold of the strictly decreasing `grid` whose percentile reaches
/// the target, on m = `samples` runs of `fn_(seed) -> score`. Returns `(threshold, index, runs,
/// (epsilon, delta, source))`, threshold and index `None` for ⊥.
#[pyfunction]
#[pyo3(signature = (fn_, grid, eps0, percentile, epsilon, samples, slack=0.5, smoothing=None,
                    delta0=0.0, seed=0))]
#[allow(clippy::too_many_arguments)]
pub fn search_threshold<'py>(
    py: Python<'py>,
    fn_: Bound<'py, PyAny>,
    grid: Vec<f64>,
    eps0: f64,
    percentile: f64,
    epsilon: f64,
    samples: u64,
    slack: f64,
    smoothing: Option<f64>,
    delta0: f64,
    seed: u64,
) -> R<Bound<'py, PyTuple>> {
    callable(&fn_, "fn(seed) -> score")?;
    let svt = sparse_vector(
        eps0,
        percentile,
        epsilon,
        grid.len().max(1) as u64,
        Some(samples),
        slack,
        smoothing,
        delta0,
    )?;
    let failed = RefCell::new(None);
    let s = svt
        .search_threshold(scored(&fn_, &failed), &grid, &mut generator(seed))
        .map_err(err)?;
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    PyTuple::new(
        py,
        [
            s.threshold.into_pyobject(py)?.into_any(),
            s.index.into_pyobject(py)?.into_any(),
            s.runs.into_pyobject(py)?.into_any(),
            statement(py, &svt.guarantee())?.into_bound(py).into_any(),
        ],
    )
}

/// Theorem 4.7: the threshold search on `fn_(seed) -> (candidate, score)`, then the known
/// threshold at the threshold found (stop with probability γ after each miss, at most
/// `max_runs`). Returns `(candidate, score, threshold, runs, (epsilon, delta, source))`,
/// candidate and score `None` for ⊥.
#[pyfunction]
#[pyo3(signature = (fn_, grid, gamma, eps0, percentile, epsilon, samples, slack=0.5,
                    smoothing=None, max_runs=None, delta0=0.0, seed=0))]
#[allow(clippy::too_many_arguments)]
pub fn select_unknown_threshold<'py>(
    py: Python<'py>,
    fn_: Bound<'py, PyAny>,
    grid: Vec<f64>,
    gamma: f64,
    eps0: f64,
    percentile: f64,
    epsilon: f64,
    samples: u64,
    slack: f64,
    smoothing: Option<f64>,
    max_runs: Option<u64>,
    delta0: f64,
    seed: u64,
) -> R<Bound<'py, PyTuple>> {
    callable(&fn_, "fn(seed) -> (candidate, score)")?;
    let svt = sparse_vector(
        eps0,
        percentile,
        epsilon,
        grid.len().max(1) as u64,
        Some(samples),
        slack,
        smoothing,
        delta0,
    )?;
    let sel = UnknownThreshold::new(svt, gamma, max_runs).map_err(err)?;
    let failed: RefCell<Option<PyErr>> = RefCell::new(None);
    let q = |r: &mut Rng| -> (Option<Py<PyAny>>, f64) {
        if failed.borrow().is_some() {
            return (None, f64::NAN);
        }
        let seed = child_seed(r);
        let out = fn_.call1((seed,)).and_then(|v| {
            v.extract::<(Bound<'py, PyAny>, f64)>().map_err(|_| {
                invalid(format!(
                    "fn must return a (candidate, score) pair with a float score, got {}",
                    v.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
                ))
            })
        });
        match out {
            Ok((c, s)) => (Some(c.unbind()), s),
            Err(e) => {
                *failed.borrow_mut() = Some(e);
                (None, f64::NAN)
            }
        }
    };
    let out = sel.run(q, &grid, &mut generator(seed)).map_err(err)?;
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    let (cand, score) = match out.outcome.best {
        Some((Some(c), s)) => (c.into_bound(py), s.into_pyobject(py)?.into_any()),
        _ => (py.None().into_bound(py), py.None().into_bound(py)),
    };
    PyTuple::new(
        py,
        [
            cand,
            score,
            out.search.threshold.into_pyobject(py)?.into_any(),
            (out.search.runs + out.outcome.runs)
                .into_pyobject(py)?
                .into_any(),
            statement(py, &sel.guarantee())?.into_bound(py).into_any(),
        ],
    )
}

/// The options of `recsel bounds` (declared once in the library), as dicts.
#[pyfunction]
pub fn bounds_options(py: Python<'_>) -> R<Bound<'_, PyList>> {
    option_dicts::<BoundsOptions>(py)
}

/// The utility bounds of RNM, GEM and mGEM (`recsel bounds --json`) as JSON text: the library's
/// bounds with k, ε, β and the mechanism with the highest bound.
#[pyfunction]
#[pyo3(signature = (**options))]
pub fn bounds(options: Option<&Bound<'_, PyDict>>) -> R<String> {
    let mut o = BoundsOptions::default();
    fill(&mut o, "bounds option", options)?;
    let need = |name: &str| invalid(format!("bounds needs {name}"));
    let scores = o.scores.clone().ok_or_else(|| need("scores"))?;
    let sens = o.sens.clone().ok_or_else(|| need("sens"))?;
    let epsilon = o.epsilon.ok_or_else(|| need("epsilon"))?;
    let reading = GemBoundReading::from_name(&o.flags()).map_err(err)?;
    let b = utility_bounds(&scores, &sens, epsilon, o.beta(), reading).map_err(err)?;
    let mut v = serde_json::to_value(b).map_err(|e| invalid(e.to_string()))?;
    v["k"] = scores.len().into();
    v["epsilon"] = epsilon.into();
    v["beta"] = o.beta().into();
    v["best_bound"] = b.best_mechanism().into();
    Ok(v.to_string())
}
