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

use crate::util::http::{args, good, Server};

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
        request_hash: ledger::RequestHash::of(&[user.as_bytes(), id.as_bytes()]),
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time: Timestamp::from_date(2026, 11, 25),
        answer: Answer::Item("7".into()),
        fallback: None,
        once_per_history: false,
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
        crate::util::http::model_dir().to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--history",
        &crate::util::http::item_ids()[3],
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

#[test]
fn a_clock_stepped_backwards_does_not_charge_a_closed_window_again() {
    let tmp = tempfile::tempdir().unwrap();
    let l = SqliteLedger::create(
        &tmp.path().join("c.db"),
        Settings {
            budget: Units::budget("1").unwrap(),
            period: Period::Day,
        },
    )
    .unwrap();
    let at = |t: &str| Timestamp::parse(t).unwrap();
    let mut r = charge("u", "today");
    r.time = at("2026-11-25T10:00:00Z");
    assert!(matches!(
        l.charge(&[r]).unwrap()[0],
        Outcome::Charged { .. }
    ));
    // The clock steps back to yesterday: yesterday's window had room, but it has closed.
    let mut back = charge("u", "yesterday");
    back.time = at("2026-11-24T23:59:00Z");
    match &l.charge(&[back.clone()]).unwrap()[0] {
        Outcome::Rejected {
            reason: ledger::Rejection::Invalid(m),
        } => assert!(m.contains("clock went backwards"), "{m}"),
        o => panic!("charged into a closed window: {o:?}"),
    }
    assert_eq!(l.balance("u", back.time).unwrap().spent, Units::ZERO);
    // Within one group too, and another user (never charged later) is not affected.
    let mut later = charge("v", "v-later");
    later.time = at("2026-11-26T08:00:00Z");
    let mut earlier = charge("v", "v-earlier");
    earlier.time = at("2026-11-25T08:00:00Z");
    let mut w = charge("w", "w-earlier");
    w.time = at("2026-11-24T08:00:00Z");
    let out = l.charge(&[later, earlier, w]).unwrap();
    assert!(matches!(out[0], Outcome::Charged { .. }), "{out:?}");
    assert!(matches!(out[1], Outcome::Rejected { .. }), "{out:?}");
    assert!(matches!(out[2], Outcome::Charged { .. }), "{out:?}");
    l.verify().unwrap();
}

/// An export of a ledger with two users, and the same export's lines.
fn two_user_export(dir: &Path) -> (String, SqliteLedger) {
    let l = SqliteLedger::create(
        &dir.join("x.db"),
        Settings {
            budget: Units::budget("10").unwrap(),
            period: Period::None,
        },
    )
    .unwrap();
    let reqs: Vec<ChargeRequest> = (0..6)
        .map(|i| charge(&format!("u{}", i % 2), &format!("r{i}")))
        .collect();
    l.charge(&reqs).unwrap();
    let mut buf = Vec::new();
    ledger::export::export(&l, &mut buf).unwrap();
    (String::from_utf8(buf).unwrap(), l)
}

#[test]
fn an_edited_export_is_refused_by_its_checksum_and_its_hmac() {
    use ledger::export::{self, Seal};
    let tmp = tempfile::tempdir().unwrap();
    let (text, _l) = two_user_export(tmp.path());
    let lines: Vec<String> = text.lines().map(String::from).collect();
    assert!(lines.last().unwrap().contains("\"sha256\":\""), "{text}");
    export::read(&mut text.as_bytes(), "ok").unwrap();
    let trailer = lines.len() - 1;
    let join = |l: &[String]| l.join("\n") + "\n";
    // An event deleted, with the trailer's counts fixed so that they agree.
    let mut deleted = lines.clone();
    deleted.remove(2);
    deleted[trailer - 1] = deleted[trailer - 1]
        .replace("\"events\":6", "\"events\":5")
        .replace("\"units\":6000000000", "\"units\":5000000000");
    // An event moved to another user; an item changed; a control character in a user id.
    let edit = |i: usize, from: &str, to: &str| {
        let mut l = lines.clone();
        let changed = l[i].replacen(from, to, 1);
        assert_ne!(changed, l[i]);
        l[i] = changed;
        l
    };
    let sha = "SHA-256 does not match";
    let cases = [
        ("deleted", deleted, sha),
        ("moved", edit(1, "\"user\":\"u0\"", "\"user\":\"u1\""), sha),
        ("item", edit(3, "{\"item\":\"7\"}", "{\"item\":\"8\"}"), sha),
        (
            "control",
            edit(2, "\"user\":\"u1\"", "\"user\":\"u\\u0007\""),
            "control character",
        ),
    ];
    for (name, bad, why) in &cases {
        let e = export::read(&mut join(bad).as_bytes(), name)
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{name}: {e}");
    }
    // The checksum alone (no key) is not a signature: whoever recomputes it passes the content
    // edits above; a control character is still refused by its own check...
    let resealed = |l: &[String]| {
        use sha2::Digest;
        let body: String = l[..l.len() - 1].iter().map(|x| format!("{x}\n")).collect();
        let sum: String = sha2::Sha256::digest(body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let t = &l[l.len() - 1];
        let at = t.find("\"sha256\":\"").unwrap() + 10;
        format!("{body}{}{sum}{}\n", &t[..at], &t[at + 64..])
    };
    let e = export::read(&mut resealed(&cases[3].1).as_bytes(), "control")
        .unwrap_err()
        .to_string();
    assert!(e.contains("control character"), "{e}");
    // ... and with an operator key, no edit passes without the key.
    let key = b"operator-key-0123456789";
    let mut sealed = Vec::new();
    export::export_sealed(
        &_l,
        &mut sealed,
        Seal {
            key: Some(key),
            accept_edits: false,
        },
    )
    .unwrap();
    let sealed = String::from_utf8(sealed).unwrap();
    let with_key = Seal {
        key: Some(key),
        accept_edits: false,
    };
    export::read_sealed(&mut sealed.as_bytes(), "sealed", with_key).unwrap();
    let sealed_lines: Vec<String> = sealed.lines().map(String::from).collect();
    let mut moved = sealed_lines.clone();
    moved[1] = moved[1].replacen("\"user\":\"u0\"", "\"user\":\"u1\"", 1);
    let e = export::read_sealed(&mut resealed(&moved).as_bytes(), "moved", with_key)
        .unwrap_err()
        .to_string();
    assert!(e.contains("HMAC does not match"), "{e}");
    let other = Seal {
        key: Some(b"another-key-0123456789"),
        accept_edits: false,
    };
    assert!(export::read_sealed(&mut sealed.as_bytes(), "other", other).is_err());
    let e = export::read_sealed(&mut text.as_bytes(), "unsealed", with_key)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no HMAC"), "{e}");
}

#[test]
fn a_version_1_export_still_imports() {
    let tmp = tempfile::tempdir().unwrap();
    let (text, _l) = two_user_export(tmp.path());
    // The layout before the checksum: version 1, no request hashes, a trailer with counts only.
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| match l.find(",\"request_hash\"") {
            Some(at) => format!("{}}}", &l[..at]),
            None => l.to_string(),
        })
        .collect();
    lines[0] = lines[0].replace("\"version\":4", "\"version\":1");
    let t = lines.len() - 1;
    let cut = lines[t].find(",\"sha256\"").unwrap();
    lines[t] = format!("{}}}", &lines[t][..cut]);
    let v1 = lines.join("\n") + "\n";
    let v = ledger::export::read(&mut v1.as_bytes(), "v1").unwrap();
    assert_eq!(v.events.len(), 6);
    let e = ledger::export::read(
        &mut v1.replace("\"version\":1", "\"version\":5").as_bytes(),
        "v5",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("versions 1 to 4"), "{e}");
}
