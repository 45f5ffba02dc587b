//! The ledger fails closed (docs/ledger.md, "What the ledger guarantees"): a ledger deleted while
//! serving fails the next charges and turns `/readyz` not-ready; `serve` and `recommend` create a
//! ledger only when asked, so a vanished ledger never comes back empty; a 0-byte file, a damaged
//! file and edited window totals are refused at start; a failing ledger makes the committer
//! unhealthy until a commit (or its probe) succeeds again.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use recsel::ledger::{
    self, Answer, ChargeRequest, GroupCommitter, Ledger, LedgerError, Outcome, Period, Settings,
    SqliteLedger, Timestamp, Units,
};

use crate::serve::{args, good, Server};

fn recsel(a: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(a)
        .output()
        .unwrap()
}

/// `recsel ledger init --ledger PATH --budget 10`, which must succeed.
fn init(path: &Path) {
    let o = recsel(&[
        "ledger",
        "init",
        "--ledger",
        path.to_str().unwrap(),
        "--budget",
        "10",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The serve arguments on `path` without --create-ledger.
fn serve_args(path: &Path) -> Vec<String> {
    let mut a = args(path.to_str().unwrap(), "10", &[]);
    a.retain(|x| x != "--create-ledger");
    a
}

/// Starts `recsel serve` on `path` (no --create-ledger), which must exit with an error; its log.
fn serve_refuses(path: &Path) -> String {
    let mut s = Server::start(&serve_args(path));
    let t = Instant::now();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(100)); // the log reader's last lines
    let log = s.log.lock().unwrap().clone();
    assert!(!status.success(), "serve must refuse:\n{log}");
    log
}

fn remove_ledger(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

fn charge(user: &str, id: &str) -> ChargeRequest {
    ChargeRequest {
        user: user.into(),
        request_id: id.into(),
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time: Timestamp::from_date(2026, 11, 25),
        answer: Answer::Item("7".into()),
        fallback: None,
    }
}

#[test]
fn a_ledger_deleted_while_serving_fails_closed_and_a_restart_refuses_to_regrant() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    // Without a ledger and without --create-ledger, serve refuses and says how to create one.
    let log = serve_refuses(&path);
    assert!(log.contains("recsel ledger init --ledger"), "{log}");
    assert!(!path.exists(), "nothing was created");
    init(&path);
    let s = Server::start(&serve_args(&path));
    s.wait_ready(Duration::from_secs(60));
    assert_eq!(
        s.post("/v1/recommend", None, &good("alice", "r1")).status,
        200
    );
    remove_ledger(&path);
    for rid in ["r2", "r3"] {
        let r = s.post("/v1/recommend", None, &good("alice", rid));
        assert_eq!(r.status, 500, "a charge into a deleted ledger: {}", r.body);
        assert!(r.json().get("item").is_none(), "{}", r.body);
    }
    let ready = s.get("/readyz", None);
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("is gone"), "{}", ready.body);
    assert!(s.log_contains("recsel ledger: "), "the failures are logged");
    drop(s);
    // A restart does not create a new ledger (which would grant every budget again).
    let log = serve_refuses(&path);
    assert!(log.contains("recsel ledger init"), "{log}");
    assert!(!path.exists());
    // The batch command fails closed the same way.
    let o = recsel(&[
        "recommend",
        "--model",
        crate::serve::model_dir().to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--history",
        &crate::serve::item_ids()[3],
        "--user",
        "alice",
        "--ledger",
        path.to_str().unwrap(),
        "--budget",
        "10",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("recsel ledger init"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!path.exists());
}

#[test]
fn an_empty_a_damaged_or_an_edited_ledger_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    // A 0-byte file (a failed copy, `> ledger.db`) is not a new ledger, even with
    // --create-ledger, and `ledger init` does not overwrite it.
    let empty = tmp.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let log = serve_refuses(&empty);
    assert!(log.contains("empty file (0 bytes)"), "{log}");
    let mut a = serve_args(&empty);
    a.push("--create-ledger".into());
    let mut s = Server::start(&a);
    assert!(!s.child.wait().unwrap().success());
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    assert!(!recsel(&[
        "ledger",
        "init",
        "--ledger",
        empty.to_str().unwrap(),
        "--budget",
        "1"
    ])
    .status
    .success());
    // A window total edited so that it disagrees with its events.
    let edited = tmp.path().join("edited.db");
    init(&edited);
    {
        let l = SqliteLedger::open_existing(&edited).unwrap();
        assert!(matches!(
            l.charge(&[charge("bob", "b1")]).unwrap()[0],
            Outcome::Charged { .. }
        ));
    }
    let c = rusqlite::Connection::open(&edited).unwrap();
    c.execute("UPDATE windows SET spent = 0 WHERE user = 'bob'", [])
        .unwrap();
    drop(c);
    let log = serve_refuses(&edited);
    assert!(log.contains("running total 0 units, events sum"), "{log}");
    // A file scribbled over in the middle.
    let damaged = tmp.path().join("damaged.db");
    {
        let l = SqliteLedger::create(
            &damaged,
            Settings {
                budget: Units::budget("1000").unwrap(),
                period: Period::None,
            },
        )
        .unwrap();
        let reqs: Vec<ChargeRequest> = (0..2000)
            .map(|i| charge(&format!("u{i}"), &format!("r{i}")))
            .collect();
        l.charge(&reqs).unwrap();
    }
    let c = rusqlite::Connection::open(&damaged).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(c);
    let mut bytes = std::fs::read(&damaged).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16384] {
        *b = 0x5a;
    }
    std::fs::write(&damaged, bytes).unwrap();
    let e = ledger::open_for_charging(damaged.to_str().unwrap(), None, None, false)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, LedgerError::Store { .. }), "{e}");
}

/// A ledger whose commits and probes fail while `down` is set.
#[derive(Debug)]
struct Flaky(SqliteLedger, Arc<AtomicBool>);

impl Flaky {
    fn fail(&self) -> ledger::Result<()> {
        if self.1.load(Ordering::SeqCst) {
            return Err(LedgerError::Store {
                path: "flaky".into(),
                message: "disk full".into(),
            });
        }
        Ok(())
    }
}

impl Ledger for Flaky {
    fn location(&self) -> String {
        self.0.location()
    }
    fn kind(&self) -> &'static str {
        Ledger::kind(&self.0)
    }
    fn settings(&self) -> Settings {
        Ledger::settings(&self.0)
    }
    fn charge(&self, requests: &[ChargeRequest]) -> ledger::Result<Vec<Outcome>> {
        self.fail()?;
        self.0.charge(requests)
    }
    fn balance(&self, user: &str, at: Timestamp) -> ledger::Result<ledger::Balance> {
        self.0.balance(user, at)
    }
    fn verify(&self) -> ledger::Result<usize> {
        self.0.verify()
    }
    fn import_events(&self, events: &[ledger::Event]) -> ledger::Result<()> {
        self.0.import_events(events)
    }
    fn open_run(&self, id: &str, key: &str, at: Timestamp) -> ledger::Result<ledger::Run> {
        self.0.open_run(id, key, at)
    }
    fn log(&self) -> &dyn ledger::LedgerLog {
        self.0.log()
    }
    fn health(&self) -> ledger::Result<()> {
        self.0.health()
    }
    fn integrity(&self) -> ledger::Result<()> {
        self.0.integrity()
    }
    fn probe(&self) -> ledger::Result<()> {
        self.fail()?;
        self.0.probe()
    }
}

#[test]
fn failing_commits_make_the_committer_unhealthy_until_one_succeeds_again() {
    let tmp = tempfile::tempdir().unwrap();
    let down = Arc::new(AtomicBool::new(false));
    let inner = SqliteLedger::create(
        &tmp.path().join("f.db"),
        Settings {
            budget: Units::budget("10").unwrap(),
            period: Period::None,
        },
    )
    .unwrap();
    let g = GroupCommitter::new(Arc::new(Flaky(inner, Arc::clone(&down))), 16);
    assert!(g.charge_one(charge("u", "a")).is_ok());
    g.health().unwrap();
    down.store(true, Ordering::SeqCst);
    for id in ["b", "c", "d"] {
        assert!(g.charge_one(charge("u", id)).is_err());
    }
    let e = g.health().unwrap_err().to_string();
    assert!(e.contains("disk full"), "{e}");
    assert_eq!(g.stats().failed, 3);
    // Recovery without any request: the commit thread's probe.
    down.store(false, Ordering::SeqCst);
    let t = Instant::now();
    while g.health().is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no recovery by probe"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(g.stats().failing, 0);
    assert!(matches!(
        g.charge_one(charge("u", "e")).unwrap(),
        Outcome::Charged { .. }
    ));
}

#[test]
fn a_ledger_replaced_by_another_file_fails_the_next_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("l.db");
    let s = Settings {
        budget: Units::budget("10").unwrap(),
        period: Period::None,
    };
    let l = SqliteLedger::create(&path, s).unwrap();
    l.charge(&[charge("u", "a")]).unwrap();
    Ledger::health(&l).unwrap();
    // Another ledger moved over the path (a restore while serving): this handle's file is no
    // longer the one at the path, so it charges nothing more.
    let other = tmp.path().join("other.db");
    drop(SqliteLedger::create(&other, s).unwrap());
    std::fs::rename(&other, &path).unwrap();
    let e = l.charge(&[charge("u", "b")]).unwrap_err().to_string();
    assert!(e.contains("replaced"), "{e}");
    assert!(Ledger::health(&l).is_err());
}
