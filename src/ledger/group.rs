//! Group commit (docs/ledger.md, "Group commit"): one thread owns the commits; callers hand it
//! requests through a channel; whatever has arrived while the previous commit was on disk goes
//! into the next commit together. One fsync serves the whole group, and each caller is answered
//! only after its group's commit returned — never before its charge is durable.
//!
//! A commit that fails answers every caller of its group with the error (nothing of it was
//! charged or released). Failures are counted and logged on stderr at most once per
//! [`LOG_EVERY`] with how many failed since the last line; while the latest commit failed the
//! committer is not [`healthy`](GroupCommitter::health) (a server answers `/readyz` with 503), and
//! the thread probes the ledger with an empty durable write every [`PROBE_EVERY`] until a probe or
//! a commit succeeds again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ChargeRequest, Ledger, LedgerError, Outcome, Result};

/// At most one log line per this long about failing commits.
pub const LOG_EVERY: Duration = Duration::from_secs(1);
/// How often a failing ledger is probed while no request arrives.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Called once with a job's outcomes (or the group's error) after the commit.
type Reply = Box<dyn FnOnce(Result<Vec<Outcome>>) + Send>;

struct Job {
    requests: Vec<ChargeRequest>,
    reply: Reply,
}

/// Counters of a [`GroupCommitter`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommitStats {
    /// Commits made.
    pub groups: u64,
    /// Requests decided.
    pub requests: u64,
    /// Wall time spent in commits, in seconds (the ledger's `charge` calls).
    pub commit_seconds: f64,
    /// The largest group.
    pub largest_group: u64,
    /// Commits that failed (nothing of them was charged).
    pub failed: u64,
    /// Commits (and probes) that failed since the last one that succeeded.
    pub failing: u64,
}

#[derive(Debug, Default)]
struct Counters {
    groups: AtomicU64,
    requests: AtomicU64,
    commit_nanos: AtomicU64,
    largest: AtomicU64,
    failed: AtomicU64,
    failing: AtomicU64,
    /// The latest failure, while `failing` > 0.
    last_error: Mutex<Option<String>>,
}

/// A thread that commits requests to a [`Ledger`] in groups. Cheap to share (`&self` methods);
/// dropping it commits what was queued, then stops the thread.
pub struct GroupCommitter {
    sender: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
    ledger: Arc<dyn Ledger>,
}

impl std::fmt::Debug for GroupCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommitter")
            .field("ledger", &self.ledger.location())
            .field("stats", &self.stats())
            .finish()
    }
}

impl GroupCommitter {
    /// Starts the commit thread. A group holds at most `max_group` requests (at least one job:
    /// a job larger than `max_group` is committed alone, whole).
    pub fn new(ledger: Arc<dyn Ledger>, max_group: usize) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = Arc::new(Counters::default());
        let thread = {
            let ledger = Arc::clone(&ledger);
            let counters = Arc::clone(&counters);
            std::thread::Builder::new()
                .name("ledger-commit".into())
                .spawn(move || commit_loop(&*ledger, &rx, max_group.max(1), &counters))
                .expect("spawning the ledger's commit thread")
        };
        GroupCommitter {
            sender: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            counters,
            ledger,
        }
    }

    /// The ledger it commits to.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.ledger
    }

    /// Queues `requests` as one job; `reply` is called on the commit thread with their outcomes,
    /// in order, once their group is durable (or with the group's error). For callers that must
    /// not block, such as an async server that completes a oneshot channel in `reply`.
    pub fn submit(&self, requests: Vec<ChargeRequest>, reply: Reply) {
        let sender = self.sender.lock().unwrap_or_else(|e| e.into_inner());
        let job = Job { requests, reply };
        match sender.as_ref() {
            Some(s) => {
                if let Err(mpsc::SendError(job)) = s.send(job) {
                    (job.reply)(Err(stopped()));
                }
            }
            None => (job.reply)(Err(stopped())),
        }
    }

    /// Charges `requests` (they join whatever group is forming) and blocks until their commit is
    /// durable; one outcome per request, in order.
    pub fn charge(&self, requests: Vec<ChargeRequest>) -> Result<Vec<Outcome>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(
            requests,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(stopped()))
    }

    /// Charges one request; blocks until it is durable.
    pub fn charge_one(&self, request: ChargeRequest) -> Result<Outcome> {
        Ok(self
            .charge(vec![request])?
            .pop()
            .expect("one outcome per request"))
    }

    /// Commits so far.
    pub fn stats(&self) -> CommitStats {
        let c = &self.counters;
        CommitStats {
            groups: c.groups.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
            commit_seconds: c.commit_nanos.load(Ordering::Relaxed) as f64 * 1e-9,
            largest_group: c.largest.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            failing: c.failing.load(Ordering::Relaxed),
        }
    }

    /// Whether charges can be expected to commit: an error while the latest commit (or probe)
    /// failed, or while the ledger's own check fails (a ledger file deleted or replaced). For a
    /// server's readiness; requests are still taken meanwhile, and the next commit that
    /// succeeds makes the committer healthy again.
    pub fn health(&self) -> Result<()> {
        let failing = self.counters.failing.load(Ordering::Relaxed);
        if failing > 0 {
            let last = self
                .counters
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_default();
            return Err(LedgerError::Store {
                path: self.ledger.location(),
                message: format!("the last {failing} commits failed: {last}"),
            });
        }
        self.ledger.health()
    }

    /// Stops accepting jobs (later ones get an error), commits the queued ones and joins the
    /// thread: a server's graceful shutdown. Idempotent; also done on drop.
    pub fn shutdown(&self) {
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for GroupCommitter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn stopped() -> LedgerError {
    LedgerError::Invalid("the ledger's commit thread has stopped".into())
}

/// The commit thread's account of failures, for the rate-limited log.
struct FailureLog {
    last_line: Option<Instant>,
    unlogged: u64,
}

impl FailureLog {
    fn failed(&mut self, counters: &Counters, e: &LedgerError) {
        counters.failed.fetch_add(1, Ordering::Relaxed);
        let failing = counters.failing.fetch_add(1, Ordering::Relaxed) + 1;
        *counters
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        self.unlogged += 1;
        if self.last_line.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            eprintln!(
                "recsel ledger: {} commit(s) failed since the last report ({failing} in a row; \
                 nothing of them was charged or released): {e}",
                self.unlogged
            );
            self.unlogged = 0;
            self.last_line = Some(Instant::now());
        }
    }

    fn succeeded(&mut self, ledger: &dyn Ledger, counters: &Counters) {
        let failing = counters.failing.swap(0, Ordering::Relaxed);
        if failing > 0 {
            *counters
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
            eprintln!(
                "recsel ledger: {}: commits succeed again after {failing} failed in a row",
                ledger.location()
            );
            self.unlogged = 0;
            self.last_line = None;
        }
    }
}

fn commit_loop(ledger: &dyn Ledger, rx: &Receiver<Job>, max_group: usize, counters: &Counters) {
    let mut log = FailureLog {
        last_line: None,
        unlogged: 0,
    };
    loop {
        // Blocks for the first job of a group (probing a failing ledger meanwhile), then takes
        // whatever else is already queued.
        let first = if counters.failing.load(Ordering::Relaxed) > 0 {
            match rx.recv_timeout(PROBE_EVERY) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    match ledger.probe() {
                        Ok(()) => log.succeeded(ledger, counters),
                        Err(e) => log.failed(counters, &e),
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(job) => job,
                Err(_) => break,
            }
        };
        let mut jobs = vec![first];
        let mut n = jobs[0].requests.len();
        while n < max_group {
            match rx.try_recv() {
                Ok(job) => {
                    n += job.requests.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let sizes: Vec<usize> = jobs.iter().map(|j| j.requests.len()).collect();
        let requests: Vec<ChargeRequest> = jobs
            .iter_mut()
            .flat_map(|j| std::mem::take(&mut j.requests))
            .collect();
        let t = Instant::now();
        let result = ledger.charge(&requests);
        counters
            .commit_nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        counters.groups.fetch_add(1, Ordering::Relaxed);
        counters
            .requests
            .fetch_add(requests.len() as u64, Ordering::Relaxed);
        counters
            .largest
            .fetch_max(requests.len() as u64, Ordering::Relaxed);
        // Each job gets its own slice of the outcomes, in order, only now that `charge` has
        // returned (the commit is durable).
        match result {
            Ok(outcomes) => {
                log.succeeded(ledger, counters);
                let mut outcomes = outcomes.into_iter();
                for (job, k) in jobs.into_iter().zip(sizes) {
                    (job.reply)(Ok(outcomes.by_ref().take(k).collect()));
                }
            }
            Err(e) => {
                log.failed(counters, &e);
                for job in jobs {
                    (job.reply)(Err(e.clone()));
                }
            }
        }
    }
}
