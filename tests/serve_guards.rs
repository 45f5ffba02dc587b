//! `recsel serve` around its core (docs/serving.md, "What the service guarantees"): shutdown with
//! clients that never finish a request, the header, body and idle timeouts, the connection limit
//! and the log of accept errors, the body's media type and length, the Host allow-list, the API
//! key's scheme, the JSON shape of every error, repeated JSON keys, start-up configurations that
//! can never answer, and the minimum response time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::http::{args, good, http, item_ids, signal, Reply, Server};

/// The documented default of `--shutdown-timeout`.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).unwrap()
}

/// What a raw connection received within `wait`, and whether the server closed it by then.
fn drain(s: &mut TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while t.elapsed() < wait {
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// Sends `head` (CRLF line ends added, `Connection: close` and the blank line appended) and
/// `body` as they are, and reads the reply.
fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> Reply {
    let mut s = connect(addr);
    let head = head.replace('\n', "\r\n");
    s.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let _ = s.write_all(body);
    let (bytes, closed) = drain(&mut s, Duration::from_secs(30));
    assert!(closed, "no complete reply to {head:?}");
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Asserts `r` is an error in the documented shape: `{"error": {"status", "code", "message"}}`
/// with the status of the response.
fn assert_error_shape(r: &Reply, what: &str) {
    assert!(r.status >= 400, "{what}: {} {}", r.status, r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("{what}: the error is not JSON ({e}): {:?}", r.body));
    let e = &v["error"];
    assert_eq!(e["status"], r.status, "{what}: {}", r.body);
    assert!(
        e["code"].is_string() && e["message"].is_string(),
        "{what}: {}",
        r.body
    );
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{what}: {:?}",
        r.headers
    );
}

/// Runs `recsel serve ARGS` until it exits or `limit` passes (then kills it: `None`).
pub fn serve_for(a: &[String], limit: Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_recsel"))
        .arg("serve")
        .args(a)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn ledger_arg(dir: &Path) -> String {
    dir.join("ledger.db").to_str().unwrap().to_string()
}

#[test]
fn sigterm_exits_within_the_shutdown_deadline_while_clients_hold_unfinished_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Server::start(&args(&ledger_arg(tmp.path()), "1000", &[]));
    s.wait_ready(Duration::from_secs(30));
    // Half a request head, and a head whose body is shorter than its Content-Length.
    let mut half = connect(s.addr);
    half.write_all(
        format!(
            "POST /v1/recommend HTTP/1.1\r\nHost: {}\r\nContent-Ty",
            s.addr
        )
        .as_bytes(),
    )
    .unwrap();
    let mut short = connect(s.addr);
    short
        .write_all(
            format!(
                "POST /v1/recommend HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
                 Content-Length: 200\r\n\r\n{{\"user\": ",
                s.addr
            )
            .as_bytes(),
        )
        .unwrap();
    // Meanwhile a good request is answered.
    let r = s.post("/v1/recommend", None, &good("u", "r1"));
    assert_eq!(r.status, 200, "{}", r.body);
    std::thread::sleep(Duration::from_millis(300));
    signal(&s.child, libc::SIGTERM);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break Some(st);
        }
        if t.elapsed() > SHUTDOWN_DEADLINE + Duration::from_secs(15) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t.elapsed();
    eprintln!("SIGTERM with a half head and a short body attached: exited after {took:?}");
    let status = status.unwrap_or_else(|| {
        panic!(
            "still running {took:?} after SIGTERM:\n{}",
            s.log.lock().unwrap()
        )
    });
    assert!(
        took <= SHUTDOWN_DEADLINE + Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(status.code(), Some(0));
    assert!(s.log_contains("shutdown deadline"));
    drop((half, short));
}

#[test]
fn a_slow_head_a_short_body_and_idle_connections_are_closed_by_their_timeouts() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start(&args(
        &ledger_arg(tmp.path()),
        "1000",
        &[
            "--header-timeout",
            "0.5",
            "--body-timeout",
            "0.5",
            "--idle-timeout",
            "1",
        ],
    ));
    s.wait_ready(Duration::from_secs(30));
    let t = Instant::now();
    let mut half = connect(s.addr);
    half.write_all(b"POST /v1/recommend HTTP/1.1\r\nHost: localhost\r\nContent-Ty")
        .unwrap();
    let mut short = connect(s.addr);
    short
        .write_all(
            b"POST /v1/recommend HTTP/1.1\r\nHost: localhost\r\nContent-Type: \
              application/json\r\nContent-Length: 200\r\n\r\n{\"user\": ",
        )
        .unwrap();
    let mut idle = connect(s.addr);
    let mut kept = connect(s.addr);
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let wait = Duration::from_secs(6);
    let (_, closed) = drain(&mut half, wait);
    assert!(closed, "a half head still open after {:?}", t.elapsed());
    let (bytes, closed) = drain(&mut short, wait);
    assert!(closed, "a short body still open after {:?}", t.elapsed());
    let r = parse(&bytes);
    assert_eq!(r.status, 408, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "body_timeout");
    let (_, closed) = drain(&mut idle, wait);
    assert!(
        closed,
        "a silent connection still open after {:?}",
        t.elapsed()
    );
    let (bytes, closed) = drain(&mut kept, wait);
    assert!(closed, "an idle kept-alive connection still open");
    assert_eq!(parse(&bytes).status, 200);
    eprintln!("all four closed within {:?}", t.elapsed());
    // The service still answers.
    assert_eq!(
        s.post("/v1/recommend", None, &good("u", "after")).status,
        200
    );
}

#[test]
fn a_connection_beyond_the_limit_is_refused_and_answers_resume_when_slow_clients_time_out() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start(&args(
        &ledger_arg(tmp.path()),
        "1000",
        &[
            "--max-connections",
            "3",
            "--header-timeout",
            "1",
            "--idle-timeout",
            "1",
        ],
    ));
    s.wait_ready(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    let hoard: Vec<TcpStream> = (0..3).map(|_| connect(s.addr)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let body = good("legit", "l1").to_string();
    match http(s.addr, "POST", "/v1/recommend", &[], body.as_bytes()) {
        Ok(r) => {
            assert_eq!(r.status, 503, "{}", r.body);
            assert_eq!(r.json()["error"]["code"], "too_many_connections");
            assert_eq!(r.json()["error"]["limit"], 3);
        }
        Err(e) => eprintln!("the fourth connection was closed: {e}"),
    }
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The hoarders are closed after the idle timeout; a legitimate client is answered.
    std::thread::sleep(Duration::from_millis(1500));
    let r = s.post("/v1/recommend", None, &good("legit", "l2"));
    assert_eq!(r.status, 200, "{}", r.body);
    let m = s.get("/metrics", None).body;
    assert!(m.contains("recsel_connections_refused_total 1"), "{m}");
    drop(hoard);
}

#[test]
fn at_the_descriptor_limit_accept_errors_are_logged_and_answers_resume() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_recsel"));
    // SAFETY: setrlimit(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let s = Server::start_command(cmd, &args(&ledger_arg(tmp.path()), "1000", &[]));
    s.wait_ready(Duration::from_secs(30));
    // More connections than descriptors (fewer than the listen backlog, so connect returns).
    let flood: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(s.addr).ok())
        .collect();
    assert!(
        s.log_contains("accepting a connection failed"),
        "{}",
        s.log.lock().unwrap()
    );
    drop(flood);
    let t = Instant::now();
    let r = loop {
        let body = good("u", "after-flood").to_string();
        match http(s.addr, "POST", "/v1/recommend", &[], body.as_bytes()) {
            Ok(r) if r.status == 200 => break r,
            other if t.elapsed() > Duration::from_secs(10) => panic!("{other:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_eq!(r.json()["replayed"], false);
    let log = s.log.lock().unwrap().clone();
    let lines = log.matches("accepting a connection failed").count();
    eprintln!("accept errors logged in {lines} line(s)");
    assert!(lines <= 3, "not rate-limited:\n{log}");
}

#[test]
fn browser_posts_foreign_hosts_and_bad_requests_are_refused_in_the_json_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start(&args(&ledger_arg(tmp.path()), "1000", &[]));
    s.wait_ready(Duration::from_secs(30));
    let body = good("victim", "p1").to_string();
    // A "simple" POST a browser sends from any page, and other bodies that are not JSON.
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let r = http(
            s.addr,
            "POST",
            "/v1/recommend",
            &[("Content-Type", ct)],
            body.as_bytes(),
        )
        .unwrap();
        assert_eq!(
            (r.status, r.field().as_deref()),
            (415, Some("content-type")),
            "{ct}: {}",
            r.body
        );
    }
    let r = raw(
        s.addr,
        &format!(
            "POST /v1/recommend HTTP/1.1\nHost: {}\nContent-Length: {}",
            s.addr,
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(
        (r.status, r.field().as_deref()),
        (415, Some("content-type"))
    );
    let r = http(
        s.addr,
        "POST",
        "/v1/recommend",
        &[("Content-Encoding", "gzip")],
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(
        (r.status, r.field().as_deref()),
        (415, Some("content-encoding"))
    );
    let b = s.get("/v1/users/victim/budget", None).json();
    assert_eq!(b["spent"].as_f64(), Some(0.0), "{b}");
    let r = http(
        s.addr,
        "POST",
        "/v1/recommend",
        &[("Content-Type", "Application/JSON; charset=utf-8")],
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // DNS rebinding: a page on evil.example resolved to this address names its own host.
    let port = s.addr.port();
    for (method, path, host, status) in [
        (
            "GET",
            "/v1/users/victim/budget",
            format!("evil.example:{port}"),
            403,
        ),
        ("GET", "/v1/model", "evil.example".to_string(), 403),
        ("GET", "/healthz", format!("evil.example:{port}"), 200),
        (
            "GET",
            "/v1/users/victim/budget",
            format!("localhost:{port}"),
            200,
        ),
        (
            "GET",
            "/v1/users/victim/budget",
            format!("127.0.0.1:{port}"),
            200,
        ),
    ] {
        let r = raw(
            s.addr,
            &format!("{method} {path} HTTP/1.1\nHost: {host}"),
            b"",
        );
        assert_eq!(r.status, status, "{method} {path} Host: {host}: {}", r.body);
        if status == 403 {
            assert_eq!(r.json()["error"]["code"], "host_not_allowed");
        }
    }
    let r = raw(
        s.addr,
        &format!(
            "POST /v1/recommend HTTP/1.1\nHost: evil.example\nContent-Type: \
             application/json\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes(),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // Every error has the documented shape, whoever made it.
    for (method, path) in [
        ("TRACE", "/healthz"),
        ("TRACE", "/v1/recommend"),
        ("DELETE", "/v1/model"),
        ("PUT", "/nothing"),
        ("GET", "/v1/users/%FF/budget"),
        ("GET", "/v1/users/a%20b/budget"),
    ] {
        let r = http(s.addr, method, path, &[], b"").unwrap();
        assert_error_shape(&r, &format!("{method} {path}"));
    }
    let r = s.get("/v1/users/%FF/budget", None);
    assert_eq!((r.status, r.field().as_deref()), (400, Some("user")));
    // A Content-Length over the limit is refused before the body is read.
    let mut c = connect(s.addr);
    c.write_all(
        format!(
            "POST /v1/recommend HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000000000000\r\n\r\n{{",
            s.addr
        )
        .as_bytes(),
    )
    .unwrap();
    let t = Instant::now();
    let (bytes, _) = drain(&mut c, Duration::from_secs(5));
    assert!(
        !bytes.is_empty(),
        "no answer to a 10^12-byte Content-Length"
    );
    let r = parse(&bytes);
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.json()["error"]["limit"], 1 << 20);
    assert!(t.elapsed() < Duration::from_secs(3));
    // A repeated key: a proxy may read the first, a parser the last.
    let ids = item_ids();
    let twice = format!(
        "{{\"user\": \"alice\", \"history\": [\"{}\"], \"user\": \"bob\"}}",
        ids[1]
    );
    let r = s.post_raw("/v1/recommend", None, twice.as_bytes());
    assert_eq!(
        (r.status, r.field().as_deref()),
        (400, Some("user")),
        "{}",
        r.body
    );
    assert_eq!(r.json()["error"]["code"], "duplicate_key");
    for u in ["alice", "bob"] {
        let b = s.get(&format!("/v1/users/{u}/budget"), None).json();
        assert_eq!(b["spent"].as_f64(), Some(0.0), "{b}");
    }
}

#[test]
fn the_bearer_scheme_is_case_insensitive_and_a_key_or_an_allow_list_decides_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    let keyf = tmp.path().join("key");
    let key = "0123456789abcdef-key";
    std::fs::write(&keyf, format!("{key}\n")).unwrap();
    let s = Server::start(&args(
        &ledger_arg(tmp.path()),
        "1000",
        &["--api-key-file", keyf.to_str().unwrap()],
    ));
    s.wait_ready(Duration::from_secs(30));
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {key}");
        let r = http(
            s.addr,
            "GET",
            "/v1/users/u/budget",
            &[("Authorization", &auth)],
            b"",
        )
        .unwrap();
        assert_eq!(r.status, 200, "{scheme}: {}", r.body);
    }
    let r = http(
        s.addr,
        "GET",
        "/v1/model",
        &[("Authorization", &format!("Basic {key}"))],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 401);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Bearer"));
    // With a key required, the key guards: a foreign Host with the key is answered.
    let r = raw(
        s.addr,
        &format!("GET /v1/model HTTP/1.1\nHost: api.example\nX-API-Key: {key}"),
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    drop(s);
    // An explicit allow-list holds with or without a key.
    let s = Server::start(&args(
        &ledger_arg(tmp.path()),
        "1000",
        &["--allowed-hosts", "api.example,Other.Example."],
    ));
    s.wait_ready(Duration::from_secs(30));
    for (host, status) in [
        ("api.example", 200),
        ("other.example:443", 200),
        ("127.0.0.1", 403),
        ("localhost", 403),
    ] {
        let r = raw(
            s.addr,
            &format!("GET /v1/model HTTP/1.1\nHost: {host}"),
            b"",
        );
        assert_eq!(r.status, status, "{host}: {}", r.body);
    }
}

#[test]
fn start_up_refuses_a_budget_that_can_never_answer() {
    let tmp = tempfile::tempdir().unwrap();
    for (budget, eps, want) in [
        ("0", "1", vec!["budget", "is 0"]),
        ("0.5", "1", vec!["charges 1 eps", "budget of 0.5 eps"]),
    ] {
        let dir = tmp.path().join(format!("b{budget}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = args(&ledger_arg(&dir), budget, &[]);
        let i = a.iter().position(|x| x == "--eps").unwrap();
        a[i + 1] = eps.into();
        let out = serve_for(&a, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("budget {budget}, eps {eps}: still serving after 60 s"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "budget {budget}: {err}");
        for w in want {
            assert!(err.contains(w), "budget {budget}: no {w:?} in {err}");
        }
    }
}

#[test]
fn with_a_minimum_response_time_charges_replays_and_refusals_take_as_long() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start(&args(
        &ledger_arg(tmp.path()),
        "1",
        &["--min-response-ms", "80"],
    ));
    s.wait_ready(Duration::from_secs(30));
    for (rid, status, what) in [
        ("m1", 200, "charged"),
        ("m1", 200, "replayed"),
        ("m2", 429, "refused"),
    ] {
        let t = Instant::now();
        let r = s.post("/v1/recommend", None, &good("u", rid));
        let took = t.elapsed();
        assert_eq!(r.status, status, "{what}: {}", r.body);
        assert!(took >= Duration::from_millis(80), "{what} took {took:?}");
    }
    let t = Instant::now();
    let r = s.post(
        "/v1/recommend/batch",
        None,
        &serde_json::json!({"requests": [good("u", "m3")]}),
    );
    assert_eq!(r.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(80));
}
