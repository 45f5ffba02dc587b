//! Lists served as one release (docs/ledger.md, "One release per history"; docs/serving.md,
//! "Lists"): within a ledger period, a user's request for the same history and the same request
//! parameters gets the list released before, charged nothing; a changed history is a new list
//! and a new charge; with the option off every request is charged.

use std::collections::HashSet;

use recsel::ledger::{
    Answer, ChargeRequest, Ledger, Outcome, Period, RequestHash, Settings, SqliteLedger, Timestamp,
    Units,
};

fn settings() -> Settings {
    Settings {
        budget: Units::budget("4").unwrap(),
        period: Period::Day,
    }
}

/// A list request of `user` with id `id` whose history (and parameters) hash from `history`,
/// releasing `items` if charged.
fn list(
    user: &str,
    id: &str,
    history: &[u8],
    items: &[&str],
    once: bool,
    day: u32,
) -> ChargeRequest {
    ChargeRequest {
        user: user.into(),
        request_id: id.into(),
        request_hash: RequestHash::of(&[history]),
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time: Timestamp::from_date(2026, 11, day),
        answer: Answer::List(items.iter().map(|s| s.to_string()).collect()),
        fallback: Some("pop".into()),
        once_per_history: once,
    }
}

fn spent(l: &dyn Ledger, user: &str, day: u32) -> Units {
    l.balance(user, Timestamp::from_date(2026, 11, day))
        .unwrap()
        .spent
}

/// The policy over one store: the same history twice in a day is one charge and the identical
/// list (whatever the second computation picked, under any request id, in one group or two); a
/// changed history, the next day or another user is a new charge; the option off charges every
/// request; a fallback is never taken for a release. On a ledger that ignored the option, the
/// second request would be charged and show the second pick.
fn one_release_per_history(l: &dyn Ledger) {
    let first = l
        .charge(&[list("alice", "p1", b"h1", &["a", "b", "c"], true, 25)])
        .unwrap();
    assert!(
        matches!(&first[0], Outcome::Charged { answer, .. }
        if *answer == Answer::List(vec!["a".into(), "b".into(), "c".into()])),
        "{first:?}"
    );
    let again = l
        .charge(&[list("alice", "p2", b"h1", &["x", "y", "z"], true, 25)])
        .unwrap();
    match &again[0] {
        Outcome::Replayed { event } => {
            assert_eq!(
                event.answer,
                Answer::List(vec!["a".into(), "b".into(), "c".into()])
            );
            assert_eq!(event.request_id, "p1");
        }
        o => panic!("the same history twice must replay the first list: {o:?}"),
    }
    assert_eq!(
        spent(l, "alice", 25),
        Units::charge("1").unwrap(),
        "charged once"
    );
    assert_eq!(
        l.log().events("alice").unwrap().len(),
        1,
        "nothing stored for a repeat"
    );

    // A changed history: a new list and a new charge.
    let changed = l
        .charge(&[list("alice", "p3", b"h2", &["d", "e"], true, 25)])
        .unwrap();
    assert!(matches!(changed[0], Outcome::Charged { .. }), "{changed:?}");
    assert_eq!(spent(l, "alice", 25), Units::charge("2").unwrap());
    // The next day, the same history is released again (a new period, a new charge).
    let next = l
        .charge(&[list("alice", "p4", b"h1", &["f"], true, 26)])
        .unwrap();
    assert!(matches!(next[0], Outcome::Charged { .. }), "{next:?}");
    // Another user with the same history pays for their own list.
    let bob = l
        .charge(&[list("bob", "p1", b"h1", &["g"], true, 25)])
        .unwrap();
    assert!(matches!(bob[0], Outcome::Charged { .. }), "{bob:?}");

    // Two requests of one history in one group: charged, then the first one's list.
    let group = l
        .charge(&[
            list("carol", "c1", b"h1", &["a"], true, 25),
            list("carol", "c2", b"h1", &["b"], true, 25),
        ])
        .unwrap();
    assert!(matches!(group[0], Outcome::Charged { .. }), "{group:?}");
    assert!(
        matches!(&group[1], Outcome::Replayed { event }
        if event.answer == Answer::List(vec!["a".into()])),
        "{group:?}"
    );
    assert_eq!(spent(l, "carol", 25), Units::charge("1").unwrap());

    // The option off: every request is charged, even for the same history.
    for id in ["q1", "q2"] {
        let o = l
            .charge(&[list("dave", id, b"h3", &["a"], false, 25)])
            .unwrap();
        assert!(matches!(o[0], Outcome::Charged { .. }), "{o:?}");
    }
    assert_eq!(spent(l, "dave", 25), Units::charge("2").unwrap());

    // A served fallback is not a release of the history: once the budget is spent, the same
    // history still gets the fallback, not a stored list.
    for (i, h) in [b"e1", b"e2", b"e3", b"e4"].iter().enumerate() {
        let o = l
            .charge(&[list("erin", &format!("e{i}"), *h, &["a"], true, 25)])
            .unwrap();
        assert!(matches!(o[0], Outcome::Charged { .. }), "{o:?}");
    }
    let fb = l
        .charge(&[list("erin", "e5", b"e5", &["a"], true, 25)])
        .unwrap();
    assert!(matches!(fb[0], Outcome::Fallback { .. }), "{fb:?}");
    let fb2 = l
        .charge(&[list("erin", "e6", b"e5", &["a"], true, 25)])
        .unwrap();
    assert!(matches!(fb2[0], Outcome::Fallback { .. }), "{fb2:?}");
}

#[test]
fn the_same_history_twice_in_a_period_is_charged_once_and_gets_the_same_list() {
    let tmp = tempfile::tempdir().unwrap();
    let l = SqliteLedger::open(&tmp.path().join("ledger.db"), settings()).unwrap();
    one_release_per_history(&l);
    // The stored list survives a reopen, with its charge.
    drop(l);
    let l = SqliteLedger::open_existing(&tmp.path().join("ledger.db")).unwrap();
    let again = l
        .charge(&[list("alice", "p9", b"h1", &["z"], true, 26)])
        .unwrap();
    assert!(
        matches!(&again[0], Outcome::Replayed { event }
        if event.answer == Answer::List(vec!["f".into()])),
        "{again:?}"
    );
    assert_eq!(l.verify().unwrap(), 6);
}

#[cfg(feature = "postgres")]
#[test]
fn the_same_history_twice_in_a_period_is_charged_once_on_postgres() {
    let test = "the_same_history_twice_in_a_period_is_charged_once_on_postgres";
    let Some(pg) = crate::serve_postgres::Pg::start(test) else {
        return;
    };
    pg.create_db("lists");
    let l = recsel::ledger::PostgresLedger::open(&pg.url("lists"), settings()).unwrap();
    one_release_per_history(&l);
}

/// A ledger of schema version 2 (no lists, no index of releases) is refused until `recsel ledger
/// migrate` migrates it, keeping every event and erasing its unkeyed request hash (docs/ledger.md,
/// "The history key"); then it stores lists and finds a history's release — not the old event's,
/// whose history is charged again.
#[test]
fn a_version_2_ledger_is_migrated_to_store_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    let l = SqliteLedger::open(&path, settings()).unwrap();
    let mut old = list("alice", "p1", b"h1", &[], true, 25);
    old.answer = Answer::Item("a".into());
    assert!(matches!(
        l.charge(&[old]).unwrap()[0],
        Outcome::Charged { .. }
    ));
    drop(l);
    let mut c = rusqlite::Connection::open(&path).unwrap();
    let tx = c.transaction().unwrap();
    tx.execute_batch(
        "CREATE TABLE events_v2 (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL, \
         user TEXT NOT NULL, mechanism TEXT NOT NULL, units INTEGER NOT NULL CHECK (units >= 0), \
         time_ms INTEGER NOT NULL, window_start INTEGER NOT NULL, \
         answer_kind TEXT NOT NULL CHECK (answer_kind IN ('item', 'none', 'fallback')), \
         answer_item TEXT, request_hash BLOB CHECK (request_hash IS NULL OR \
         length(request_hash) = 32), UNIQUE (user, request_id));
         INSERT INTO events_v2 SELECT seq, request_id, user, mechanism, units, time_ms, \
         window_start, answer_kind, answer_item, request_hash FROM events;
         DROP TABLE events;
         ALTER TABLE events_v2 RENAME TO events;
         CREATE INDEX events_by_user ON events (user, seq);
         UPDATE meta SET value = '2' WHERE key = 'format_version';",
    )
    .unwrap();
    tx.commit().unwrap();
    drop(c);
    let e = SqliteLedger::open_existing(&path).unwrap_err().to_string();
    assert!(e.contains("recsel ledger migrate --ledger"), "{e}");
    let m = recsel::ledger::migrate(path.to_str().unwrap()).unwrap();
    assert_eq!((m.from, m.to, m.events), (2, 4, 1));
    let l = SqliteLedger::open_existing(&path).unwrap();
    let e = l.log().event("alice", "p1").unwrap().unwrap();
    assert_eq!(e.request_hash, None, "the unkeyed hash is erased");
    // The old event's history is charged again: its hash cannot be compared any more.
    let o = l
        .charge(&[list("alice", "p2", b"h1", &["b"], true, 25)])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Charged { answer, .. } if *answer == Answer::List(vec!["b".into()])),
        "{o:?}"
    );
    // A list stored now is its history's release in the window.
    let o = l
        .charge(&[list("alice", "p3", b"h1", &["c"], true, 25)])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Replayed { event } if event.answer == Answer::List(vec!["b".into()])),
        "{o:?}"
    );
    // The old request id replays its stored answer (an event without a hash replays).
    let o = l
        .charge(&[list("alice", "p1", b"anything", &["d"], true, 25)])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Replayed { event } if event.answer == Answer::Item("a".into())),
        "{o:?}"
    );
}

/// `POST /v1/recommend` with `"k": 10`: ten distinct items, one charge of the list's ε with the
/// claim of one release; the same history again (another request id, in the batch endpoint too)
/// gets the identical list at no charge; a changed history is a new list and a new charge; a
/// request without `k` is the single item as before. With `--charge-repeats` the same history
/// twice is charged twice. On a server that charged every list, `spent` would be 2 after the
/// repeat.
#[cfg(feature = "serve")]
#[test]
fn a_list_of_ten_over_http_is_one_charge_and_the_same_history_gets_it_again_free() {
    use crate::util::http::{args, item_ids, Server};
    use serde_json::json;
    use std::time::Duration;

    let ids = item_ids();
    let body = |rid: &str, cols: &[usize], k: Option<usize>| {
        let history: Vec<&str> = cols.iter().map(|&j| ids[j].as_str()).collect();
        let mut b = json!({"user": "alice", "history": history, "request_id": rid});
        if let Some(k) = k {
            b["k"] = json!(k);
        }
        b
    };
    let spent = |s: &Server| {
        let r = s.get("/v1/users/alice/budget", None);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["spent"].as_f64().unwrap()
    };
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = Server::start(&args(ledger.to_str().unwrap(), "5", &[]));
    s.wait_ready(Duration::from_secs(60));

    let first = s.post("/v1/recommend", None, &body("r1", &[3, 17, 42], Some(10)));
    assert_eq!(first.status, 200, "{}", first.body);
    let v = first.json();
    eprintln!("{}", serde_json::to_string_pretty(&v).unwrap());
    let items: Vec<String> = serde_json::from_value(v["items"].clone()).unwrap();
    assert_eq!(items.len(), 10);
    let distinct: HashSet<&String> = items.iter().collect();
    assert_eq!(
        distinct.len(),
        10,
        "a list never repeats an item: {items:?}"
    );
    assert_eq!(
        (v["k"].as_u64(), v["charged"].as_f64()),
        (Some(10), Some(1.0))
    );
    assert_eq!(v["replayed"], json!(false));
    let claim = v["guarantee"].as_str().unwrap();
    assert!(
        claim.contains("per list of 10 distinct items (one release)"),
        "{claim}"
    );
    assert!(claim.contains("at no charge"), "{claim}");
    assert_eq!(spent(&s), 1.0);

    // The same history (another order, a repeat) under another request id: the same list, free.
    let again = s.post(
        "/v1/recommend",
        None,
        &body("r2", &[42, 3, 17, 3], Some(10)),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    let a = again.json();
    assert_eq!(a["items"], v["items"], "the identical list");
    assert_eq!(
        (a["replayed"].clone(), a["charged"].as_f64()),
        (json!(true), Some(0.0))
    );
    assert_eq!(spent(&s), 1.0, "the same history twice is charged once");
    // And in a batch.
    let batch = s.post(
        "/v1/recommend/batch",
        None,
        &json!({"requests": [body("r3", &[3, 17, 42], Some(10))]}),
    );
    assert_eq!(batch.status, 200, "{}", batch.body);
    assert_eq!(batch.json()["responses"][0]["items"], v["items"]);
    assert_eq!(spent(&s), 1.0);

    // A changed history: a new list, a new charge.
    let changed = s.post("/v1/recommend", None, &body("r4", &[3, 17, 43], Some(10)));
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.json()["charged"].as_f64(), Some(1.0));
    assert_eq!(spent(&s), 2.0);
    // Without k: one item, as before (no list fields), charged per request.
    let one = s.post("/v1/recommend", None, &body("r5", &[3, 17, 42], None));
    assert_eq!(one.status, 200, "{}", one.body);
    let o = one.json();
    assert!(o.get("items").is_none() && o.get("k").is_none(), "{o}");
    assert_eq!(spent(&s), 3.0);
    // A bad k names its field.
    let bad = s.post("/v1/recommend", None, &body("r6", &[3], Some(0)));
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("\"field\":\"k\""), "{}", bad.body);
    assert_eq!(s.terminate().code(), Some(0));

    // --charge-repeats: every list is charged.
    let ledger2 = tmp.path().join("repeats.db");
    let s = Server::start(&args(ledger2.to_str().unwrap(), "5", &["--charge-repeats"]));
    s.wait_ready(Duration::from_secs(60));
    for rid in ["q1", "q2"] {
        let r = s.post("/v1/recommend", None, &body(rid, &[3, 17, 42], Some(10)));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["charged"].as_f64(), Some(1.0), "{}", r.body);
    }
    assert_eq!(spent(&s), 2.0);
    assert_eq!(s.terminate().code(), Some(0));
}

/// `recsel recommend --k 10`: the claim of one list at ε, ten distinct items; with a ledger the
/// same history twice is charged once (the second run replays the first list).
#[test]
fn recommend_k_prints_the_list_claim_and_charges_a_history_once() {
    let tmp = tempfile::tempdir().unwrap();
    let model = crate::util::http::model_dir();
    let ledger = tmp.path().join("ledger.db");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "recommend",
            "--model",
            model.to_str().unwrap(),
            "--mech",
            "mgem",
            "--eps",
            "1",
            "--k",
            "10",
            "--history",
            "3,17,42",
            "--secure",
        ];
        a.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
            .args(&a)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        (String::from_utf8_lossy(&o.stdout).trim().to_string(), err)
    };
    let (out, err) = run(&[]);
    let items: Vec<&str> = out.split(',').collect();
    assert_eq!(items.len(), 10, "{out}");
    assert_eq!(items.iter().collect::<HashSet<_>>().len(), 10, "{out}");
    assert!(
        err.contains("user-level 1-DP per list of 10 distinct items"),
        "{err}"
    );
    assert!(err.contains("per list of 10 items (one release)"), "{err}");

    let l = ledger.to_str().unwrap();
    let with = [
        "--ledger",
        l,
        "--budget",
        "5",
        "--period",
        "day",
        "--create-ledger",
        "--user",
        "bob",
    ];
    let (first, err1) = run(&with);
    assert!(
        err1.contains("each list of 10 (one release) charges 1 eps"),
        "{err1}"
    );
    assert!(err1.contains("charged 1 eps"), "{err1}");
    let (second, err2) = run(&with[..]);
    assert!(err2.contains("replayed"), "{err2}");
    assert_eq!(first, second, "the same list again");
    let l = SqliteLedger::open_existing(&ledger).unwrap();
    assert_eq!(
        l.balance("bob", Timestamp::now()).unwrap().spent,
        Units::charge("1").unwrap()
    );
}
