//! The registry: every mechanism by name, with its guarantee, its declared parameters and its
//! validating builder ([`REGISTRY`] for the built-ins; a [`Registry`] value for a run, which code
//! outside the crate extends). Front ends list names and parameters from here, and resolve the
//! parameter values a person gave ([`Registry::resolve`]).

use std::fmt;

use super::params::{MechParams, MechValues, ParamKind, ParamSpec};
use super::{
    private_candidates, CombinedGem, ExponentialMechanism, Gem, GemVariant, KRandomizedResponse,
    Mechanism, Noise, NoisyMax, PermuteAndFlip, RandomStopping, StoppingRule, UniformRandom, BETA,
    C, CHOOSER, DRAWS, ETA, GAMMA,
};
use crate::error::{Error, Result};
use crate::numerics::Chooser;
use crate::options::{Kind, OptionSpec, OptionTable};

/// One registry entry: how to list, document and build a mechanism. Code outside the crate
/// writes one as a struct literal (a `static` or a value) and adds it to a [`Registry`].
pub struct MechanismSpec {
    /// CLI name.
    pub name: &'static str,
    /// The guarantee in words.
    pub guarantee: &'static str,
    /// Whether it claims any differential privacy.
    pub private: bool,
    /// The parameters it reads besides ε, declared in its own file and read in `build` with
    /// [`MechParams::get`] or [`MechParams::word`].
    pub params: &'static [ParamSpec],
    /// One-line description.
    pub summary: &'static str,
    /// When to choose it (docs/deployment.md, "Which mechanism for my data").
    pub use_when: &'static str,
    /// An audit reference: a mechanism that is deliberately not ε-DP, kept to show that
    /// `recsel audit` catches a real violation. Not part of `all`.
    pub audit_reference: bool,
    /// Validates the parameters and builds the mechanism (a function or a closure that captures
    /// nothing).
    pub build: fn(&MechParams) -> Result<Box<dyn Mechanism>>,
}

impl fmt::Debug for MechanismSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MechanismSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl MechanismSpec {
    /// Validates `params` and builds the mechanism.
    pub fn build(&self, params: &MechParams) -> Result<Box<dyn Mechanism>> {
        (self.build)(params)
    }

    /// Whether `all` includes it: every entry but the audit references and the built-ins that
    /// run only when named ([`private_candidates::scores::NAMED_ONLY`]).
    pub fn in_all(&self) -> bool {
        !self.audit_reference && !private_candidates::scores::NAMED_ONLY.contains(&self.name)
    }
}

/// `m` boxed as a trait object: the usual last step of a [`MechanismSpec::build`] function.
pub fn boxed<M: Mechanism + 'static>(m: Result<M>) -> Result<Box<dyn Mechanism>> {
    m.map(|m| Box::new(m) as Box<dyn Mechanism>)
}

/// Every mechanism, in the order of docs/mechanisms.md, then the audit references. The single
/// source of names for the CLI and the docs.
pub static REGISTRY: &[MechanismSpec] = &[
    MechanismSpec {
        name: "rnm",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "Report Noisy Max: argmax q_a + Exp(mean 2*Delta/eps), Delta = max sensitivity",
        use_when: "a safe default; equal sensitivities",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, false, p.epsilon)),
    },
    MechanismSpec {
        name: "pf",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "permute-and-flip (McKenna-Sheldon 2020); same distribution as rnm",
        use_when: "as rnm (the same distribution)",
        audit_reference: false,
        build: |p| boxed(PermuteAndFlip::new(p.epsilon)),
    },
    MechanismSpec {
        name: "em",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "exponential mechanism: P(a) proportional to exp(eps*q_a/(2*Delta))",
        use_when: "as rnm (the same choice, in log space)",
        audit_reference: false,
        build: |p| boxed(ExponentialMechanism::new(p.epsilon)),
    },
    MechanismSpec {
        name: "rnm-laplace",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "argmax q_a + Lap(2*Delta/eps)",
        use_when: "comparison only (rnm does better)",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, false, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh",
        guarantee: "not private (reference only)",
        private: false,
        params: &[],
        summary: "heterogeneous RNM: argmax q_a + Exp(mean 2*Delta_a/eps); NOT DP for any eps",
        use_when: "never: not private",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Exponential, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rnmh-laplace",
        guarantee: "(k-1)*eps-DP only (reference only)",
        private: true,
        params: &[],
        summary: "heterogeneous Laplace noisy max: argmax q_a + Lap(Delta_a/eps)",
        use_when: "never: only (k-1)*eps-DP",
        audit_reference: false,
        build: |p| boxed(NoisyMax::new(Noise::Laplace, true, p.epsilon)),
    },
    MechanismSpec {
        name: "rs",
        guarantee: "eps-DP",
        private: true,
        params: &[GAMMA],
        summary: "random stopping RS_gamma (Liu-Talwar): K ~ Geometric(gamma) uniform draws, \
                  each q_a + Lap(3*Delta_a/eps), best recorded",
        use_when: "comparison (gem/mgem usually do better)",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::Geometric,
                p.epsilon,
                p.get(&GAMMA)?,
                0.0,
            ))
        },
    },
    MechanismSpec {
        name: "rs-tnb",
        guarantee: "eps-DP",
        private: true,
        params: &[GAMMA, ETA],
        summary: "improved random stopping (Papernot-Steinke): K ~ truncated negative binomial, \
                  noise Lap((2+eta)*Delta_a/eps)",
        use_when: "as rs, with less noise per draw",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::TruncatedNegBinomial,
                p.epsilon,
                p.get(&GAMMA)?,
                p.get(&ETA)?,
            ))
        },
    },
    MechanismSpec {
        name: "rs-exp",
        guarantee: "eps-DP",
        private: true,
        params: &[GAMMA],
        summary: "RS_gamma with one-sided Exp(mean 3*Delta_a/eps) noise; eps-DP (seed 001 \
                  appendix B's proof of the contrary is wrong, docs/mechanisms.md)",
        use_when: "as rs, with one-sided noise",
        audit_reference: false,
        build: |p| {
            boxed(RandomStopping::new(
                StoppingRule::GeometricExponentialNoise,
                p.epsilon,
                p.get(&GAMMA)?,
                0.0,
            ))
        },
    },
    private_candidates::scores::RS_THRESHOLD,
    private_candidates::scores::RS_HARD,
    private_candidates::scores::RS_HARD_DELTA,
    private_candidates::margin::RS_MARGIN,
    private_candidates::svt_scores::SVT,
    MechanismSpec {
        name: "gem",
        guarantee: "eps-DP",
        private: true,
        params: &[BETA],
        summary: "generalised exponential mechanism (Raskhodnikova-Smith), t = 2 ln(k/beta)/eps",
        use_when: "Spearman(q, Delta) mostly negative",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Gem, p.epsilon, p.get(&BETA)?)),
    },
    MechanismSpec {
        name: "mgem",
        guarantee: "eps-DP",
        private: true,
        params: &[BETA],
        summary: "modified GEM, t = -2 ln(k/beta)/eps",
        use_when: "Spearman(q, Delta) mostly positive",
        audit_reference: false,
        build: |p| boxed(Gem::new(GemVariant::Modified, p.epsilon, p.get(&BETA)?)),
    },
    MechanismSpec {
        name: "cgem",
        guarantee: "eps-DP",
        private: true,
        params: &[BETA, C, CHOOSER],
        summary: "combined GEM: randomised-response bit [corr(q, Delta) >= 0] with c*eps, \
                  then mgem (bit 1) or gem (bit 0) with (1-c)*eps",
        use_when: "Spearman mixed or polarised across users",
        audit_reference: false,
        build: |p| {
            let chooser = Chooser::from_name(&p.word(&CHOOSER)?)?;
            boxed(CombinedGem::new(
                p.epsilon,
                p.get(&BETA)?,
                p.get(&C)?,
                chooser,
            ))
        },
    },
    MechanismSpec {
        name: "krr",
        guarantee: "eps-DP",
        private: true,
        params: &[],
        summary: "k-randomised response: the argmax with probability e^eps/(e^eps+k-1)",
        use_when: "e^eps >> k (large eps, few candidates)",
        audit_reference: false,
        build: |p| boxed(KRandomizedResponse::new(p.epsilon)),
    },
    MechanismSpec {
        name: "random",
        guarantee: "0-DP",
        private: true,
        params: &[],
        summary: "uniform over the k candidates (ignores scores)",
        use_when: "the floor every mechanism must beat",
        audit_reference: false,
        build: |p| boxed(UniformRandom::new(p.epsilon)),
    },
    MechanismSpec {
        name: "bot-exp",
        guarantee: "not private (audit reference)",
        private: false,
        params: &[DRAWS],
        summary: "best of T uniform draws with Exp(mean 3*Delta_a/eps) noise and no random \
                  stopping; NOT DP: loss ln[(1+p)^T - p^T], p = 1 - e^(-eps/3)",
        use_when: "audits only",
        audit_reference: true,
        build: |p| boxed(RandomStopping::best_of(p.epsilon, p.get(&DRAWS)? as u64)),
    },
    MechanismSpec {
        name: "rs-exp-m1",
        guarantee: "claims eps-DP; is 3*eps-DP",
        private: false,
        params: &[GAMMA],
        summary: "rs-exp with noise multiplier 1 instead of 3 while claiming eps: the audit \
                  must report a violation",
        use_when: "audits only",
        audit_reference: true,
        build: |p| {
            boxed(RandomStopping::miscalibrated(
                StoppingRule::GeometricExponentialNoise,
                p.epsilon,
                p.get(&GAMMA)?,
                0.0,
                1.0,
            ))
        },
    },
    private_candidates::scores::RS_THRESHOLD_EPS0,
    private_candidates::scores::RS_HARD_EPS0,
];

/// A set of mechanisms the runners can choose from by name: the built-ins ([`REGISTRY`]) plus any
/// registered by the caller (docs/extending.md). Cheap to clone; runners take one in their
/// configuration ([`crate::experiments::select::SelectConfig::registry`],
/// [`crate::experiments::SynthConfig::registry`]), and default to the built-ins.
#[derive(Clone)]
pub struct Registry {
    entries: Vec<&'static MechanismSpec>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|s| s.name))
            .finish()
    }
}

impl PartialEq for Registry {
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|(a, b)| std::ptr::eq(*a, *b))
    }
}

impl Registry {
    /// The built-in mechanisms, in the order of docs/mechanisms.md.
    pub fn builtin() -> Self {
        Registry {
            entries: REGISTRY.iter().collect(),
        }
    }

    /// Adds `spec` after the existing entries. Errors if the name is taken, empty, `all`, or
    /// contains a comma or whitespace (names are list items on the command line and in
    /// pipelines), if a parameter is declared twice, or differently from a mechanism already
    /// registered that declares one of the same name, or has an invalid default. A spec given
    /// by value is kept for the rest of the program (registrations are program-wide, like the
    /// built-ins).
    pub fn register(&mut self, spec: impl Into<SpecRef>) -> Result<&mut Self> {
        let spec = spec.into().0;
        let name = spec.name;
        if name.is_empty()
            || name == "all"
            || name.contains(|c: char| c == ',' || c.is_whitespace())
        {
            return Err(Error::Invalid(format!(
                "mechanism name '{name}' is not usable: non-empty, not 'all', no comma or space"
            )));
        }
        if self.entries.iter().any(|s| s.name == name) {
            return Err(Error::Invalid(format!(
                "a mechanism named '{name}' is already registered"
            )));
        }
        for (i, p) in spec.params.iter().enumerate() {
            let same_name = |q: &&ParamSpec| q.name == p.name;
            if p.name == "epsilon" || spec.params[..i].iter().any(|q| same_name(&q)) {
                return Err(Error::Invalid(format!(
                    "mechanism '{name}': parameter '{}' is declared twice or is named epsilon",
                    p.name
                )));
            }
            if let Some(q) = self.params().into_iter().find(same_name) {
                if q != p {
                    return Err(Error::Invalid(format!(
                        "mechanism '{name}': parameter '{}' is declared differently by {}",
                        p.name,
                        self.readers(p.name).join(", ")
                    )));
                }
            }
            p.check(&p.default_value()).map_err(|e| {
                Error::Invalid(format!("mechanism '{name}': default of {}: {e}", p.name))
            })?;
        }
        self.entries.push(spec);
        Ok(self)
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'static MechanismSpec> + '_ {
        self.entries.iter().copied()
    }

    /// The comma-separated list of valid names, for error messages.
    pub fn valid_names(&self) -> String {
        self.entries
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Result<&'static MechanismSpec> {
        self.entries
            .iter()
            .copied()
            .find(|s| s.name == name)
            .ok_or_else(|| Error::UnknownName {
                kind: "mechanism",
                name: name.to_string(),
                valid: self.valid_names(),
            })
    }

    /// Validates `params` and builds the mechanism called `name`.
    pub fn build(&self, name: &str, params: &MechParams) -> Result<Box<dyn Mechanism>> {
        self.get(name)?.build(params)
    }

    /// Parses `all` (every entry but the audit references and the named-only built-ins,
    /// [`MechanismSpec::in_all`]) or a comma-separated list of names into entries, in the given
    /// order.
    pub fn parse_list(&self, list: &str) -> Result<Vec<&'static MechanismSpec>> {
        if list.trim() == "all" {
            return Ok(self.iter().filter(|s| s.in_all()).collect());
        }
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let s = self.get(name)?;
            if !out.iter().any(|o: &&MechanismSpec| o.name == s.name) {
                out.push(s);
            }
        }
        if out.is_empty() {
            return Err(Error::Invalid(format!(
                "no mechanism named in '{list}'; valid names: all, {}",
                self.valid_names()
            )));
        }
        Ok(out)
    }

    /// The names a run of `list` uses, in order: [`Registry::parse_list`], except that `all` in
    /// secure mode leaves out the mechanisms without a secure path (`rnmh`, `rnmh-laplace`: they
    /// claim no ε-DP; docs/secure.md) instead of failing on them.
    pub fn run_names(&self, list: &str, secure: bool) -> Result<Vec<String>> {
        let defaults = self.defaults();
        let has_secure_path =
            |s: &MechanismSpec| s.build(&defaults).and_then(|m| m.secure_epsilon()).is_ok();
        Ok(self
            .parse_list(list)?
            .into_iter()
            .filter(|s| !(secure && list.trim() == "all") || has_secure_path(s))
            .map(|s| s.name.to_string())
            .collect())
    }

    /// Every parameter its mechanisms declare, once each: first the six of the built-ins in the
    /// order resolved configurations have always recorded them (γ, β, η, c, chooser, draws;
    /// keeping it keeps configurations and the hash of resumable runs unchanged), then the
    /// others in registry order.
    pub fn params(&self) -> Vec<&'static ParamSpec> {
        let mut all: Vec<&'static ParamSpec> = Vec::new();
        for s in &self.entries {
            for p in s.params {
                if !all.iter().any(|q| q.name == p.name) {
                    all.push(p);
                }
            }
        }
        let rank = |p: &&ParamSpec| {
            RECORD_ORDER
                .iter()
                .position(|n| *n == p.name)
                .unwrap_or(RECORD_ORDER.len())
        };
        all.sort_by_key(rank); // stable: the others keep registry order
        all
    }

    /// The declaration of the parameter `name`; the error names it and lists the valid ones.
    pub fn param(&self, name: &str) -> Result<&'static ParamSpec> {
        let all = self.params();
        all.iter().copied().find(|p| p.name == name).ok_or_else(|| {
            let valid: Vec<&str> = all.iter().map(|p| p.name).collect();
            Error::UnknownName {
                kind: "mechanism parameter",
                name: name.to_string(),
                valid: valid.join(", "),
            }
        })
    }

    /// The mechanisms that read the parameter `name`, in registry order.
    pub fn readers(&self, name: &str) -> Vec<&'static str> {
        self.entries
            .iter()
            .filter(|s| s.params.iter().any(|p| p.name == name))
            .map(|s| s.name)
            .collect()
    }

    /// Checks that every name in `values` is a parameter of a mechanism of this registry (a
    /// misspelt key would otherwise silently leave a default in place).
    pub fn check_names(&self, values: &MechValues) -> Result<()> {
        for (name, _) in values.iter() {
            self.param(name)?;
        }
        Ok(())
    }

    /// Checks the keys of a table's mechanism parameters (the keys that are not options of the
    /// table `table`): an unknown one is an error naming it.
    pub fn check_table_keys(&self, values: &MechValues, table: &str) -> Result<()> {
        for (name, _) in values.iter() {
            if self.param(name).is_err() {
                let valid: Vec<&str> = self.params().iter().map(|p| p.name).collect();
                return Err(Error::Invalid(format!(
                    "unknown key `{name}` in {table}: neither an option of the table nor a \
                     mechanism parameter ({})",
                    valid.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The parameters `given` resolved, in [`Registry::params`] order: every parameter that a
    /// mechanism of `all` reads (and the built-ins' six, which configurations have always
    /// recorded) with its given value (converted to the declared type: an integer given for a
    /// real becomes a real) or its default, and the given values of the others (read only by
    /// mechanisms that run when named; [`MechParams::get`] gives their default when unset);
    /// ε is 1 until set. Errors name an unknown parameter or a value of the wrong type; ranges
    /// are checked when a mechanism that reads the parameter is built.
    pub fn resolve(&self, given: &MechValues) -> Result<MechParams> {
        self.check_names(given)?;
        let standard = self.parse_list("all").unwrap_or_default();
        let recorded = |p: &ParamSpec| {
            RECORD_ORDER.contains(&p.name)
                || standard
                    .iter()
                    .any(|s| s.params.iter().any(|q| q.name == p.name))
        };
        let mut values = MechValues::new();
        for p in self.params() {
            match given.get(p.name) {
                Some(v) => values.set(p.name, p.coerce(v)?),
                None if recorded(p) => values.set(p.name, p.default_value()),
                None => {}
            }
        }
        Ok(MechParams {
            epsilon: 1.0,
            values,
        })
    }

    /// Every parameter at its default (ε = 1).
    pub fn defaults(&self) -> MechParams {
        self.resolve(&MechValues::new())
            .expect("defaults are checked at registration")
    }

    /// The values a resolved table records for a run of the mechanisms `names`: those of the
    /// parameters that the mechanisms of `all` or of the run read, from `params`, in
    /// [`Registry::params`] order.
    pub fn table_values(&self, names: &[String], params: &MechParams) -> MechValues {
        let standard = self.parse_list("all").unwrap_or_default();
        let read = |p: &ParamSpec| {
            let reads = |s: &&MechanismSpec| s.params.iter().any(|q| q.name == p.name);
            standard.iter().any(reads)
                || names
                    .iter()
                    .filter_map(|n| self.get(n).ok())
                    .any(|s| reads(&s))
        };
        let mut out = MechValues::new();
        for p in self.params().into_iter().filter(|p| read(p)) {
            let v = params
                .values
                .get(p.name)
                .cloned()
                .unwrap_or(p.default_value());
            out.set(p.name, v);
        }
        out
    }
}

impl Registry {
    /// The parameters as options for a front end: the flag `--<name>`, the help (meaning,
    /// requirement, default, and the mechanisms that read it: the others ignore it), the words
    /// of a choice, and the declaration's check of a value.
    pub fn options(&self) -> Vec<OptionSpec> {
        self.params()
            .into_iter()
            .map(|p| {
                let (kind, choices) = match p.kind {
                    ParamKind::Real { .. } => (Kind::Real, &[][..]),
                    ParamKind::Integer { .. } => (Kind::Count, &[][..]),
                    ParamKind::Choice { choices, .. } => (Kind::Text, choices),
                };
                let readers = self.readers(p.name).join(", ");
                let requirement = match p.kind {
                    ParamKind::Choice { .. } => String::new(),
                    _ => format!("; {}", p.requirement()),
                };
                OptionSpec {
                    key: p.name,
                    flag: crate::options::leak_flag(p.name),
                    help: format!(
                        "{}{requirement}. Read by {readers}; the other mechanisms ignore it",
                        p.doc
                    ),
                    value_name: Box::leak(p.name.to_uppercase().into_boxed_str()),
                    kind,
                    choices,
                    negatable: false,
                    required: false,
                    hidden: false,
                    conflicts: &[],
                    group: "Mechanism parameters",
                    default: Some(p.default_value().to_string()),
                    check: std::sync::Arc::new(move |t: &str| {
                        p.parse(t).map(|_| ()).map_err(|e| e.to_string())
                    }),
                }
            })
            .collect()
    }
}

/// Mechanism parameters as an option table: the parameters of the built-in mechanisms (the
/// command line and the Python package offer these).
impl OptionTable for MechValues {
    fn defaults() -> Self {
        MechValues::new()
    }

    fn options() -> Vec<OptionSpec> {
        Registry::builtin().options()
    }

    fn set(&mut self, key: &str, text: &str) -> Result<bool> {
        match Registry::builtin().param(key) {
            Ok(p) => {
                MechValues::set(self, key, p.parse(text)?);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// The values as given: a parameter's default depends on the mechanism and the data set,
    /// and the registry resolves it ([`Registry::resolve`]).
    fn resolved(&self) -> Self {
        self.clone()
    }
}

/// The built-in parameters in the order tables record them ([`Registry::params`]).
const RECORD_ORDER: [&str; 6] = ["gamma", "beta", "eta", "c", "chooser", "draws"];

impl Default for MechParams {
    /// The built-in parameters at their defaults, ε = 1.
    fn default() -> Self {
        Registry::builtin().defaults()
    }
}

/// A registry entry that lives for the whole program: a `&'static MechanismSpec`, or a spec
/// given by value (then leaked, once per registration).
pub struct SpecRef(&'static MechanismSpec);

impl From<&'static MechanismSpec> for SpecRef {
    fn from(s: &'static MechanismSpec) -> Self {
        SpecRef(s)
    }
}

impl From<MechanismSpec> for SpecRef {
    fn from(s: MechanismSpec) -> Self {
        SpecRef(Box::leak(Box::new(s)))
    }
}

/// The comma-separated list of the built-in names, for error messages.
pub fn valid_names() -> String {
    Registry::builtin().valid_names()
}

/// The built-in entry called `name`.
pub fn spec(name: &str) -> Result<&'static MechanismSpec> {
    REGISTRY
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownName {
            kind: "mechanism",
            name: name.to_string(),
            valid: valid_names(),
        })
}

/// Validates `params` and builds the built-in mechanism called `name`.
pub fn build(name: &str, params: &MechParams) -> Result<Box<dyn Mechanism>> {
    spec(name)?.build(params)
}

/// Parses `all` (every built-in but the audit references and the named-only ones) or a
/// comma-separated list of names into built-in entries, in the given order.
pub fn parse_list(list: &str) -> Result<Vec<&'static MechanismSpec>> {
    Registry::builtin().parse_list(list)
}
