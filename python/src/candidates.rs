//! Selection from private candidates from Python (`recsel.select_private_candidates`,
//! docs/private-candidates.md): the library's `PrivateSelection` run with a Python callable as the
//! private algorithm Q. The callable gets a fresh 63-bit seed per run (drawn from the selection's
//! generator, so a seeded selection is reproducible) and returns `(candidate, score)`; its
//! exceptions stop the selection and propagate unchanged.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use recsel::mechanisms::private_candidates::{SelectionParams, Statement, Stopping};
use recsel::rng::{name_id, SecureRng, Streams};

use crate::convert::{err, invalid, R};

/// The stopping rule named `stopping` with its parameters; a missing or unused one is an error
/// naming it.
fn stopping_rule(
    stopping: &str,
    gamma: Option<f64>,
    eta: Option<f64>,
    mu: Option<f64>,
    runs: Option<u64>,
) -> R<Stopping> {
    let need = |v: Option<f64>, name: &str| {
        v.ok_or_else(|| invalid(format!("stopping='{stopping}' needs {name}")))
    };
    let unused = |given: bool, name: &str| -> R<()> {
        if given {
            Err(invalid(format!(
                "stopping='{stopping}' does not use {name}"
            )))
        } else {
            Ok(())
        }
    };
    Ok(match stopping {
        "geometric" => {
            unused(eta.is_some(), "eta")?;
            unused(mu.is_some(), "mu")?;
            unused(runs.is_some(), "runs")?;
            Stopping::Geometric {
                gamma: need(gamma, "gamma")?,
            }
        }
        "tnb" | "truncated_negative_binomial" => {
            unused(mu.is_some(), "mu")?;
            unused(runs.is_some(), "runs")?;
            Stopping::TruncatedNegBinomial {
                eta: need(eta, "eta")?,
                gamma: need(gamma, "gamma")?,
            }
        }
        "poisson" => {
            unused(gamma.is_some(), "gamma")?;
            unused(eta.is_some(), "eta")?;
            unused(runs.is_some(), "runs")?;
            Stopping::Poisson {
                mu: need(mu, "mu")?,
            }
        }
        "fixed" => {
            unused(gamma.is_some(), "gamma")?;
            unused(eta.is_some(), "eta")?;
            unused(mu.is_some(), "mu")?;
            Stopping::Fixed {
                runs: runs.ok_or_else(|| invalid("stopping='fixed' needs runs".into()))?,
            }
        }
        other => {
            return Err(invalid(format!(
                "unknown stopping rule '{other}'; valid: geometric, tnb, poisson, fixed"
            )))
        }
    })
}

fn statement_tuple<'py>(py: Python<'py>, s: &Statement) -> R<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        [
            s.epsilon.into_pyobject(py)?.into_any(),
            s.delta.into_pyobject(py)?.into_any(),
            s.source.into_pyobject(py)?.into_any(),
        ],
    )
}

/// Runs `fn_` (Q) as many times as the stopping rule says and returns `(candidate, score,
/// (epsilon, delta, source), runs, statements)`; candidate and score are `None` for ⊥.
#[pyfunction]
#[pyo3(signature = (fn_, stopping, eps0, gamma=None, eta=None, mu=None, runs=None, threshold=None,
                    max_runs=None, delta0=0.0, seed=0, secure=false))]
#[allow(clippy::too_many_arguments)]
pub fn select_private_candidates<'py>(
    py: Python<'py>,
    fn_: Bound<'py, PyAny>,
    stopping: &str,
    eps0: f64,
    gamma: Option<f64>,
    eta: Option<f64>,
    mu: Option<f64>,
    runs: Option<u64>,
    threshold: Option<f64>,
    max_runs: Option<u64>,
    delta0: f64,
    seed: u64,
    secure: bool,
) -> R<Bound<'py, PyTuple>> {
    if !fn_.is_callable() {
        return Err(invalid(
            "fn must be callable: fn(seed) -> (candidate, score)".into(),
        ));
    }
    let params = SelectionParams {
        stopping: stopping_rule(stopping, gamma, eta, mu, runs)?,
        eps0,
        delta0,
        threshold,
        max_runs,
    };
    let selection = params.check().map_err(err)?;
    // One run of Q: the callable with a fresh seed; its (candidate, score) pair.
    let call = |seed: u64| -> R<(Py<PyAny>, f64)> {
        let out = fn_.call1((seed,))?;
        let (c, s): (Bound<'py, PyAny>, f64) = out.extract().map_err(|_| {
            invalid(format!(
                "fn must return a (candidate, score) pair with a float score, got {}",
                out.repr()
                    .map_or_else(|_| "?".to_string(), |r| r.to_string())
            ))
        })?;
        Ok((c.unbind(), s))
    };
    let (outcome, statements) = if secure {
        let secure_sel = selection.secure().map_err(err)?;
        let mut rng = SecureRng::from_os().map_err(err)?;
        let o = secure_sel.try_run_seeded(call, &mut rng)?;
        (o, secure_sel.statements().to_vec())
    } else {
        let mut rng = Streams::new(seed).stream(name_id("private-candidates"), 0, 0, 0);
        let o = selection.try_run_seeded(call, &mut rng)?;
        (o, selection.statements().to_vec())
    };
    let (cand, score) = match outcome.best {
        Some((c, s)) => (c.into_bound(py), s.into_pyobject(py)?.into_any()),
        None => (py.None().into_bound(py), py.None().into_bound(py)),
    };
    let all = statements
        .iter()
        .map(|s| statement_tuple(py, s))
        .collect::<R<Vec<_>>>()?;
    PyTuple::new(
        py,
        [
            cand,
            score,
            statement_tuple(py, &outcome.guarantee)?.into_any(),
            outcome.runs.into_pyobject(py)?.into_any(),
            pyo3::types::PyList::new(py, all)?.into_any(),
        ],
    )
}
