//! `recsel serve` killed under load: SIGKILL at random moments, 20 times, restarted each time on
//! the same ledger file. Every 200 a client received has its charge in the ledger with the same
//! item, no user is over budget, a replayed request id returns the same item, and `/readyz` is
//! ready within 2 s of each restart.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use recsel::ledger::{Ledger as _, LedgerLog as _, SqliteLedger, Timestamp};
use serde_json::Value;

use crate::util::http::{args, good, http, Server};

const KILLS: usize = 20;
const USERS: usize = 600;
const BUDGET: &str = "3";

/// What the clients saw: request id → (user, item) of every 200, and replays that disagreed.
#[derive(Default)]
struct Seen {
    answered: HashMap<String, (String, Value)>,
    confirmed: Vec<String>,
    mismatches: Vec<String>,
    replays_checked: usize,
}

#[test]
fn sigkill_under_load_loses_no_charge_and_overspends_no_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let server_args = args(ledger.to_str().unwrap(), BUDGET, &[]);
    let addr: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6u64)
        .map(|c| {
            let (addr, seen, stop) = (Arc::clone(&addr), Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(c);
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let Some(a) = *addr.lock().unwrap() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    // One request in ten replays an answered id.
                    let replay = {
                        let s = seen.lock().unwrap();
                        (rng.random_bool(0.1) && !s.confirmed.is_empty()).then(|| {
                            let rid = s.confirmed[rng.random_range(0..s.confirmed.len())].clone();
                            let (user, item) = s.answered[&rid].clone();
                            (rid, user, item)
                        })
                    };
                    let (rid, user) = match &replay {
                        Some((rid, user, _)) => (rid.clone(), user.clone()),
                        None => {
                            n += 1;
                            (
                                format!("c{c}-{n}"),
                                format!("user{}", rng.random_range(0..USERS)),
                            )
                        }
                    };
                    let body = good(&user, &rid).to_string();
                    let Ok(r) = http(a, "POST", "/v1/recommend", &[], body.as_bytes()) else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    if r.status != 200 {
                        continue;
                    }
                    let item = r.json()["item"].clone();
                    let mut s = seen.lock().unwrap();
                    match replay {
                        Some((rid, _, before)) => {
                            s.replays_checked += 1;
                            if before != item || r.json()["replayed"] != true {
                                s.mismatches
                                    .push(format!("{rid}: {before} then {}", r.body));
                            }
                        }
                        None => {
                            s.answered.insert(rid.clone(), (user, item));
                            s.confirmed.push(rid);
                        }
                    }
                }
            })
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    let mut ready_times = Vec::new();
    for _ in 0..KILLS {
        let s = Server::start(&server_args);
        ready_times.push(s.wait_ready(Duration::from_secs(10)));
        *addr.lock().unwrap() = Some(s.addr);
        std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
        s.kill();
        *addr.lock().unwrap() = None;
    }
    // One more start: the ledger opens after the last kill, and replays still agree.
    let s = Server::start(&server_args);
    ready_times.push(s.wait_ready(Duration::from_secs(10)));
    *addr.lock().unwrap() = Some(s.addr);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    let slowest = ready_times.iter().max().unwrap();
    eprintln!(
        "{KILLS} kills: {} answered, {} replays checked, ready within {:?} (slowest)",
        seen.answered.len(),
        seen.replays_checked,
        slowest
    );
    assert!(seen.mismatches.is_empty(), "{:?}", seen.mismatches);
    assert!(
        seen.answered.len() > 50,
        "too little load: {}",
        seen.answered.len()
    );
    assert!(seen.replays_checked > 0);
    assert!(
        *slowest <= Duration::from_secs(2),
        "ready after {slowest:?}: {ready_times:?}"
    );
    // A replay through the last server returns the stored item and charges nothing.
    for rid in seen.confirmed.iter().take(20) {
        let (user, item) = &seen.answered[rid];
        let r = http(
            s.addr,
            "POST",
            "/v1/recommend",
            &[],
            good(user, rid).to_string().as_bytes(),
        )
        .unwrap()
        .json();
        assert_eq!(&r["item"], item);
        assert_eq!(r["replayed"], true);
    }
    assert_eq!(s.terminate().code(), Some(0));
    let l = SqliteLedger::open_existing(&ledger).unwrap();
    l.verify().unwrap();
    for (rid, (user, item)) in &seen.answered {
        let e = l
            .event(user, rid)
            .unwrap()
            .unwrap_or_else(|| panic!("{rid}: a 200 whose charge is not in the ledger"));
        assert_eq!(&e.user, user);
        assert_eq!(&serde_json::json!(e.answer.item()), item, "{rid}");
    }
    let budget = recsel::ledger::Units::budget(BUDGET).unwrap();
    for u in l.users().unwrap() {
        let b = l.balance(&u, Timestamp::now()).unwrap();
        assert!(b.spent <= budget, "{u} spent {}", b.spent);
    }
}
