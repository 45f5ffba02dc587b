//! The options of serving, declared once: [`ServingOptions`] (the model, the mechanism, ε, the
//! candidates), [`LedgerOptions`] (the privacy ledger a served recommendation is charged to) and
//! [`RecommendOptions`], what `recsel recommend` and the Python package's `Recommender` fill in
//! (both of the former, the random source, the batch's ledger settings and the mechanism's
//! parameters). [`RecommendOptions::config`] resolves them into the [`RecommendConfig`] a
//! [`super::Recommender`] is built with. The service (`recsel serve`) takes the first two whole.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{RecommendConfig, Recommender};
use crate::error::{Error, Result};
use crate::ledger::{Period, Units};
use crate::mechanisms::{ListForm, MechValues, NoiseOptions, Registry};
use crate::options::{option_table, text_option_value};
use crate::rng::NoiseMode;
use crate::scoring::{CandidatePolicy, Prior};

option_table! {
    /// What a served recommendation is made with: the model, the mechanism and its ε, the
    /// candidates (docs/deployment.md, "Serving").
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct ServingOptions {
        /// Model directory written by `recsel fit --out DIR` (model.json, release.json, …).
        #[option(value_name = "DIR", required = true, group = "Model")]
        pub model: PathBuf,
        /// Mechanism (`recsel mechanisms`); one that is not ε-DP needs --allow-non-private.
        /// Default: `tuned`, the row of DIR/tuning.json (`recsel tune`) for the largest tuned ε
        /// not above --eps: krr over its public pool (with its public prior, if it has one), or
        /// the best free option (the most popular or the most held-out item, 0-DP). A named mechanism serves its own tuned row of
        /// tuning.json for --eps (pool, clip range, prior) unless --candidates, --clip-range or
        /// --prior is given.
        #[option(flag = "mech", value_name = "MECH", group = "Selection")]
        pub mechanism: String = super::tuned::TUNED.to_string(),
        /// ε of each recommendation.
        #[option(flag = "eps", value_name = "EPS", required = true, group = "Selection")]
        pub epsilon: f64,
        /// Which items are candidates: all (every item, the user's own included), popular:N
        /// (the N most popular training items, stored in the release), heldout:N (the N items
        /// most often held out by the users fitted on, stored in the release), pool:FILE (a
        /// public list of item ids, one per line) — each user-level ε-DP per recommendation —
        /// or history-top:N (the user's top N by the user's own scores, own items excluded;
        /// candidate membership is not protected, needs --allow-non-private). With the tuned
        /// mechanism the tuning chooses them.
        #[option(value_name = "POLICY", group = "Selection")]
        pub candidates: CandidatePolicy = CandidatePolicy::All,
        /// A public per-item prior added to the clipped candidate scores (docs/priors.md): none,
        /// popularity:W (the release's training popularity), heldout:W (how often the users
        /// fitted on hold each item out, when the release carries it) or file:PATH:W (public
        /// counts, ITEM COUNT per line) — each keeps the guarantee; em then draws from the base
        /// measure (1 + count)^W. own-history:W (the user's own items boosted) is a known leak
        /// for audits: needs --allow-non-private.
        #[option(value_name = "PRIOR", group = "Selection")]
        pub prior: Prior = Prior::None,
        /// Clip range LO,HI of a named mechanism: the release's own percentiles, or one whose
        /// bounds `recsel tune` stored beside the model (percentiles of the calibration users'
        /// scores). Default: the release's, or the mechanism's tuned row.
        #[option(value_name = "LO,HI", group = "Selection")]
        pub clip_range: Vec<f64>,
        /// Accept what is not user-level ε-DP: a mechanism that is not ε-DP for this many
        /// candidates (rnmh, rnmh-laplace), --candidates history-top:N or --prior
        /// own-history:W. Reference runs only;
        /// the output says so.
        #[option(group = "Selection")]
        pub allow_non_private: bool = false,
        /// Items per answer: 1 (one item), or an ordered list of K distinct items released as
        /// one answer at --eps for the whole list (docs/serving.md, "Lists"). The service takes
        /// it as the default of a request's "k".
        #[option(value_name = "K", group = "Selection")]
        pub k: usize = 1,
        /// How a list is drawn (docs/lists.md): peeling (K rounds of the mechanism at eps/K
        /// over the items not yet chosen; every mechanism), gumbel (one-shot, the law of peeling
        /// em) or laplace (one-shot, rnm-laplace; no secure path).
        #[option(value_name = "FORM", group = "Selection")]
        pub list_form: String = "peeling".to_string(),
    }
}

option_table! {
    /// The privacy ledger that served recommendations are charged to before they leave
    /// (docs/ledger.md).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct LedgerOptions {
        /// Charge every recommendation to this privacy ledger before it is written out: an
        /// SQLite file or a postgres:// URL (a ledger shared by several replicas), made with
        /// `recsel ledger init` or --create-ledger. A user whose budget is exhausted gets a
        /// refusal (or the fallback).
        #[option(value_name = "FILE|URL", group = "Ledger")]
        pub ledger: String,
        /// ε each user may spend per --period (decimal, rounded down to 10^-9). Needed to create
        /// a ledger; an existing ledger keeps its own, and a different value is an error.
        #[option(value_name = "EPS", group = "Ledger")]
        pub budget: String,
        /// The budget's window (UTC calendar): day, week, month or none (the ledger's lifetime).
        /// Unset: none for a new ledger; recommend keeps an existing ledger's own.
        #[option(value_name = "PERIOD", choices = &["day", "week", "month", "none"], group = "Ledger")]
        pub period: String,
        /// What a user with an exhausted budget gets: none (a refusal), popular (the release's
        /// most popular training item) or item:ID (that public item); 0 ε, marked fallback.
        #[option(value_name = "none|popular|item:ID", group = "Ledger")]
        pub fallback: Fallback = Fallback::None,
        /// Create the ledger (with --budget and --period) if it does not exist. Without it a
        /// missing ledger is an error: one that vanished must not come back empty and grant
        /// every budget again. `recsel ledger init` creates one ahead.
        #[option(group = "Ledger")]
        pub create_ledger: bool = false,
        /// Charge a list again when the same user asks for the same history with the same
        /// request parameters within a ledger period. Default: a list is released once per
        /// history and period — the same request gets the same list again at no charge (a
        /// release repeated is post-processing; the ledger keeps a keyed hash of the history and
        /// configuration, never the history; docs/ledger.md, "One release per history").
        #[option(group = "Ledger")]
        pub charge_repeats: bool = false,
        /// The secret key of the ledger's request hashes (HMAC-SHA256), a file readable by its
        /// owner only; the same file on every replica. Default for a ledger file: LEDGER.history-key
        /// beside it, made (mode 0600) while the ledger holds no event. Without a readable key
        /// nothing is charged (docs/ledger.md, "The history key").
        #[option(value_name = "FILE", group = "Ledger")]
        pub history_key_file: PathBuf,
    }
}

option_table! {
    /// Every option of `recsel recommend` and of the Python `Recommender` with its default.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct RecommendOptions {
        /// The model, the mechanism, ε and the candidates.
        #[flatten]
        pub serving: ServingOptions,
        /// The random source: a seed (experiments only: a charged recommendation takes none),
        /// or the secure path, which anything shown to users should use.
        #[flatten]
        pub noise: NoiseOptions,
        /// Replaced by candidates: an error that says what to write instead.
        #[option(value_name = "N", hidden = true, group = "Selection")]
        pub top: String,
        /// Replaced by candidates: an error that says what to write instead.
        #[option(hidden = true, group = "Selection")]
        pub include_history: bool,
        /// The ledger the recommendations are charged to.
        #[flatten]
        pub ledger: LedgerOptions,
        /// Requests per durable ledger commit (one fsync each).
        #[option(group = "Ledger")]
        pub group: usize = 256,
        /// The batch's run id: request ids are ID/USER (unless the users file has a
        /// request_id column). Default: a fingerprint of the users file and the serving
        /// options, so the same command never charges twice — a rerun after a crash replays
        /// what was committed. Name a new batch over the same file with a new run id.
        #[option(value_name = "ID", group = "Ledger")]
        pub run_id: String,
        /// Parameters of the mechanism.
        #[flatten]
        pub params: MechValues,
    }
}

impl ServingOptions {
    /// The mechanism, ε and the candidate policy; errors name a missing or bad option.
    fn selection(&self) -> Result<(String, f64, CandidatePolicy)> {
        let mechanism = self.mechanism();
        if mechanism == super::tuned::TUNED && self.candidates.is_some() {
            return Err(Error::Invalid(
                "candidates (--candidates) needs a mechanism (--mech): with the tuned \
                 configuration (tuning.json) the tuning chooses the candidates"
                    .into(),
            ));
        }
        if mechanism == super::tuned::TUNED && self.prior.as_ref().is_some_and(|p| p.weight() > 0.0)
        {
            return Err(Error::Invalid(
                "prior (--prior) needs a mechanism (--mech): the tuned configuration \
                 (tuning.json) was chosen without a prior"
                    .into(),
            ));
        }
        if mechanism == super::tuned::TUNED && self.clip_range.is_some() {
            return Err(Error::Invalid(
                "clip range (--clip-range) needs a mechanism (--mech): with the tuned \
                 configuration (tuning.json) the tuning chooses it"
                    .into(),
            ));
        }
        let epsilon = self.epsilon.ok_or_else(|| missing("epsilon (--eps)"))?;
        Ok((mechanism, epsilon, self.candidates()))
    }

    /// The configuration of a recommender with these options, the mechanism parameters `params`
    /// (resolved against `registry`) and the random source `noise`.
    pub fn config(
        &self,
        params: &MechValues,
        registry: &Registry,
        noise: NoiseMode,
    ) -> Result<RecommendConfig> {
        let (mechanism, epsilon, candidates) = self.selection()?;
        if mechanism != super::tuned::TUNED {
            registry.get(&mechanism)?;
        }
        registry.check_table_keys(params, "the serving options")?;
        let params = registry.resolve(params)?.with_epsilon(epsilon);
        let mut cfg = RecommendConfig::new(&mechanism, params, noise)
            .with_candidates(candidates)
            .with_prior(self.prior());
        cfg.allow_non_private = self.allow_non_private();
        cfg.clip_range = match self.clip_range.as_deref() {
            None => None,
            Some(&[lo, hi])
                if lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo < hi && hi <= 100.0 =>
            {
                Some((lo, hi))
            }
            Some(r) => {
                return Err(Error::Invalid(format!(
                    "clip_range (--clip-range) takes two percentiles LO,HI with 0 <= LO < HI <= \
                     100, got {r:?}"
                )))
            }
        };
        cfg.tuned_row =
            self.candidates.is_none() && self.prior.is_none() && self.clip_range.is_none();
        cfg.list_form = ListForm::parse(&self.list_form())?;
        cfg.list_k = self.list_len()?;
        Ok(cfg)
    }

    /// Items per answer (`k`), checked: 1 to [`super::MAX_LIST`].
    pub fn list_len(&self) -> Result<usize> {
        match self.k() {
            k @ 1..=super::MAX_LIST => Ok(k),
            k => Err(Error::Invalid(format!(
                "k (--k) = {k}: an answer has 1 to {} items",
                super::MAX_LIST
            ))),
        }
    }

    /// The model folder; an error when it is not given.
    pub fn model_dir(&self) -> Result<&Path> {
        self.model
            .as_deref()
            .ok_or_else(|| missing("model (--model)"))
    }
}

fn missing(what: &str) -> Error {
    Error::Invalid(format!("{what} is required"))
}

impl RecommendOptions {
    /// The configuration these options give: the mechanism with its parameters resolved
    /// against `registry`, ε, the candidates and the noise mode. Errors name a missing or bad
    /// option, and say what replaced `top` and `include_history`.
    pub fn config(&self, registry: &Registry) -> Result<RecommendConfig> {
        self.refuse_replaced()?;
        self.ledger.check(false)?;
        if !self.charges_a_ledger() {
            let batch = [
                ("group", self.group.is_some()),
                ("run_id", self.run_id.is_some()),
            ];
            if let Some((name, _)) = batch.iter().find(|(_, g)| *g) {
                return Err(Error::Invalid(format!(
                    "{name} is a setting of the ledger's batch: give the ledger too (--ledger \
                     FILE)"
                )));
            }
        }
        self.noise.check()?;
        if let (Some(seed), true) = (self.noise.seed, self.charges_a_ledger()) {
            return Err(Error::Invalid(format!(
                "--seed {seed} with --ledger: a charged recommendation must be drawn with fresh \
                 noise (the budget adds up each answer's eps, which holds only for independent \
                 draws; a seed repeats them), so --ledger takes no seed; use --secure (OS-seeded \
                 exact noise), or leave --seed out (a fresh seed from OS entropy each run)"
            )));
        }
        self.serving
            .config(&self.params, registry, self.noise.mode())
    }

    /// The error of an option that `candidates` replaced.
    fn refuse_replaced(&self) -> Result<()> {
        if let Some(top) = &self.top {
            return Err(Error::Invalid(format!(
                "--top (Python: top=) was replaced by --candidates (Python: candidates=): the \
                 default is now every item ('all', user-level eps-DP); the old top {top} (the \
                 user's top {top} by score, own items excluded; candidate membership not \
                 protected) is '--candidates history-top:{top} --allow-non-private' (Python: \
                 candidates=\"history-top:{top}\", allow_non_private=True; docs/deployment.md, \
                 \"Candidate policies\")"
            )));
        }
        if self.include_history.is_some() {
            return Err(Error::Invalid(
                "--include-history (Python: include_history=) was replaced by --candidates \
                 (Python: candidates=): every history-independent policy ('all', the default, \
                 'popular:N', 'pool:FILE') includes the user's own items (docs/deployment.md, \
                 \"Candidate policies\")"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The model folder; an error when it is not given.
    pub fn model_dir(&self) -> Result<&Path> {
        self.serving.model_dir()
    }

    /// Whether the recommendations are charged to a ledger.
    pub fn charges_a_ledger(&self) -> bool {
        self.ledger.ledger.is_some()
    }

    /// Requests per durable commit (at least 1).
    pub fn group_size(&self) -> Result<usize> {
        match self.group() {
            0 => Err(Error::Invalid("group must be at least 1, got 0".into())),
            n => Ok(n),
        }
    }
}

impl LedgerOptions {
    /// Checks that the ledger's settings come with a ledger (`required`: a ledger must be
    /// named, as the service needs one).
    pub fn check(&self, required: bool) -> Result<()> {
        if self.ledger.is_none() {
            if required {
                return Err(missing("ledger (--ledger)"));
            }
            let given = [
                ("budget", self.budget.is_some()),
                ("period", self.period.is_some()),
                ("fallback", self.fallback.is_some()),
                ("create-ledger", self.create_ledger()),
                ("charge-repeats", self.charge_repeats()),
                ("history-key-file", self.history_key_file.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
                return Err(Error::Invalid(format!(
                    "{name} (--{name}) is a setting of the privacy ledger: give the ledger too \
                     (--ledger FILE)"
                )));
            }
        }
        self.period()?;
        self.budget()?;
        Ok(())
    }

    /// The budget per user and window, if given.
    pub fn budget(&self) -> Result<Option<Units>> {
        self.budget
            .as_deref()
            .map(|b| Units::budget(b).map_err(|e| Error::Invalid(format!("budget '{b}': {e}"))))
            .transpose()
    }

    /// The budget's window, if given.
    pub fn period(&self) -> Result<Option<Period>> {
        self.period
            .as_deref()
            .map(|p| {
                p.parse()
                    .map_err(|e| Error::Invalid(format!("period: {e}")))
            })
            .transpose()
    }
}

/// What a user whose budget is exhausted gets instead of a refusal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Fallback {
    /// Nothing: a refusal (the service answers 429 with `Retry-After`).
    #[default]
    None,
    /// The most popular training item of the release (public, 0 ε).
    Popular,
    /// A public item chosen by the operator (0 ε).
    Item(String),
}

impl Fallback {
    /// The fallback's column in `rec`'s model (`None` for no fallback). `popular` needs a
    /// release that carries the training popularity; an item must be one of the model's.
    pub fn column(&self, rec: &Recommender) -> Result<Option<u32>> {
        match self {
            Fallback::None => Ok(None),
            // The most popular training item: public, fixed in the release artifact.
            Fallback::Popular => match &rec.release().popularity {
                Some(counts) => Ok(
                    crate::scoring::policy::most_popular(counts, 1, rec.n_items())?
                        .first()
                        .copied(),
                ),
                None => Err(Error::Invalid(
                    "fallback 'popular' needs a release that carries the training popularity of \
                     its items (format version 2), which this model directory does not: write \
                     it again with `recsel fit ... --out DIR`, or give a public item with \
                     item:ID"
                        .into(),
                )),
            },
            Fallback::Item(id) => rec.item_index(id).map(Some).ok_or_else(|| {
                Error::Invalid(format!(
                    "fallback item '{id}' is not one of the model's item ids"
                ))
            }),
        }
    }
}

impl FromStr for Fallback {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Fallback::None),
            "popular" => Ok(Fallback::Popular),
            _ => match s.strip_prefix("item:") {
                Some(id) if !id.is_empty() => Ok(Fallback::Item(id.into())),
                _ => Err(Error::Invalid(format!(
                    "fallback '{s}': write none, popular or item:ID"
                ))),
            },
        }
    }
}

// A fallback as an option's value (`--fallback`, a table's `fallback` key).
text_option_value!(Fallback, "none|popular|item:ID");

impl Serialize for Fallback {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fallback {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::None => f.write_str("none"),
            Fallback::Popular => f.write_str("popular"),
            Fallback::Item(id) => write!(f, "item:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OptionTable;

    #[test]
    fn fallbacks_parse_and_print_alike() {
        for s in ["none", "popular", "item:7"] {
            assert_eq!(s.parse::<Fallback>().unwrap().to_string(), s);
        }
        assert!("item:".parse::<Fallback>().is_err());
        assert!("most".parse::<Fallback>().is_err());
    }

    #[test]
    fn ledger_settings_need_a_ledger_and_replaced_options_say_what_replaced_them() {
        let mut o = RecommendOptions::default();
        o.set("model", "m").unwrap();
        o.set("mechanism", "mgem").unwrap();
        o.set("epsilon", "1").unwrap();
        assert!(o.config(&Registry::builtin()).is_ok());
        let mut b = o.clone();
        b.set("budget", "10").unwrap();
        let e = b.config(&Registry::builtin()).unwrap_err().to_string();
        assert!(e.contains("--ledger"), "{e}");
        b.set("ledger", "l.db").unwrap();
        assert!(b.config(&Registry::builtin()).is_ok());
        let mut t = o.clone();
        t.set("top", "50").unwrap();
        let e = t.config(&Registry::builtin()).unwrap_err().to_string();
        assert!(
            e.contains("--candidates history-top:50 --allow-non-private"),
            "{e}"
        );
        let mut h = o;
        h.set("include_history", "true").unwrap();
        let e = h.config(&Registry::builtin()).unwrap_err().to_string();
        assert!(e.contains("replaced by --candidates"), "{e}");
    }
}
