//! Recommendations charged to a privacy ledger before they are released (docs/ledger.md,
//! "Charge before release").
//!
//! [`LedgeredRecommender`] computes a user's private pick, hands it to the ledger's
//! [`GroupCommitter`] inside a [`ChargeRequest`], and returns only the committed [`Outcome`]: the
//! pick is never returned by itself, so a caller cannot release it before its charge is durable.
//! A refused pick is dropped unseen (a pick that is never released costs nothing). A user's
//! request id that was charged before gets its stored answer back and charges nothing — if the
//! request is the same one: each charge carries the [`RequestHash`] of the canonical history and
//! the serving configuration ([`LedgeredRecommender::request_hash`]), and the ledger rejects a
//! stored id whose hash differs.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use rayon::prelude::*;

use crate::data::Fnv64;
use crate::error::{Error, Result};
use crate::ledger::{
    Answer, ChargeRequest, CommitStats, GroupCommitter, HistoryKey, Outcome, RequestHash,
    RequestHasher, Run, Timestamp, Units,
};
use crate::mechanisms::{MechParams, ParamValue};
use crate::numerics::Chooser;
use crate::rng::{Draws, SecureRng};
use crate::scoring::CandidateList;

use super::input::UserRequest;
use super::{user_key, RecScratch, Recommender, ScoredBlock};

/// A [`Recommender`] whose answers go through a ledger.
#[derive(Debug, Clone)]
pub struct LedgeredRecommender {
    /// The answers of the recommender's own length (and of every length when a mechanism was
    /// named).
    base: Arc<Answers>,
    /// The tuned answers of other lengths resolved so far ([`Recommender::for_k`]).
    of_k: Arc<std::sync::RwLock<HashMap<usize, Arc<Answers>>>>,
    /// The request hashes' keyed start ([`RequestHasher::keyed`]), before any part.
    hasher: RequestHasher,
    committer: Arc<GroupCommitter>,
    fallback: Option<String>,
    /// Whether a list (k > 1) repeated for the same history in a ledger period is charged again
    /// (default: no — one release per history, [`ChargeRequest::once_per_history`]).
    charge_repeats: bool,
}

/// What answers of one resolved recommender ([`Recommender::for_k`]) are charged and hashed
/// with.
#[derive(Debug)]
struct Answers {
    rec: Arc<Recommender>,
    /// What one item of it is charged.
    charge: Units,
    mechanism: String,
    /// Its serving configuration's part of every request hash.
    config_hash: RequestHasher,
}

impl Answers {
    fn new(rec: Arc<Recommender>, hasher: &RequestHasher) -> Result<Self> {
        let charge = rec.charge_units()?;
        Ok(Answers {
            mechanism: rec.mech.name().to_string(),
            config_hash: config_hasher_from(hasher.clone(), &rec, charge),
            rec,
            charge,
        })
    }

    /// What an answer of `k` items of it is charged.
    fn charge_for(&self, k: usize) -> Result<Units> {
        if k == 1 {
            return Ok(self.charge);
        }
        let eps = self.rec.list_epsilon(k)?.ok_or_else(|| {
            Error::Invalid(format!(
                "a list of mechanism '{}' is not differentially private; a ledger cannot charge it",
                self.mechanism
            ))
        })?;
        Ok(Units::charge_f64(eps)?)
    }
}

/// The domain of a request hash (a new layout of the hashed parts takes a new tag).
const REQUEST_HASH_TAG: &[u8] = b"recsel-request-hash v2 (keyed)";

/// Picks that are computed but not released ([`LedgeredRecommender::prepare`]): their answers
/// cannot be read, only charged ([`LedgeredRecommender::submit`]).
#[derive(Debug, Default)]
pub struct PendingCharges(Vec<ChargeRequest>);

impl PendingCharges {
    /// Number of requests.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends `other`'s requests after these (one job, one commit).
    pub fn append(&mut self, mut other: PendingCharges) {
        self.0.append(&mut other.0);
    }
}

/// The callback of [`LedgeredRecommender::submit`].
pub type Reply = Box<dyn FnOnce(crate::ledger::Result<Vec<Outcome>>) + Send>;

/// One request of a batch: the user, the request id (see [`request_ids`]), the history and the
/// number of items asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRequest {
    /// The user.
    pub user: String,
    /// The idempotency key.
    pub request_id: String,
    /// Item columns.
    pub history: Vec<u32>,
    /// Items in the answer: 1 (one item) or a list of k (one release, [`Recommender::top_k`]).
    pub k: usize,
}

impl Recommender {
    /// What one recommendation is charged, in ledger units (docs/ledger.md, "Units"): the
    /// mechanism's ε at this `top` as the operator wrote it, rounded up — and on the secure path
    /// never less than the exact effective ε, rounded up. An error for a mechanism that is not
    /// private at all.
    pub fn charge_units(&self) -> Result<Units> {
        let eps = self.epsilon.ok_or_else(|| {
            Error::Invalid(format!(
                "mechanism '{}' is not differentially private; a ledger cannot charge it",
                self.mech.name()
            ))
        })?;
        let written = Units::charge_f64(eps)?;
        if self.noise.is_secure() {
            return Ok(written.max(Units::ceil_exact(eps)?));
        }
        Ok(written)
    }
}

impl LedgeredRecommender {
    /// Answers of `rec`, charged through `committer`; `fallback` is a public item column to
    /// release at 0 ε when a user's budget is exhausted (`None`: refuse). Every request hash is
    /// keyed with `key` (HMAC-SHA256; docs/ledger.md, "The history key").
    pub fn new(
        rec: Arc<Recommender>,
        committer: Arc<GroupCommitter>,
        fallback: Option<u32>,
        key: &HistoryKey,
    ) -> Result<Self> {
        if let Some(j) = fallback {
            if j as usize >= rec.n_items() {
                return Err(Error::Invalid(format!(
                    "fallback item column {j} is out of range"
                )));
            }
        }
        let hasher = RequestHasher::keyed(key);
        Ok(LedgeredRecommender {
            fallback: fallback.map(|j| rec.item_id(j).to_string()),
            base: Arc::new(Answers::new(rec, &hasher)?),
            of_k: Default::default(),
            hasher,
            committer,
            charge_repeats: false,
        })
    }

    /// The answers of `k` items: the recommender's [`Recommender::for_k`], with what they are
    /// charged and hashed with (resolved once per length). An error when the recommender has
    /// no answer of `k` (a tuned recommender without a tuned list of `k`).
    fn answers(&self, k: usize) -> Result<Arc<Answers>> {
        let rec = self.base.rec.for_k(k)?;
        if Arc::ptr_eq(&rec, &self.base.rec) {
            return Ok(Arc::clone(&self.base));
        }
        if let Some(a) = self.of_k.read().unwrap_or_else(|e| e.into_inner()).get(&k) {
            return Ok(Arc::clone(a));
        }
        let a = Arc::new(Answers::new(rec, &self.hasher)?);
        let mut of_k = self.of_k.write().unwrap_or_else(|e| e.into_inner());
        Ok(Arc::clone(of_k.entry(k).or_insert(a)))
    }

    /// The recommender that answers `k` items ([`Recommender::for_k`]): its mechanism, pool,
    /// released length, claim and ε are what an answer of `k` says.
    pub fn recommender_for(&self, k: usize) -> Result<Arc<Recommender>> {
        Ok(Arc::clone(&self.answers(k)?.rec))
    }

    /// These answers with lists repeated for the same history in a period charged again
    /// (`charge_repeats`), or answered once per history (the default).
    pub fn with_charge_repeats(mut self, charge_repeats: bool) -> Self {
        self.charge_repeats = charge_repeats;
        self
    }

    /// Whether lists repeated for the same history in a period are charged again.
    pub fn charges_repeats(&self) -> bool {
        self.charge_repeats
    }

    /// What an answer of `k` items is charged: one item of the recommender for `k`
    /// ([`LedgeredRecommender::recommender_for`]), or its list's ε
    /// ([`Recommender::list_epsilon`]) rounded up to ledger units. An error for a length it has
    /// no answer of, or a list the ledger cannot charge (not private, or only (ε, δ)-DP).
    pub fn charge_for(&self, k: usize) -> Result<Units> {
        self.answers(k)?.charge_for(k)
    }

    /// The [`RequestHash`] of a request for `history` (item columns): HMAC-SHA256 under the
    /// history key (docs/ledger.md, "The history key") of the serving configuration of the
    /// answer of `k` ([`LedgeredRecommender::recommender_for`]) — mechanism, ε charged (ledger units), candidate policy and a fixed list's
    /// item ids, the prior — and of the history as the service canonicalises it: the set of the
    /// model's item ids it holds (order, repeats and ids the model does not know change nothing,
    /// since they change no answer), in byte order of the ids. Item ids rather than columns, so
    /// the hash does not depend on the model's column order. The user is not hashed: request
    /// ids are scoped per user already. A list (k > 1) adds its length and form, so a list
    /// and a single item, or two lengths, are different requests.
    pub fn request_hash(&self, history: &[u32], k: usize) -> Result<RequestHash> {
        let a = self.answers(k)?;
        Ok(hash_with(&a, a.config_hash.clone(), history, k))
    }

    /// What [`LedgeredRecommender::request_hash`] would be without the key: plain SHA-256 of the
    /// same parts — what anyone holding the ledger could compute for a guessed history. Never
    /// stored; it exists so that tests can show the stored hash is not it.
    pub fn unkeyed_request_hash(&self, history: &[u32], k: usize) -> Result<RequestHash> {
        let a = self.answers(k)?;
        let h = config_hasher_from(RequestHasher::new(), &a.rec, a.charge);
        Ok(hash_with(&a, h, history, k))
    }

    /// The recommender (of the length it was loaded for).
    pub fn recommender(&self) -> &Recommender {
        &self.base.rec
    }

    /// The committer (its ledger, its statistics).
    pub fn committer(&self) -> &GroupCommitter {
        &self.committer
    }

    /// What each recommendation of the recommender's own is charged.
    pub fn charge(&self) -> Units {
        self.base.charge
    }

    /// The mechanism's registry name, as logged with each charge of the recommender's own.
    pub fn mechanism(&self) -> &str {
        &self.base.mechanism
    }

    /// The fallback item id, if configured.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    fn request(
        &self,
        r: &BatchRequest,
        time: Timestamp,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<ChargeRequest> {
        let a = self.answers(r.k)?;
        let picks = a
            .rec
            .recommend_list(&r.history, r.k, user_key(&r.user), draws, scratch)?;
        self.charge_request(&a, r, time, picks)
    }

    fn charge_request(
        &self,
        a: &Answers,
        r: &BatchRequest,
        time: Timestamp,
        picks: Vec<u32>,
    ) -> Result<ChargeRequest> {
        let ids = || picks.iter().map(|&j| a.rec.item_id(j).to_string());
        let answer = match (r.k, picks.first()) {
            (_, None) => Answer::NoCandidate,
            (1, Some(&j)) => Answer::Item(a.rec.item_id(j).to_string()),
            _ => Answer::List(ids().collect()),
        };
        Ok(ChargeRequest {
            user: r.user.clone(),
            request_id: r.request_id.clone(),
            request_hash: hash_with(a, a.config_hash.clone(), &r.history, r.k),
            mechanism: a.mechanism.clone(),
            epsilon: a.charge_for(r.k)?,
            time,
            answer,
            fallback: self.fallback.clone(),
            once_per_history: r.k > 1 && !self.charge_repeats,
        })
    }

    /// One recommendation for `history`, charged to `user` under `request_id` at `time`; blocks
    /// until the charge is durable (joining whatever group is committing) and returns the
    /// outcome: only [`Outcome::answer`] may be released.
    pub fn recommend(
        &self,
        user: &str,
        request_id: &str,
        history: &[u32],
        time: Timestamp,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Outcome> {
        let r = BatchRequest {
            user: user.into(),
            request_id: request_id.into(),
            history: history.to_vec(),
            k: 1,
        };
        self.recommend_request(&r, time, draws, scratch)
    }

    /// [`LedgeredRecommender::recommend`] for one request of any length `r.k`: a list is
    /// charged once as one release (and, unless repeats are charged, answered again for the
    /// same history in the period at no charge).
    pub fn recommend_request(
        &self,
        r: &BatchRequest,
        time: Timestamp,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<Outcome> {
        let c = self.request(r, time, draws, scratch)?;
        Ok(self.committer.charge_one(c)?)
    }

    /// The picks of `requests` at `time`, computed on the calling thread with `draws` and
    /// `scratch`, held unreleased until [`LedgeredRecommender::submit`] charges them: the first
    /// half of [`LedgeredRecommender::recommend`] for callers that must not block on the commit
    /// (an async server computes on a worker pool, then awaits the commit).
    pub fn prepare(
        &self,
        requests: &[BatchRequest],
        time: Timestamp,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<PendingCharges> {
        requests
            .iter()
            .map(|r| self.request(r, time, draws, scratch))
            .collect::<Result<_>>()
            .map(PendingCharges)
    }

    /// [`LedgeredRecommender::prepare`] for requests whose histories are already scored:
    /// `requests[j]` is history `first + j` of `block` ([`Recommender::score_block`]). The same
    /// picks for the same draws.
    pub fn prepare_scored(
        &self,
        requests: &[BatchRequest],
        block: &ScoredBlock,
        first: usize,
        time: Timestamp,
        draws: &mut Draws,
        scratch: &mut RecScratch,
    ) -> Result<PendingCharges> {
        requests
            .iter()
            .enumerate()
            .map(|(j, r)| {
                let a = self.answers(r.k)?;
                let picks = a.rec.recommend_list_scored(
                    block,
                    first + j,
                    r.k,
                    user_key(&r.user),
                    draws,
                    scratch,
                )?;
                self.charge_request(&a, r, time, picks)
            })
            .collect::<Result<_>>()
            .map(PendingCharges)
    }

    /// Queues `pending` as one job of the group committer; `reply` receives one outcome per
    /// request, in order, on the commit thread once the group is durable (or the group's error).
    /// Only [`Outcome::answer`] may be released.
    pub fn submit(&self, pending: PendingCharges, reply: Reply) {
        self.committer.submit(pending.0, reply);
    }

    /// One recommendation per request, in input order. Requests are charged in groups of
    /// `group` (one durable commit each); while a group commits, the next one's picks are
    /// computed. Seeded streams of `seed` in fast mode, as [`Recommender::recommend_all`].
    /// `done` receives each group's outcomes once they are durable, in order.
    pub fn recommend_batch(
        &self,
        requests: &[BatchRequest],
        time: Timestamp,
        seed: u64,
        group: usize,
        done: &mut dyn FnMut(&[BatchRequest], &[Outcome]),
    ) -> Result<Vec<Outcome>> {
        if self.base.rec.noise.is_secure() {
            SecureRng::from_os()?;
        }
        let group = group.max(1);
        let (tx, rx) = mpsc::channel();
        let blocks: Vec<&[BatchRequest]> = requests.chunks(group).collect();
        let mut results: Vec<Option<Vec<Outcome>>> = vec![None; blocks.len()];
        let mut next_done = 0;
        let deliver = |results: &mut Vec<Option<Vec<Outcome>>>,
                       next_done: &mut usize,
                       done: &mut dyn FnMut(&[BatchRequest], &[Outcome])| {
            while *next_done < blocks.len() {
                match &results[*next_done] {
                    Some(o) => done(blocks[*next_done], o),
                    None => break,
                }
                *next_done += 1;
            }
        };
        let mut submitted = 0;
        for (b, block) in blocks.iter().enumerate() {
            let charges: Vec<ChargeRequest> = block
                .par_iter()
                .map_init(
                    || {
                        let d = self
                            .base
                            .rec
                            .draws_seeded(seed)
                            .expect("OS entropy was available when the run started");
                        (self.base.rec.scratch(), d)
                    },
                    |(scratch, draws), r| self.request(r, time, draws, scratch),
                )
                .collect::<Result<_>>()?;
            let tx = tx.clone();
            self.committer.submit(
                charges,
                Box::new(move |r| {
                    let _ = tx.send((b, r));
                }),
            );
            submitted += 1;
            // Collect what has committed meanwhile, without waiting.
            while let Ok((i, r)) = rx.try_recv() {
                results[i] = Some(r?);
                submitted -= 1;
            }
            deliver(&mut results, &mut next_done, done);
        }
        while submitted > 0 {
            let (i, r) = rx
                .recv()
                .map_err(|_| Error::Invalid("the ledger's commit thread stopped".into()))?;
            results[i] = Some(r?);
            submitted -= 1;
        }
        deliver(&mut results, &mut next_done, done);
        Ok(results.into_iter().flatten().flatten().collect())
    }

    /// The commit statistics so far.
    pub fn stats(&self) -> CommitStats {
        self.committer.stats()
    }
}

/// A request hash ([`LedgeredRecommender::request_hash`]): `h` (the configuration's part of
/// `a`) with a list's length and form, then the history's item ids, sorted, once each.
fn hash_with(a: &Answers, mut h: RequestHasher, history: &[u32], k: usize) -> RequestHash {
    let mut ids: Vec<&str> = history.iter().map(|&j| a.rec.item_id(j)).collect();
    ids.sort_unstable();
    ids.dedup();
    if k != 1 {
        h.part(b"list");
        h.part(&(k as u64).to_le_bytes());
        h.part(a.rec.list_form().to_string().as_bytes());
    }
    h.part(&(ids.len() as u64).to_le_bytes());
    for id in ids {
        h.part(id.as_bytes());
    }
    h.finish()
}

/// The serving configuration's part of a request hash ([`LedgeredRecommender::request_hash`]),
/// added to `h`: the tag, the mechanism's name, the charge in ledger units, the candidate policy
/// as written and a fixed list's item ids, and the prior as written (empty without one).
fn config_hasher_from(mut h: RequestHasher, rec: &Recommender, charge: Units) -> RequestHasher {
    h.part(REQUEST_HASH_TAG);
    h.part(rec.mech.name().as_bytes());
    h.part(charge.get().to_string().as_bytes());
    h.part(rec.candidate_policy().to_string().as_bytes());
    match rec.candidate_list() {
        CandidateList::Fixed(cols) => {
            h.part(&(cols.len() as u64).to_le_bytes());
            for &j in cols {
                h.part(rec.item_id(j).as_bytes());
            }
        }
        _ => h.part(b""),
    }
    h.part(
        rec.prior()
            .map_or_else(String::new, |p| p.prior.to_string())
            .as_bytes(),
    );
    h
}

/// The request ids of a batch run: the file's `request_id` where it gives one, else
/// `<run id>/<user>` — the same on every attempt of the run, so a rerun after a crash replays
/// what was committed and charges only the rest.
pub fn request_ids(requests: Vec<UserRequest>, run: &Run, k: usize) -> Vec<BatchRequest> {
    requests
        .into_iter()
        .map(|r| BatchRequest {
            request_id: r
                .request_id
                .unwrap_or_else(|| format!("{}/{}", run.id, r.user)),
            user: r.user,
            history: r.history,
            k,
        })
        .collect()
}

/// The mechanism parameters as a batch run's key ([`run_key`]) records them: ε, the built-ins'
/// six parameters (γ, β, η, c, chooser, draws) and then every other parameter given, by name —
/// the text the key has always held, so that a batch keeps its run id (and its reruns replay
/// instead of charging again) across versions of recsel.
pub fn key_params(params: &MechParams) -> String {
    use crate::mechanisms::{BETA, C, CHOOSER, DRAWS, ETA, GAMMA};
    let chooser = params
        .word(&CHOOSER)
        .ok()
        .and_then(|w| Chooser::from_name(&w).ok())
        .unwrap_or_default();
    let six = [
        GAMMA.name,
        BETA.name,
        ETA.name,
        C.name,
        CHOOSER.name,
        DRAWS.name,
    ];
    let others: std::collections::BTreeMap<&str, f64> = params
        .values
        .iter()
        .filter(|(name, _)| !six.contains(name))
        .map(|(name, v)| {
            let x = match v {
                ParamValue::Real(x) => *x,
                ParamValue::Integer(i) => *i as f64,
                ParamValue::Word(_) => f64::NAN,
            };
            (name, x)
        })
        .collect();
    format!(
        "MechParams {{ epsilon: {:?}, gamma: {:?}, beta: {:?}, eta: {:?}, c: {:?}, chooser: \
         {chooser:?}, draws: {}, extra: {others:?} }}",
        params.epsilon,
        params.number(&GAMMA),
        params.number(&BETA),
        params.number(&ETA),
        params.number(&C),
        params.number(&DRAWS) as u64,
    )
}

/// The fingerprint of a batch command for [`crate::ledger::Ledger::open_run`], and its default
/// run id (its first 16 hex digits): a hash of what decides its requests (the users file's bytes
/// and the serving configuration), not of the seed or the output path. The same command
/// therefore has the same run id and the same request ids on every attempt: a rerun after a
/// crash replays what was committed and charges only the rest, and running it again after it
/// finished charges nothing. A new batch over the same file takes a new run id.
pub fn run_key(users_file: &[u8], config: &[&str]) -> String {
    let mut h = Fnv64::new();
    h.write(&(users_file.len() as u64).to_le_bytes());
    h.write(users_file);
    let first = h.finish();
    for c in config {
        h.write(&(c.len() as u64).to_le_bytes());
        h.write(c.as_bytes());
    }
    // Two 64-bit halves: the second hashes everything again in reverse order, so the key is not
    // one 64-bit FNV value whose collisions are easy to find.
    let mut g = Fnv64::new();
    for c in config.iter().rev() {
        g.write(c.as_bytes());
        g.write(&[0xff]);
    }
    g.write(&first.to_le_bytes());
    g.write(users_file);
    format!("{:016x}{:016x}", h.finish(), g.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters' text in a batch run's key is the one batches have always been keyed by,
    /// so a rerun of the same command keeps its run id (and replays) across versions.
    #[test]
    fn key_params_keep_the_text_run_ids_were_made_of() {
        let p = MechParams::default();
        assert_eq!(
            key_params(&p),
            "MechParams { epsilon: 1.0, gamma: 0.05, beta: 0.05, eta: 0.0, c: 0.6, chooser: \
             Spearman, draws: 10, extra: {} }"
        );
        let p = p
            .with_epsilon(0.5)
            .with_param("chooser", "bound")
            .with_param("max_runs", 100i64)
            .with_param("threshold", 0.8);
        assert_eq!(
            key_params(&p),
            "MechParams { epsilon: 0.5, gamma: 0.05, beta: 0.05, eta: 0.0, c: 0.6, chooser: \
             Bound, draws: 10, extra: {\"max_runs\": 100.0, \"threshold\": 0.8} }"
        );
    }
}
