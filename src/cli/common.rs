//! Pieces shared by several subcommands: mechanism parameters, number lists, progress bars, seeds.

use anyhow::bail;
#[cfg(feature = "progress")]
pub use indicatif::ProgressBar;
#[cfg(feature = "progress")]
use indicatif::ProgressStyle;
use recsel::options::{Kind, OptionSpec, OptionTable};
use recsel::rng::Streams;

/// Prints a release's privacy report on stderr and, with `json`, writes it there as JSON.
pub fn show_report(
    report: &recsel::privacy::report::PrivacyReport,
    json: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    eprintln!("{report}");
    if let Some(path) = json {
        recsel::io::write_atomic(path, report.to_json().as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The option of every subcommand that draws plots.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PlotArgs {
    /// Also write every plot as SVG (vector graphics, for papers) beside its PNG.
    #[arg(long, help_heading = "Output")]
    pub svg: bool,
}

impl PlotArgs {
    /// Makes the plots of this run follow `--svg`.
    pub fn apply(&self) {
        recsel::report::plot::set_svg(self.svg);
    }
}

/// An option table of the library ([`recsel::options`]) as command-line flags: one flag per
/// option, with the table's help, kind of value, choices, default and check. Only the options
/// given on the command line are set; the library resolves the rest.
#[derive(Debug, Clone, Default)]
pub struct Flags<T>(pub T);

/// The id of the `--no-<flag>` twin of a negatable flag.
fn negated(key: &str) -> String {
    format!("no_{key}")
}

impl<T: OptionTable + Default> clap::FromArgMatches for Flags<T> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut table = Flags(T::default());
        table.update_from_arg_matches(m)?;
        Ok(table)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        for spec in T::options() {
            let text = match spec.kind {
                Kind::Flag if given(spec.key) => Some("true".to_string()),
                Kind::Flag if spec.negatable && given(&negated(spec.key)) => {
                    Some("false".to_string())
                }
                Kind::Flag => None,
                _ if given(spec.key) => m.get_one::<String>(spec.key).cloned(),
                _ => None,
            };
            if let Some(text) = text {
                self.0.set(spec.key, &text).map_err(|e| {
                    clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
                })?;
            }
        }
        Ok(())
    }
}

impl<T: OptionTable + Default> clap::Args for Flags<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let mut cmd = cmd;
        for spec in T::options() {
            cmd = cmd.args(flag_args(spec));
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The clap arguments of one option (two for a negatable flag).
fn flag_args(spec: OptionSpec) -> Vec<clap::Arg> {
    use clap::{builder::PossibleValuesParser, Arg, ArgAction};
    let help = match &spec.default {
        Some(d) if spec.kind != Kind::Flag => format!("{} [default: {d}]", spec.help),
        _ => spec.help.clone(),
    };
    let arg = Arg::new(spec.key)
        .long(spec.flag)
        .help(help)
        .help_heading(spec.group)
        .hide(spec.hidden)
        .conflicts_with_all(spec.conflicts)
        .required(spec.required);
    let arg = match spec.kind {
        Kind::Flag => arg.action(ArgAction::SetTrue),
        _ if !spec.choices.is_empty() => arg
            .action(ArgAction::Set)
            .value_name(spec.value_name)
            .value_parser(PossibleValuesParser::new(spec.choices)),
        kind => {
            let check = spec.check.clone();
            arg.action(ArgAction::Set)
                .value_name(spec.value_name)
                .allow_negative_numbers(kind == Kind::Real)
                .allow_hyphen_values(kind == Kind::Reals)
                .value_parser(move |s: &str| check(s).map(|_| s.to_string()))
        }
    };
    if !spec.negatable {
        return vec![arg];
    }
    // clap keeps ids and flags as `&'static str`; negatable flags are few.
    let no: &'static str = Box::leak(negated(spec.key).into_boxed_str());
    let long: &'static str = Box::leak(format!("no-{}", spec.flag).into_boxed_str());
    vec![
        arg.overrides_with(no),
        Arg::new(no)
            .long(long)
            .help(format!("The opposite of --{} (the default)", spec.flag))
            .help_heading(spec.group)
            .action(ArgAction::SetTrue)
            .overrides_with(spec.key),
    ]
}

/// The options of a table from a TOML file (its keys are the table's, as in a run's
/// `config.toml`), with the flags given on the command line over them. A key that is neither
/// an option of the table nor a mechanism parameter is an error naming the file and the key.
pub fn table_with_file<T>(file: Option<&std::path::Path>, flags: &T) -> anyhow::Result<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone + OptionTable,
{
    use anyhow::Context;
    let Some(path) = file else {
        return Ok(flags.clone());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let options = T::options();
    let registry = recsel::mechanisms::Registry::builtin();
    for key in table.keys() {
        let known = options.iter().any(|o| o.key == key.as_str())
            || registry.params().iter().any(|p| p.name == key.as_str());
        if !known {
            let valid: Vec<&str> = options.iter().map(|o| o.key).collect();
            bail!(
                "{}: unknown key `{key}`: not an option of this command ({})",
                path.display(),
                valid.join(", ")
            );
        }
    }
    let base: T = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    Ok(recsel::options::overlay(&base, flags)?)
}

/// `--seed` where it once named the seed of the split (`fit`, `export`): an error naming
/// `--split-seed`, so that an old command line does not run with another split.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RenamedSeed {
    /// Replaced by --split-seed.
    #[arg(long = "seed", value_name = "N", hide = true)]
    old_seed: Option<String>,
}

impl RenamedSeed {
    /// An error when the old flag is given.
    pub fn check(&self) -> anyhow::Result<()> {
        match &self.old_seed {
            Some(s) => {
                bail!("--seed (the seed of the split) is now --split-seed: write --split-seed {s}")
            }
            None => Ok(()),
        }
    }
}

/// The seed from `--seed`, or one drawn from OS entropy (below 2^63, so TOML can record it) and
/// reported on stderr so the run can be repeated.
pub fn seed_or_entropy(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        let s = Streams::from_entropy().seed();
        eprintln!("recsel: no --seed given; using seed {s} (from OS entropy)");
        s
    })
}

/// Says on stderr what `--secure` means for this run: no seed, OS entropy, and the exact ε.
pub fn announce_secure(effective_epsilon: f64) {
    eprintln!(
        "recsel: --secure: exact discrete noise from an OS-seeded ChaCha20 generator (no seed; \
         the run cannot be repeated); effective eps = {effective_epsilon} (eps rounded down \
         onto the 2^-32 grid)"
    );
}

/// Says on stderr once what `--secure` means for a run of several mechanisms.
pub fn announce_secure_mode() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "recsel: --secure: exact discrete noise from OS-seeded ChaCha20 generators (no seed; \
             the run cannot be repeated); every eps is rounded down onto the 2^-32 grid"
        )
    });
}

/// Like [`announce_secure`], one line per mechanism.
pub fn announce_secure_for(name: &str, effective_epsilon: f64) {
    announce_secure_mode();
    eprintln!("recsel: --secure: {name}: effective eps = {effective_epsilon}");
}

/// The seed of the inputs a run draws beside the mechanisms' noise (an audit's built-in pairs or
/// base users): `--seed`; else one from OS entropy, reported unless the run is secure (whose
/// inputs need not be repeatable).
pub fn input_seed(noise: &recsel::mechanisms::NoiseOptions) -> anyhow::Result<u64> {
    noise.check()?;
    Ok(match noise.seed {
        None if noise.secure() => Streams::from_entropy().seed(),
        seed => seed_or_entropy(seed),
    })
}

/// A build without the `progress` feature draws no bars: the same calls, and nothing on stderr.
#[cfg(not(feature = "progress"))]
#[derive(Debug, Clone, Default)]
pub struct ProgressBar;

#[cfg(not(feature = "progress"))]
impl ProgressBar {
    /// Counts `delta` more units done (nothing to draw).
    pub fn inc(&self, _delta: u64) {}
    /// Ends the bar (nothing to clear).
    pub fn finish_and_clear(&self) {}
    /// Runs `f`, which prints, with the bar out of the way (there is none).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// A progress bar: none without the `progress` feature.
#[cfg(not(feature = "progress"))]
pub fn progress(_len: u64, _message: &str) -> ProgressBar {
    ProgressBar
}

/// A counter of work of unknown total: none without the `progress` feature.
#[cfg(not(feature = "progress"))]
pub fn counter(_message: &str, _unit: &str) -> ProgressBar {
    ProgressBar
}

/// A progress bar on stderr (drawn only when stderr is a terminal) with rate and time left.
#[cfg(feature = "progress")]
pub fn progress(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({per_sec}, {eta} left)")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A counter on stderr for work of unknown total (drawn only when stderr is a terminal): `msg`,
/// the count with `unit`, its rate and the time elapsed. Print log lines through
/// [`ProgressBar::suspend`] so they do not tear it.
#[cfg(feature = "progress")]
pub fn counter(message: &str, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg:>12}} {{spinner}} {{human_pos}} {unit} ({{per_sec}}, {{elapsed}})"
        ))
        .expect("valid template"),
    );
    bar.set_message(message.to_string());
    bar
}

/// Checks a positive count.
pub fn positive(name: &str, n: u64) -> anyhow::Result<u64> {
    if n == 0 {
        bail!("{name} must be at least 1, got 0");
    }
    Ok(n)
}

/// The example of a mechanism defined outside recsel, for the unit test below.
#[cfg(test)]
#[path = "../../examples/custom_mechanism.rs"]
mod custom_mechanism;

#[cfg(test)]
mod tests {
    use recsel::mechanisms::MechValues;

    use super::{custom_mechanism, flag_args};

    /// Every parameter the example's mechanism declares becomes a flag of a command built by
    /// [`flag_args`] (as every subcommand's mechanism flags are), with the declaration's check:
    /// its default parses and builds the mechanism, a value of another type is refused.
    #[test]
    fn a_declared_parameter_becomes_a_flag() {
        let r = custom_mechanism::registry().unwrap();
        let spec = r.get("laplace-max").unwrap();
        let cmd = r
            .options()
            .into_iter()
            .filter(|o| spec.params.iter().any(|p| p.name == o.key))
            .fold(clap::Command::new("t"), |c, o| c.args(flag_args(o)));
        for p in spec.params {
            let flag = format!("--{}", p.name);
            let text = p.default_value().to_string();
            let m = cmd
                .clone()
                .try_get_matches_from(["t", &flag, &text])
                .unwrap();
            let given: &String = m.get_one(p.name).unwrap();
            let value = r.param(p.name).unwrap().parse(given).unwrap();
            let params = r.resolve(&MechValues::new().with(p.name, value)).unwrap();
            r.build("laplace-max", &params).unwrap();
            let bad = cmd
                .clone()
                .try_get_matches_from(["t", &flag, "not-a-value"]);
            assert!(bad.is_err(), "{flag} accepted not-a-value");
        }
    }
}
