//! The README's serving path runs as written: its `sh` block (fit → tune → recommend → serve →
//! one request) is read from README.md and run line by line in an empty temporary directory on
//! the generated synthetic data. `recsel` lines run the binary with the README's arguments;
//! `serve` gets `--listen 127.0.0.1:0` on top (a free loopback port instead of 8080), and the
//! `curl` line's body is posted to it; the server is then stopped with SIGTERM.

use std::path::Path;
use std::time::Duration;

use crate::util::http::{http, Server};

/// The README's serving block: the fenced `sh` block that starts with `recsel fit`.
fn serving_block() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut blocks = readme.split("```sh\n").skip(1);
    let block = blocks
        .find(|b| b.starts_with("recsel fit --dataset synthetic"))
        .expect("README.md shows the serving path in a ```sh block that starts with recsel fit");
    let block = &block[..block.find("```").expect("the block ends")];
    block.lines().map(str::to_string).collect()
}

/// The words of a command line (the README's lines quote only the curl body, in '…').
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('\'') {
            let end = r.find('\'').expect("a closing quote");
            out.push(r[..end].to_string());
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    out
}

#[test]
fn the_readme_serving_path_runs_on_synthetic_data_from_an_empty_directory() {
    let lines = serving_block();
    let kinds: Vec<String> = lines
        .iter()
        .map(|l| words(l).into_iter().take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        kinds,
        [
            "recsel fit",
            "recsel tune",
            "recsel recommend",
            "recsel ledger",
            "recsel serve",
            "curl -s"
        ],
        "the README's serving block changed: {lines:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut server: Option<Server> = None;
    for line in &lines {
        let w = words(line);
        match w[0].as_str() {
            "recsel" if w[1] == "serve" => {
                let mut args: Vec<String> = w[2..].to_vec();
                args.extend(["--threads".into(), "2".into()]);
                let s = Server::start_in(dir, &args);
                s.wait_ready(Duration::from_secs(120));
                assert!(
                    s.log_contains("calibration hit@1"),
                    "serve did not say what its configuration is worth:\n{}",
                    s.log.lock().unwrap()
                );
                server = Some(s);
            }
            "recsel" => {
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
                    .args(&w[1..])
                    .current_dir(dir)
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "`{line}` failed:\n{err}");
                if w[1] == "recommend" {
                    assert!(
                        (err.contains("worth: mgem over") || err.contains("WARNING: mgem over"))
                            && err.contains("[tuned]"),
                        "recommend --mech mgem did not serve and price its tuned row:\n{err}"
                    );
                    let item = String::from_utf8_lossy(&out.stdout).trim().to_string();
                    assert!(!item.is_empty(), "no item recommended");
                }
            }
            "curl" => {
                let s = server.as_ref().expect("serve runs before the request");
                let body = &w[w.iter().position(|a| a == "-d").unwrap() + 1];
                let path = w
                    .iter()
                    .find_map(|a| a.strip_prefix("localhost:8080"))
                    .expect("the request goes to the served port");
                // The headers the line sends (`-H 'Name: value'`); without them the service
                // refuses the body as a browser's form post.
                let headers: Vec<(&str, &str)> = w
                    .windows(2)
                    .filter(|p| p[0] == "-H")
                    .filter_map(|p| p[1].split_once(": "))
                    .collect();
                assert!(
                    headers.contains(&("Content-Type", "application/json")),
                    "the README's request must say it is JSON: {line}"
                );
                let r = http(s.addr, "POST", path, &headers, body.as_bytes()).unwrap();
                assert_eq!(r.status, 200, "{}", r.body);
                assert!(r.json()["item"].is_string(), "{}", r.body);
                // The service says what its configuration is worth, as the log did.
                let m = http(s.addr, "GET", "/v1/model", &[], b"").unwrap().json();
                let worth = &m["serving"]["worth"];
                assert_eq!(worth["standing"], "tuned", "{m}");
                assert!(worth["hit"]["mean"].is_f64() && worth["free"]["mean"].is_f64());
                let text = m["serving"]["worth_text"].as_str().unwrap();
                assert!(s.log_contains(text), "{text}");
            }
            other => panic!("the serving block runs only recsel and curl, found {other}"),
        }
    }
    let status = server.expect("serve ran").terminate();
    assert!(status.success(), "serve exited with {status}");
    assert!(dir.join("models/synth/tuning.json").exists());
}
