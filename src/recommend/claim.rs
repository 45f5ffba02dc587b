//! What a [`Recommender`]'s answers protect, decided once: the scope of the guarantee
//! ([`Scope`]), the few words every answer of the service carries, and the privacy statement for
//! people. The CLI, the service, Python and the end-to-end audit ask here.

use super::release::Statistics;
use super::Recommender;
use crate::mechanisms::Guarantee;
use crate::privacy::report::PrivacyReport;
use crate::privacy::{Population, PopulationPrivacy};
use crate::scoring::{CandidateList, ResolvedPrior};

/// What one recommendation of a [`Recommender`] protects ([`Recommender::scope`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// User-level ε-DP: each recommended item is ε-DP with respect to the user's whole history.
    UserLevel,
    /// Not user-level: which items are candidates depends on the history (`history-top:N`).
    HistoryCandidates,
    /// Not user-level: the prior depends on the history (`own-history:W`).
    HistoryPrior,
    /// Not user-level: the mechanism is not ε-DP at its ε (only a weaker ε, or none).
    NotPure,
}

impl Recommender {
    /// What each recommendation protects: user-level ε-DP, or the first reason it is not. The
    /// one place this is decided; every front end (the CLI, the service, Python, the end-to-end
    /// audit) asks here.
    pub fn scope(&self) -> Scope {
        if !self.list.history_independent() {
            Scope::HistoryCandidates
        } else if self
            .prior
            .as_ref()
            .is_some_and(|p| !p.history_independent())
        {
            Scope::HistoryPrior
        } else if !matches!(self.mech.guarantee(), Guarantee::Pure { .. }) {
            Scope::NotPure
        } else {
            Scope::UserLevel
        }
    }

    /// Whether each recommendation is user-level ε-DP: an ε-DP mechanism on a candidate list that
    /// does not depend on the history, with no prior that does (scores are always clipped to the
    /// release's bounds).
    pub fn user_level(&self) -> bool {
        self.scope() == Scope::UserLevel
    }

    /// The guarantee of each answer in a few words (the service's `guarantee` field and start-up
    /// line): "user-level eps-DP per recommendation", or "NOT user-level eps-DP: " and why.
    pub fn guarantee(&self) -> String {
        match self.scope() {
            Scope::UserLevel => "user-level eps-DP per recommendation".to_string(),
            Scope::HistoryCandidates => format!(
                "NOT user-level eps-DP: which items are candidates ('{}') depends on the user's \
                 history and is not protected (--allow-non-private)",
                self.policy
            ),
            Scope::HistoryPrior => format!(
                "NOT user-level eps-DP: the prior ('{}') depends on the user's history and is \
                 not protected (--allow-non-private)",
                self.prior
                    .as_ref()
                    .map_or_else(String::new, |p| p.prior.to_string())
            ),
            Scope::NotPure => format!(
                "NOT user-level eps-DP: mechanism '{}' is not eps-DP (--allow-non-private)",
                self.mech.name()
            ),
        }
    }

    /// The public prior in use, resolved (`None`: no prior, or weight 0).
    pub fn prior(&self) -> Option<&ResolvedPrior> {
        self.prior.as_ref()
    }

    /// One line for people: the unit of the guarantee ("user-level ε-DP per recommendation" only
    /// when it is), mechanism, ε, the candidates and what about them is protected
    /// (docs/deployment.md, "Candidate policies"), who the bounds were calibrated on, and the
    /// randomness.
    pub fn privacy_statement(&self) -> String {
        let c = &self.release.manifest.calibration;
        let mech = self.mech.name();
        let k = self.list.k(self.n_items());
        let candidates = match &self.list {
            CandidateList::All => format!(
                "candidates: all {k} items, the same for every user, the user's own included"
            ),
            CandidateList::Fixed(_) => format!(
                "candidates: '{}', {k} public items, the same for every user, the user's own \
                 included",
                self.policy
            ),
            CandidateList::HistoryTop(n) => format!(
                "candidates: '{}', each user's top {n} by the user's own scores, the user's items \
                 excluded",
                self.policy
            ),
        };
        let candidates = match &self.prior {
            Some(p) if p.history_independent() => format!(
                "{candidates}; public prior '{}' added to the clipped scores, the same for every \
                 user",
                p.prior
            ),
            Some(p) => format!(
                "{candidates}; prior '{}' boosts the user's own items (not protected)",
                p.prior
            ),
            None => candidates,
        };
        let scope = match (self.epsilon, self.scope()) {
            (None, _) => format!("NOT differentially private ({mech}); {candidates}"),
            (Some(e), Scope::UserLevel) => format!(
                "user-level {e}-DP per recommendation ({mech}): each recommended item is {e}-DP \
                 with respect to the user's whole history; {candidates}"
            ),
            (Some(e), Scope::HistoryCandidates) => format!(
                "NOT user-level private: candidate membership is not protected ({candidates}; \
                 an item outside a user's list has probability 0 for that user; \
                 docs/deployment.md); only the choice among the candidates is {e}-DP ({mech})"
            ),
            (Some(e), Scope::HistoryPrior) => format!(
                "NOT user-level private: the prior depends on the history ({candidates}); only \
                 the selection on the offset scores is {e}-DP ({mech})"
            ),
            (Some(e), Scope::NotPure) => format!(
                "NOT user-level private: {mech} is only {e}-DP here, not {}-DP; {candidates}",
                self.mech.epsilon()
            ),
        };
        let tuned = match &self.tuned {
            Some(t) => format!("; {}", t.describe()),
            None => String::new(),
        };
        let bounds = match (self.exact_clip, self.release.manifest.statistics()) {
            (Some((lo, hi)), _) => format!(
                "scores clipped to the tuned clip range p{lo}/p{hi}: EXACT percentiles of the \
                 calibration users' scores (NOT DP: calibration users not protected; \
                 `recsel tune --private` keeps the release's ranges)"
            ),
            (None, s) => match s {
                Statistics::Private { history_cap, .. } => format!(
                "scores clipped to ranges derived from the model alone for histories of at most \
                 {history_cap} items (no calibration user read)"
            ),
                Statistics::ExactLeaky => format!(
                "scores clipped to EXACT percentiles of {} {} users who are not served (LEAKY: \
                 exact statistics in the release, calibration users not protected)",
                c.users.map_or_else(|| "the".into(), |n| n.to_string()),
                c.population
            ),
            },
        };
        format!(
            "privacy: {scope}; {bounds}; n recommendations from one history spend n times that; \
             noise: {}{tuned}",
            self.noise_words()
        )
    }

    fn noise_words(&self) -> &'static str {
        if self.noise.is_secure() {
            "secure (OS-seeded ChaCha20, exact sampler)"
        } else {
            "seeded floating-point streams (experiments only, not for a release; use --secure)"
        }
    }

    /// What each recommendation guarantees the served user, as a report entry.
    pub fn serving_privacy(&self) -> PopulationPrivacy {
        match (self.epsilon, self.scope()) {
            (Some(e), Scope::UserLevel) => PopulationPrivacy {
                population: Population::Served,
                unit: "user's whole history, per recommendation".into(),
                epsilon: Some(e),
                delta: 0.0,
                mechanism: format!(
                    "{} over candidates '{}', scores clipped to the release's ranges; noise: {}",
                    self.mech.name(),
                    self.policy,
                    self.noise_words()
                ),
                note: String::new(),
            },
            _ => PopulationPrivacy::public(Population::Served, &self.guarantee()),
        }
    }

    /// The release's privacy report with what each recommendation guarantees (the served
    /// users per request). One value for every front end: `recsel recommend`, `recsel serve`,
    /// `GET /v1/model`, Python.
    pub fn privacy_report(&self) -> PrivacyReport {
        self.report
            .clone()
            .with("each recommendation", self.serving_privacy())
    }

    /// [`Recommender::privacy_report`] with the served users per ledger period: a ledger that
    /// charges every answer before it leaves holds each user to its budget per period (period
    /// `none`: one budget for the ledger's lifetime).
    pub fn privacy_report_with_ledger(&self, ledger: &crate::ledger::Settings) -> PrivacyReport {
        let (budget, period) = (ledger.budget.as_epsilon(), ledger.period.name());
        let unit = if period == "none" {
            "user, over the ledger's lifetime (no periods)".to_string()
        } else {
            format!("user per ledger period ({period})")
        };
        self.privacy_report().with(
            "ledger period",
            PopulationPrivacy {
                population: Population::Served,
                unit,
                epsilon: Some(budget),
                delta: 0.0,
                mechanism: "basic composition: the ledger charges each recommendation's eps \
                            durably before it leaves and refuses one past the budget"
                    .into(),
                note: String::new(),
            },
        )
    }
}
