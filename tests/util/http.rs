//! The HTTP harness of the `recsel serve` tests (serve, serve_faults, serve_options,
//! serve_postgres, priors): a small HTTP/1.1 client, the example release, and a `recsel serve`
//! child process on 127.0.0.1 with a free port, killed when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
    // A POST is JSON unless the caller says otherwise.
    if method == "POST"
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
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
    /// Starts `recsel serve` with `args` on 127.0.0.1, a free port, and returns once it is bound
    /// (not necessarily ready).
    pub fn start(args: &[String]) -> Server {
        Self::start_command(Command::new(env!("CARGO_BIN_EXE_recsel")), args)
    }

    /// [`Server::start`] with `dir` as the working directory.
    pub fn start_in(dir: &Path, args: &[String]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_recsel"));
        cmd.current_dir(dir);
        Self::start_command(cmd, args)
    }

    /// [`Server::start`] with `cmd` (the binary, perhaps with limits set before it runs).
    pub fn start_command(mut cmd: Command, args: &[String]) -> Server {
        let mut child = cmd
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
            // The address is printed once bound ("bound to"), before the model and the ledger
            // are loaded; "listening on" follows only once ready.
            if let Some(a) = line.trim().strip_prefix("recsel serve: bound to http://") {
                break a.split(';').next().unwrap().parse().unwrap();
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

/// A history key file (mode 0600) for ledgers that have no file to sit beside (PostgreSQL),
/// written once per test process: every replica of a test passes the same one.
pub fn history_key_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        let p = dir.join("history-key");
        recsel::ledger::HistoryKey::create(&p).unwrap();
        p
    })
}

/// The common arguments: the example model, `ledger`, budget, mgem at ε = 1 (and for a
/// PostgreSQL ledger the test process's history key file).
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
    if ledger.starts_with("postgres") {
        a.push("--history-key-file".into());
        a.push(history_key_file().to_str().unwrap().into());
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

pub fn good(user: &str, rid: &str) -> Value {
    let ids = item_ids();
    json!({"user": user, "history": [ids[3], ids[17], ids[42]], "request_id": rid})
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
