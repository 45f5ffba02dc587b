//! The real binary on real arguments (docs/ARCHITECTURE.md, after ripgrep's CLI tests).

use crate::util::recsel;
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `recsel mechanisms` prints one row per registry entry — the selection mechanisms in registry
/// order, then the audit references under their own heading — with the name, the guarantee and the
/// description as whole columns (not substrings: "em" is inside "gem", "rs" inside "rs-tnb"), and
/// `--json` the same entries field by field.
#[test]
fn mechanisms_lists_the_registry() {
    use recsel::mechanisms::REGISTRY;
    let o = recsel(&["mechanisms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    // Column starts from the header: name, guarantee, parameters (defaults), description.
    let start = |title: &str| {
        header
            .find(title)
            .unwrap_or_else(|| panic!("no column {title:?} in {header:?}"))
    };
    let cols = [
        start("name"),
        start("guarantee"),
        start("parameters"),
        start("description"),
    ];
    assert_eq!(cols[0], 0, "{header}");
    let cell = |row: &str, c: usize| -> String {
        let end = cols.get(c + 1).copied().unwrap_or(row.len());
        row.get(cols[c]..end.min(row.len()))
            .unwrap_or_else(|| panic!("row {row:?} is shorter than column {c}"))
            .trim()
            .to_string()
    };
    // The first block of rows, then the block after the "Audit references" heading.
    let mut rows: Vec<&str> = lines
        .by_ref()
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let heading = lines.next().unwrap_or_default();
    assert!(heading.starts_with("Audit references"), "{heading:?}");
    rows.extend(lines.take_while(|l| !l.trim().is_empty()));
    let listed: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (cell(r, 0), cell(r, 1), cell(r, 3)))
        .collect();
    let want: Vec<(String, String, String)> = REGISTRY
        .iter()
        .filter(|s| !s.audit_reference)
        .chain(REGISTRY.iter().filter(|s| s.audit_reference))
        .map(|s| (s.name.into(), s.guarantee.into(), s.summary.into()))
        .collect();
    assert_eq!(
        listed, want,
        "(name, guarantee, description) columns vs the registry"
    );
    let o = recsel(&["mechanisms", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = v.as_array().unwrap();
    assert_eq!(entries.len(), REGISTRY.len());
    for (e, spec) in entries.iter().zip(REGISTRY) {
        assert_eq!(e["name"], spec.name);
        assert_eq!(e["guarantee"], spec.guarantee, "{}", spec.name);
        assert_eq!(e["private"], spec.private, "{}", spec.name);
        assert_eq!(e["audit_reference"], spec.audit_reference, "{}", spec.name);
        assert_eq!(
            e["parameters"].as_array().unwrap().len(),
            spec.params.len(),
            "{}",
            spec.name
        );
    }
}

#[test]
fn sample_json_is_one_object_and_reproducible() {
    let args = [
        "sample",
        "--mech",
        "mgem",
        "--eps",
        "1",
        "--scores",
        "1,0.5,-0.25",
        "--sens",
        "1,2,0.5",
        "--n",
        "20000",
        "--seed",
        "3",
        "--json",
    ];
    let o = recsel(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["counts", "epsilon", "mechanism", "n", "private"]);
    assert_eq!(v["mechanism"], "mgem");
    assert_eq!(v["n"], 20000);
    assert_eq!(v["private"], true);
    let counts: Vec<u64> = serde_json::from_value(v["counts"].clone()).unwrap();
    assert_eq!(counts.iter().sum::<u64>(), 20000);
    // Same seed, 1 and 3 threads named explicitly (the default may be 1 on a 1-core runner):
    // identical output, equal to the default's.
    let with_threads = |n: &'static str| {
        let mut a = vec!["--threads", n];
        a.extend_from_slice(&args);
        let o = recsel(&a);
        assert!(o.status.success(), "--threads {n}: {}", stderr(&o));
        stdout(&o)
    };
    let (one, three) = (with_threads("1"), with_threads("3"));
    assert_eq!(one, three, "--threads 1 vs --threads 3");
    assert_eq!(one, text, "--threads 1 vs the default");
    // Power: another seed gives other counts, so the equality above is not vacuous.
    let mut other = args.to_vec();
    let seed_at = other.len() - 2;
    other[seed_at] = "4";
    assert_ne!(stdout(&recsel(&other)), text, "seed 4 vs seed 3");
    let o = recsel(&[
        "sample", "--mech", "rnmh", "--eps", "1", "--scores", "1,2", "--sens", "1,1", "--n", "10",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["private"], false);
}

#[test]
fn bad_input_fails_with_a_named_value() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "sample", "--mech", "foo", "--eps", "1", "--scores", "1", "--sens", "1", "--n", "1",
            ],
            "unknown mechanism 'foo'; valid names: rnm,",
        ),
        (
            &[
                "sample", "--mech", "rnm", "--eps", "-1", "--scores", "1", "--sens", "1", "--n",
                "1",
            ],
            "epsilon must be finite and > 0, got -1",
        ),
        (
            &[
                "sample", "--mech", "rnm", "--eps", "1", "--scores", "1,2", "--sens", "1", "--n",
                "1",
            ],
            "differ in length: 2 scores, 1 sensitivities",
        ),
        (
            &[
                "sample", "--mech", "rnm", "--eps", "1", "--scores", "1,2", "--sens", "1,0", "--n",
                "1",
            ],
            "sensitivity of candidate 1 must be finite and > 0, got 0",
        ),
        (
            &[
                "sample", "--mech", "rs", "--gamma", "0", "--eps", "1", "--scores", "1", "--sens",
                "1", "--n", "1",
            ],
            "gamma must be in (0, 1], got 0",
        ),
        (
            &[
                "sample", "--mech", "rnm", "--eps", "1", "--scores", "1", "--sens", "1", "--n", "0",
            ],
            "--n must be at least 1",
        ),
    ];
    for (args, want) in cases {
        let o = recsel(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    // A value the option's own parser refuses is a usage error (exit 2) naming the flag.
    let o = recsel(&[
        "sample", "--mech", "rnm", "--eps", "1", "--scores", "1,x", "--sens", "1,1", "--n", "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("--scores") && err.contains("item 2 is 'x', not a number"),
        "{err}"
    );
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    let o = recsel(&["--help"]);
    let text = stdout(&o);
    let subcommands: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues on a line indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|s| s != "help")
        .collect();
    assert!(subcommands.len() >= 2, "{text}");
    for sub in subcommands {
        let o = recsel(&[&sub, "--help"]);
        assert!(o.status.success());
        assert!(
            stdout(&o).contains("Example"),
            "`recsel {sub} --help` has no example"
        );
    }
}

#[test]
fn audit_reports_verdicts_and_exit_codes() {
    let o = recsel(&[
        "audit",
        "--mech",
        "rnmh,rnm",
        "--eps",
        "1",
        "--samples",
        "20000",
        "--seed",
        "1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["mechanism"], "rnmh");
    assert_eq!(v[0]["verdict"], "flagged (not private)");
    assert_eq!(v[1]["verdict"], "consistent");
    assert!(stderr(&o).contains("samples/s"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    std::fs::write(
        &path,
        r#"[{"label":"far","sens":[1,1],"q":[0,0],"q2":[0,5]}]"#,
    )
    .unwrap();
    let o = recsel(&[
        "audit",
        "--mech",
        "rnm",
        "--eps",
        "1",
        "--pairs",
        path.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("pair 1") && stderr(&o).contains("moves by 5"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn select_runs_end_to_end_on_synthetic_data_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sel");
    let args = [
        "select",
        "--dataset",
        "synthetic",
        "--mech",
        "rnm,gem,mgem,cgem,random",
        "--eps",
        "0.1,1",
        "--trials",
        "3",
        "--top",
        "50",
        "--seed",
        "4",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = recsel(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mse"].as_array().unwrap().len(), 10);
    assert!(v["spearman"]["share_positive"].as_f64().unwrap() > 0.5);
    assert!(stderr(&o).contains("no saved model"), "{}", stderr(&o));
    for f in [
        "mse.csv",
        "mse.parquet",
        "users.csv",
        "users.parquet",
        "config.json",
        "config.toml",
        "fig13_spearman.png",
        "fig13_logratio.png",
        "fig13_mse.png",
        "fig21_cgem.png",
        "model/model.json",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    // The same command again: the saved model is reused, every chunk is read back, same tables.
    let again = recsel(&args);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("using the saved model"),
        "{}",
        stderr(&again)
    );
    let w: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["mse"], w["mse"]);
    // Another configuration into the same folder is refused without --force.
    let mut other = args.to_vec();
    other[10] = "4";
    let o = recsel(&other);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("different configuration"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn pipelines_check_including_select_tables() {
    let root = env!("CARGO_MANIFEST_DIR");
    for f in std::fs::read_dir(format!("{root}/pipelines")).unwrap() {
        let path = f.unwrap().path();
        let o = recsel(&["run", path.to_str().unwrap(), "--check"]);
        // --check also checks that the data can be read: the paper-scale data sets are not in the
        // repository, and for those the only acceptable failure is the message saying where to
        // put them.
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let needs_download = [
            "fig13_ml20m.toml",
            "fig13_netflix.toml",
            "fig13_amazon_book.toml",
        ]
        .contains(&name.as_str());
        if needs_download {
            assert!(
                o.status.success() || stderr(&o).contains("dataset not found"),
                "{}: {}",
                path.display(),
                stderr(&o)
            );
        } else {
            assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "figure = \"x\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\ntrials = 0\ntop = \"many\"\n").unwrap();
    let o = recsel(&["run", bad.to_str().unwrap(), "--check"]);
    assert_eq!(o.status.code(), Some(1));
    std::fs::write(
        &bad,
        "figure = \"x\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\ntrails = 5\n",
    )
    .unwrap();
    let o = recsel(&["run", bad.to_str().unwrap(), "--check"]);
    assert!(
        stderr(&o).contains("unknown key `trails`"),
        "{}",
        stderr(&o)
    );
}

/// `recsel export` writes the split `fit` would use as LightGCN files, which `fit --format
/// lightgcn` reads back with the same test users.
#[test]
fn export_writes_lightgcn_files_fit_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("small");
    let o = recsel(&[
        "export",
        "--dataset",
        "synthetic",
        "--shape",
        "small",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(out.join("train.txt").is_file() && out.join("test.txt").is_file());
    let o = recsel(&[
        "fit",
        "--format",
        "lightgcn",
        "--path",
        out.to_str().unwrap(),
        "--method",
        "popular",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let f: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(f["users"], e["test_users"]);
    assert_eq!(f["train_users"], e["users"]);
    assert_eq!(f["train_interactions"], e["train_interactions"]);
}
