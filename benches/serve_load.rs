//! Load generator for `recsel serve` on loopback (docs/serving.md, "Capacity"); driven by
//! `benches/serve.sh`.
//!
//! ```text
//! cargo bench --bench serve_load -- users --shape netflix --n 20000 --out users.jsonl
//! cargo bench --bench serve_load -- load --addr 127.0.0.1:8080 --users users.jsonl \
//!     --clients 32 --seconds 30
//! ```
//!
//! `users` writes test users' input histories of the generated data set (split seed 42, as
//! `recsel fit` uses) as JSON lines `{"user": ..., "items": [...]}` — the users file of
//! `recsel recommend --users` too. `load` runs `--clients` closed-loop clients, each on one
//! keep-alive connection, for `--seconds` (and at most `--max-requests` in all), each request a
//! user of the file in turn with a fresh request id, and prints requests per second, the status
//! counts and the latency percentiles p50/p90/p95/p99/max. It refuses any address that is not
//! loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`; the first word that is a mode chooses it.
    match args
        .iter()
        .find(|a| *a == "users" || *a == "load")
        .map(String::as_str)
    {
        Some("users") => users(&args),
        Some("load") => load(&args),
        _ => eprintln!("serve_load: give `users ...` or `load ...` (see benches/serve_load.rs)"),
    }
}

fn users(args: &[String]) {
    use recsel::data::synthetic::SyntheticShape;
    use recsel::data::{load_dataset, DataSource, NamedDataset};
    let shape = SyntheticShape::parse(&arg(args, "--shape").unwrap_or_else(|| "netflix".into()))
        .expect("--shape");
    let n: usize = arg(args, "--n").map_or(20_000, |s| s.parse().expect("--n"));
    let out = arg(args, "--out").expect("--out FILE");
    let t = Instant::now();
    let data = load_dataset(
        &DataSource::Named {
            dataset: NamedDataset::Synthetic(shape),
            data_dir: "data".into(),
        },
        42,
    )
    .expect("generating the data");
    let mut text = String::new();
    let rows = data.test_input.rows();
    let mut written = 0;
    for u in 0..rows {
        if written == n {
            break;
        }
        let r = data.test_input.outer_view(u).unwrap();
        if r.nnz() == 0 {
            continue;
        }
        let items: Vec<&str> = r
            .indices()
            .iter()
            .map(|&j| data.item_ids[j as usize].as_str())
            .collect();
        text.push_str(
            &serde_json::json!({"user": data.test_user_ids[u], "items": items}).to_string(),
        );
        text.push('\n');
        written += 1;
    }
    std::fs::write(&out, text).expect("writing the users file");
    eprintln!(
        "serve_load: {written} users of {} ({} test users) written to {out} in {:.1} s",
        data.name(),
        rows,
        t.elapsed().as_secs_f64()
    );
}

/// Reads one HTTP/1.1 response with a Content-Length body; returns its status.
fn read_response(r: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let mut len = 0usize;
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v
                    .trim()
                    .parse()
                    .map_err(|_| std::io::ErrorKind::InvalidData)?;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(status)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i] as f64 / 1e3
}

fn load(args: &[String]) {
    let addr: SocketAddr = arg(args, "--addr")
        .expect("--addr HOST:PORT")
        .parse()
        .expect("--addr");
    assert!(
        addr.ip().is_loopback(),
        "serve_load runs against loopback only"
    );
    let clients: usize = arg(args, "--clients").map_or(32, |s| s.parse().unwrap());
    let seconds: f64 = arg(args, "--seconds").map_or(30.0, |s| s.parse().unwrap());
    let max_requests: u64 = arg(args, "--max-requests").map_or(1_000_000, |s| s.parse().unwrap());
    let key =
        arg(args, "--key-file").map(|p| std::fs::read_to_string(p).unwrap().trim().to_string());
    let label = arg(args, "--label").unwrap_or_default();
    let text = std::fs::read_to_string(arg(args, "--users").expect("--users FILE")).unwrap();
    let bodies: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["user"].as_str().unwrap().to_string(),
                v["items"].to_string(),
            )
        })
        .collect();
    let bodies = Arc::new(bodies);
    let run = format!("{:08x}", rand::random::<u32>());
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (bodies, stop, issued, key, run) = (
                Arc::clone(&bodies),
                Arc::clone(&stop),
                Arc::clone(&issued),
                key.clone(),
                run.clone(),
            );
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let mut statuses = std::collections::BTreeMap::<u16, u64>::new();
                let mut errors = 0u64;
                let mut conn: Option<(TcpStream, BufReader<TcpStream>)> = None;
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    if issued.fetch_add(1, Ordering::Relaxed) >= max_requests {
                        break;
                    }
                    let (user, items) = &bodies[i % bodies.len()];
                    i += clients;
                    let body = format!(
                        "{{\"user\": \"{user}\", \"history\": {items}, \"request_id\": \"{run}-{c}-{i}\"}}"
                    );
                    let mut req = format!(
                        "POST /v1/recommend HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                        body.len()
                    );
                    if let Some(k) = &key {
                        req.push_str(&format!("Authorization: Bearer {k}\r\n"));
                    }
                    req.push_str("\r\n");
                    req.push_str(&body);
                    if conn.is_none() {
                        match TcpStream::connect(addr) {
                            Ok(s) => {
                                let _ = s.set_nodelay(true);
                                let r = BufReader::new(s.try_clone().unwrap());
                                conn = Some((s, r));
                            }
                            Err(_) => {
                                errors += 1;
                                std::thread::sleep(Duration::from_millis(10));
                                continue;
                            }
                        }
                    }
                    let (s, r) = conn.as_mut().unwrap();
                    let t = Instant::now();
                    let res = s.write_all(req.as_bytes()).and_then(|_| read_response(r));
                    match res {
                        Ok(st) => {
                            lat.push(t.elapsed().as_micros() as u64);
                            *statuses.entry(st).or_default() += 1;
                        }
                        Err(_) => {
                            errors += 1;
                            conn = None;
                        }
                    }
                }
                (lat, statuses, errors)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    let mut statuses = std::collections::BTreeMap::<u16, u64>::new();
    let mut errors = 0;
    for h in handles {
        let (l, s, e) = h.join().unwrap();
        lat.extend(l);
        for (k, v) in s {
            *statuses.entry(k).or_default() += v;
        }
        errors += e;
    }
    let wall = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    let ok = statuses.get(&200).copied().unwrap_or(0);
    println!(
        "{label} clients={clients} seconds={wall:.1} requests={} ok={ok} rps={:.1} \
         p50_ms={:.2} p90_ms={:.2} p95_ms={:.2} p99_ms={:.2} max_ms={:.2} statuses={statuses:?} \
         errors={errors}",
        lat.len(),
        ok as f64 / wall,
        percentile(&lat, 50.0),
        percentile(&lat, 90.0),
        percentile(&lat, 95.0),
        percentile(&lat, 99.0),
        lat.last().map_or(f64::NAN, |&m| m as f64 / 1e3),
    );
}
