//! The loaded service: the [`Recommender`] of the release, the ledger behind its group committer,
//! and the worker pool that scores and selects off the async runtime.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;
use serde_json::{json, Value};

use crate::data::Fnv64;
use crate::ledger::{self, Balance, GroupCommitter, Ledger, Outcome, Timestamp, Units};
use crate::recommend::ledgered::{BatchRequest, LedgeredRecommender, PendingCharges};
use crate::recommend::{RecScratch, Recommender, ScoredBlock};
use crate::rng::{Draws, NoiseMode, SecureRng, Streams};

use super::metrics::Metrics;
use super::options::{ServeConfig, ServeOptions};
use super::ServeError;
use crate::scoring::CandidatePolicy;

/// Requests of a batch that one worker prepares at a time.
const BATCH_CHUNK: usize = 8;

/// The most waiting requests one worker scores together (one block of the model's lanes).
const MAX_BLOCK: usize = crate::model::SCORE_LANES;

/// One worker's scratch space and random source, reused across requests.
struct Worker {
    scratch: RecScratch,
    block: ScoredBlock,
    draws: Draws,
}

/// The reply of a request to [`Service::recommend`].
type ReplyTx = tokio::sync::oneshot::Sender<Result<Vec<Outcome>, ServeError>>;

/// Requests of one call of [`Service::recommend`] waiting for a worker.
struct Job {
    requests: Vec<BatchRequest>,
    time: Timestamp,
    tx: ReplyTx,
}

/// A loaded, ready service.
pub struct Service {
    lr: LedgeredRecommender,
    ledger: Arc<dyn Ledger>,
    pool: rayon::ThreadPool,
    workers: Mutex<Vec<Worker>>,
    /// Calls of at most [`BATCH_CHUNK`] requests waiting for a worker, oldest first.
    queue: Mutex<VecDeque<Job>>,
    test_seed: Option<u64>,
    metrics: Arc<Metrics>,
    /// Items per answer when a request names no `k`.
    default_k: usize,
    /// The history key in use: its public id and where it came from.
    history_key: (String, String),
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("ledger", &self.ledger.location())
            .field("candidates", self.candidates())
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Loads the model and its release, opens (or creates) the ledger and starts the worker
    /// pool and the ledger's commit thread. Blocking; seconds for a large model.
    /// `config` is what `opts` resolve to ([`ServeOptions::config`]).
    pub fn load(
        opts: &ServeOptions,
        config: &ServeConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ServeError> {
        SecureRng::from_os()?; // fail now, not in a worker, if the OS has no entropy
        let rec = Recommender::load(opts.serving.model_dir()?, &config.recommend)?;
        let fallback = opts.ledger.fallback().column(&rec)?;
        let spec = config.ledger.as_str();
        let existed = ledger::Location::parse(spec).exists()?;
        // A key made beside a ledger made now goes with it if the start is refused.
        let new_key = match ledger::Location::parse(spec) {
            ledger::Location::Sqlite(p) => Some(ledger::HistoryKey::beside(&p)),
            ledger::Location::Postgres(_) => None,
        }
        .filter(|k| !k.exists());
        let ledger = ledger::open_for_charging(
            spec,
            config.budget,
            config.period,
            opts.ledger.create_ledger(),
        )?;
        let started = Self::start(opts, spec, rec, fallback, Arc::clone(&ledger), metrics);
        if started.is_err() && !existed {
            // A refused start leaves no ledger behind that it created (nothing was charged).
            match ledger::discard_new(ledger) {
                Ok(()) => {
                    if let Some(k) = new_key {
                        let _ = std::fs::remove_file(k);
                    }
                }
                Err(e) => eprintln!("recsel serve: {e}"),
            }
        }
        started
    }

    /// The rest of [`Service::load`] once the ledger is open.
    fn start(
        opts: &ServeOptions,
        spec: &str,
        rec: Recommender,
        fallback: Option<u32>,
        ledger: Arc<dyn Ledger>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ServeError> {
        let committer = Arc::new(GroupCommitter::new(
            Arc::clone(&ledger),
            opts.limits.max_group(),
        ));
        let (key, key_source) =
            ledger::history_key::resolve(&*ledger, spec, opts.ledger.history_key_file.as_deref())?;
        let lr = LedgeredRecommender::new(Arc::new(rec), committer, fallback, &key)?
            .with_charge_repeats(opts.ledger.charge_repeats());
        let default_k = opts.serving.list_len()?;
        let list_charge = lr.charge_for(default_k)?;
        let budget = ledger.settings().budget;
        if list_charge > budget {
            return Err(ServeError::Options(format!(
                "a list of {default_k} charges {list_charge} eps, more than the budget of \
                 {budget} eps per user and window; raise --budget or lower --eps"
            )));
        }
        if lr.charge() > budget {
            return Err(ServeError::Options(format!(
                "each recommendation charges {} eps, more than the budget of {budget} eps per \
                 user and window: no recommendation could ever be answered; raise --budget or \
                 lower --eps",
                lr.charge()
            )));
        }
        let threads = opts.threads.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
        if threads == 0 {
            return Err(ServeError::Options("threads must be at least 1".into()));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("serve-worker-{i}"))
            .build()
            .map_err(|e| ServeError::Internal(format!("starting the worker pool: {e}")))?;
        Ok(Service {
            lr,
            ledger,
            pool,
            workers: Mutex::new(Vec::new()),
            queue: Mutex::new(VecDeque::new()),
            test_seed: opts.insecure_test_seed,
            metrics,
            default_k,
            history_key: (key.id(), key_source.to_string()),
        })
    }

    /// The history key in use: its public id ([`ledger::HistoryKey::id`]) and where it came from.
    pub fn history_key(&self) -> (&str, &str) {
        (&self.history_key.0, &self.history_key.1)
    }

    /// The recommender.
    pub fn recommender(&self) -> &Recommender {
        self.lr.recommender()
    }

    /// Items per answer when a request names no `k` (`--k`).
    pub fn default_k(&self) -> usize {
        self.default_k
    }

    /// The recommender that answers `k` items ([`Recommender::for_k`]): what a request of
    /// `"k": K` is answered, charged and described with. An error for a length the release has
    /// no tuned answer of (the service is tuned and tuning.json has no list of `k`).
    pub fn recommender_for(&self, k: usize) -> crate::error::Result<Arc<Recommender>> {
        self.lr.recommender_for(k)
    }

    /// What an answer of `k` items is charged (an error for a list the ledger cannot charge).
    pub fn charge_for(&self, k: usize) -> Result<Units, ServeError> {
        Ok(self.lr.charge_for(k)?)
    }

    /// The guarantee of an answer of `k` items in a few words, with one release per history
    /// when the ledger keeps lists once per history.
    pub fn guarantee_for(&self, k: usize) -> crate::error::Result<String> {
        let words = self.recommender_for(k)?.list_guarantee_words(k);
        Ok(if k > 1 && !self.lr.charges_repeats() {
            format!(
                "{words}; the same history again in this ledger period gets this list again at \
                 no charge (the ledger keeps a keyed hash of the history, never the history)"
            )
        } else {
            words
        })
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.ledger
    }

    /// The ledger's commit thread.
    pub fn committer(&self) -> &GroupCommitter {
        self.lr.committer()
    }

    /// Whether charges can be expected to commit, for `/readyz`: an error (its reason) while
    /// the latest ledger commit failed or the ledger is not the one opened (a file deleted or
    /// replaced). Requests are still taken; the next commit that succeeds clears it.
    pub fn ledger_health(&self) -> Result<(), String> {
        self.committer().health().map_err(|e| e.to_string())
    }

    /// What each recommendation is charged.
    pub fn charge(&self) -> Units {
        self.lr.charge()
    }

    /// The mechanism's registry name.
    pub fn mechanism(&self) -> &str {
        self.lr.mechanism()
    }

    /// The fallback item id, if configured.
    pub fn fallback(&self) -> Option<&str> {
        self.lr.fallback()
    }

    /// The candidate policy.
    pub fn candidates(&self) -> &CandidatePolicy {
        self.recommender().candidate_policy()
    }

    /// Whether each recommendation is user-level ε-DP (the recommender's claim).
    pub fn user_level(&self) -> bool {
        self.recommender().user_level()
    }

    /// The `guarantee` field of every response (the recommender's claim).
    pub fn guarantee(&self) -> String {
        self.recommender().guarantee()
    }

    /// The `noise` field of every response.
    pub fn noise(&self) -> &'static str {
        match self.test_seed {
            None => "secure (OS-seeded ChaCha20, exact sampler)",
            Some(_) => "INSECURE TEST SEED: the noise is predictable; never serve real users so",
        }
    }

    /// Whether a test seed is in use.
    pub fn seeded(&self) -> bool {
        self.test_seed.is_some()
    }

    /// Item ids → columns, duplicates once; the second value counts the ids the model does not
    /// know (they are ignored).
    pub fn item_columns(&self, ids: &[String]) -> (Vec<u32>, usize) {
        let rec = self.recommender();
        let mut cols = Vec::with_capacity(ids.len());
        let mut unknown = 0;
        for id in ids {
            match rec.item_index(id) {
                Some(j) => cols.push(j),
                None => unknown += 1,
            }
        }
        cols.sort_unstable();
        cols.dedup();
        (cols, unknown)
    }

    fn worker(&self) -> Result<Worker, ServeError> {
        if let Some(w) = self.workers.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(w);
        }
        Ok(Worker {
            scratch: self.recommender().scratch(),
            block: ScoredBlock::default(),
            draws: Draws::new(NoiseMode::Secure, Streams::new(0))?,
        })
    }

    fn put_back(&self, w: Worker) {
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
    }

    /// The picks of `requests`, histories `first..` of `w.block`: the noise is the worker's
    /// secure generator, or in tests follows from the seed and the first request id.
    fn prepare_scored(
        &self,
        requests: &[BatchRequest],
        first: usize,
        time: Timestamp,
        w: &mut Worker,
    ) -> Result<PendingCharges, ServeError> {
        let out = match self.test_seed {
            // Tests only: the noise of a request follows from the seed and its first request id.
            Some(seed) => {
                let mut h = Fnv64::new();
                h.write(&seed.to_le_bytes());
                h.write(requests[0].request_id.as_bytes());
                let mut draws = Draws::Secure(Box::new(SecureRng::from_seed_insecure(h.finish())));
                self.lr
                    .prepare_scored(requests, &w.block, first, time, &mut draws, &mut w.scratch)
            }
            None => self.lr.prepare_scored(
                requests,
                &w.block,
                first,
                time,
                &mut w.draws,
                &mut w.scratch,
            ),
        };
        Ok(out?)
    }

    fn prepare_chunk(
        &self,
        requests: &[BatchRequest],
        time: Timestamp,
    ) -> Result<PendingCharges, ServeError> {
        let mut w = self.worker()?;
        let histories: Vec<&[u32]> = requests.iter().map(|r| r.history.as_slice()).collect();
        self.recommender().score_block(&histories, &mut w.block);
        let out = self.prepare_scored(requests, 0, time, &mut w);
        self.put_back(w);
        out
    }

    /// Charges `prepared` in one job of the group committer; `tx` receives the outcomes once
    /// they are durable (or the error).
    fn submit(&self, prepared: Result<PendingCharges, ServeError>, tx: ReplyTx) {
        match prepared {
            Ok(pending) => {
                let metrics = Arc::clone(&self.metrics);
                let t = Instant::now();
                self.lr.submit(
                    pending,
                    Box::new(move |r| {
                        metrics
                            .ledger_wait_seconds
                            .observe(t.elapsed().as_secs_f64());
                        let _ = tx.send(r.map_err(ServeError::from));
                    }),
                );
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
    }

    /// On a worker: takes the oldest waiting calls, up to [`MAX_BLOCK`] requests, scores their
    /// histories as one block, then selects and submits each call's picks in turn. Nothing to do
    /// if other workers took them. Taking every waiting request (rather than a share per worker)
    /// fills the model's 32 lanes: under load the other workers take what arrives meanwhile.
    fn drain(&self) {
        let jobs: Vec<Job> = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            let mut jobs = Vec::new();
            let mut taken = 0;
            while let Some(j) = q.front() {
                if !jobs.is_empty() && taken + j.requests.len() > MAX_BLOCK {
                    break;
                }
                taken += j.requests.len();
                jobs.extend(q.pop_front());
            }
            jobs
        };
        if jobs.is_empty() {
            return;
        }
        let mut w = match self.worker() {
            Ok(w) => w,
            Err(e) => {
                for job in jobs {
                    let _ = job.tx.send(Err(ServeError::Internal(e.to_string())));
                }
                return;
            }
        };
        let histories: Vec<&[u32]> = jobs
            .iter()
            .flat_map(|j| j.requests.iter().map(|r| r.history.as_slice()))
            .collect();
        self.recommender().score_block(&histories, &mut w.block);
        let mut first = 0;
        for job in jobs {
            let prepared = self.prepare_scored(&job.requests, first, job.time, &mut w);
            first += job.requests.len();
            self.submit(prepared, job.tx);
        }
        self.put_back(w);
    }

    /// Computes the picks of `requests` on the worker pool, charges them in one job of the
    /// group committer, and returns one outcome per request once their commit is durable.
    /// Calls of a few requests wait in one queue, and a free worker scores those waiting
    /// together ([`Recommender::score_block`]: the same scores, the model read once per block).
    pub async fn recommend(
        self: &Arc<Self>,
        requests: Vec<BatchRequest>,
        time: Timestamp,
    ) -> Result<Vec<Outcome>, ServeError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let this = Arc::clone(self);
        if requests.len() <= BATCH_CHUNK {
            self.queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(Job { requests, time, tx });
            self.pool.spawn(move || this.drain());
        } else {
            self.pool.spawn(move || {
                let prepared = requests
                    .par_chunks(BATCH_CHUNK)
                    .map(|c| this.prepare_chunk(c, time))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|parts| {
                        let mut all = PendingCharges::default();
                        parts.into_iter().for_each(|p| all.append(p));
                        all
                    });
                this.submit(prepared, tx);
            });
        }
        rx.await
            .map_err(|_| ServeError::Internal("a worker stopped before answering".into()))?
    }

    /// The user's balance now (blocking: a ledger read).
    pub fn balance(&self, user: &str, at: Timestamp) -> Result<Balance, ServeError> {
        Ok(self.ledger.balance(user, at)?)
    }

    /// The release's privacy report with the served users per request and per ledger period
    /// (the start-up log prints it, `GET /v1/model` shows it).
    pub fn privacy_report(&self) -> crate::privacy::report::PrivacyReport {
        self.recommender()
            .privacy_report_with_ledger(&self.ledger.settings())
    }

    /// What the service serves for lists (`GET /v1/model`'s `lists`): the forms, the largest k,
    /// whether one release per history is on (and the history key's public id), and the claim
    /// of a list of the default k (10 when the default is one item) as the library states it.
    pub fn lists(&self) -> Value {
        let rec = self.recommender();
        let k = if self.default_k > 1 {
            self.default_k
        } else {
            10
        };
        let refused = |e: String| Value::String(format!("refused: {e}"));
        let of_k = self.recommender_for(k).map_err(|e| e.to_string());
        let ask = |f: &dyn Fn(&Recommender) -> crate::error::Result<Value>| {
            of_k.as_ref()
                .map_err(Clone::clone)
                .and_then(|r| f(r).map_err(|e| e.to_string()))
                .unwrap_or_else(refused)
        };
        json!({
            "default_k": self.default_k,
            "max_k": crate::recommend::MAX_LIST,
            "form": rec.list_form().to_string(),
            "mechanism_forms": rec.mechanism().list_forms(),
            "one_release_per_history": !self.lr.charges_repeats(),
            "history_key_id": self.history_key.0,
            "claim_k": k,
            "claim": ask(&|r| r.list_statement(k).map(Value::String)),
            "guarantee": ask(&|_| self.guarantee_for(k).map(Value::String)),
            "epsilon": ask(&|r| r.list_epsilon(k).map(|e| json!(e))),
            "privacy": ask(&|r| r.list_privacy(k).map(|p| json!(p))),
        })
    }

    /// The release's public list of `m` items (`GET /v1/public-list`): no history, no charge.
    pub fn public_list(&self, m: usize) -> crate::error::Result<Value> {
        let p = self.recommender().public_list(m)?;
        Ok(json!({
            "m": m,
            "items": p.items,
            "charged": 0.0,
            "guarantee": "0-DP with respect to served users: a public list, no history read",
            "claim": p.claim,
            "served_epsilon": p.served_epsilon,
            "learned_from": p.learned_from,
        }))
    }

    /// The lines `recsel serve` prints once the service is loaded: the privacy statement and
    /// report, the release's signature and worth, the ledger and its charge, lists and the
    /// public list — each as the library states it.
    pub fn startup_lines(&self) -> Vec<String> {
        let rec = self.recommender();
        let l = self.lists();
        let mut out = vec![
            rec.privacy_statement(),
            self.privacy_report().to_string(),
            format!("recsel serve: {}", rec.release().signature),
            format!("recsel serve: {}", rec.worth_for(self.default_k).text()),
            format!(
                "recsel serve: ledger {}: {}; each recommendation charges {} eps; fallback: {}; \
                 guarantee: {}",
                self.ledger.location(),
                self.ledger.settings(),
                self.charge(),
                self.fallback().unwrap_or("none (429)"),
                self.guarantee()
            ),
            format!(
                "recsel serve: lists: \"k\" 1 to {} per request (default {}), form {} (this \
                 mechanism's forms: {}); one release per history: {}; request hashes keyed with \
                 history key {} from {}",
                l["max_k"],
                self.default_k,
                rec.list_form(),
                rec.mechanism().list_forms().join(", "),
                if self.lr.charges_repeats() {
                    "off (--charge-repeats: every list is charged)"
                } else {
                    "on"
                },
                self.history_key.0,
                self.history_key.1
            ),
            format!(
                "recsel serve: list claim (k = {}): {}",
                l["claim_k"],
                l["claim"].as_str().unwrap_or_default()
            ),
            format!(
                "recsel serve: GET /v1/public-list?m=M: {}",
                rec.public_list_claim()
            ),
        ];
        if !self.user_level() {
            out.push(format!(
                "recsel serve: WARNING: {} (every response says so)",
                self.guarantee()
            ));
        }
        out
    }

    /// What `GET /v1/model` shows: the release manifest and how it is served.
    pub fn describe(&self) -> Value {
        let rec = self.recommender();
        let s = self.ledger.settings();
        json!({
            "manifest": rec.release().manifest,
            "signature": rec.release().signature.to_string(),
            "serving": {
                "mechanism": self.mechanism(),
                "epsilon": self.charge().as_epsilon(),
                "candidates": self.candidates().to_string(),
                "guarantee": self.guarantee(),
                "privacy": rec.privacy_statement(),
                "privacy_report": self.privacy_report(),
                "worth": rec.worth_for(self.default_k),
                "worth_text": rec.worth_for(self.default_k).text(),
                "budget": s.budget.as_epsilon(),
                "period": s.period.name(),
                "fallback": self.fallback(),
                "ledger": self.ledger.kind(),
                "noise": self.noise(),
            },
            "lists": self.lists(),
            "public_list": {
                "path": "/v1/public-list?m=M",
                "max_m": crate::recommend::MAX_LIST,
                "claim": rec.public_list_claim(),
                "learned_from": rec.public_list_sources(),
            },
        })
    }
}
