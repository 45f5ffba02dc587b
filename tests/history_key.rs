//! The ledger's request hashes are keyed (docs/ledger.md, "The history key"): HMAC-SHA256 under
//! a secret that is not in the ledger, so that whoever holds the ledger cannot test guesses of
//! a user's history; one release per history still holds under one key; a changed key charges
//! again; a missing or unreadable key fails closed; a ledger of the unkeyed schema migrates
//! with its hashes erased.

use std::sync::Arc;

use recsel::ledger::history_key::{resolve, KeySource};
use recsel::ledger::{
    self, Answer, ChargeRequest, GroupCommitter, HistoryKey, Ledger, Outcome, Period, Rejection,
    Settings, SqliteLedger, Timestamp, Units,
};
use recsel::mechanisms::MechParams;
use recsel::recommend::ledgered::{BatchRequest, LedgeredRecommender};
use recsel::recommend::{RecommendConfig, Recommender};

fn recommender() -> Arc<Recommender> {
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let cfg = RecommendConfig::new("mgem", params, recsel::rng::NoiseMode::Fast);
    Arc::new(Recommender::load(crate::util::http::model_dir(), &cfg).unwrap())
}

fn key(byte: u8) -> HistoryKey {
    HistoryKey::from_bytes(&[byte; 32]).unwrap()
}

fn open(path: &std::path::Path) -> Arc<dyn Ledger> {
    let settings = Settings {
        budget: Units::charge("5").unwrap(),
        period: Period::Day,
    };
    Arc::new(SqliteLedger::open(path, settings).unwrap())
}

fn served(l: &Arc<dyn Ledger>, key: &HistoryKey) -> LedgeredRecommender {
    let committer = Arc::new(GroupCommitter::new(Arc::clone(l), 1));
    LedgeredRecommender::new(recommender(), committer, None, key).unwrap()
}

/// A list of 10 for alice's `history` (item columns) under request id `rid`.
fn ask(lr: &LedgeredRecommender, rid: &str, history: &[u32]) -> Outcome {
    let r = BatchRequest {
        user: "alice".into(),
        request_id: rid.into(),
        history: history.to_vec(),
        k: 10,
    };
    let rec = lr.recommender();
    let mut draws = rec.draws_seeded(rid.len() as u64).unwrap();
    lr.recommend_request(&r, Timestamp::now(), &mut draws, &mut rec.scratch())
        .unwrap()
}

fn spent(l: &Arc<dyn Ledger>) -> Units {
    l.balance("alice", Timestamp::now()).unwrap().spent
}

/// The stored hash is the keyed one (the test reproduces it with the key, so it can fail), not
/// the unkeyed SHA-256 of the same parts, and another key gives another value. A dictionary
/// attack — every history of one or two of the first 40 items, hashed without the key — finds
/// nothing in the keyed ledger; the same attack on the unkeyed hash (what the ledger stored
/// before the key) finds alice's history: the leak the key closes.
#[test]
fn stored_request_hashes_are_keyed_and_a_dictionary_of_histories_finds_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let l = open(&tmp.path().join("ledger.db"));
    let (one, two) = (served(&l, &key(1)), served(&l, &key(2)));
    let history = [3u32, 17];
    assert!(matches!(ask(&one, "r1", &history), Outcome::Charged { .. }));
    let stored = l
        .log()
        .event("alice", "r1")
        .unwrap()
        .unwrap()
        .request_hash
        .unwrap();
    assert_eq!(stored, one.request_hash(&history, 10).unwrap());
    assert_ne!(stored, one.unkeyed_request_hash(&history, 10).unwrap());
    assert_ne!(stored, two.request_hash(&history, 10).unwrap());
    assert_eq!(
        one.unkeyed_request_hash(&history, 10).unwrap(),
        two.unkeyed_request_hash(&history, 10).unwrap(),
        "without a key the hash is the same for everyone"
    );

    let mut guesses: Vec<Vec<u32>> = (0..40).map(|a| vec![a]).collect();
    for a in 0..40 {
        for b in a + 1..40 {
            guesses.push(vec![a, b]);
        }
    }
    let attack = |target| {
        guesses
            .iter()
            .filter(|g| one.unkeyed_request_hash(g, 10).unwrap() == target)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(attack(stored), Vec::<Vec<u32>>::new());
    assert_eq!(
        attack(one.unkeyed_request_hash(&history, 10).unwrap()),
        vec![history.to_vec()],
        "the attack finds the history behind an unkeyed hash"
    );
}

/// Under one key the same history in the same period is charged once (another request id, the
/// items in another order and repeated, gets the stored list at no charge); a changed history is
/// charged; the same history under another key is charged again, and a request id stored under
/// the old key is a different request under the new one.
#[test]
fn one_key_charges_a_history_once_and_a_changed_key_charges_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let l = open(&tmp.path().join("ledger.db"));
    let (one, two) = (served(&l, &key(1)), served(&l, &key(2)));
    let first = match ask(&one, "r1", &[3, 17]) {
        Outcome::Charged { answer, .. } => answer,
        o => panic!("{o:?}"),
    };
    assert_eq!(spent(&l), Units::charge("1").unwrap());
    for (rid, history) in [("r2", vec![3, 17]), ("r3", vec![17, 3, 3])] {
        match ask(&one, rid, &history) {
            Outcome::Replayed { event } => assert_eq!(event.answer, first),
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(spent(&l), Units::charge("1").unwrap(), "charged once");
    assert!(matches!(ask(&one, "r4", &[3, 18]), Outcome::Charged { .. }));
    assert_eq!(spent(&l), Units::charge("2").unwrap());
    assert!(matches!(ask(&two, "r5", &[3, 17]), Outcome::Charged { .. }));
    assert_eq!(
        spent(&l),
        Units::charge("3").unwrap(),
        "a new key charges again"
    );
    // A request id stored under the old key is another request under the new one.
    assert_eq!(
        ask(&two, "r1", &[3, 17]),
        Outcome::Rejected {
            reason: Rejection::DifferentRequest
        }
    );
    assert_eq!(spent(&l), Units::charge("3").unwrap());
}

/// No key, no charge: a key beside a ledger file is made (mode 0600) only while the ledger holds
/// no event; once it holds events, a missing key is refused; so are a given file that is
/// missing, too short or readable by others, and a PostgreSQL ledger without a key file. The
/// command line refuses to charge without its key and charges nothing.
#[test]
fn a_missing_or_unreadable_history_key_fails_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    let spec = path.to_str().unwrap();
    let l = open(&path);
    let (made, src) = resolve(&*l, spec, None).unwrap();
    assert_eq!(src, KeySource::Created(HistoryKey::beside(&path)));
    let (again, src) = resolve(&*l, spec, None).unwrap();
    assert_eq!(
        (again.id(), src),
        (made.id(), KeySource::Beside(HistoryKey::beside(&path)))
    );
    assert!(matches!(
        ask(&served(&l, &made), "r1", &[1]),
        Outcome::Charged { .. }
    ));
    std::fs::remove_file(HistoryKey::beside(&path)).unwrap();
    let e = resolve(&*l, spec, None).unwrap_err().to_string();
    assert!(e.contains("is missing, and the ledger holds events"), "{e}");
    assert!(!HistoryKey::beside(&path).exists(), "no key made for it");

    let given = tmp.path().join("key");
    let e = resolve(&*l, spec, Some(&given)).unwrap_err().to_string();
    assert!(e.contains("history key"), "{e}");
    std::fs::write(&given, "short").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&given, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(resolve(&*l, spec, Some(&given)).is_err());
    std::fs::write(&given, "0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&given, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = resolve(&*l, spec, Some(&given)).unwrap_err().to_string();
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&given, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(matches!(
        resolve(&*l, spec, Some(&given)).unwrap().1,
        KeySource::Given(_)
    ));
    let e = resolve(&*l, "postgres://u@h/db", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs --history-key-file"), "{e}");
    drop(l);

    let before = SqliteLedger::open_existing(&path)
        .unwrap()
        .balance("alice", Timestamp::now())
        .unwrap()
        .spent;
    let o = crate::util::recsel(&[
        "recommend",
        "--model",
        crate::util::http::model_dir().to_str().unwrap(),
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--k",
        "10",
        "--history",
        "3,17",
        "--ledger",
        spec,
        "--user",
        "alice",
        "--secure",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("history key"), "{err}");
    let after = SqliteLedger::open_existing(&path)
        .unwrap()
        .balance("alice", Timestamp::now())
        .unwrap()
        .spent;
    assert_eq!(before, after, "nothing charged");
}

/// A ledger of schema version 3 (unkeyed hashes) is refused until migrated; the migration keeps
/// its events and erases their hashes, after which the old history is charged again (its
/// unkeyed hash cannot be compared with a keyed one) and the old request id still replays.
#[test]
fn a_version_3_ledger_migrates_with_its_unkeyed_hashes_erased() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ledger.db");
    let l = open(&path);
    let lr = served(&l, &key(1));
    let history = [3u32, 17];
    let unkeyed = lr.unkeyed_request_hash(&history, 10).unwrap();
    let old = ChargeRequest {
        user: "alice".into(),
        request_id: "r1".into(),
        request_hash: unkeyed,
        mechanism: "mgem".into(),
        epsilon: Units::charge("1").unwrap(),
        time: Timestamp::now(),
        answer: Answer::List(vec!["x".into()]),
        fallback: None,
        once_per_history: true,
    };
    assert!(matches!(
        l.charge(&[old]).unwrap()[0],
        Outcome::Charged { .. }
    ));
    drop((lr, l));
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "UPDATE meta SET value = '3' WHERE key = 'format_version'",
        [],
    )
    .unwrap();
    drop(c);
    let e = SqliteLedger::open_existing(&path).unwrap_err().to_string();
    assert!(e.contains("recsel ledger migrate --ledger"), "{e}");
    let m = ledger::migrate(path.to_str().unwrap()).unwrap();
    assert_eq!((m.from, m.to, m.events), (3, 4, 1));
    let l: Arc<dyn Ledger> = Arc::new(SqliteLedger::open_existing(&path).unwrap());
    let e = l.log().event("alice", "r1").unwrap().unwrap();
    assert_eq!(e.request_hash, None, "the unkeyed hash is erased");
    let lr = served(&l, &key(1));
    assert!(matches!(ask(&lr, "r2", &history), Outcome::Charged { .. }));
    assert_eq!(spent(&l), Units::charge("2").unwrap(), "charged again");
    match ask(&lr, "r1", &history) {
        Outcome::Replayed { event } => assert_eq!(event.answer, Answer::List(vec!["x".into()])),
        o => panic!("{o:?}"),
    }
}
