//! Mechanisms: the registry, one selection, counts, batches, audits.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use recsel::mechanisms::batch::{self, BatchStreams};
use recsel::mechanisms::{self, MechParams, MechValues, Problem};
use recsel::rng::{NoiseMode, Streams};

use crate::convert::{err, fill, invalid, slice, R};

/// Mechanism parameters from keyword arguments: each a parameter the registry declares
/// (`recsel mechanisms`), its value parsed by the declaration as the command line's flag is; an
/// unknown keyword is an error naming it.
pub(crate) fn mech_params(epsilon: f64, params: Option<&Bound<'_, PyDict>>) -> R<MechParams> {
    let mut values = MechValues::new();
    fill(&mut values, "mechanism parameter", params)?;
    let registry = mechanisms::Registry::builtin();
    Ok(registry
        .resolve(&values)
        .map_err(err)?
        .with_epsilon(epsilon))
}

pub(crate) fn build_mech(name: &str, params: &MechParams) -> R<Box<dyn mechanisms::Mechanism>> {
    let spec = mechanisms::spec(name).map_err(err)?;
    spec.build(params)
        .map_err(|e| invalid(format!("invalid parameters for {}: {e}", spec.name)))
}

pub(crate) fn mode(secure: bool, mech: &dyn mechanisms::Mechanism) -> R<NoiseMode> {
    let m = NoiseMode::from_flag(secure);
    if secure {
        mech.secure_epsilon().map_err(err)?;
    }
    Ok(m)
}

/// The registry: one dict per mechanism (name, guarantee, private, params, summary,
/// audit_reference).
#[pyfunction]
pub(crate) fn mechanisms_list(py: Python<'_>) -> R<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for s in mechanisms::REGISTRY {
        let d = PyDict::new(py);
        d.set_item("name", s.name)?;
        d.set_item("guarantee", s.guarantee)?;
        d.set_item("private", s.private)?;
        let names: Vec<&str> = s.params.iter().map(|p| p.name).collect();
        d.set_item("params", names)?;
        let params = PyList::empty(py);
        for p in s.params {
            params.append(param_dict(py, p)?)?;
        }
        d.set_item("parameters", params)?;
        d.set_item("summary", s.summary)?;
        d.set_item("audit_reference", s.audit_reference)?;
        out.append(d)?;
    }
    Ok(out)
}

/// One declared parameter as a dict: `name`, `doc`, `kind` (`real`, `integer` or `choice`),
/// `default`, `requirement` and `choices`.
pub(crate) fn param_dict<'py>(py: Python<'py>, p: &mechanisms::ParamSpec) -> R<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", p.name)?;
    d.set_item("doc", p.doc)?;
    let (kind, choices): (&str, &[&str]) = match p.kind {
        mechanisms::ParamKind::Real { .. } => ("real", &[]),
        mechanisms::ParamKind::Integer { .. } => ("integer", &[]),
        mechanisms::ParamKind::Choice { choices, .. } => ("choice", choices),
    };
    d.set_item("kind", kind)?;
    match p.default_value() {
        mechanisms::ParamValue::Real(x) => d.set_item("default", x)?,
        mechanisms::ParamValue::Integer(i) => d.set_item("default", i)?,
        mechanisms::ParamValue::Word(w) => d.set_item("default", w)?,
    }
    d.set_item("requirement", p.requirement())?;
    d.set_item("choices", choices.to_vec())?;
    Ok(d)
}

/// Every parameter the built-in mechanisms declare (the keyword arguments `sample`, `select`,
/// `audit`, `Recommender` and `recsel.ray.select` accept besides their own), as dicts.
#[pyfunction]
pub(crate) fn mechanism_params(py: Python<'_>) -> R<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for p in mechanisms::Registry::builtin().params() {
        out.append(param_dict(py, p)?)?;
    }
    Ok(out)
}

/// Counts of `n` selections (the function `recsel sample` calls).
#[pyfunction]
#[pyo3(signature = (mech, scores, sens, eps, n, seed, secure, params=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sample<'py>(
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
pub(crate) fn select_batch<'py>(
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
pub(crate) fn audit(
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
