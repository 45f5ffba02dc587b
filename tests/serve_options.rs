//! `recsel serve` options: a policy that is not user-level needs `--allow-non-private` and is
//! announced in every response; a TOML file fills in the same `ServeOptions` as the flags (the
//! same keys, mechanism parameters beside the others).

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::util::http::{args, good, item_ids, model_dir, Server};

#[test]
fn a_policy_that_is_not_user_level_needs_allow_non_private_and_says_so_in_every_response() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.db");
    let out = Command::new(env!("CARGO_BIN_EXE_recsel"))
        .arg("serve")
        .args(args(
            ledger.to_str().unwrap(),
            "10",
            &["--candidates", "history-top:100"],
        ))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-non-private"), "{err}");
    let s = Server::start(&args(
        ledger.to_str().unwrap(),
        "10",
        &["--candidates", "history-top:100", "--allow-non-private"],
    ));
    s.wait_ready(Duration::from_secs(30));
    assert!(s.log_contains("WARNING: NOT user-level"));
    let r = s.post("/v1/recommend", None, &good("dave", "d1")).json();
    assert!(
        r["guarantee"]
            .as_str()
            .unwrap()
            .starts_with("NOT user-level"),
        "{r}"
    );
    assert_eq!(r["candidates"], "history-top:100");
}

#[test]
fn a_toml_file_fills_in_the_same_options_as_the_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("serve.toml");
    let ledger = tmp.path().join("ledger.db");
    std::fs::write(
        &config,
        format!(
            "model = {:?}\nledger = {:?}\nbudget = \"4\"\nperiod = \"week\"\nmechanism = \"gem\"\n\
             epsilon = 0.5\nbeta = 0.1\nmax_history = 3\ncreate_ledger = true\n",
            model_dir().to_str().unwrap(),
            ledger.to_str().unwrap()
        ),
    )
    .unwrap();
    let s = Server::start(&["--config".into(), config.to_str().unwrap().into()]);
    s.wait_ready(Duration::from_secs(30));
    let serving = s.get("/v1/model", None).json()["serving"].clone();
    assert_eq!(serving["mechanism"], "gem");
    assert_eq!(
        (serving["budget"].as_f64(), serving["period"].as_str()),
        (Some(4.0), Some("week"))
    );
    assert!(serving["epsilon"].as_f64().unwrap() >= 0.5);
    let ids = item_ids();
    let r = s.post(
        "/v1/recommend",
        None,
        &json!({"user": "g", "history": [ids[1], ids[2], ids[3], ids[4]]}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["limit"].as_u64()),
        (400, Some(3))
    );
    // An unknown key in the file is an error that names it (a misspelt option, or a table the
    // options do not have).
    for bad in ["epsilom = 1\n", "[params]\nepsilon = 1\n"] {
        std::fs::write(
            &config,
            format!("model = 'm'\nledger = 'l'\nbudget = '1'\nmechanism = 'gem'\n{bad}"),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_recsel"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let key = if bad.starts_with('[') {
            "`params`"
        } else {
            "`epsilom`"
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{err}");
    }
}
