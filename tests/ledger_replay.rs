//! Replays bound to their request (docs/ledger.md, "Request ids and idempotency"; docs/serving.md,
//! "Request ids"): a user's request id that was answered is replayed only for the same request —
//! the same canonical history under the same mechanism, ε and candidates — and answered 409
//! otherwise, with nothing charged and nothing of the stored answer shown; request ids are scoped
//! per user; a ledger of schema version 1 is refused until `recsel ledger migrate` migrates it
//! (SQLite and PostgreSQL); the export carries each event's request hash.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use recsel::ledger::{
    self, export, Answer, ChargeRequest, Ledger, LedgerLog, Outcome, Period, PostgresLedger,
    Rejection, RequestHash, Settings, SqliteLedger, Timestamp, Units,
};
use serde_json::{json, Value};

use crate::serve_postgres::Pg;
use crate::util::http::{args, item_ids, Server};

fn recsel(a: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(a)
        .output()
        .unwrap()
}

/// A request of `user` with id `rid` for the example model's items at `cols`.
fn body(user: &str, rid: &str, cols: &[usize]) -> Value {
    let ids = item_ids();
    let history: Vec<&str> = cols.iter().map(|&j| ids[j].as_str()).collect();
    json!({"user": user, "history": history, "request_id": rid})
}

/// The serve arguments on `ledger` (budget 3, mgem at ε = 1) with `flag` set to `value`.
fn serve_with(ledger: &Path, flag: &str, value: &str) -> Vec<String> {
    let mut a = args(ledger.to_str().unwrap(), "3", &[]);
    match a.iter().position(|x| x == flag) {
        Some(i) => a[i + 1] = value.to_string(),
        None => a.extend([flag.to_string(), value.to_string()]),
    }
    a
}

fn started(a: &[String]) -> Server {
    let s = Server::start(a);
    s.wait_ready(Duration::from_secs(60));
    s
}

/// What the user has spent, by `GET /v1/users/{user}/budget`.
fn spent(s: &Server, user: &str) -> f64 {
    let r = s.get(&format!("/v1/users/{user}/budget"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["spent"].as_f64().unwrap()
}

/// A 409 in the documented error shape that shows nothing of the stored answer `item`.
fn assert_conflict(r: &crate::util::http::Reply, rid: &str, item: &Value, what: &str) {
    assert_eq!(r.status, 409, "{what}: {}", r.body);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "request_id_conflict", "{what}: {}", r.body);
    assert_eq!(e["field"], "request_id", "{what}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "request id '{rid}' was already used for a different request"
        )),
        "{what}: {msg}"
    );
    assert!(
        r.json().get("item").is_none() && e.get("item").is_none(),
        "{what}"
    );
    assert!(
        !r.body.contains(&item.to_string()),
        "{what}: the stored item {item} leaks: {}",
        r.body
    );
}

/// The same (user, request id) with another history — or, after a restart, under another ε,
/// mechanism or candidate policy — is answered 409 with nothing charged; the same request
/// (its history in another order, repeated, with an unknown item: the same canonical history)
/// is replayed. On the code before request hashes every one of these was a 200 replay carrying
/// the stored item.
#[test]
fn a_request_id_reused_for_another_request_gets_409_and_charges_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = started(&serve_with(&ledger, "--eps", "1"));
    let first = s.post("/v1/recommend", None, &body("bob", "r1", &[3, 17, 42]));
    assert_eq!(first.status, 200, "{}", first.body);
    let item = first.json()["item"].clone();
    assert_eq!(first.json()["charged"].as_f64(), Some(1.0));
    assert_eq!(spent(&s, "bob"), 1.0);
    // Another history under the same id.
    let r = s.post("/v1/recommend", None, &body("bob", "r1", &[3, 17, 43]));
    assert_conflict(&r, "r1", &item, "another history");
    // In a batch, the entry fails alone with the same error.
    let batch = json!({"requests": [body("bob", "r1", &[5]), body("bob", "r2", &[5])]});
    let r = s.post("/v1/recommend/batch", None, &batch);
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json()["responses"].clone();
    assert_eq!(out[0]["status"], 409, "{out}");
    assert_eq!(out[0]["error"]["code"], "request_id_conflict");
    assert!(out[0].get("item").is_none());
    assert_eq!(out[1]["status"], 200, "{out}");
    assert_eq!(spent(&s, "bob"), 2.0, "only r2 was charged");
    // The same canonical history: order, repeats and unknown ids change nothing.
    let mut same = body("bob", "r1", &[42, 3, 17, 3]);
    same["history"]
        .as_array_mut()
        .unwrap()
        .push(json!("no-such-item"));
    let r = s.post("/v1/recommend", None, &same);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (&r.json()["item"], r.json()["replayed"].as_bool()),
        (&item, Some(true))
    );
    assert_eq!(spent(&s, "bob"), 2.0);
    assert_eq!(s.terminate().code(), Some(0));
    // The same request to a service configured otherwise: another ε, mechanism, candidates.
    for (flag, value) in [
        ("--eps", "0.5"),
        ("--mech", "em"),
        ("--candidates", "popular:50"),
    ] {
        let s = started(&serve_with(&ledger, flag, value));
        let r = s.post("/v1/recommend", None, &body("bob", "r1", &[3, 17, 42]));
        assert_conflict(&r, "r1", &item, &format!("{flag} {value}"));
        assert_eq!(spent(&s, "bob"), 2.0, "{flag} {value}");
        assert_eq!(s.terminate().code(), Some(0));
    }
    // Back to the first configuration: the replay again.
    let s = started(&serve_with(&ledger, "--eps", "1"));
    let r = s.post("/v1/recommend", None, &body("bob", "r1", &[17, 42, 3]));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["item"], item);
    assert_eq!(s.terminate().code(), Some(0));
    let l = SqliteLedger::open_existing(&ledger).unwrap();
    l.verify().unwrap();
    assert_eq!(
        l.events("bob").unwrap().len(),
        2,
        "r1 and r2, charged once each"
    );
}

/// Request ids are scoped per user: the same id (and the same history) of two users is two
/// independent charged requests — no replay across users, and no 409 that would tell one user
/// that another used the id. On the code before, the second user got a 409.
#[test]
fn the_same_request_id_of_two_users_is_two_independent_charged_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = started(&serve_with(&ledger, "--eps", "1"));
    let a = s.post(
        "/v1/recommend",
        None,
        &body("alice", "shared-1", &[3, 17, 42]),
    );
    let c = s.post(
        "/v1/recommend",
        None,
        &body("carol", "shared-1", &[3, 17, 42]),
    );
    for (who, r) in [("alice", &a), ("carol", &c)] {
        assert_eq!(r.status, 200, "{who}: {}", r.body);
        assert_eq!(r.json()["replayed"], false, "{who}");
        assert_eq!(r.json()["charged"].as_f64(), Some(1.0), "{who}");
        assert_eq!(spent(&s, who), 1.0, "{who}");
    }
    // Each user's retry replays that user's own answer.
    for (who, r) in [("alice", &a), ("carol", &c)] {
        let again = s.post("/v1/recommend", None, &body(who, "shared-1", &[3, 17, 42]));
        assert_eq!(again.json()["replayed"], true, "{who}");
        assert_eq!(again.json()["item"], r.json()["item"], "{who}");
    }
    assert_eq!(s.terminate().code(), Some(0));
    let l = SqliteLedger::open_existing(&ledger).unwrap();
    for who in ["alice", "carol"] {
        let e = l.event(who, "shared-1").unwrap().unwrap();
        assert_eq!(
            (e.user.as_str(), e.units),
            (who, Units::charge("1").unwrap())
        );
        assert!(e.request_hash.is_some());
    }
    l.verify().unwrap();
}

/// Rewrites a current SQLite ledger into the layout of schema version 1 (events without request
/// hashes, the request id unique across users), as recsel wrote it before.
fn downgrade_to_v1(path: &Path) {
    let mut c = rusqlite::Connection::open(path).unwrap();
    let tx = c.transaction().unwrap();
    tx.execute_batch(
        "CREATE TABLE events_v1 (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL UNIQUE, \
         user TEXT NOT NULL, mechanism TEXT NOT NULL, units INTEGER NOT NULL CHECK (units >= 0), \
         time_ms INTEGER NOT NULL, window_start INTEGER NOT NULL, \
         answer_kind TEXT NOT NULL CHECK (answer_kind IN ('item', 'none', 'fallback')), \
         answer_item TEXT);
         INSERT INTO events_v1 SELECT seq, request_id, user, mechanism, units, time_ms, \
         window_start, answer_kind, answer_item FROM events;
         DROP TABLE events;
         ALTER TABLE events_v1 RENAME TO events;
         CREATE INDEX events_by_user ON events (user, seq);
         UPDATE meta SET value = '1' WHERE key = 'format_version';",
    )
    .unwrap();
    tx.commit().unwrap();
}

fn sqlite_version(path: &Path) -> String {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// Starts `recsel serve` with `a`, which must exit with an error; its log.
fn serve_refuses(a: &[String]) -> String {
    let mut s = Server::start(a);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(100));
    let log = s.log.lock().unwrap().clone();
    assert!(!status.success(), "serve must refuse:\n{log}");
    log
}

/// A ledger of schema version 1 is refused by every command that opens it — `serve`, `ledger
/// show`, the library — with a message naming `recsel ledger migrate --ledger PATH`, and left as
/// it is; `recsel ledger migrate` migrates it in one transaction, keeping every event. An old
/// event has no request hash and replays as before (the same user, any request); ids are
/// scoped per user and new events are bound to their request. On the code before, the version 1
/// file was the current one and `ledger migrate` did not exist.
#[test]
fn a_version_1_sqlite_ledger_is_refused_until_migrated_and_keeps_every_event() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    let p = path.to_str().unwrap();
    let s = started(&serve_with(&path, "--eps", "1"));
    let old = s.post("/v1/recommend", None, &body("dave", "old-1", &[3, 17, 42]));
    assert_eq!(old.status, 200, "{}", old.body);
    let old_item = old.json()["item"].clone();
    assert_eq!(s.terminate().code(), Some(0));
    downgrade_to_v1(&path);
    let migrate_cmd = format!("recsel ledger migrate --ledger {p}");
    let mut serve = serve_with(&path, "--eps", "1");
    serve.retain(|x| x != "--create-ledger");
    let log = serve_refuses(&serve);
    assert!(log.contains(&migrate_cmd), "{log}");
    assert!(log.contains("schema version 1"), "{log}");
    let o = recsel(&["ledger", "show", "--ledger", p]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&migrate_cmd),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let e = ledger::open_for_charging(p, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&migrate_cmd), "{e}");
    assert_eq!(sqlite_version(&path), "1", "a refusal changes nothing");
    // The migration.
    let o = recsel(&["ledger", "migrate", "--ledger", p]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("from schema version 1 to 4: 1 events kept"),
        "{err}"
    );
    assert_eq!(sqlite_version(&path), "4");
    let o = recsel(&["ledger", "migrate", "--ledger", p]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing changed"));
    let l = SqliteLedger::open_existing(&path).unwrap();
    l.verify().unwrap();
    let e = l.event("dave", "old-1").unwrap().unwrap();
    assert_eq!(
        (json!(e.answer.item()), e.request_hash),
        (old_item.clone(), None)
    );
    drop(l);
    // Served again: the old event replays its stored answer even for another history (it has
    // no hash to compare; documented), another user's old-1 is that user's own request, and a
    // new request is bound to its hash.
    let s = started(&serve);
    let r = s.post("/v1/recommend", None, &body("dave", "old-1", &[9]));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (&r.json()["item"], r.json()["replayed"].as_bool()),
        (&old_item, Some(true))
    );
    let r = s.post("/v1/recommend", None, &body("erin", "old-1", &[9]));
    assert_eq!(r.json()["replayed"], false, "{}", r.body);
    let r = s.post("/v1/recommend", None, &body("dave", "new-1", &[3]));
    let new_item = r.json()["item"].clone();
    let r = s.post("/v1/recommend", None, &body("dave", "new-1", &[4]));
    assert_conflict(&r, "new-1", &new_item, "after the migration");
    assert_eq!(spent(&s, "dave"), 2.0);
    assert_eq!(s.terminate().code(), Some(0));
}

fn settings() -> Settings {
    Settings {
        budget: Units::budget("10").unwrap(),
        period: Period::Day,
    }
}

fn charge(user: &str, id: &str, hash: &[u8]) -> ChargeRequest {
    ChargeRequest {
        user: user.into(),
        request_id: id.into(),
        request_hash: RequestHash::of(&[hash]),
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time: Timestamp::from_date(2026, 11, 25),
        answer: Answer::Item(format!("item-{user}-{id}")),
        fallback: None,
        once_per_history: false,
    }
}

/// The export carries each event's request hash and the import restores it (a replay on the
/// imported ledger is still bound to its request); a hash edited in the file fails the import
/// by the checksum, a malformed one even with --accept-edits; a version 2 export (no hashes)
/// imports its events without one. On the code before, the export had no hashes.
#[test]
fn the_export_round_trips_request_hashes_and_an_edited_hash_fails_import() {
    let tmp = tempfile::tempdir().unwrap();
    let l = SqliteLedger::create(&tmp.path().join("a.db"), settings()).unwrap();
    let reqs = [
        charge("u0", "r0", b"h0"),
        charge("u1", "r0", b"h1"),
        charge("u0", "r1", b"h2"),
    ];
    assert!(l
        .charge(&reqs)
        .unwrap()
        .iter()
        .all(|o| matches!(o, Outcome::Charged { .. })));
    let mut buf = Vec::new();
    export::export(&l, &mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    assert!(text.starts_with("{\"format\":\"recsel-ledger-export\",\"version\":4,"));
    for r in &reqs {
        assert!(
            text.contains(&format!("\"request_hash\":\"{}\"", r.request_hash.hex())),
            "{text}"
        );
    }
    let v = export::read(&mut text.as_bytes(), "export").unwrap();
    let copy = SqliteLedger::create(&tmp.path().join("b.db"), settings()).unwrap();
    export::import(&copy, &v).unwrap();
    for u in ["u0", "u1"] {
        assert_eq!(copy.events(u).unwrap(), l.events(u).unwrap());
    }
    let o = copy
        .charge(&[charge("u0", "r0", b"h0"), charge("u0", "r1", b"other")])
        .unwrap();
    assert!(matches!(o[0], Outcome::Replayed { .. }), "{o:?}");
    assert_eq!(
        o[1],
        Outcome::Rejected {
            reason: Rejection::DifferentRequest
        }
    );
    // One hex digit of a hash changed.
    let h = reqs[1].request_hash.hex();
    let flipped = format!("{}{}", if h.starts_with('0') { "1" } else { "0" }, &h[1..]);
    let edited = text.replacen(&h, &flipped, 1);
    assert_ne!(edited, text);
    let e = export::read(&mut edited.as_bytes(), "edited")
        .unwrap_err()
        .to_string();
    assert!(e.contains("SHA-256 does not match"), "{e}");
    let malformed = text.replacen(&h, "not-a-hash", 1);
    let accept = export::Seal {
        key: None,
        accept_edits: true,
    };
    let e = export::read_sealed(&mut malformed.as_bytes(), "malformed", accept)
        .unwrap_err()
        .to_string();
    assert!(e.contains("request_hash 'not-a-hash'"), "{e}");
    // A version 2 export: no hashes, the checksum over its own lines.
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| match l.find(",\"request_hash\"") {
            Some(at) => format!("{}}}", &l[..at]),
            None => l.replace("\"version\":4", "\"version\":2"),
        })
        .collect();
    let t = lines.len() - 1;
    let body: String = lines[..t].iter().map(|x| format!("{x}\n")).collect();
    let sum: String = {
        use sha2::Digest;
        sha2::Sha256::digest(body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let at = lines[t].find("\"sha256\":\"").unwrap() + 10;
    lines[t] = format!("{}{sum}{}", &lines[t][..at], &lines[t][at + 64..]);
    let v2 = lines.join("\n") + "\n";
    let v = export::read(&mut v2.as_bytes(), "v2").unwrap();
    assert_eq!(v.events.len(), 3);
    assert!(v.events.iter().all(|e| e.request_hash.is_none()));
    // A hash in a version 2 export is refused (hashes came with version 3).
    let mixed = v2.replacen(
        "}}\n{\"end\"",
        &format!("}},\"request_hash\":\"{h}\"}}\n{{\"end\""),
        1,
    );
    assert!(export::read(&mut mixed.as_bytes(), "mixed").is_err());
}

/// The same on PostgreSQL: a database holding a version 1 ledger (its tables as recsel created
/// them) is refused naming `recsel ledger migrate`, and migrated in one transaction; the old
/// event replays, ids are scoped per user, new events are bound to their hash. Without
/// PostgreSQL the test fails under CI and prints SKIPPED otherwise.
#[test]
fn a_version_1_postgres_ledger_is_refused_until_migrated() {
    let test = "a_version_1_postgres_ledger_is_refused_until_migrated";
    let Some(pg) = Pg::start(test) else {
        return;
    };
    pg.create_db("old");
    let url = pg.url("old");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let day = Timestamp::from_date(2026, 11, 25).0;
    c.batch_execute(&format!(
        "CREATE TABLE recsel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE recsel_events (
             seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
             request_id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, mechanism TEXT NOT NULL,
             units BIGINT NOT NULL CHECK (units >= 0), time_ms BIGINT NOT NULL,
             window_start BIGINT NOT NULL,
             answer_kind TEXT NOT NULL CHECK (answer_kind IN ('item', 'none', 'fallback')),
             answer_item TEXT
         );
         CREATE INDEX recsel_events_by_user ON recsel_events (user_id, seq);
         CREATE TABLE recsel_windows (
             user_id TEXT NOT NULL, window_start BIGINT NOT NULL,
             spent BIGINT NOT NULL CHECK (spent >= 0 AND spent <= 10000000000),
             PRIMARY KEY (user_id, window_start)
         );
         CREATE TABLE recsel_runs (
             run_id TEXT PRIMARY KEY, key TEXT NOT NULL, first_ms BIGINT NOT NULL,
             last_ms BIGINT NOT NULL, attempts BIGINT NOT NULL CHECK (attempts >= 1)
         );
         INSERT INTO recsel_meta VALUES ('format', 'recsel-ledger'), ('format_version', '1'),
             ('budget_units', '10000000000'), ('period', 'day'), ('created', 'x');
         INSERT INTO recsel_events (request_id, user_id, mechanism, units, time_ms,
             window_start, answer_kind, answer_item)
             VALUES ('r0', 'u0', 'mgem', 1000000000, {day}, {day}, 'item', 'old-item');
         INSERT INTO recsel_windows VALUES ('u0', {day}, 1000000000);"
    ))
    .unwrap();
    let e = PostgresLedger::open_existing(&url).unwrap_err().to_string();
    assert!(
        e.contains(&format!("recsel ledger migrate --ledger {url}")),
        "{e}"
    );
    let o = recsel(&["ledger", "migrate", "--ledger", &url]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("from schema version 1 to 4: 1 events kept"),
        "{err}"
    );
    let m = ledger::migrate(&url).unwrap();
    assert_eq!((m.from, m.to, m.events), (4, 4, 1));
    let l = PostgresLedger::open_existing(&url).unwrap();
    assert_eq!(l.settings(), settings());
    l.verify().unwrap();
    let o = l
        .charge(&[
            charge("u0", "r0", b"anything"),
            charge("u1", "r0", b"h"),
            charge("u0", "r1", b"h1"),
            charge("u0", "r1", b"h2"),
        ])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Replayed { event } if event.answer == Answer::Item("old-item".into()) && event.request_hash.is_none()),
        "{o:?}"
    );
    assert!(matches!(o[1], Outcome::Charged { .. }), "{o:?}");
    assert!(matches!(o[2], Outcome::Charged { .. }), "{o:?}");
    assert_eq!(
        o[3],
        Outcome::Rejected {
            reason: Rejection::DifferentRequest
        }
    );
    let at = Timestamp::from_date(2026, 11, 25);
    assert_eq!(
        l.balance("u0", at).unwrap().spent,
        Units::charge("2").unwrap()
    );
    assert_eq!(l.events("u0").unwrap().len(), 2);
    l.verify().unwrap();
}
