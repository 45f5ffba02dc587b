//! `recsel serve` over loopback (docs/serving.md): the binary is started on 127.0.0.1 with a free
//! port, driven by a small HTTP/1.1 client, and stopped. Bad input, the API key, budgets under
//! concurrency, replays, fallbacks, batches, metrics and graceful shutdown.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use recsel::ledger::{Ledger as _, LedgerLog as _};
use serde_json::json;

use crate::util::http::{args, good, http, item_ids, simultaneous, Reply, Server};

const KEY: &str = "test-key-0123456789abcdef";

fn key_file(dir: &Path) -> PathBuf {
    let p = dir.join("api-key");
    std::fs::write(&p, format!("{KEY}\n")).unwrap();
    p
}

/// A bad-input case: its name, the body, the API key sent, the status and the field expected.
type Case = (
    &'static str,
    Vec<u8>,
    Option<&'static str>,
    u16,
    &'static str,
);

/// A server with an API key, a 4096-byte body limit and a 50-item history limit; its ledger lives
/// in `tmp`.
fn guarded_server(tmp: &Path) -> Server {
    let ledger = tmp.join("ledger.db");
    let keyf = key_file(tmp);
    let s = Server::start(&args(
        ledger.to_str().unwrap(),
        "1000",
        &[
            "--api-key-file",
            keyf.to_str().unwrap(),
            "--max-body-bytes",
            "4096",
            "--max-history",
            "50",
        ],
    ));
    s.wait_ready(Duration::from_secs(30));
    s
}

#[test]
fn bad_input_gets_the_right_4xx_naming_the_field_and_the_next_good_request_is_served() {
    let tmp = tempfile::tempdir().unwrap();
    let s = guarded_server(tmp.path());
    let ids = item_ids();
    let long_history: Vec<&String> = ids.iter().take(51).collect();
    let big_body = format!(
        "{{\"user\": \"u\", \"history\": [\"{}\"], \"request_id\": \"big\"}}",
        "x".repeat(5000)
    );
    // (case, body, key, status, field)
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            b"{\"user\": \"u\", \"history\": [".to_vec(),
            Some(KEY),
            400,
            "body",
        ),
        (
            "not an object",
            b"[1, 2, 3]".to_vec(),
            Some(KEY),
            400,
            "body",
        ),
        (
            "user of the wrong type",
            json!({"user": 7, "history": [ids[1]]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "user",
        ),
        (
            "history of the wrong type",
            json!({"user": "u", "history": ids[1]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "history",
        ),
        (
            "an item of the wrong type",
            json!({"user": "u", "history": [ids[1], 5]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "history[1]",
        ),
        (
            "request id of the wrong type",
            json!({"user": "u", "history": [ids[1]], "request_id": 9})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "request_id",
        ),
        (
            "missing user",
            json!({"history": [ids[1]]}).to_string().into_bytes(),
            Some(KEY),
            400,
            "user",
        ),
        (
            "missing history",
            json!({"user": "u"}).to_string().into_bytes(),
            Some(KEY),
            400,
            "history",
        ),
        (
            "user id with a space",
            json!({"user": "a b", "history": [ids[1]]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "user",
        ),
        (
            "user id with a slash",
            json!({"user": "../etc", "history": [ids[1]]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "user",
        ),
        (
            "user id of 129 bytes",
            json!({"user": "u".repeat(129), "history": [ids[1]]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "user",
        ),
        (
            "empty history",
            json!({"user": "u", "history": []}).to_string().into_bytes(),
            Some(KEY),
            400,
            "history",
        ),
        (
            "history over the limit",
            json!({"user": "u", "history": long_history})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "history",
        ),
        (
            "only unknown items",
            json!({"user": "u", "history": ["no-such-item"]})
                .to_string()
                .into_bytes(),
            Some(KEY),
            422,
            "history",
        ),
        (
            "body over the limit",
            big_body.into_bytes(),
            Some(KEY),
            413,
            "body",
        ),
        (
            "missing API key",
            good("u", "k1").to_string().into_bytes(),
            None,
            401,
            "authorization",
        ),
        (
            "wrong API key",
            good("u", "k2").to_string().into_bytes(),
            Some("test-key-0123456789abcdeX"),
            401,
            "authorization",
        ),
        (
            "a mechanism in the request",
            json!({"user": "u", "history": [ids[1]], "mechanism": "rnmh"})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "mechanism",
        ),
        (
            "another eps in the request",
            json!({"user": "u", "history": [ids[1]], "epsilon": 8})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "epsilon",
        ),
        (
            "an unknown field",
            json!({"user": "u", "history": [ids[1]], "colour": "red"})
                .to_string()
                .into_bytes(),
            Some(KEY),
            400,
            "colour",
        ),
    ];
    eprintln!("| case | status | field | message |\n|---|---|---|---|");
    for (i, (case, body, key, status, field)) in cases.iter().enumerate() {
        let r = s.post_raw("/v1/recommend", *key, body);
        let msg = r.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string();
        eprintln!(
            "| {case} | {} | {} | {msg} |",
            r.status,
            r.field().unwrap_or_default()
        );
        assert_eq!(r.status, *status, "{case}: {}", r.body);
        assert_eq!(r.field().as_deref(), Some(*field), "{case}: {}", r.body);
        assert!(!msg.is_empty(), "{case}");
        if *status == 413 {
            assert_eq!(r.json()["error"]["limit"], 4096, "{case}");
            assert!(msg.contains("4096"), "{case}: {msg}");
        }
        if *case == "history over the limit" {
            assert_eq!(r.json()["error"]["limit"], 50);
        }
        if *status == 401 {
            assert!(r.header("www-authenticate").is_some());
        }
        // The next good request is served.
        let ok = s.post(
            "/v1/recommend",
            Some(KEY),
            &good("good-user", &format!("good-{i}")),
        );
        assert_eq!(ok.status, 200, "after {case}: {}", ok.body);
    }
}

#[test]
fn unknown_items_among_known_ones_are_ignored_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let s = guarded_server(tmp.path());
    let ids = item_ids();
    let r = s.post(
        "/v1/recommend",
        Some(KEY),
        &json!({"user": "u2", "history": [ids[5], "new-item-1", "new-item-2"], "request_id": "unk"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["unknown_items"], 2);
    assert_eq!(r.json()["history_items"], 1);
}

/// The API key guards everything but health; a bad user id in a path names `user`; an unknown
/// route is 404 and a wrong method 405.
#[test]
fn the_api_key_guards_everything_but_health_and_routes_answer_404_or_405() {
    let tmp = tempfile::tempdir().unwrap();
    let s = guarded_server(tmp.path());
    assert_eq!(s.get("/healthz", None).status, 200);
    assert_eq!(s.get("/readyz", None).status, 200);
    for p in ["/metrics", "/v1/model", "/v1/users/u/budget"] {
        assert_eq!(s.get(p, None).status, 401, "{p}");
        assert_eq!(s.get(p, Some(KEY)).status, 200, "{p}");
    }
    assert_eq!(
        s.get("/v1/users/a%20b/budget", Some(KEY))
            .field()
            .as_deref(),
        Some("user")
    );
    assert_eq!(s.get("/v1/nothing", Some(KEY)).status, 404);
    assert_eq!(s.get("/v1/recommend", Some(KEY)).status, 405);
}

#[test]
fn one_user_with_budget_for_10_gets_exactly_10_of_100_simultaneous_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = Server::start(&args(ledger.to_str().unwrap(), "10", &["--period", "day"]));
    s.wait_ready(Duration::from_secs(30));
    let replies = simultaneous(&[s.addr], 100, "alice");
    let ok = replies.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    eprintln!(
        "one server, embedded ledger: 100 simultaneous requests of one user, budget for 10: {ok} \
         answered, {} refused",
        refused.len()
    );
    assert_eq!(
        (ok, refused.len()),
        (10, 90),
        "{:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for r in &refused {
        assert_eq!(r.json()["error"]["code"], "budget_exhausted");
        let secs: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=86_400).contains(&secs), "{secs}");
    }
    let b = s.get("/v1/users/alice/budget", None).json();
    assert_eq!(
        (b["spent"].as_f64(), b["remaining"].as_f64()),
        (Some(10.0), Some(0.0))
    );
    let m = s.get("/metrics", None).body;
    assert!(
        m.contains("recsel_recommendations_total{outcome=\"charged\"} 10"),
        "{m}"
    );
    assert!(m.contains("recsel_budget_refusals_total 90"), "{m}");
    assert_eq!(s.terminate().code(), Some(0));
    let l = recsel::ledger::SqliteLedger::open_existing(&ledger).unwrap();
    l.verify().unwrap();
    assert_eq!(l.events("alice").unwrap().len(), 10);
}

/// Power of the count above: two servers that do not share a ledger (the deployment mistake
/// docs/serving.md warns about) each grant the whole budget, and the count sees 20.
#[test]
fn two_servers_with_two_ledgers_grant_the_budget_twice_and_the_count_sees_it() {
    let tmp = tempfile::tempdir().unwrap();
    let servers: Vec<Server> = ["a.db", "b.db"]
        .iter()
        .map(|f| Server::start(&args(tmp.path().join(f).to_str().unwrap(), "10", &[])))
        .collect();
    for s in &servers {
        s.wait_ready(Duration::from_secs(30));
    }
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let ok = simultaneous(&addrs, 100, "mallory")
        .iter()
        .filter(|r| r.status == 200)
        .count();
    eprintln!("two servers, two ledgers (the mistake): {ok} answered");
    assert_eq!(ok, 20);
}

#[test]
fn replays_fallbacks_batches_and_the_model_are_served_as_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let fb = item_ids()[7].clone();
    let s = Server::start(&args(
        ledger.to_str().unwrap(),
        "2",
        &[
            "--fallback",
            &format!("item:{fb}"),
            "--insecure-test-seed",
            "5",
        ],
    ));
    s.wait_ready(Duration::from_secs(30));
    assert!(s.log_contains("INSECURE TEST SEED"));
    let first = s.post("/v1/recommend", None, &good("bob", "b1")).json();
    assert_eq!(first["guarantee"], "user-level eps-DP per recommendation");
    assert_eq!(first["candidates"], "all");
    assert_eq!(first["insecure_test_seed"], true);
    assert_eq!(
        (first["charged"].as_f64(), first["remaining"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    // The same id again: the stored item, nothing charged.
    let again = s.post("/v1/recommend", None, &good("bob", "b1")).json();
    assert_eq!(again["item"], first["item"]);
    assert_eq!(again["replayed"], true);
    assert_eq!(
        (again["charged"].as_f64(), again["remaining"].as_f64()),
        (Some(0.0), Some(1.0))
    );
    // Request ids are scoped per user: carol's b1 is her own request, charged to her.
    let other = s.post("/v1/recommend", None, &good("carol", "b1"));
    assert_eq!(other.status, 200, "{}", other.body);
    assert_eq!(
        (
            other.json()["replayed"].as_bool(),
            other.json()["charged"].as_f64()
        ),
        (Some(false), Some(1.0))
    );
    // A batch: bob's last unit, then the fallback, and a bad entry that fails alone.
    let batch = json!({"requests": [good("bob", "b2"), good("bob", "b3"), {"user": 1}]});
    let r = s.post("/v1/recommend/batch", None, &batch);
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json()["responses"].as_array().unwrap().clone();
    assert_eq!(out[0]["status"], 200);
    assert_eq!(out[0]["fallback"], false);
    assert_eq!(out[1]["fallback"], true);
    assert_eq!(out[1]["item"], json!(fb));
    assert_eq!(out[1]["charged"].as_f64(), Some(0.0));
    assert_eq!(out[2]["status"], 400);
    assert_eq!(out[2]["error"]["field"], "requests[2].user");
    let model = s.get("/v1/model", None).json();
    assert_eq!(model["manifest"]["format"], "recsel-release");
    assert_eq!(model["serving"]["mechanism"], "mgem");
    assert_eq!(model["serving"]["fallback"], json!(fb));
    let m = s.get("/metrics", None).body;
    for family in [
        "recsel_request_duration_seconds_bucket",
        "recsel_ledger_commits_total",
        "recsel_ledger_wait_seconds_count",
        "recsel_recommendations_total{outcome=\"fallback\"} 1",
        "recsel_recommendations_total{outcome=\"replayed\"} 1",
    ] {
        assert!(m.contains(family), "{family}\n{m}");
    }
    assert_eq!(s.terminate().code(), Some(0));
}

#[test]
fn sigterm_finishes_the_requests_in_flight_commits_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let s = Server::start(&args(ledger.to_str().unwrap(), "1000", &[]));
    s.wait_ready(Duration::from_secs(30));
    let addr = s.addr;
    let clients: Vec<_> = (0..8)
        .map(|c| {
            std::thread::spawn(move || {
                let mut ok = Vec::new();
                for i in 0..1000 {
                    let rid = format!("t{c}-{i}");
                    match http(
                        addr,
                        "POST",
                        "/v1/recommend",
                        &[],
                        good(&format!("u{c}"), &rid).to_string().as_bytes(),
                    ) {
                        Ok(r) if r.status == 200 => ok.push((rid, r.json()["item"].clone())),
                        Ok(r) if r.status == 503 => break,
                        _ => break,
                    }
                }
                ok
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let status = s.terminate();
    assert_eq!(status.code(), Some(0));
    let l = recsel::ledger::SqliteLedger::open_existing(&ledger).unwrap();
    let mut answered = 0;
    for (c, h) in clients.into_iter().enumerate() {
        for (rid, item) in h.join().unwrap() {
            let e = l
                .event(&format!("u{c}"), &rid)
                .unwrap()
                .unwrap_or_else(|| panic!("{rid} answered, not in the ledger"));
            assert_eq!(json!(e.answer.item()), item);
            answered += 1;
        }
    }
    assert!(answered > 0);
    l.verify().unwrap();
}
