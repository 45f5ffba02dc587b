//! The end-to-end audit (docs/deployment.md, "The end-to-end audit"): the whole serving path of a
//! [`Recommender`] — score a history, take the candidates of its policy, clip, select — run on
//! neighbouring *histories* built from real users, with the module's recipe (a selection batch
//! chooses the output, fresh samples bound it with Clopper–Pearson, Bonferroni over every output
//! item, direction and pair).
//!
//! The output each direction is tested on is the one with the best Clopper–Pearson evidence on
//! the selection batch ([`OutputChoice::Bounded`]): with thousands of items of small probability
//! the smoothed ratio of `recsel audit` would test an item drawn once against zero.
//!
//! For each of `pairs` base users u (drawn with the seed among the users with at least two items)
//! with history h, three neighbours:
//!
//! * `add-one`: h + {y}, y the item outside h that the selection batch of h gave most often;
//! * `remove-one`: h − {x}, x the item of h with the highest model score under h (the item the
//!   smaller history is most likely to be recommended);
//! * `replace`: another user's whole history, one that holds the selection batch's most frequent
//!   item o. The protected unit of user-level DP is the whole history, so this is the relation
//!   user-level ε-DP must survive.
//!
//! The choices make the audit strong against a history-dependent candidate list (an item leaves the
//! list, or the other user cannot be shown o at all) and are ordinary neighbours for a policy
//! whose list is public. Each history is scored once; only the selection is repeated. The
//! neighbours are chosen from the selection batch of h only, so the fresh samples that give the
//! bounds are independent of every choice.
//!
//! The claim audited is the user-level one: ε per recommendation with respect to the whole
//! history, which a [`Recommender`] makes only when [`Recommender::user_level`]. The problems
//! audited are the ones the mechanism sees, a prior's offsets included (docs/priors.md). For any
//! other configuration (`history-top:N`, the `own-history:W` prior, a mechanism that is not
//! ε-DP) the audit reports whether the
//! bounds exceed the nominal ε, as `recsel audit` does for mechanisms that claim nothing.

use rand::Rng as _;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::mechanisms::{Guarantee, Problem, Selector};
use crate::recommend::{RecScratch, Recommender, Scope};
use crate::rng::{name_id, NoiseMode, SecureRng, Streams};

use super::{counts_of, direction_bound_by, exceeds, held_to, OutputChoice};

/// Validated settings of an end-to-end audit.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EndToEndConfig {
    /// Fresh samples per history for the final bounds (N).
    pub samples: u64,
    /// Samples per history of the first batch that chooses neighbours and outputs.
    pub select_samples: u64,
    /// Total failure probability α of all bounds together.
    pub alpha: f64,
    /// Seed of the base users' draw and of the selection streams (unused by secure draws).
    pub seed: u64,
    /// Base users, each with three neighbours.
    pub pairs: usize,
}

impl EndToEndConfig {
    /// Validates N ≥ 100, α in (0, 1) and at least one base user; the selection batch is N/5
    /// (at least 100).
    pub fn new(samples: u64, alpha: f64, seed: u64, pairs: usize) -> Result<Self> {
        let base = super::AuditConfig::new(samples, alpha, seed)?;
        if pairs == 0 {
            return Err(Error::Invalid(
                "pairs (base users) must be at least 1, got 0".into(),
            ));
        }
        Ok(EndToEndConfig {
            samples,
            select_samples: base.select_samples,
            alpha,
            seed,
            pairs,
        })
    }
}

/// How a neighbouring history is made from a user's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NeighbourKind {
    /// One item added.
    AddOne,
    /// One item removed.
    RemoveOne,
    /// The whole history replaced by another user's (the user-level relation).
    Replace,
}

impl NeighbourKind {
    /// All three, in report order.
    pub const ALL: [NeighbourKind; 3] = [
        NeighbourKind::AddOne,
        NeighbourKind::RemoveOne,
        NeighbourKind::Replace,
    ];

    /// `add-one`, `remove-one` or `replace`.
    pub fn name(self) -> &'static str {
        match self {
            NeighbourKind::AddOne => "add-one",
            NeighbourKind::RemoveOne => "remove-one",
            NeighbourKind::Replace => "replace",
        }
    }
}

/// The bound for one neighbouring pair in one direction.
#[derive(Debug, Clone, Serialize)]
pub struct EndToEndResult {
    /// How the neighbour was made.
    pub kind: NeighbourKind,
    /// The base user's id.
    pub user: String,
    /// What changed: `+item`, `-item` or `user:<id>`.
    pub change: String,
    /// `h->h'` or `h'->h`.
    pub direction: &'static str,
    /// Candidates of the first and of the second history.
    pub k: (usize, usize),
    /// The item tested.
    pub output: String,
    /// Fresh samples of the first history that gave `output`.
    pub count_first: u64,
    /// Fresh samples of the second history that gave `output`.
    pub count_second: u64,
    /// Lower confidence bound on P[first history → output].
    pub p_lo: f64,
    /// Upper confidence bound on P[second history → output].
    pub p_hi: f64,
    /// ln(p_lo / p_hi); −∞ when `p_lo` is 0.
    pub eps_lb: f64,
}

/// Outcome of an end-to-end audit of one recommender.
#[derive(Debug, Clone, Serialize)]
pub struct EndToEndReport {
    /// Mechanism name.
    pub mechanism: String,
    /// The ε the mechanism was built with.
    pub epsilon: f64,
    /// The candidate policy.
    pub candidates: String,
    /// The prior added to the clipped scores (`none`: no prior; docs/priors.md).
    pub prior: String,
    /// Item columns (the outputs the Bonferroni correction runs over).
    pub n_items: usize,
    /// The user-level ε claimed per recommendation (`None`: no user-level claim).
    pub claimed: Option<f64>,
    /// The claim in words (`claims user-level 1-DP`, or why there is none).
    pub guarantee: String,
    /// Every (pair, direction) bound.
    pub results: Vec<EndToEndResult>,
    /// The largest ε_LB of each neighbour kind (0 when no pair of the kind gave evidence).
    pub max_by_kind: Vec<(NeighbourKind, f64)>,
    /// The largest ε_LB over all kinds.
    pub max_eps_lb: f64,
    /// Whether some ε_LB exceeds the claimed user-level ε.
    pub violation: bool,
    /// Whether some ε_LB exceeds the nominal ε.
    pub exceeds_nominal: bool,
    /// Selections drawn in total.
    pub samples_drawn: u64,
    /// Histories scored.
    pub histories_scored: u64,
    /// Noise mode audited (`fast` or `secure`).
    pub noise: &'static str,
    /// Settings.
    pub config: EndToEndConfig,
}

impl EndToEndReport {
    /// A one-word verdict, as `recsel audit` gives it: `VIOLATION` (the user-level claim
    /// refuted), `consistent`, or for a configuration without a user-level claim, `flagged (not
    /// private)` / `not flagged` against the nominal ε.
    pub fn verdict(&self) -> &'static str {
        match (self.claimed.is_some(), self.violation, self.exceeds_nominal) {
            (true, true, _) => "VIOLATION",
            (true, false, _) => "consistent",
            (false, _, true) => "flagged (not private)",
            (false, _, false) => "not flagged",
        }
    }
}

/// One history's problem and its output counts.
struct Sampled {
    /// Candidates (item columns).
    k: usize,
    select: Vec<u64>,
    fresh: Vec<u64>,
}

/// The audit's state while it runs.
struct Run<'a> {
    rec: &'a Recommender,
    cfg: &'a EndToEndConfig,
    streams: Streams,
    id: u32,
    noise: NoiseMode,
    scratch: RecScratch,
    drawn: u64,
    scored: u64,
}

impl Run<'_> {
    /// Scores `history` once and draws the selection batch and the fresh samples from its
    /// problem (stream families `family`, `family + 1`); returns also the raw scores.
    fn sample(&mut self, history: &[u32], family: u32) -> Result<(Sampled, Vec<f64>)> {
        let c = self.rec.candidates(history, &mut self.scratch);
        self.scored += 1;
        if c.items.is_empty() {
            return Err(Error::Invalid(format!(
                "a history of {} items leaves no candidate under '{}'",
                history.len(),
                self.rec.candidate_policy()
            )));
        }
        let problem = Problem::new(&c.scores, &c.deltas)?;
        let selector = Selector::new(self.rec.mechanism(), &problem, self.noise)?;
        let n = self.rec.n_items();
        let (n0, n1) = (self.cfg.select_samples, self.cfg.samples);
        let map = Some(&c.items[..]);
        let (s, f) = (&self.streams, self.noise);
        let select = counts_of(&selector, self.id, map, n, n0, s, family, f)?;
        let fresh = counts_of(&selector, self.id, map, n, n1, s, family + 1, f)?;
        self.drawn += n0 + n1;
        Ok((
            Sampled {
                k: c.items.len(),
                select,
                fresh,
            },
            self.scratch.scores().to_vec(),
        ))
    }
}

/// The most frequent output among `allowed` items of a selection batch (ties: the lowest column);
/// `None` when none of them was drawn.
fn most_frequent(counts: &[u64], allowed: impl Fn(usize) -> bool) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (j, &c) in counts.iter().enumerate() {
        if c > 0 && allowed(j) && best.is_none_or(|b| c > counts[b]) {
            best = Some(j);
        }
    }
    best
}

/// The highest-scoring item among `allowed` (ties: the lowest column).
fn best_scored(scores: &[f64], allowed: impl Fn(usize) -> bool) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (j, &v) in scores.iter().enumerate() {
        if allowed(j) && best.is_none_or(|b| v > scores[b]) {
            best = Some(j);
        }
    }
    best
}

/// Audits `rec`'s whole serving path on neighbours of the histories `users` (item columns, each
/// sorted), as the module describes. `progress` receives selections drawn.
pub fn audit_end_to_end(
    rec: &Recommender,
    users: &[(String, Vec<u32>)],
    cfg: &EndToEndConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<EndToEndReport> {
    let noise = rec.noise();
    if noise.is_secure() {
        SecureRng::from_os()?;
    }
    let mech = rec.mechanism();
    let held = held_to(mech, noise)?;
    let claimed = if rec.user_level() {
        rec.epsilon()
    } else {
        None
    };
    let guarantee = match (claimed, held, rec.scope()) {
        (Some(e), _, _) => format!("claims user-level {e}-DP"),
        (None, Guarantee::Pure { .. }, Scope::HistoryCandidates) => format!(
            "no user-level claim: candidates '{}' depend on the history",
            rec.candidate_policy()
        ),
        (None, Guarantee::Pure { .. }, _) => format!(
            "no user-level claim: prior '{}' depends on the history",
            rec.prior()
                .map_or_else(String::new, |p| p.prior.to_string())
        ),
        (None, g, _) => format!("no user-level claim: {} is {g}", mech.name()),
    };
    if let Some((id, _)) = users
        .iter()
        .find(|(_, h)| !h.windows(2).all(|w| w[0] < w[1]))
    {
        return Err(Error::Invalid(format!(
            "the history of user '{id}' is not sorted without repeats (item columns ascending)"
        )));
    }
    let eligible: Vec<usize> = (0..users.len())
        .filter(|&u| users[u].1.len() >= 2)
        .collect();
    if eligible.len() < 2 {
        return Err(Error::Invalid(format!(
            "the end-to-end audit needs at least two users with two or more items, got {}",
            eligible.len()
        )));
    }
    // The base users: a seeded shuffle of the eligible ones.
    let mut order = eligible;
    let mut rng = Streams::new(cfg.seed).derive(0xe2e).stream(0, 0, 0, 0);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let n_items = rec.n_items();
    let pairs = cfg.pairs.min(order.len());
    // Bonferroni over every output item, direction and pair; each bound gets half of its share.
    let tests = (pairs * NeighbourKind::ALL.len() * 2 * n_items) as f64;
    let level = cfg.alpha / (2.0 * tests);
    // The output of a direction: the best evidence on the selection batch at the same level.
    let choice = OutputChoice::Bounded {
        n: cfg.select_samples,
        level,
    };
    let mut run = Run {
        rec,
        cfg,
        streams: Streams::new(cfg.seed),
        id: name_id(mech.name()),
        noise,
        scratch: rec.scratch(),
        drawn: 0,
        scored: 0,
    };
    let mut results = Vec::new();
    let item = |j: usize| rec.item_id(j as u32).to_string();
    for (b, &u) in order.iter().take(pairs).enumerate() {
        let (user, h) = (&users[u].0, &users[u].1);
        let fam = 8 * b as u32;
        let before = run.drawn;
        let (base, scores) = run.sample(h, fam)?;
        let in_h = |j: usize| h.binary_search(&(j as u32)).is_ok();
        // add-one: the batch's favourite outside h (else the best-scored item outside h).
        let y = most_frequent(&base.select, |j| !in_h(j))
            .or_else(|| best_scored(&scores, |j| !in_h(j)))
            .ok_or_else(|| Error::Invalid(format!("user '{user}' has every item")))?;
        let mut plus = h.clone();
        plus.insert(plus.partition_point(|&j| (j as usize) < y), y as u32);
        // remove-one: the history item the model scores highest.
        let x = best_scored(&scores, in_h).expect("the history has items");
        let minus: Vec<u32> = h.iter().copied().filter(|&j| j as usize != x).collect();
        // replace: the next user (in the shuffled order) who has the batch's favourite item.
        let o = most_frequent(&base.select, |_| true).expect("the batch drew something") as u32;
        let start = order.iter().position(|&v| v == u).expect("u is in order");
        let others = (1..order.len()).map(|i| order[(start + i) % order.len()]);
        let v = others
            .clone()
            .find(|&v| users[v].1 != *h && users[v].1.binary_search(&o).is_ok())
            .or_else(|| others.clone().find(|&v| users[v].1 != *h))
            .ok_or_else(|| Error::Invalid("every user has the same history".into()))?;
        let neighbours = [
            (NeighbourKind::AddOne, plus, format!("+{}", item(y))),
            (NeighbourKind::RemoveOne, minus, format!("-{}", item(x))),
            (
                NeighbourKind::Replace,
                users[v].1.clone(),
                format!("user:{}", users[v].0),
            ),
        ];
        for (i, (kind, h2, change)) in neighbours.into_iter().enumerate() {
            let (other, _) = run.sample(&h2, fam + 2 * (i as u32 + 1))?;
            let n = cfg.samples;
            for (direction, first, second) in [("h->h'", &base, &other), ("h'->h", &other, &base)] {
                let d = direction_bound_by(
                    choice,
                    &first.select,
                    &second.select,
                    &first.fresh,
                    &second.fresh,
                    n,
                    level,
                );
                results.push(EndToEndResult {
                    kind,
                    user: user.clone(),
                    change: change.clone(),
                    direction,
                    k: (first.k, second.k),
                    output: item(d.output),
                    count_first: d.count_first,
                    count_second: d.count_second,
                    p_lo: d.p_lo,
                    p_hi: d.p_hi,
                    eps_lb: d.eps_lb,
                });
            }
        }
        progress(run.drawn - before);
    }
    let max_of = |pick: &dyn Fn(&EndToEndResult) -> bool| {
        results
            .iter()
            .filter(|r| pick(r))
            .map(|r| r.eps_lb)
            .fold(0.0f64, |a, b| if b > a { b } else { a })
    };
    let max_by_kind = NeighbourKind::ALL
        .iter()
        .map(|&k| (k, max_of(&|r| r.kind == k)))
        .collect();
    let max_eps_lb = max_of(&|_| true);
    let violation = claimed.is_some_and(|c| results.iter().any(|r| exceeds(r.eps_lb, c)));
    let exceeds_nominal = results.iter().any(|r| exceeds(r.eps_lb, mech.epsilon()));
    Ok(EndToEndReport {
        mechanism: mech.name().to_string(),
        epsilon: mech.epsilon(),
        candidates: rec.candidate_policy().to_string(),
        prior: rec
            .prior()
            .map_or_else(|| "none".to_string(), |p| p.prior.to_string()),
        n_items,
        claimed,
        guarantee,
        results,
        max_by_kind,
        max_eps_lb,
        violation,
        exceeds_nominal,
        samples_drawn: run.drawn,
        histories_scored: run.scored,
        noise: if noise.is_secure() { "secure" } else { "fast" },
        config: *cfg,
    })
}
