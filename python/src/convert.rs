//! Conversions every binding shares: library errors to `recsel.RecselError` with the library's
//! message, numpy arrays to slices, Python values to the text a command-line flag would carry,
//! and pickling support.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use recsel::options::{Kind, OptionSpec, OptionTable};

pyo3::create_exception!(
    _native,
    RecselError,
    pyo3::exceptions::PyValueError,
    "An error reported by the recsel library; the message is the library's."
);

/// The library's error as a Python exception with the library's message.
pub(crate) fn err(e: recsel::Error) -> PyErr {
    RecselError::new_err(e.to_string())
}

pub(crate) fn invalid(msg: String) -> PyErr {
    RecselError::new_err(msg)
}

pub(crate) type R<T> = PyResult<T>;

/// `__reduce__` of an object that its class's static method `ctor` rebuilds from `arg` (the
/// picklable classes travel as bytes or a state tuple, e.g. through Ray's object store).
pub(crate) fn reduce_with<'py>(
    slf: &Bound<'py, PyAny>,
    ctor: &str,
    arg: Bound<'py, PyAny>,
) -> R<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    Ok((
        slf.get_type().getattr(ctor)?,
        PyTuple::new(slf.py(), [arg])?,
    ))
}

/// A Python value as the text a command-line flag would carry (`str` of it; a float's `str` is
/// its shortest exact form, so reals arrive bit for bit).
pub(crate) fn py_text(v: &Bound<'_, PyAny>) -> R<String> {
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Ok(if v.extract::<bool>()? {
            "true"
        } else {
            "false"
        }
        .to_string());
    }
    if let Ok(items) = v.cast::<PyList>() {
        let parts: Vec<String> = items.iter().map(|x| py_text(&x)).collect::<R<_>>()?;
        return Ok(parts.join(","));
    }
    Ok(v.str()?.to_string())
}

pub(crate) fn slice<'a, T: numpy::Element>(
    a: &'a PyReadonlyArray1<'_, T>,
    what: &str,
) -> R<&'a [T]> {
    a.as_slice()
        .map_err(|_| invalid(format!("{what} must be a contiguous 1-D array")))
}

/// Fills the option table `table` from keyword arguments: each names an option by the command
/// line's flag with `_` for `-`, or by its table key; its value is parsed as the command line
/// parses the flag's text. `None` values are skipped; an unknown name is an error that lists
/// the valid ones, a bad value one that names the option.
pub(crate) fn fill<T: OptionTable>(
    table: &mut T,
    what: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> R<()> {
    let specs = T::options();
    for (k, v) in options.into_iter().flat_map(|d| d.iter()) {
        let name: String = k.extract()?;
        let Some(spec) = specs
            .iter()
            .find(|s| s.python_name() == name || s.key == name)
        else {
            let valid: Vec<String> = specs.iter().map(OptionSpec::python_name).collect();
            return Err(invalid(format!(
                "unknown {what} '{name}'; valid: {}",
                valid.join(", ")
            )));
        };
        if !v.is_none() {
            table
                .set(spec.key, &py_text(&v)?)
                .map_err(|e| invalid(format!("{name}: {e}")))?;
        }
    }
    Ok(())
}

/// The options of the table `T` (declared once in the library), as dicts: the keyword `name`
/// (the command line's flag with `_` for `-`), the table `key`, the `flag`, `help`, `kind`,
/// `choices`, `negatable`, `hidden`, `default` and `group`.
pub(crate) fn option_dicts<T: OptionTable>(py: Python<'_>) -> R<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for spec in T::options() {
        let d = PyDict::new(py);
        d.set_item("name", spec.python_name())?;
        d.set_item("key", spec.key)?;
        d.set_item("flag", spec.flag)?;
        d.set_item("help", &spec.help)?;
        let kind = match spec.kind {
            Kind::Text => "text",
            Kind::Path => "path",
            Kind::Count => "count",
            Kind::Real => "real",
            Kind::Flag => "flag",
            Kind::Reals => "reals",
        };
        d.set_item("kind", kind)?;
        d.set_item("choices", spec.choices.to_vec())?;
        d.set_item("negatable", spec.negatable)?;
        d.set_item("hidden", spec.hidden)?;
        d.set_item("default", spec.default.clone())?;
        d.set_item("group", spec.group)?;
        out.append(d)?;
    }
    Ok(out)
}
