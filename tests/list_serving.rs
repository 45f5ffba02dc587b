//! Lists served as one release (docs/ledger.md, "One release per history"; docs/serving.md,
//! "Lists"): within a ledger period, a user's request for the same history and the same request
//! parameters gets the list released before, charged nothing; a changed history is a new list
//! and a new charge; with the option off every request is charged.

use recsel::ledger::{
    Answer, ChargeRequest, Ledger, LedgerLog, Outcome, Period, RequestHash, Settings, SqliteLedger,
    Timestamp, Units,
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
/// migrate` migrates it, keeping every event with its request hash; then it stores lists and
/// finds a history's release.
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
    assert_eq!((m.from, m.to, m.events), (2, 3, 1));
    let l = SqliteLedger::open_existing(&path).unwrap();
    let e = l.log().event("alice", "p1").unwrap().unwrap();
    assert_eq!(e.request_hash, Some(RequestHash::of(&[b"h1"])));
    // The old item is this history's release in its window.
    let o = l
        .charge(&[list("alice", "p2", b"h1", &["b"], true, 25)])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Replayed { event } if event.answer == Answer::Item("a".into())),
        "{o:?}"
    );
    let o = l
        .charge(&[list("alice", "p3", b"h2", &["b", "c"], true, 25)])
        .unwrap();
    assert!(
        matches!(&o[0], Outcome::Charged { answer, .. }
        if *answer == Answer::List(vec!["b".into(), "c".into()])),
        "{o:?}"
    );
}
