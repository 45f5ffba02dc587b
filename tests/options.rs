//! Options declared once reach every front end: each option of `SelectOptions` is a flag of
//! `recsel select`, a key of the `[select]` table, a key of the rerun table in a run's
//! `config.toml` and (through the same declarations, `recsel._native.select_options()`) a Python
//! keyword; each option of `RecommendOptions` is a flag of `recsel recommend`, a key of its table
//! and a keyword of the Python `Recommender`; the options the service shares with it are the
//! same declarations; a key that is none of these is an error naming it; and `docs/cli.md` is
//! what the binary prints.

use std::path::{Path, PathBuf};

use crate::util::recsel;
use recsel::experiments::pipeline::Pipeline;
use recsel::experiments::select::SelectOptions;
use recsel::mechanisms::{MechValues, Registry};
use recsel::options::{Kind, OptionSpec, OptionTable};
use recsel::recommend::RecommendOptions;
#[cfg(feature = "serve")]
use recsel::serve::ServeOptions;

/// A valid value of `spec` as text: a choice, the default, or the first of a few candidates of
/// its kind that its check accepts.
fn sample(spec: &OptionSpec) -> String {
    let kind: &[&str] = match spec.kind {
        Kind::Flag => &["true"],
        Kind::Count => &["3"],
        Kind::Real => &["0.5"],
        Kind::Reals => &["0.5,2"],
        Kind::Path => &["some/dir"],
        Kind::Text => &["none", "4", "x", "all", "0.1"],
    };
    let default = spec.default.clone();
    spec.choices
        .iter()
        .map(|c| c.to_string())
        .chain(default)
        .chain(kind.iter().map(|c| c.to_string()))
        .find(|t| (spec.check)(t).is_ok())
        .unwrap_or_else(|| panic!("no valid sample for {}", spec.key))
}

/// The options of `specs` whose flag `help` does not show.
fn missing_flags<'a>(specs: &'a [OptionSpec], help: &str) -> Vec<&'a str> {
    specs
        .iter()
        .filter(|s| {
            !help.contains(&format!("--{} ", s.flag)) && !help.contains(&format!("--{}\n", s.flag))
        })
        .map(|s| s.key)
        .collect()
}

/// A table of `T` with the option `spec` set from text, as the command line and Python set it,
/// and its TOML text: the option is a key of the serialised table, which reads back to the same
/// options.
fn set_and_round_trip<T>(spec: &OptionSpec) -> (T, String)
where
    T: OptionTable + Default + PartialEq + std::fmt::Debug + serde::Serialize,
    T: serde::de::DeserializeOwned,
{
    let mut o = T::default();
    assert!(
        o.set(spec.key, &sample(spec)).unwrap(),
        "{} not settable",
        spec.key
    );
    let table = toml::to_string(&o).unwrap();
    assert!(
        table.contains(&format!("{} = ", spec.key)),
        "{}: {table}",
        spec.key
    );
    assert_eq!(toml::from_str::<T>(&table).unwrap(), o, "{}", spec.key);
    (o, table)
}

#[test]
fn every_select_option_is_a_flag_a_table_key_and_a_python_keyword() {
    let specs = SelectOptions::options();
    // The mechanism parameters are options of the job too, taken in from the registry.
    for p in Registry::builtin().params() {
        assert!(
            specs.iter().any(|s| s.key == p.name),
            "{} is not an option",
            p.name
        );
    }
    // Command line: `recsel select --help` shows every flag.
    let help = String::from_utf8(recsel(&["select", "--help"]).stdout).unwrap();
    let shown: Vec<OptionSpec> = specs.iter().filter(|s| !s.hidden).cloned().collect();
    assert_eq!(missing_flags(&shown, &help), Vec::<&str>::new(), "{help}");
    // The check has power: an option the command line lacks is reported.
    let mut fake = specs[0].clone();
    (fake.key, fake.flag) = ("not_an_option", "not-an-option");
    assert_eq!(missing_flags(&[fake], &help), ["not_an_option"]);
    // Table: each option, set from text as the command line and Python set it, is a key of the
    // serialised table that reads back to the same options, and a [select] table with it parses.
    for spec in &specs {
        let (o, table) = set_and_round_trip::<SelectOptions>(spec);
        // Keep the table runnable: a data source, and no seed beside `secure`.
        let text =
            format!("figure = \"f\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\n{table}");
        let text = text.replacen("dataset = \"synthetic\"\ndataset", "dataset", 1);
        match Pipeline::parse(&text, "t.toml") {
            Ok(p) => assert_eq!(p.select.unwrap().params, o.params),
            // Only options that make this minimal table inconsistent may fail, by name.
            Err(e) => assert!(["format", "path"].contains(&spec.key), "{}: {e}", spec.key),
        }
    }
    // Python: the keyword names are the flags with `_`, exported from the same list.
    let names: Vec<String> = specs.iter().map(OptionSpec::python_name).collect();
    for n in [
        "mech",
        "eps",
        "split_seed",
        "percentile_users",
        "gamma",
        "chooser",
        "secure",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
}

/// Runs `recsel select` on synthetic data with `args` (seeded, two trials) into a fresh folder;
/// the folder, the run's output folder, the text of its `config.toml` and the recorded
/// `[select]` table, which must pass `SelectOptions::check`.
fn recorded_select(args: &[&str]) -> (tempfile::TempDir, PathBuf, String, toml::Table) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut a = vec![
        "select",
        "--dataset",
        "synthetic",
        "--trials",
        "2",
        "--seed",
        "5",
    ];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = recsel(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("config.toml")).unwrap();
    let config: toml::Table = text.parse().unwrap();
    let table = config["config"]["pipeline"].as_table().unwrap().clone();
    let recorded: SelectOptions = toml::Value::Table(table.clone()).try_into().unwrap();
    assert!(recorded.check().is_ok());
    (dir, out, text, table)
}

#[test]
fn a_run_records_every_select_option_in_config_toml() {
    let (dir, out, text, table) =
        recorded_select(&["--mech", "gem,mgem", "--eps", "1", "--top", "20"]);
    // Every option of the job is recorded, except the data options a named synthetic data set
    // does not use, the parameters of mechanisms that neither this run nor `all` reads, and the
    // candidate policy of a run with the paper's candidates (`top`), and the prior of a run
    // without one.
    let unused_data = [
        "candidates",
        "prior",
        "data_dir",
        "format",
        "path",
        "user_col",
        "item_col",
        "rating_col",
        "delimiter",
        "min_rating",
        "min_user_items",
        "test_users",
        "validation_users",
        "catalogue",
    ];
    let registry = Registry::builtin();
    let standard = registry.parse_list("all").unwrap();
    for spec in SelectOptions::options() {
        let unread_param = registry.param(spec.key).is_ok()
            && !standard
                .iter()
                .any(|m| m.params.iter().any(|p| p.name == spec.key));
        // A hidden option (a former name) is read, never recorded.
        let expected = !unused_data.contains(&spec.key) && !unread_param && !spec.hidden;
        assert_eq!(
            table.contains_key(spec.key),
            expected,
            "{}: {text}",
            spec.key
        );
    }
    // The table reruns the run: same results.
    let again = dir.path().join("again");
    let cfg = out.join("config.toml");
    let o = recsel(&[
        "run",
        cfg.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["mse.csv", "users.csv"] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn a_table_key_that_is_no_option_is_an_error_naming_it() {
    let base = "figure = \"f\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\n";
    for (key, value) in [
        ("trails", "5"),
        ("gama", "0.1"),
        ("out_dir", "\"x\""),
        ("mech", "[1]"),
    ] {
        let e = Pipeline::parse(&format!("{base}{key} = {value}\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
    }
    // The same table with the key spelt right parses (the error is the key's).
    assert!(Pipeline::parse(&format!("{base}trials = 5\ngamma = 0.1\n"), "t.toml").is_ok());
    // A parameter value of the wrong type is named when the table is checked.
    let e = Pipeline::parse(&format!("{base}chooser = \"kendall\"\n"), "t.toml")
        .map(|p| Registry::builtin().resolve(&p.select.unwrap().params))
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains("chooser") && e.contains("kendall"), "{e}");
    let _ = MechValues::new();
}

/// The options ported into the tables after they were introduced — the candidate policy of
/// `select` and of `recommend`, the ledger's options of `recommend` — reach every front end
/// from their one declaration: the command line, the table, a run's `config.toml` (select) and
/// Python (`python/tests/test_options.py` checks the keyword lists against the same `--help`).
#[test]
fn ported_options_reach_every_front_end() {
    // select --candidates: a flag, a [select] key, recorded in config.toml and rerun from it.
    let select = SelectOptions::options();
    let spec = select.iter().find(|s| s.key == "candidates").unwrap();
    assert_eq!(
        (spec.flag, spec.python_name()),
        ("candidates", "candidates".into())
    );
    let help = String::from_utf8(recsel(&["select", "--help"]).stdout).unwrap();
    assert!(
        missing_flags(std::slice::from_ref(spec), &help).is_empty(),
        "{help}"
    );
    let text = "figure = \"f\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\n\
                candidates = \"popular:40\"\n";
    let p = Pipeline::parse(text, "t.toml").unwrap();
    assert_eq!(
        p.select.unwrap().candidates.unwrap().to_string(),
        "popular:40"
    );
    // A bad policy is an error naming the option, on the command line and in a table.
    let o = recsel(&["select", "--dataset", "synthetic", "--candidates", "best:3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--candidates") && err.contains("best:3"),
        "{err}"
    );
    let bad = text.replace("popular:40", "best:3");
    let e = Pipeline::parse(&bad, "t.toml").unwrap_err().to_string();
    assert!(e.contains("best:3"), "{e}");
    let (_dir, _, _, table) =
        recorded_select(&["--mech", "rnm", "--eps", "1", "--candidates", "popular:40"]);
    assert_eq!(table["candidates"].as_str(), Some("popular:40"));
    assert!(
        !table.contains_key("top"),
        "a policy's run records the policy"
    );

    // recommend: every option (the candidates and the ledger's among them) is a flag of
    // `recsel recommend` but the hidden ones kept to name what replaced them, and a key of the
    // table that reads back to the same options.
    let specs = RecommendOptions::options();
    for key in [
        "candidates",
        "ledger",
        "budget",
        "period",
        "fallback",
        "group",
        "run_id",
    ] {
        assert!(specs.iter().any(|s| s.key == key), "{key} is not an option");
    }
    let help = String::from_utf8(recsel(&["recommend", "--help"]).stdout).unwrap();
    let shown: Vec<OptionSpec> = specs.iter().filter(|s| !s.hidden).cloned().collect();
    assert_eq!(missing_flags(&shown, &help), Vec::<&str>::new(), "{help}");
    for hidden in specs.iter().filter(|s| s.hidden) {
        assert!(
            !help.contains(&format!("--{} ", hidden.flag)),
            "{}",
            hidden.key
        );
    }
    for spec in &specs {
        set_and_round_trip::<RecommendOptions>(spec);
    }
    // The service's options include the serving and ledger options as the same declarations:
    // same keys, flags and help.
    #[cfg(feature = "serve")]
    served_options_are_recommends(&specs);
}

/// The options of `recsel serve` that it shares with `recsel recommend` (`specs`) are the same
/// declarations, and every one is a flag of `recsel serve`.
#[cfg(feature = "serve")]
fn served_options_are_recommends(specs: &[OptionSpec]) {
    use recsel::recommend::options::{LedgerOptions, ServingOptions};
    let serve = ServeOptions::options();
    for shared in ServingOptions::options()
        .into_iter()
        .chain(LedgerOptions::options())
    {
        let s = serve.iter().find(|s| s.key == shared.key).unwrap();
        let r = specs.iter().find(|s| s.key == shared.key).unwrap();
        for o in [s, r] {
            assert_eq!((o.flag, &o.help), (shared.flag, &shared.help), "{}", o.key);
        }
    }
    let help = String::from_utf8(recsel(&["serve", "--help"]).stdout).unwrap();
    let shown: Vec<OptionSpec> = serve.iter().filter(|s| !s.hidden).cloned().collect();
    assert_eq!(missing_flags(&shown, &help), Vec::<&str>::new(), "{help}");
}

#[test]
fn negative_numbers_are_values() {
    let o = recsel(&[
        "sample", "--mech", "rs-tnb", "--eta", "-0.5", "--eps", "1", "--scores", "1,0", "--sens",
        "1,1", "--n", "10", "--seed", "1", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Power: a negative value out of range is still refused, by the parameter's declaration.
    let o = recsel(&[
        "sample", "--mech", "rs-tnb", "--eta", "-2", "--eps", "1", "--scores", "1,0", "--sens",
        "1,1", "--n", "10", "--seed", "1",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("eta must be finite and > -1, got -2"));
}

#[test]
fn docs_cli_md_is_what_the_binary_prints() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let generated = String::from_utf8(recsel(&["help-markdown"]).stdout).unwrap();
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        generated == stored,
        "docs/cli.md differs from `recsel help-markdown`; regenerate it with \
         `cargo run --release -- help-markdown > docs/cli.md` and commit it"
    );
    // Every subcommand and every select flag is in it.
    for sub in [
        "mechanisms",
        "sample",
        "select",
        "recommend",
        "run",
        "bandit",
    ] {
        assert!(stored.contains(&format!("## `recsel {sub}`")), "{sub}");
    }
    let shown: Vec<OptionSpec> = SelectOptions::options()
        .into_iter()
        .filter(|s| !s.hidden)
        .collect();
    assert!(missing_flags(&shown, &stored.replace('`', " ")).is_empty());
}

/// The options of what a recommendation is worth — `fit`'s release options (calibration users,
/// clip range), `tune`'s and `evaluate`'s, and `validation_users` among the data options — are
/// declared once: each is a flag of its subcommand and a key of its table that reads back to
/// the same options; `evaluate` records its options in config.toml and `--config` reads them.
#[test]
fn utility_options_reach_every_front_end() {
    use recsel::data::DataOptions;
    use recsel::evaluate::options::{EvaluateOptions, TuneOptions};
    use recsel::recommend::publish::ReleaseOptions;
    assert!(DataOptions::options()
        .iter()
        .any(|s| s.key == "validation_users"));
    assert!(SelectOptions::options()
        .iter()
        .any(|s| s.key == "validation_users"));
    let check = |sub: &str, specs: Vec<OptionSpec>| {
        let help = String::from_utf8(recsel(&[sub, "--help"]).stdout).unwrap();
        let shown: Vec<OptionSpec> = specs.into_iter().filter(|s| !s.hidden).collect();
        assert_eq!(
            missing_flags(&shown, &help),
            Vec::<&str>::new(),
            "{sub}: {help}"
        );
    };
    check("fit", ReleaseOptions::options());
    check("tune", TuneOptions::options());
    check("evaluate", EvaluateOptions::options());
    for spec in ReleaseOptions::options() {
        set_and_round_trip::<ReleaseOptions>(&spec);
    }
    for spec in TuneOptions::options() {
        set_and_round_trip::<TuneOptions>(&spec);
    }
    for spec in EvaluateOptions::options() {
        set_and_round_trip::<EvaluateOptions>(&spec);
    }
    // A bad value is an error naming the option, from the one parser.
    let o = recsel(&[
        "tune",
        "--model",
        "m",
        "--dataset",
        "synthetic",
        "--eps",
        "x",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--eps"));
    let o = recsel(&[
        "fit",
        "--dataset",
        "synthetic",
        "--validation-users",
        "some",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--validation-users") && err.contains("some"),
        "{err}"
    );
    // A --config file of tune or evaluate with a misspelt key is an error naming it (a known
    // key and a mechanism parameter are accepted).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    for (cmd, text, bad) in [
        ("tune", "margn = 3\n", Some("margn")),
        (
            "evaluate",
            "mechanisms = \"em\"\ntrails = 3\n",
            Some("trails"),
        ),
        ("evaluate", "gamma = 0.1\ntrials = 3\n", None),
    ] {
        std::fs::write(&file, text).unwrap();
        let o = recsel(&[
            cmd,
            "--config",
            file.to_str().unwrap(),
            "--model",
            "/nowhere",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        match bad {
            Some(key) => assert!(
                err.contains(&format!("unknown key `{key}`")),
                "{cmd}: {err}"
            ),
            None => assert!(!err.contains("unknown key"), "{cmd}: {err}"),
        }
    }
}

/// Every option table resolves through the defaults it declares, and nothing else: the
/// resolved empty table is `defaults()`; each option with a default resolves (in
/// `resolved()`, and so through the accessor of its name that `resolved()` reads) to the value
/// its help shows as the default; an option without one stays unset; a given value is kept.
#[test]
fn every_table_resolves_through_its_declared_defaults() {
    use recsel::audit::{AuditOptions, EndToEndOptions};
    use recsel::data::DataOptions;
    use recsel::evaluate::options::{EvaluateOptions, TuneOptions};
    use recsel::recommend::publish::ReleaseOptions;
    fn check<T>(name: &str)
    where
        T: OptionTable + Default + PartialEq + std::fmt::Debug + serde::Serialize,
    {
        assert_eq!(T::default().resolved(), T::defaults(), "{name}");
        let registry = Registry::builtin();
        let table = |t: &T| toml::Table::try_from(t).unwrap();
        let resolved = table(&T::default().resolved());
        for spec in T::options() {
            if registry.param(spec.key).is_ok() {
                continue; // a mechanism parameter: the registry resolves it per mechanism
            }
            match &spec.default {
                Some(d) => {
                    let mut given = T::default();
                    given.set(spec.key, d).unwrap();
                    assert_eq!(
                        resolved.get(spec.key),
                        table(&given).get(spec.key),
                        "{name}.{}",
                        spec.key
                    );
                }
                None => assert!(!resolved.contains_key(spec.key), "{name}.{}", spec.key),
            }
            let mut given = T::default();
            given.set(spec.key, &sample(&spec)).unwrap();
            assert_eq!(
                table(&given.resolved()).get(spec.key),
                table(&given).get(spec.key),
                "{name}.{}",
                spec.key
            );
        }
    }
    check::<SelectOptions>("select");
    check::<DataOptions>("data");
    check::<RecommendOptions>("recommend");
    #[cfg(feature = "serve")]
    {
        check::<ServeOptions>("serve");
        check::<recsel::serve::LimitOptions>("limits");
        assert_eq!(recsel::serve::LimitOptions::default().max_batch(), 256);
    }
    check::<recsel::experiments::SynthOptions>("synth");
    check::<recsel::experiments::twocand::TwocandOptions>("twocand");
    check::<recsel::experiments::bandit::BanditOptions>("bandit");
    check::<ReleaseOptions>("release");
    check::<TuneOptions>("tune");
    check::<EvaluateOptions>("evaluate");
    check::<AuditOptions>("audit");
    check::<EndToEndOptions>("audit-e2e");
    // The accessors are the resolved values.
    let o = SelectOptions::default();
    assert_eq!((o.trials(), o.top(), o.clip()), (50, 500, false));
    assert_eq!(o.data.split_seed(), 42);
}

/// The seed of the split has one name, `split_seed`, in every job that splits data. The
/// former names still say where they went: `data_seed` of a `[select]` table (older pipeline
/// files and config.toml) is read as `split_seed` (both at once are an error); `--seed` of
/// `fit` and `export` and `seed` of `tune` and `evaluate` are errors naming `split_seed`.
#[test]
fn the_split_seed_has_one_name() {
    use recsel::evaluate::options::{EvaluateOptions, TuneOptions};
    for table in [
        SelectOptions::options(),
        recsel::data::DataOptions::options(),
        TuneOptions::options(),
        EvaluateOptions::options(),
        recsel::audit::EndToEndOptions::options(),
    ] {
        assert!(table.iter().any(|s| s.key == "split_seed" && !s.hidden));
        // No other visible name for it: a visible `seed` is the noise table's.
        for s in table.iter().filter(|s| !s.hidden) {
            assert_ne!(s.key, "data_seed");
            if s.key == "seed" {
                assert_eq!(s.group, "Randomness");
            }
        }
    }
    let base = "figure = \"f\"\nout = \"o\"\n[select]\ndataset = \"synthetic\"\n";
    let old = Pipeline::parse(&format!("{base}data_seed = 7\n"), "t.toml").unwrap();
    let new = Pipeline::parse(&format!("{base}split_seed = 7\n"), "t.toml").unwrap();
    assert_eq!(old.select.unwrap().split_seed().unwrap(), 7);
    assert_eq!(new.select.unwrap().split_seed().unwrap(), 7);
    let both = Pipeline::parse(&format!("{base}data_seed = 7\nsplit_seed = 7\n"), "t.toml");
    assert!(both.unwrap_err().to_string().contains("split_seed"));
    for args in [
        &["fit", "--dataset", "synthetic", "--seed", "3"][..],
        &[
            "export",
            "--dataset",
            "synthetic",
            "--seed",
            "3",
            "--out",
            "x",
        ],
        &[
            "tune",
            "--model",
            "m",
            "--dataset",
            "synthetic",
            "--seed",
            "3",
        ],
        &[
            "evaluate",
            "--model",
            "m",
            "--dataset",
            "synthetic",
            "--seed",
            "3",
        ],
    ] {
        let o = recsel(args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--split-seed 3"), "{args:?}: {err}");
    }
}

/// The pair `seed` | `secure` is one table ([`NoiseOptions`]) that every job selecting with
/// noise takes whole — the same keys, flags, help and section — so its rule is written once:
/// each job refuses a seed with `--secure` with the same message.
#[test]
fn every_noisy_job_takes_the_one_noise_table() {
    use recsel::audit::{AuditOptions, EndToEndOptions};
    use recsel::mechanisms::{NoiseOptions, SampleOptions};
    let noise = NoiseOptions::options();
    for (name, specs) in [
        ("select", SelectOptions::options()),
        ("sample", SampleOptions::options()),
        ("audit", AuditOptions::options()),
        ("audit-e2e", EndToEndOptions::options()),
    ] {
        for n in &noise {
            let s = specs.iter().find(|s| s.key == n.key).unwrap();
            assert_eq!(
                (s.flag, &s.help, s.group),
                (n.flag, &n.help, n.group),
                "{name}"
            );
        }
    }
    for args in [
        &["select", "--dataset", "synthetic"][..],
        &[
            "sample", "--mech", "rnm", "--eps", "1", "--scores", "1,0", "--sens", "1,1", "--n",
            "10",
        ],
        &["audit", "--mech", "rnm", "--eps", "1", "--samples", "100"],
        &["audit-e2e", "--model", "m", "--eps", "1"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--seed", "1", "--secure"]);
        let o = recsel(&a);
        assert!(!o.status.success(), "{a:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("seed and secure exclude each other"),
            "{a:?}: {err}"
        );
        // Power: without the seed the same command gets past the rule (select would then run
        // for long; the others finish, or stop at the missing model).
        if a[0] == "select" {
            continue;
        }
        a.truncate(a.len() - 3);
        a.push("--secure");
        let err = String::from_utf8_lossy(&recsel(&a).stderr).to_string();
        assert!(!err.contains("exclude each other"), "{a:?}: {err}");
    }
}

/// The options of `recsel statistic` are declared once: each is a flag of the subcommand and a
/// key of its table that reads back to the same options.
#[test]
fn statistic_options_reach_the_command_line() {
    use recsel::column_statistic::StatisticOptions;
    let help = String::from_utf8(recsel(&["statistic", "--help"]).stdout).unwrap();
    let shown: Vec<OptionSpec> = StatisticOptions::options()
        .into_iter()
        .filter(|s| !s.hidden)
        .collect();
    assert_eq!(missing_flags(&shown, &help), Vec::<&str>::new(), "{help}");
    for spec in StatisticOptions::options() {
        set_and_round_trip::<StatisticOptions>(&spec);
    }
}

/// synth, twocand and bandit are option tables like select's: every option (but the mechanism
/// parameters, checked over the registry above) is a flag of the subcommand, and a key of its
/// pipeline table that reads back to the same options; a key of none is an error naming it.
#[test]
fn experiment_options_are_flags_and_pipeline_keys() {
    use recsel::experiments::bandit::BanditOptions;
    use recsel::experiments::twocand::TwocandOptions;
    use recsel::experiments::SynthOptions;
    fn check<T>(command: &str, in_pipeline: fn(Pipeline) -> Option<T>)
    where
        T: OptionTable + Default + PartialEq + std::fmt::Debug + serde::Serialize,
        T: serde::de::DeserializeOwned,
    {
        let registry = Registry::builtin();
        let specs: Vec<OptionSpec> = T::options()
            .into_iter()
            .filter(|s| registry.param(s.key).is_err())
            .collect();
        assert!(specs.iter().any(|s| s.key == "seed"), "{command}");
        let help = String::from_utf8(recsel(&[command, "--help"]).stdout).unwrap();
        assert_eq!(missing_flags(&specs, &help), Vec::<&str>::new(), "{help}");
        for spec in &specs {
            let (o, table) = set_and_round_trip::<T>(spec);
            let mut file = toml::Table::new();
            file.insert("figure".into(), "f".into());
            file.insert("out".into(), "o".into());
            let inner: toml::Table = toml::from_str(&table).unwrap();
            file.insert(command.into(), toml::Value::Table(inner));
            let p: Pipeline = file.try_into().unwrap();
            assert_eq!(in_pipeline(p), Some(o), "{command}.{}", spec.key);
        }
        let text = format!("figure = \"f\"\nout = \"o\"\n[{command}]\nnot_a_key = 1\n");
        let e = Pipeline::parse(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("not_a_key"), "{command}: {e}");
    }
    check::<SynthOptions>("synth", |p| p.synth);
    check::<TwocandOptions>("twocand", |p| p.twocand);
    check::<BanditOptions>("bandit", |p| p.bandit);
}
