//! Every error a user can cause names the bad value.

use recsel::mechanisms::{self, MechParams, Problem};
use recsel::numerics::Chooser;

fn problem_err(q: &[f64], d: &[f64]) -> String {
    Problem::new(q, d).unwrap_err().to_string()
}

fn build_err(name: &str, p: MechParams) -> String {
    mechanisms::build(name, &p).unwrap_err().to_string()
}

#[test]
fn bad_inputs_are_named() {
    assert_eq!(problem_err(&[], &[]), "the candidate list is empty");
    assert_eq!(
        problem_err(&[1.0, 2.0], &[1.0]),
        "scores and sensitivities differ in length: 2 scores, 1 sensitivities"
    );
    assert_eq!(
        problem_err(&[1.0, f64::NAN], &[1.0, 1.0]),
        "score of candidate 1 must be finite, got NaN"
    );
    assert_eq!(
        problem_err(&[f64::INFINITY], &[1.0]),
        "score of candidate 0 must be finite, got inf"
    );
    for (bad, shown) in [
        (0.0, "0"),
        (-2.0, "-2"),
        (f64::INFINITY, "inf"),
        (f64::NAN, "NaN"),
    ] {
        assert_eq!(
            problem_err(&[1.0, 2.0, 3.0], &[1.0, 1.0, bad]),
            format!("sensitivity of candidate 2 must be finite and > 0, got {shown}")
        );
    }
}

#[test]
fn bad_parameters_are_caught_at_construction() {
    let d = MechParams::default();
    for spec in mechanisms::REGISTRY {
        for eps in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let msg = build_err(spec.name, d.with_epsilon(eps));
            assert!(
                msg.starts_with("epsilon must be finite and > 0, got"),
                "{}: {msg}",
                spec.name
            );
        }
    }
    for name in ["rs", "rs-tnb", "rs-exp"] {
        for g in [0.0, 1.5, -0.1, f64::NAN] {
            let msg = build_err(name, d.clone().with_param("gamma", g));
            assert_eq!(msg, format!("gamma must be in (0, 1], got {g}"), "{name}");
        }
    }
    for name in ["gem", "mgem", "cgem"] {
        for b in [0.0, 1.0, 2.0] {
            let msg = build_err(name, d.clone().with_param("beta", b));
            assert_eq!(msg, format!("beta must be in (0, 1), got {b}"), "{name}");
        }
    }
    for h in [-1.0, -3.0, f64::INFINITY] {
        let msg = build_err("rs-tnb", d.clone().with_param("eta", h));
        assert_eq!(msg, format!("eta must be finite and > -1, got {h}"));
    }
    for c in [0.0, 1.0, 1.2] {
        let msg = build_err("cgem", d.clone().with_param("c", c));
        assert_eq!(msg, format!("c must be in (0, 1), got {c}"));
    }
    // Parameters a mechanism does not use are not its business.
    assert!(mechanisms::build("rnm", &d.clone().with_param("gamma", 7.0)).is_ok());
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let msg = build_err("gen", MechParams::default());
    assert!(
        msg.starts_with("unknown mechanism 'gen'; valid names: rnm, pf, em,"),
        "{msg}"
    );
    for spec in mechanisms::REGISTRY {
        assert!(msg.contains(spec.name));
    }
    let msg = Chooser::from_name("kendall").unwrap_err().to_string();
    assert_eq!(
        msg,
        "unknown correlation chooser 'kendall'; valid names: spearman, pearson, weighted, bound"
    );
    assert!(mechanisms::parse_list("rnm,nope").is_err());
    // `all` is every mechanism except the audit references (bot-exp, rs-exp-m1).
    let all: Vec<&str> = mechanisms::parse_list("all")
        .unwrap()
        .iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(all.len(), 14, "{all:?}");
    assert!(all.contains(&"rs-exp") && !all.contains(&"bot-exp") && !all.contains(&"rs-exp-m1"));
    let two = mechanisms::parse_list("mgem, rnm,mgem").unwrap();
    assert_eq!(
        two.iter().map(|s| s.name).collect::<Vec<_>>(),
        ["mgem", "rnm"]
    );
}
