//! The charge policy, written once for every backend (docs/ledger.md, "Charges"): a group of
//! requests is decided in one transaction of a [`Store`]. Each request is checked; a (user,
//! request id) already stored is a replay (its stored answer, nothing charged) if the stored
//! request hash is the request's — else a rejection, nothing charged or shown; a request that
//! asks for one release per history whose user has a charged release of the same request hash
//! in its window gets that release again (nothing charged or stored); otherwise the request is
//! charged if its user's window has room, else answered with the public fallback at 0 ε (logged)
//! or refused, with the start of the next window that will have room (`retry_after`). Imports and batch runs go through the same transactions, and every
//! [`Store`] is a [`Ledger`] through this file.

use std::collections::BTreeMap;

use super::store::{EventRow, Store, StoreTx, TxError, TxResult};
use super::{
    Answer, Balance, ChargeRequest, Event, Ledger, LedgerError, LedgerLog, Outcome, Rejection,
    Result, Run, Settings, Timestamp, Units,
};

/// How often a group is run again after a retryable failure (a deadlock or a serialisation
/// failure between replicas).
const RETRIES: usize = 5;

/// Why a request cannot be taken at all, if it cannot.
fn invalid(r: &ChargeRequest) -> Option<&'static str> {
    if r.user.is_empty() {
        Some("the user id is empty")
    } else if r.request_id.is_empty() {
        Some("the request id is empty")
    } else if r.answer.is_fallback() {
        Some("a charged answer cannot be a fallback; pass the fallback separately")
    } else if r.fallback.as_deref() == Some("") {
        Some("the fallback item id is empty")
    } else {
        None
    }
}

/// The answer to a request whose (user, request id) is stored as `event`: its replay if it asks
/// the same question (the same request hash), else a rejection that shows nothing of the stored
/// answer. An event stored before hashes were kept (schema version 1, migrated) has none and is
/// replayed as before: the stored answer was released to this user already, so replaying it
/// reveals nothing new, and a batch rerun across the upgrade stays idempotent.
fn replay(r: &ChargeRequest, event: Event) -> Outcome {
    match event.request_hash {
        Some(h) if h != r.request_hash => Outcome::Rejected {
            reason: Rejection::DifferentRequest,
        },
        _ => Outcome::Replayed { event },
    }
}

/// Decides `requests` in order inside `tx`: the running totals of every (user, window) of the
/// group are loaded first, in sorted order (a store that locks rows locks them there, so two
/// groups never deadlock), kept in memory while the group is decided, and the changed ones are
/// saved at the end.
fn decide_group(
    settings: Settings,
    requests: &[ChargeRequest],
    tx: &mut dyn StoreTx,
) -> TxResult<Vec<Outcome>> {
    let mut spent: BTreeMap<(String, Timestamp), (Units, bool)> = requests
        .iter()
        .filter(|r| invalid(r).is_none())
        .map(|r| {
            let key = (r.user.clone(), settings.period.window(r.time).start);
            (key, (Units::ZERO, false))
        })
        .collect();
    let keys: Vec<(String, Timestamp)> = spent.keys().cloned().collect();
    for (key, total) in keys.iter().zip(tx.load_spent(&keys)?) {
        spent.get_mut(key).expect("loaded keys").0 = total;
    }
    let mut out = Vec::with_capacity(requests.len());
    for r in requests {
        out.push(decide(settings, r, tx, &mut spent)?);
    }
    for ((user, start), (total, dirty)) in &spent {
        if *dirty {
            tx.save_spent(user, *start, *total)?;
        }
    }
    Ok(out)
}

fn decide(
    settings: Settings,
    r: &ChargeRequest,
    tx: &mut dyn StoreTx,
    spent: &mut BTreeMap<(String, Timestamp), (Units, bool)>,
) -> TxResult<Outcome> {
    if let Some(why) = invalid(r) {
        return Ok(Outcome::Rejected {
            reason: Rejection::Invalid(why.into()),
        });
    }
    if let Some(event) = tx.find(&r.user, &r.request_id)? {
        return Ok(replay(r, event));
    }
    let budget = settings.budget;
    let window = settings.period.window(r.time);
    // A clock stepped backwards (an NTP step, a restored VM) must not charge an earlier window
    // again: the latest window the user was charged in, stored or in this group, closes the
    // ones before it.
    let in_group = spent
        .range((r.user.clone(), Timestamp(i64::MIN))..)
        .take_while(|((u, _), _)| *u == r.user)
        .filter(|(_, (_, dirty))| *dirty)
        .map(|((_, w), _)| *w)
        .max();
    let latest = tx.latest_window(&r.user)?.max(in_group);
    if let Some(latest) = latest.filter(|l| window.start < *l) {
        return Ok(Outcome::Rejected {
            reason: Rejection::Invalid(format!(
                "the request's time {} falls in the {} window of {}, before this user's latest \
                 charged window (of {latest}): the clock went backwards (an NTP step, a restored \
                 VM?); nothing is charged into a window that has closed",
                r.time, settings.period, window.start
            )),
        });
    }
    if r.once_per_history {
        if let Some(event) = tx.find_release(&r.user, window.start, &r.request_hash)? {
            return Ok(Outcome::Replayed { event });
        }
    }
    let key = (r.user.clone(), window.start);
    let (now, _) = spent[&key];
    let remaining = budget.saturating_sub(now);
    let charge = r.epsilon <= remaining;
    // A request larger than the whole budget never fits; otherwise the next window has room (it
    // starts empty).
    let retry_after = if r.epsilon > budget { None } else { window.end };
    let (mechanism, cost, answer) = if charge {
        (r.mechanism.clone(), r.epsilon, r.answer.clone())
    } else {
        match &r.fallback {
            Some(item) => (
                "fallback".into(),
                Units::ZERO,
                Answer::Fallback(item.clone()),
            ),
            None => {
                return Ok(Outcome::Refused {
                    spent: now,
                    remaining,
                    retry_after,
                })
            }
        }
    };
    let event = Event {
        seq: 0,
        user: r.user.clone(),
        request_id: r.request_id.clone(),
        mechanism,
        units: cost,
        time: r.time,
        window: window.start,
        answer,
        request_hash: Some(r.request_hash),
    };
    if !tx.insert(&EventRow::of(&event, false))? {
        // Another writer committed this (user, request id) meanwhile: answer as its replay.
        let stored = tx.find(&r.user, &r.request_id)?.ok_or_else(|| {
            TxError::fatal(format!(
                "request id '{}' is stored and not found",
                r.request_id
            ))
        })?;
        return Ok(replay(r, stored));
    }
    if !charge {
        return Ok(Outcome::Fallback {
            item: event.answer.item().unwrap_or_default().to_string(),
            remaining,
            retry_after,
        });
    }
    let after = now
        .checked_add(r.epsilon)
        .expect("spent + charge <= budget");
    spent.insert(key, (after, true));
    Ok(Outcome::Charged {
        answer: event.answer,
        charged: r.epsilon,
        spent: after,
        remaining: budget.saturating_sub(after),
    })
}

/// Runs `body` in one transaction of `store`, again after a retryable failure (at most
/// [`RETRIES`] times); its value once committed.
fn run<S: Store + ?Sized, T>(
    store: &S,
    body: &mut dyn FnMut(&mut dyn StoreTx) -> std::result::Result<T, Fail>,
) -> Result<T> {
    let mut attempt = 0;
    loop {
        let mut value = None;
        let mut refused = None;
        let result = store.transact(&mut |tx| match body(tx) {
            Ok(v) => {
                value = Some(v);
                Ok(())
            }
            Err(Fail::Tx(e)) => Err(e),
            Err(Fail::Ledger(e)) => {
                refused = Some(e);
                Err(TxError::fatal("refused"))
            }
        });
        match result {
            Ok(()) => return Ok(value.expect("a committed body has a value")),
            Err(_) if refused.is_some() => return Err(refused.expect("checked")),
            Err(e) if e.retry && attempt < RETRIES => attempt += 1,
            Err(e) => {
                return Err(LedgerError::Store {
                    path: store.label(),
                    message: e.message,
                })
            }
        }
    }
}

/// A body's failure: the store's, or the ledger's own refusal (which rolls back and is returned
/// as it is).
enum Fail {
    Tx(TxError),
    Ledger(LedgerError),
}

impl From<TxError> for Fail {
    fn from(e: TxError) -> Self {
        Fail::Tx(e)
    }
}

impl<S: Store> Ledger for S {
    fn location(&self) -> String {
        Store::location(self)
    }

    fn kind(&self) -> &'static str {
        Store::kind(self)
    }

    fn settings(&self) -> Settings {
        Store::settings(self)
    }

    fn charge(&self, requests: &[ChargeRequest]) -> Result<Vec<Outcome>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let settings = Store::settings(self);
        run(self, &mut |tx| Ok(decide_group(settings, requests, tx)?))
    }

    fn balance(&self, user: &str, at: Timestamp) -> Result<Balance> {
        let s = Store::settings(self);
        let window = s.period.window(at);
        let spent = self.spent(user, window.start)?;
        // The charge's clock rule (`decide`): a later window charged closes this one, so
        // nothing remains in it, whatever its total.
        let closed_by = self.latest_window_read(user)?.filter(|l| window.start < *l);
        Ok(Balance {
            window,
            budget: s.budget,
            spent,
            remaining: match closed_by {
                Some(_) => Units::ZERO,
                None => s.budget.saturating_sub(spent),
            },
            closed_by,
        })
    }

    fn newest_event_time(&self) -> Result<Option<Timestamp>> {
        Store::newest_event_time(self)
    }

    fn server_time(&self) -> Result<Option<Timestamp>> {
        Store::server_time(self)
    }

    fn verify(&self) -> Result<usize> {
        let budget = Store::settings(self).budget.get();
        let (windows, orphans) = self.windows()?;
        let bad = |message: String| LedgerError::Store {
            path: self.label(),
            message,
        };
        for w in &windows {
            if w.spent != w.events || w.spent as u64 > budget {
                return Err(bad(format!(
                    "user '{}', window {}: running total {} units, events sum {}, budget \
                     {budget}",
                    w.user, w.start, w.spent, w.events
                )));
            }
        }
        if orphans > 0 {
            return Err(bad(format!(
                "{orphans} windows have charges but no running total"
            )));
        }
        Ok(windows.len())
    }

    fn import_events(&self, events: &[Event]) -> Result<()> {
        let label = self.label();
        run(self, &mut |tx| {
            let n = tx.count_events()?;
            if n > 0 {
                return Err(Fail::Ledger(LedgerError::Invalid(format!(
                    "{label}: the ledger already has {n} events; import only into an empty ledger"
                ))));
            }
            for ev in events {
                tx.insert(&EventRow::of(ev, true))?;
            }
            tx.rebuild_windows()?;
            Ok(())
        })
    }

    fn open_run(&self, id: &str, key: &str, at: Timestamp) -> Result<Run> {
        Run::check_id(id)?;
        let label = self.label();
        let attempts = run(self, &mut |tx| {
            let attempts = match tx.find_run(id)? {
                Some((k, _)) if k != key => {
                    return Err(Fail::Ledger(Run::key_mismatch(&label, id)))
                }
                Some((_, n)) => n + 1,
                None => 1,
            };
            tx.put_run(id, key, at, attempts)?;
            Ok(attempts)
        })?;
        Ok(Run {
            id: id.to_string(),
            attempts,
        })
    }

    fn log(&self) -> &dyn LedgerLog {
        self
    }

    fn health(&self) -> Result<()> {
        Store::health(self)
    }

    fn integrity(&self) -> Result<()> {
        Store::integrity(self)
    }

    fn probe(&self) -> Result<()> {
        run(self, &mut |tx| Ok(tx.touch(Timestamp::now())?))
    }
}
