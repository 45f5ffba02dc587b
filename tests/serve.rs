//! `recsel serve` over loopback (docs/serving.md): the binary is started on 127.0.0.1 with a free
//! port, driven by a small HTTP/1.1 client, and stopped. Bad input, the API key, budgets under
//! concurrency, replays, fallbacks, batches, metrics and graceful shutdown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use recsel::ledger::{Ledger as _, LedgerLog as _};
use serde_json::{json, Value};

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The error body's `field`.
    pub fn field(&self) -> Option<String> {
        self.json()["error"]["field"].as_str().map(str::to_string)
    }
}

/// One request on a fresh connection (`Connection: close`).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    // The server may answer (413) before it has read a large body; keep what it said.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        }
    }
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> std::io::Result<Reply> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&raw[end + 4..]).into_owned(),
    })
}

/// The example release (synthetic data, 1,500 items), written once per test process.
pub fn model_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Kept for the whole test process (a static is never dropped), under the target dir.
        let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let dir = t.join("model");
        recsel::recommend::example_release(&dir).unwrap();
        dir
    })
}

/// Item ids of the example release (its manifest).
pub fn item_ids() -> &'static [String] {
    static IDS: OnceLock<Vec<String>> = OnceLock::new();
    IDS.get_or_init(|| {
        recsel::recommend::release::Release::read(model_dir())
            .unwrap()
            .manifest
            .item_ids
    })
}

/// A running `recsel serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `recsel serve` with `args` on 127.0.0.1, a free port, and returns once it listens
    /// (not necessarily ready).
    pub fn start(args: &[String]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_recsel"))
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting recsel serve");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::new(Mutex::new(String::new()));
        let mut line = String::new();
        let addr = loop {
            line.clear();
            if err.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                panic!(
                    "recsel serve exited before listening:\n{}",
                    log.lock().unwrap()
                );
            }
            log.lock().unwrap().push_str(&line);
            if let Some(a) = line
                .trim()
                .strip_prefix("recsel serve: listening on http://")
            {
                break a.parse().unwrap();
            }
        };
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut line = String::new();
            while err.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Server { child, addr, log }
    }

    /// Waits until `/readyz` answers 200; returns how long that took.
    pub fn wait_ready(&self, timeout: Duration) -> Duration {
        let t = Instant::now();
        while t.elapsed() < timeout {
            if let Ok(r) = http(self.addr, "GET", "/readyz", &[], b"") {
                if r.status == 200 {
                    return t.elapsed();
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "not ready within {timeout:?}:\n{}",
            self.log.lock().unwrap()
        );
    }

    /// Waits until the server's stderr holds `needle` (it is read by another thread).
    pub fn log_contains(&self, needle: &str) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if self.log.lock().unwrap().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    pub fn post(&self, path: &str, key: Option<&str>, body: &Value) -> Reply {
        self.post_raw(path, key, body.to_string().as_bytes())
    }

    pub fn post_raw(&self, path: &str, key: Option<&str>, body: &[u8]) -> Reply {
        let auth = key.map(|k| format!("Bearer {k}"));
        let headers: Vec<(&str, &str)> = auth
            .as_deref()
            .map(|a| vec![("Authorization", a)])
            .unwrap_or_default();
        http(self.addr, "POST", path, &headers, body).unwrap()
    }

    pub fn get(&self, path: &str, key: Option<&str>) -> Reply {
        let auth = key.map(|k| format!("Bearer {k}"));
        let headers: Vec<(&str, &str)> = auth
            .as_deref()
            .map(|a| vec![("Authorization", a)])
            .unwrap_or_default();
        http(self.addr, "GET", path, &headers, b"").unwrap()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        signal(&self.child, libc::SIGTERM);
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }

    /// SIGKILL, no goodbye.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the id of a child this test started and has not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// The common arguments: the example model, `ledger`, budget, mgem at ε = 1.
pub fn args(ledger: &str, budget: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--model",
        model_dir().to_str().unwrap(),
        "--ledger",
        ledger,
        "--budget",
        budget,
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--threads",
        "2",
        "--create-ledger",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

pub fn good(user: &str, rid: &str) -> Value {
    let ids = item_ids();
    json!({"user": user, "history": [ids[3], ids[17], ids[42]], "request_id": rid})
}

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

#[test]
fn bad_input_gets_the_right_4xx_naming_the_field_and_the_next_good_request_is_served() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let keyf = key_file(tmp.path());
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
    // Unknown items among known ones are ignored and counted.
    let r = s.post(
        "/v1/recommend",
        Some(KEY),
        &json!({"user": "u2", "history": [ids[5], "new-item-1", "new-item-2"], "request_id": "unk"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["unknown_items"], 2);
    assert_eq!(r.json()["history_items"], 1);
    // The key guards everything but health.
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

/// `n` requests for `user` with distinct ids, all sent at once (after a barrier), spread over
/// `servers` in turn.
pub fn simultaneous(servers: &[SocketAddr], n: usize, user: &str) -> Vec<Reply> {
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let addr = servers[i % servers.len()];
            let body = good(user, &format!("{user}-{i}")).to_string();
            std::thread::spawn(move || {
                barrier.wait();
                http(addr, "POST", "/v1/recommend", &[], body.as_bytes()).unwrap()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
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
    // Another user may not reuse the id.
    let other = s.post("/v1/recommend", None, &good("carol", "b1"));
    assert_eq!(
        (other.status, other.field().as_deref()),
        (409, Some("request_id"))
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
    for c in clients {
        for (rid, item) in c.join().unwrap() {
            let e = l
                .event(&rid)
                .unwrap()
                .unwrap_or_else(|| panic!("{rid} answered, not in the ledger"));
            assert_eq!(json!(e.answer.item()), item);
            answered += 1;
        }
    }
    assert!(answered > 0);
    l.verify().unwrap();
}
