//! What the service says it serves for lists (`GET /v1/model`'s `lists` and the start-up
//! lines, as the library states them) and the public list (`GET /v1/public-list`: the release's
//! public ranking, no history, no charge, with the report entries it learned from).
//! docs/serving.md, "Lists" and "`GET /v1/public-list`".

use std::time::Duration;

use recsel::ledger::{Ledger, SqliteLedger};
use recsel::mechanisms::MechParams;
use recsel::recommend::{RecommendConfig, Recommender};
use serde_json::json;

use crate::util::http::{args, good, item_ids, model_dir, Server};

/// The recommender the common server arguments serve (mgem at ε = 1 on the example model).
fn library() -> Recommender {
    let params = MechParams {
        epsilon: 1.0,
        ..Default::default()
    };
    let cfg = RecommendConfig::new("mgem", params, recsel::rng::NoiseMode::Secure);
    Recommender::load(model_dir(), &cfg).unwrap()
}

/// `GET /v1/model` states the list forms, the largest k, one release per history and the list
/// claim — the library's, word for word — and the start-up lines say the same. The public list
/// is the library's public ranking, charges nothing and stores nothing in the ledger (the same
/// check sees the one event a private list stores), names the report entries it learned from,
/// and refuses a bad `m`. With `--charge-repeats` the model says one release per history is off.
#[test]
fn the_service_states_its_lists_and_serves_the_public_list_at_no_charge() {
    let rec = library();
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = Server::start(&args(ledger.to_str().unwrap(), "5", &[]));
    s.wait_ready(Duration::from_secs(60));

    let m = s.get("/v1/model", None);
    assert_eq!(m.status, 200, "{}", m.body);
    let l = &m.json()["lists"];
    assert_eq!(l["max_k"], json!(recsel::recommend::MAX_LIST));
    assert_eq!(l["default_k"], json!(1));
    assert_eq!(l["form"], json!("peeling"));
    assert_eq!(l["mechanism_forms"], json!(["peeling"]));
    assert_eq!(l["one_release_per_history"], json!(true));
    assert_eq!(l["claim_k"], json!(10));
    assert_eq!(l["claim"], json!(rec.list_statement(10).unwrap()));
    assert_eq!(l["epsilon"], json!(rec.list_epsilon(10).unwrap()));
    assert!(l["history_key_id"].as_str().unwrap().len() == 16, "{l}");
    let p = &m.json()["public_list"];
    assert_eq!(p["claim"], json!(rec.public_list_claim()));
    assert!(s.log_contains("recsel serve: lists: \"k\" 1 to 1000 per request (default 1)"));
    assert!(s.log_contains("one release per history: on"));
    assert!(s.log_contains(&format!(
        "recsel serve: list claim (k = 10): {}",
        rec.list_statement(10).unwrap()
    )));
    assert!(s.log_contains("recsel serve: GET /v1/public-list?m=M: public list: 0-DP"));

    let r = s.get("/v1/public-list?m=20", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    eprintln!("{}", serde_json::to_string_pretty(&v).unwrap());
    let ids = item_ids();
    let expected: Vec<&str> = rec
        .public_ranking(20)
        .unwrap()
        .iter()
        .map(|&j| ids[j as usize].as_str())
        .collect();
    assert_eq!(v["items"], json!(expected));
    // Most popular first (a pool in column order would fail this).
    let pop = recsel::recommend::Release::read(model_dir())
        .unwrap()
        .popularity
        .unwrap();
    let counts: Vec<u64> = rec
        .public_ranking(20)
        .unwrap()
        .iter()
        .map(|&j| pop[j as usize])
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    assert!(counts.windows(2).any(|w| w[0] > w[1]), "{counts:?}");
    assert_eq!(
        (v["charged"].as_f64(), v["served_epsilon"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    assert!(
        v["claim"]
            .as_str()
            .unwrap()
            .contains("no ledger is charged"),
        "{v}"
    );
    let parts: Vec<&str> = v["learned_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["part"].as_str().unwrap())
        .collect();
    assert!(parts.contains(&"popularity counts"), "{parts:?}");
    assert_eq!(
        s.get("/v1/public-list", None).json()["items"]
            .as_array()
            .unwrap()
            .len(),
        100
    );
    for bad in [
        "/v1/public-list?m=0",
        "/v1/public-list?m=1001",
        "/v1/public-list?n=3",
    ] {
        let r = s.get(bad, None);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(r.body.contains("\"field\":\"m\""), "{}", r.body);
    }
    let events = || {
        let l = SqliteLedger::open_existing(&ledger).unwrap();
        l.log().users().unwrap().len()
    };
    assert_eq!(events(), 0, "a public list stores nothing in the ledger");
    let mut one = good("alice", "r1");
    one["k"] = json!(10);
    let r = s.post("/v1/recommend", None, &one);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(events(), 1, "a private list is charged and stored");
    assert_eq!(s.terminate().code(), Some(0));

    let ledger2 = tmp.path().join("repeats.db");
    let s = Server::start(&args(
        ledger2.to_str().unwrap(),
        "5",
        &["--charge-repeats", "--k", "10"],
    ));
    s.wait_ready(Duration::from_secs(60));
    let l = &s.get("/v1/model", None).json()["lists"];
    assert_eq!(l["one_release_per_history"], json!(false));
    assert_eq!(l["default_k"], json!(10));
    assert!(s.log_contains("one release per history: off"));
    assert_eq!(s.terminate().code(), Some(0));
}
