//! Mechanism parameters besides ε (docs/extending.md, "Its parameters").
//!
//! Every parameter is declared once, as a [`ParamSpec`] beside the mechanism that reads it: its
//! name, meaning, type (a real or an integer in a range, or one of a few words) and default. The
//! registry collects the declarations of its mechanisms, and everything that takes parameters
//! from a person reads them there: the command-line flags (`--gamma`), the Python keyword
//! arguments, the keys of the pipeline tables and of the resolved configurations, and the
//! `recsel mechanisms` listing. Values are given by name ([`MechValues`]) and resolved against
//! the declarations into [`MechParams`], which the mechanisms' builders read with
//! [`MechParams::get`] and [`MechParams::word`].

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// One end of a real parameter's range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// The value itself is allowed.
    Closed(f64),
    /// Values up to, but not including, this one are allowed.
    Open(f64),
    /// No limit on this side (the value must still be finite).
    Unbounded,
}

impl Bound {
    fn below(self, v: f64) -> bool {
        match self {
            Bound::Closed(m) => v >= m,
            Bound::Open(m) => v > m,
            Bound::Unbounded => true,
        }
    }

    fn above(self, v: f64) -> bool {
        match self {
            Bound::Closed(m) => v <= m,
            Bound::Open(m) => v < m,
            Bound::Unbounded => true,
        }
    }
}

/// The type of a declared parameter, with its default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A finite real between `min` and `max`.
    Real {
        /// Value when none is given.
        default: f64,
        /// Lower end of the range.
        min: Bound,
        /// Upper end of the range.
        max: Bound,
    },
    /// An integer in `[min, max]`.
    Integer {
        /// Value when none is given.
        default: i64,
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// One of a few words.
    Choice {
        /// Value when none is given.
        default: &'static str,
        /// The allowed words.
        choices: &'static [&'static str],
    },
}

/// A parameter a mechanism reads besides ε: its name (the key in [`MechValues`], the
/// command-line flag `--<name>`, the Python keyword and the pipeline key), its meaning and its
/// type with default and range. The runners, the resolved configurations, the command line, the
/// Python package and the `mechanisms` listing read these declarations, so a new parameter needs
/// no edit outside the mechanism's own file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    /// Key, e.g. `"gamma"`.
    pub name: &'static str,
    /// Meaning, one line.
    pub doc: &'static str,
    /// Type, range and default.
    pub kind: ParamKind,
}

impl ParamSpec {
    /// A real parameter in the closed range `[min, max]`.
    pub const fn real(
        name: &'static str,
        doc: &'static str,
        default: f64,
        min: f64,
        max: f64,
    ) -> Self {
        Self::real_in(name, doc, default, Bound::Closed(min), Bound::Closed(max))
    }

    /// A real parameter between `min` and `max`, each end open, closed or unbounded.
    pub const fn real_in(
        name: &'static str,
        doc: &'static str,
        default: f64,
        min: Bound,
        max: Bound,
    ) -> Self {
        ParamSpec {
            name,
            doc,
            kind: ParamKind::Real { default, min, max },
        }
    }

    /// An integer parameter in `[min, max]`.
    pub const fn integer(
        name: &'static str,
        doc: &'static str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Self {
        ParamSpec {
            name,
            doc,
            kind: ParamKind::Integer { default, min, max },
        }
    }

    /// A parameter that is one of `choices`.
    pub const fn choice(
        name: &'static str,
        doc: &'static str,
        default: &'static str,
        choices: &'static [&'static str],
    ) -> Self {
        ParamSpec {
            name,
            doc,
            kind: ParamKind::Choice { default, choices },
        }
    }

    /// The value when none is given.
    pub fn default_value(&self) -> ParamValue {
        match self.kind {
            ParamKind::Real { default, .. } => ParamValue::Real(default),
            ParamKind::Integer { default, .. } => ParamValue::Integer(default),
            ParamKind::Choice { default, .. } => ParamValue::Word(default.to_string()),
        }
    }

    /// The requirement in words, e.g. `in (0, 1]`, `finite and > -1`, `an integer >= 1`,
    /// `one of spearman, pearson`.
    pub fn requirement(&self) -> String {
        match self.kind {
            ParamKind::Real { min, max, .. } => match (min, max) {
                (Bound::Unbounded, Bound::Unbounded) => "finite".into(),
                (m, Bound::Unbounded) => format!("finite and {}", lower_words(m)),
                (Bound::Unbounded, m) => format!("finite and {}", upper_words(m)),
                (a, b) => {
                    let (open, lo) = match a {
                        Bound::Open(v) => ('(', v),
                        Bound::Closed(v) => ('[', v),
                        Bound::Unbounded => unreachable!("matched above"),
                    };
                    let (close, hi) = match b {
                        Bound::Open(v) => (')', v),
                        Bound::Closed(v) => (']', v),
                        Bound::Unbounded => unreachable!("matched above"),
                    };
                    format!("in {open}{lo}, {hi}{close}")
                }
            },
            ParamKind::Integer { min, max, .. } if max == i64::MAX => {
                format!("an integer >= {min}")
            }
            ParamKind::Integer { min, max, .. } => format!("an integer in [{min}, {max}]"),
            ParamKind::Choice { choices, .. } => format!("one of {}", choices.join(", ")),
        }
    }

    fn invalid(&self, shown: &dyn fmt::Display) -> Error {
        Error::Invalid(format!(
            "{} must be {}, got {shown}",
            self.name,
            self.requirement()
        ))
    }

    /// `value` as this parameter's type (an integer given for a real, or a whole real given for
    /// an integer, is converted) if it meets the requirement; else an error naming the parameter
    /// and the value.
    pub fn check(&self, value: &ParamValue) -> Result<ParamValue> {
        match (self.kind, value) {
            (ParamKind::Real { min, max, .. }, v) => {
                let x = match v {
                    ParamValue::Real(x) => *x,
                    ParamValue::Integer(i) => *i as f64,
                    ParamValue::Word(w) => return Err(self.invalid(&format!("'{w}'"))),
                };
                if x.is_finite() && min.below(x) && max.above(x) {
                    Ok(ParamValue::Real(x))
                } else {
                    Err(self.invalid(&x))
                }
            }
            (ParamKind::Integer { min, max, .. }, v) => {
                let i = match v {
                    ParamValue::Integer(i) => Some(*i),
                    ParamValue::Real(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Some(*x as i64),
                    _ => None,
                };
                match i {
                    Some(i) if i >= min && i <= max => Ok(ParamValue::Integer(i)),
                    _ => Err(self.invalid(v)),
                }
            }
            (ParamKind::Choice { choices, .. }, ParamValue::Word(w)) if choices.contains(&&**w) => {
                Ok(value.clone())
            }
            (ParamKind::Choice { .. }, v) => Err(self.invalid(&format!("'{v}'"))),
        }
    }

    /// `value` as this parameter's type, without the range check: an integer given for a real
    /// becomes a real, a whole real given for an integer an integer; a word must be one of the
    /// choices. The error names the parameter and the value.
    pub fn coerce(&self, value: &ParamValue) -> Result<ParamValue> {
        let ok = match (self.kind, value) {
            (ParamKind::Real { .. }, ParamValue::Integer(i)) => Some(ParamValue::Real(*i as f64)),
            (ParamKind::Real { .. }, ParamValue::Real(_)) => Some(value.clone()),
            (ParamKind::Integer { .. }, ParamValue::Real(x)) if x.fract() == 0.0 => {
                Some(ParamValue::Integer(*x as i64))
            }
            (ParamKind::Integer { .. }, ParamValue::Integer(_)) => Some(value.clone()),
            (ParamKind::Choice { choices, .. }, ParamValue::Word(w))
                if choices.contains(&w.as_str()) =>
            {
                Some(value.clone())
            }
            _ => None,
        };
        ok.ok_or_else(|| self.invalid(&format!("'{value}'")))
    }

    /// The value written as `text` (a number, or a word for a choice) as this parameter's type
    /// ([`ParamSpec::coerce`]; the range is checked when a mechanism that reads it is built):
    /// how the command line and the Python keyword arguments give values.
    pub fn parse(&self, text: &str) -> Result<ParamValue> {
        let t = text.trim();
        let value = if let Ok(i) = t.parse::<i64>() {
            ParamValue::Integer(i)
        } else if let Ok(x) = t.parse::<f64>() {
            ParamValue::Real(x)
        } else {
            ParamValue::Word(t.to_string())
        };
        self.coerce(&value)
    }
}

fn lower_words(b: Bound) -> String {
    match b {
        Bound::Open(v) => format!("> {v}"),
        Bound::Closed(v) => format!(">= {v}"),
        Bound::Unbounded => String::new(),
    }
}

fn upper_words(b: Bound) -> String {
    match b {
        Bound::Open(v) => format!("< {v}"),
        Bound::Closed(v) => format!("<= {v}"),
        Bound::Unbounded => String::new(),
    }
}

/// A parameter's value: a real, an integer or a word (written in tables as a TOML or JSON
/// number or string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// A word (a choice).
    Word(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Integer(i) => write!(f, "{i}"),
            ParamValue::Real(x) => write!(f, "{x}"),
            ParamValue::Word(w) => write!(f, "{w}"),
        }
    }
}

impl From<f64> for ParamValue {
    fn from(x: f64) -> Self {
        ParamValue::Real(x)
    }
}

impl From<i64> for ParamValue {
    fn from(i: i64) -> Self {
        ParamValue::Integer(i)
    }
}

impl From<u64> for ParamValue {
    fn from(i: u64) -> Self {
        ParamValue::Integer(i.min(i64::MAX as u64) as i64)
    }
}

impl From<&str> for ParamValue {
    fn from(w: &str) -> Self {
        ParamValue::Word(w.to_string())
    }
}

impl From<crate::numerics::Chooser> for ParamValue {
    fn from(c: crate::numerics::Chooser) -> Self {
        ParamValue::Word(c.name().to_string())
    }
}

/// Parameter values by name, in order: the ones a person gave (a table's keys, a command line's
/// flags), or a whole resolved set. In a table they sit beside the table's other keys, so a
/// table deserialises them from every key it does not know itself; whether each name is a
/// parameter is checked against a registry when the values are resolved
/// ([`crate::mechanisms::Registry::resolve`]), and the error names the key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MechValues(Vec<(String, ParamValue)>);

impl MechValues {
    /// No values.
    pub fn new() -> Self {
        MechValues(Vec::new())
    }

    /// Sets `name` to `value` (replacing an earlier value of the same name).
    pub fn set(&mut self, name: &str, value: impl Into<ParamValue>) {
        let value = value.into();
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name.to_string(), value)),
        }
    }

    /// These values with `name` set to `value`.
    pub fn with(mut self, name: &str, value: impl Into<ParamValue>) -> Self {
        self.set(name, value);
        self
    }

    /// The value given for `name`.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Removes the value of `name`, returning it.
    pub fn remove(&mut self, name: &str) -> Option<ParamValue> {
        let i = self.0.iter().position(|(n, _)| n == name)?;
        Some(self.0.remove(i).1)
    }

    /// Every `(name, value)`, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The numeric value of `spec` as given, else its default, without the range check; NaN
    /// for a word.
    pub fn number(&self, spec: &ParamSpec) -> f64 {
        match self.get(spec.name).cloned().unwrap_or(spec.default_value()) {
            ParamValue::Real(x) => x,
            ParamValue::Integer(i) => i as f64,
            ParamValue::Word(_) => f64::NAN,
        }
    }

    /// Whether no value is given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `other`'s values set over these.
    pub fn merged(mut self, other: &MechValues) -> Self {
        for (n, v) in other.iter() {
            self.set(n, v.clone());
        }
        self
    }
}

impl Serialize for MechValues {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (n, v) in &self.0 {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for MechValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MechValues;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("mechanism parameters: names with a number or a word")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<MechValues, A::Error> {
                let mut out = MechValues::new();
                while let Some(key) = a.next_key::<String>()? {
                    let value: ParamValue = a.next_value().map_err(|_| {
                        serde::de::Error::custom(format!(
                            "unknown key `{key}` (not an option of this table; a mechanism \
                             parameter takes a number or a word)"
                        ))
                    })?;
                    out.set(&key, value);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// The parameters a mechanism is built with: ε and a value for each declared parameter
/// (resolved by [`crate::mechanisms::Registry::resolve`]; a parameter without a value takes
/// its declared default). Serialised as `epsilon` followed by the values, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct MechParams {
    /// Privacy parameter ε (finite, > 0).
    pub epsilon: f64,
    /// The other parameters by name.
    pub values: MechValues,
}

impl MechParams {
    /// These parameters with another ε.
    pub fn with_epsilon(&self, epsilon: f64) -> Self {
        let mut p = self.clone();
        p.epsilon = epsilon;
        p
    }

    /// These parameters with `name` set to `value` (checked when a mechanism that reads it is
    /// built).
    pub fn with_param(mut self, name: &str, value: impl Into<ParamValue>) -> Self {
        self.values.set(name, value);
        self
    }

    /// The value of the parameter `spec` as given, else its default, checked against `spec`;
    /// an error naming the parameter and the value if it breaks the requirement. Reals and
    /// integers come back as `f64`.
    pub fn get(&self, spec: &ParamSpec) -> Result<f64> {
        match self.checked(spec)? {
            ParamValue::Real(x) => Ok(x),
            ParamValue::Integer(i) => Ok(i as f64),
            ParamValue::Word(_) => Err(Error::Invalid(format!(
                "parameter {} is a word, not a number",
                spec.name
            ))),
        }
    }

    /// The word of the choice parameter `spec` as given, else its default, checked.
    pub fn word(&self, spec: &ParamSpec) -> Result<String> {
        match self.checked(spec)? {
            ParamValue::Word(w) => Ok(w),
            v => Err(Error::Invalid(format!(
                "parameter {} takes a word, got {v}",
                spec.name
            ))),
        }
    }

    /// The numeric value of `spec` as given, else its default, without the range check (for
    /// reading a parameter outside a mechanism, e.g. GEM's β in a diagnostic); NaN for a word.
    pub fn number(&self, spec: &ParamSpec) -> f64 {
        self.values.number(spec)
    }

    fn checked(&self, spec: &ParamSpec) -> Result<ParamValue> {
        match self.values.get(spec.name) {
            Some(v) => spec.check(v),
            None => Ok(spec.default_value()),
        }
    }
}

impl Serialize for MechParams {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.values.0.len() + 1))?;
        m.serialize_entry("epsilon", &self.epsilon)?;
        for (n, v) in &self.values.0 {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for MechParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut values = MechValues::deserialize(d)?;
        let epsilon = match values.remove("epsilon") {
            Some(ParamValue::Real(x)) => x,
            Some(ParamValue::Integer(i)) => i as f64,
            _ => {
                return Err(serde::de::Error::custom(
                    "mechanism parameters without epsilon",
                ))
            }
        };
        Ok(MechParams { epsilon, values })
    }
}
