//! Option tables: the options of a job declared once, as one struct.
//!
//! A table is written with `option_table!` (crate-internal): every field is an option with its meaning (the doc
//! comment), its type and, where it has one, its default. From that one declaration come the
//! serde table (the keys of a pipeline file and of the resolved `config.toml`; every field
//! optional), the list of [`OptionSpec`]s that the command line turns into flags and the Python
//! package into keyword arguments, and [`OptionTable::set`], which parses an option's value
//! from text (a flag's argument, a Python value) with the same parser for every front end. A
//! table can take in another table whole (`#[flatten]`), as the select job's options take in
//! the data and model options. Front ends fill tables in; the library resolves them: an option
//! with a declared default is read through the method of its name (`options.trials()`, the
//! given value or the default), and [`OptionTable::resolved`] fills every declared default in
//! at once. No code outside the declaration writes a default again.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};

/// How an option's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text: a name, or a list of names.
    Text,
    /// A file or a folder.
    Path,
    /// A whole number ≥ 0.
    Count,
    /// A real number (negative values allowed).
    Real,
    /// On or off: given as a flag without a value.
    Flag,
    /// Real numbers, comma separated on a command line, a list in a table.
    Reals,
}

/// Checks an option's text; the error says what is wrong with it.
pub type Check = Arc<dyn Fn(&str) -> std::result::Result<(), String> + Send + Sync>;

/// One option of a table, for a front end to offer: its table key, its command-line flag, its
/// help, the kind of value, the words it may take, its default and a check of its text.
#[derive(Clone)]
pub struct OptionSpec {
    /// Key in a table (`trials`).
    pub key: &'static str,
    /// Long flag without dashes (`trials`; `mech` for the key `mechanisms`). The Python keyword
    /// is the flag with `_` for `-`.
    pub flag: &'static str,
    /// What it means, and what it defaults to when that depends on the data.
    pub help: String,
    /// Placeholder of the value in help texts.
    pub value_name: &'static str,
    /// Kind of value.
    pub kind: Kind,
    /// The words it may take (empty: any text of its kind).
    pub choices: &'static [&'static str],
    /// Also offer `--no-<flag>` to switch a flag off.
    pub negatable: bool,
    /// The job cannot run without it (a front end may ask for it up front).
    pub required: bool,
    /// Left out of help texts and the generated references (an option kept only to say what
    /// replaced it, or one for tests).
    pub hidden: bool,
    /// The keys of options it cannot be given with (the table's check says so too).
    pub conflicts: &'static [&'static str],
    /// Section of the help it is listed in.
    pub group: &'static str,
    /// Its default, written as text (`None`: no default, or one that depends on the data).
    pub default: Option<String>,
    /// Checks a value's text before it is set.
    pub check: Check,
}

impl std::fmt::Debug for OptionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptionSpec")
            .field("key", &self.key)
            .field("flag", &self.flag)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl OptionSpec {
    /// The option `key` of type `T` with the doc comment lines `doc` and the default `default`;
    /// the flag is the key with `-` for `_`.
    pub fn new<T: OptionValue>(key: &'static str, doc: &[&str], default: Option<&T>) -> Self {
        OptionSpec {
            key,
            flag: leak_flag(key),
            help: doc_text(doc),
            value_name: T::VALUE_NAME,
            kind: T::KIND,
            choices: &[],
            negatable: false,
            required: false,
            hidden: false,
            conflicts: &[],
            group: "Options",
            default: default.map(OptionValue::show),
            check: Arc::new(|text: &str| T::parse_text(text).map(|_| ())),
        }
    }

    /// The Python keyword of this option: the flag with `_` for `-`.
    pub fn python_name(&self) -> String {
        self.flag.replace('-', "_")
    }
}

/// `key` with `-` for `_`, kept for the program's life (option keys are few and static).
pub(crate) fn leak_flag(key: &'static str) -> &'static str {
    if key.contains('_') {
        Box::leak(key.replace('_', "-").into_boxed_str())
    } else {
        key
    }
}

/// Doc comment lines as one paragraph.
fn doc_text(doc: &[&str]) -> String {
    let text = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    // As clap does with a doc comment: no final full stop.
    text.trim().trim_end_matches('.').to_string()
}

/// A type an option can hold: how its value is written as text and parsed back.
pub trait OptionValue: Sized {
    /// Kind of value.
    const KIND: Kind;
    /// Placeholder in help texts.
    const VALUE_NAME: &'static str;
    /// The value written as `text`; the error says what is wrong.
    fn parse_text(text: &str) -> std::result::Result<Self, String>;
    /// The value as text (what [`OptionValue::parse_text`] reads back).
    fn show(&self) -> String;
}

impl OptionValue for String {
    const KIND: Kind = Kind::Text;
    const VALUE_NAME: &'static str = "TEXT";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        Ok(text.to_string())
    }
    fn show(&self) -> String {
        self.clone()
    }
}

impl OptionValue for PathBuf {
    const KIND: Kind = Kind::Path;
    const VALUE_NAME: &'static str = "PATH";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        Ok(PathBuf::from(text))
    }
    fn show(&self) -> String {
        self.display().to_string()
    }
}

macro_rules! count_value {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            const KIND: Kind = Kind::Count;
            const VALUE_NAME: &'static str = "N";
            fn parse_text(text: &str) -> std::result::Result<Self, String> {
                text.trim()
                    .parse()
                    .map_err(|_| format!("'{text}' is not a whole number >= 0"))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
count_value!(u8, u32, u64, usize);

impl OptionValue for f64 {
    const KIND: Kind = Kind::Real;
    const VALUE_NAME: &'static str = "X";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        text.trim()
            .parse()
            .map_err(|_| format!("'{text}' is not a number"))
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for bool {
    const KIND: Kind = Kind::Flag;
    const VALUE_NAME: &'static str = "BOOL";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "true" | "True" | "1" => Ok(true),
            "false" | "False" | "0" => Ok(false),
            t => Err(format!("'{t}' is not true or false")),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for Vec<f64> {
    const KIND: Kind = Kind::Reals;
    const VALUE_NAME: &'static str = "X1,X2,...";
    fn parse_text(text: &str) -> std::result::Result<Self, String> {
        parse_reals(text)
    }
    fn show(&self) -> String {
        self.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Implements [`OptionValue`] for a type written as one word of text, through its `FromStr` (the
/// error's text says what is wrong) and `Display` (which `FromStr` reads back), with the
/// placeholder `$value_name` in help texts.
macro_rules! text_option_value {
    ($t:ty, $value_name:expr) => {
        impl $crate::options::OptionValue for $t {
            const KIND: $crate::options::Kind = $crate::options::Kind::Text;
            const VALUE_NAME: &'static str = $value_name;
            fn parse_text(text: &str) -> std::result::Result<Self, String> {
                text.parse::<$t>()
                    .map_err(|e: <$t as std::str::FromStr>::Err| e.to_string())
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    };
}
pub(crate) use text_option_value;

/// A comma-separated list of numbers; the error names the position and the text.
pub fn parse_reals(text: &str) -> std::result::Result<Vec<f64>, String> {
    text.split(',')
        .enumerate()
        .map(|(i, t)| {
            let t = t.trim();
            t.parse::<f64>()
                .map_err(|_| format!("item {} is '{t}', not a number", i + 1))
        })
        .collect()
}

/// A value written as `text`; the error says what is wrong with the text (the front end names
/// the option as its user wrote it).
pub fn parse_value<T: OptionValue>(text: &str) -> Result<T> {
    T::parse_text(text).map_err(Error::Invalid)
}

/// A struct of options declared with `option_table!` (or written by hand): its options, their
/// defaults, and a setter from text.
pub trait OptionTable: Sized {
    /// The table with every option that has a fixed default set to it, the others unset.
    fn defaults() -> Self;
    /// Every option, in the table's order (options of tables taken in whole, in place).
    fn options() -> Vec<OptionSpec>;
    /// Sets the option `key` from `text`; `Ok(false)` when `key` is not one of its options, an
    /// error naming the option when the text is not a valid value.
    fn set(&mut self, key: &str, text: &str) -> Result<bool>;
    /// The table with every option that has a declared default set (to the given value, else
    /// the default), the others as given: what a run records as its resolved options. Declared
    /// tables also have, for each option with a default, a method of the option's name that
    /// returns it resolved (`options.trials()`), which is what code that uses a value reads;
    /// both come from the one `= default` of the declaration.
    fn resolved(&self) -> Self;
}

/// `over`'s options set over `base`'s (an option given in both takes `over`'s value): the
/// flags of a command line over a file's table. Both go through their serde tables, where an
/// option that is not given is absent.
pub fn overlay<T: serde::Serialize + serde::de::DeserializeOwned>(base: &T, over: &T) -> Result<T> {
    let table = |t: &T| {
        toml::Table::try_from(t).map_err(|e| Error::Invalid(format!("an option table: {e}")))
    };
    let mut merged = table(base)?;
    merged.extend(table(over)?);
    merged
        .try_into()
        .map_err(|e: toml::de::Error| Error::Invalid(e.to_string()))
}

/// Declares an option table (see the module documentation):
///
/// ```ignore
/// option_table! {
///     #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
///     pub struct JobOptions {
///         /// Trials per (user, mechanism, ε).
///         #[option(group = "Selection")]
///         pub trials: u32 = 50,
///         /// The data options, taken in whole.
///         #[flatten]
///         pub data: DataOptions,
///     }
/// }
/// ```
///
/// Every `#[option(...)]` field becomes `Option<T>` (absent from a TOML table when unset, `null`
/// in JSON); the
/// attribute's `name = value` pairs set [`OptionSpec`] fields (`flag`, `value_name`, `choices`,
/// `negatable`, `required`, `hidden`, `conflicts`, `group`). `= default` gives the value [`OptionTable::defaults`] sets and the
/// help shows. `#[serde(...)]` attributes after `#[option(...)]` pass through to the field (e.g.
/// `skip_serializing_if` for an option a table records only when set). A `#[table_only]` field is a key of the serde table only (no option: the command
/// line gives it another way), of its own type, `Default` when absent.
macro_rules! option_table {
    ($(#[$m:meta])* pub struct $name:ident { $($body:tt)* }) => {
        // The names the generated code shares pass through every step, so that they resolve to
        // one another (macro hygiene).
        $crate::options::option_table!(@munch [$(#[$m])*] $name [out defaults table key text res]
            [] [] [] [] [] [] $($body)*);
    };
    (@munch $meta:tt $name:ident [$out:ident $defs:ident $table:ident $key:ident $text:ident $res:ident]
        [$($fields:tt)*] [$($defaults:tt)*] [$($specs:tt)*] [$($sets:tt)*] [$($getters:tt)*]
        [$($fills:tt)*]
        $(#[doc = $d:literal])* #[flatten] pub $f:ident : $t:ty, $($rest:tt)*) => {
        $crate::options::option_table!(@munch $meta $name [$out $defs $table $key $text $res]
            [$($fields)* $(#[doc = $d])* #[serde(flatten)] pub $f: $t,]
            [$($defaults)* $f: <$t as $crate::options::OptionTable>::defaults(),]
            [$($specs)* $out.extend(<$t as $crate::options::OptionTable>::options());]
            [$($sets)* if $crate::options::OptionTable::set(&mut $table.$f, $key, $text)? {
                return Ok(true);
            }]
            [$($getters)*]
            [$($fills)* $f: $crate::options::OptionTable::resolved(&$res.$f),]
            $($rest)*);
    };
    (@munch $meta:tt $name:ident [$out:ident $defs:ident $table:ident $key:ident $text:ident $res:ident]
        [$($fields:tt)*] [$($defaults:tt)*] [$($specs:tt)*] [$($sets:tt)*] [$($getters:tt)*]
        [$($fills:tt)*]
        $(#[doc = $d:literal])* #[option($($k:ident = $v:expr),* $(,)?)]
        $(#[serde($($serde:tt)*)])*
        pub $f:ident : $t:ty $(= $def:expr)?, $($rest:tt)*) => {
        $crate::options::option_table!(@munch $meta $name [$out $defs $table $key $text $res]
            [$($fields)* $(#[doc = $d])*
                #[serde(default)] $(#[serde($($serde)*)])* pub $f: Option<$t>,]
            [$($defaults)* $f: $crate::options::option_table!(@default $($def)?),]
            [$($specs)* $out.push($crate::options::OptionSpec {
                $($k: $v,)*
                ..$crate::options::OptionSpec::new::<$t>(
                    stringify!($f), &[$($d),*], $defs.$f.as_ref())
            });]
            [$($sets)* if $key == stringify!($f) {
                $table.$f = Some($crate::options::parse_value::<$t>($text)?);
                return Ok(true);
            }]
            [$($getters)* $(
                #[doc = concat!("`", stringify!($f), "` as given, else its declared default (`",
                    stringify!($def), "`).")]
                #[allow(clippy::clone_on_copy)]
                pub fn $f(&self) -> $t {
                    match &self.$f {
                        Some(v) => v.clone(),
                        None => $def,
                    }
                }
            )?]
            [$($fills)* $f: $crate::options::option_table!(@fill $res $f $($def)?),]
            $($rest)*);
    };
    (@munch $meta:tt $name:ident [$out:ident $defs:ident $table:ident $key:ident $text:ident $res:ident]
        [$($fields:tt)*] [$($defaults:tt)*] [$($specs:tt)*] [$($sets:tt)*] [$($getters:tt)*]
        [$($fills:tt)*]
        $(#[doc = $d:literal])* #[table_only] pub $f:ident : $t:ty, $($rest:tt)*) => {
        $crate::options::option_table!(@munch $meta $name [$out $defs $table $key $text $res]
            [$($fields)* $(#[doc = $d])* #[serde(default)] pub $f: $t,]
            [$($defaults)* $f: Default::default(),]
            [$($specs)*]
            [$($sets)*]
            [$($getters)*]
            [$($fills)* $f: $res.$f.clone(),]
            $($rest)*);
    };
    (@default $def:expr) => { Some($def) };
    (@default) => { None };
    (@fill $res:ident $f:ident $def:expr) => { Some($res.$f()) };
    (@fill $res:ident $f:ident) => { $res.$f.clone() };
    (@munch [$($meta:tt)*] $name:ident [$out:ident $defs:ident $table:ident $key:ident $text:ident $res:ident]
        [$($fields:tt)*] [$($defaults:tt)*] [$($specs:tt)*] [$($sets:tt)*] [$($getters:tt)*]
        [$($fills:tt)*]) => {
        $($meta)*
        pub struct $name { $($fields)* }

        /// Each option with a declared default, resolved: the given value, else the default.
        impl $name {
            $($getters)*
        }

        impl $crate::options::OptionTable for $name {
            fn defaults() -> Self {
                $name { $($defaults)* }
            }

            #[allow(unused_variables, clippy::vec_init_then_push)]
            fn options() -> Vec<$crate::options::OptionSpec> {
                let $defs = <Self as $crate::options::OptionTable>::defaults();
                let mut $out = Vec::new();
                $($specs)*
                $out
            }

            fn set(&mut self, $key: &str, $text: &str) -> $crate::error::Result<bool> {
                let $table = self;
                $($sets)*
                Ok(false)
            }

            fn resolved(&self) -> Self {
                let $res = self;
                $name { $($fills)* }
            }
        }
    };
}
pub(crate) use option_table;
