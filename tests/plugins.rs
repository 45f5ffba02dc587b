//! Mechanisms from outside the crate (docs/extending.md): the example's `laplace-max` is registered and runs
//! through `select`, `synth` and `audit`; its typed parameter is validated; the generic checks
//! pass it and reject broken variants.

use recsel::audit::conformance::check_mechanism;
use recsel::mechanisms::{boxed, MechParams, MechanismSpec, Registry};

use crate::custom_mechanism::{self, LaplaceMax, LAPLACE_MAX};

#[test]
fn example_mechanism_runs_through_select_synth_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let o = custom_mechanism::run(dir.path()).unwrap();
    let mse = |rows: &[recsel::experiments::select::MseRow], m: &str, e: f64| {
        rows.iter()
            .find(|r| r.mechanism == m && r.epsilon == e)
            .unwrap_or_else(|| panic!("no select row for {m} at {e}"))
            .mse
    };
    // Every mechanism ran at every ε, on every test user.
    assert_eq!(o.select.len(), 6);
    assert!(o
        .select
        .iter()
        .all(|r| r.users > 100 && r.users == o.select[0].users));
    // laplace-max is a noisy max: far better than uniform at ε = 100, and better at 100 than at 1.
    assert!(mse(&o.select, "laplace-max", 100.0) < 0.5 * mse(&o.select, "random", 100.0));
    assert!(mse(&o.select, "laplace-max", 100.0) < mse(&o.select, "laplace-max", 1.0));
    // synth: scenario 1 rows for all three mechanisms; the same ordering.
    let synth: Vec<_> = o
        .synth
        .rows
        .iter()
        .map(|r| (r.mechanism.as_str(), r.epsilon))
        .collect();
    assert!(
        synth.contains(&("laplace-max", 8.0)) && synth.len() == 6,
        "{synth:?}"
    );
    let s = |m: &str| {
        o.synth
            .rows
            .iter()
            .find(|r| r.mechanism == m && r.epsilon == 8.0)
            .unwrap()
            .mse
    };
    assert!(s("laplace-max") < s("random"));
    // audit: claims 1-DP and is not refuted.
    assert_eq!(o.audit.mechanism, "laplace-max");
    assert!(!o.audit.violation, "max eps_LB {}", o.audit.max_eps_lb);
}

#[test]
fn declared_parameter_is_typed_defaulted_and_checked() {
    let r = custom_mechanism::registry().unwrap();
    let d = MechParams::default();
    // Default 2, accepted; 3 accepted; 1 (below the eps-DP range) and NaN rejected by name.
    assert!(r.build("laplace-max", &d).is_ok());
    assert!(r
        .build("laplace-max", &d.clone().with_param("scale", 3.0))
        .is_ok());
    for bad in [1.0, f64::NAN, 1e9] {
        let e = r
            .build("laplace-max", &d.clone().with_param("scale", bad))
            .unwrap_err()
            .to_string();
        assert!(e.contains("scale") && e.contains("[2, 100]"), "{e}");
    }
    // A misspelt key is an error in a run, not a silent default.
    let cfg = recsel::experiments::SynthConfig {
        mechanisms: "laplace-max".into(),
        params: recsel::mechanisms::MechValues::new().with("scael", 3.0),
        registry: r.clone(),
        ..recsel::experiments::SynthOptions::default().config(|| 0)
    };
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("scael") && e.contains("scale"), "{e}");
    // The built-ins do not know the name; registering it twice or as `all` fails.
    assert!(recsel::mechanisms::build("laplace-max", &d).is_err());
    let mut r2 = r.clone();
    assert!(r2.register(&LAPLACE_MAX).is_err());
    assert!(r
        .parse_list("all")
        .unwrap()
        .iter()
        .any(|s| s.name == "laplace-max"));
    assert!(!Registry::builtin()
        .parse_list("all")
        .unwrap()
        .iter()
        .any(|s| s.name == "laplace-max"));
}

static MISCALIBRATED: MechanismSpec = MechanismSpec {
    name: "laplace-max", // as the real one: only the noise differs
    build: |p| boxed(LaplaceMax::new(p.epsilon, 0.5)),
    ..LAPLACE_STUB
};

static NAME_MISMATCH: MechanismSpec = MechanismSpec {
    name: "not-laplace-max",
    ..LAPLACE_STUB
};

static MANY_DIFFERS: MechanismSpec = MechanismSpec {
    name: "many-differs",
    build: |p| boxed(ManyDiffers::new(p.epsilon)),
    ..LAPLACE_STUB
};

/// `laplace-max`, except that `prepare_many` always selects candidate 0.
#[derive(Debug)]
struct ManyDiffers(LaplaceMax, f64);

impl ManyDiffers {
    fn new(eps: f64) -> recsel::Result<Self> {
        Ok(ManyDiffers(LaplaceMax::new(eps, 2.0)?, eps))
    }
}

impl recsel::mechanisms::Mechanism for ManyDiffers {
    fn name(&self) -> &'static str {
        "many-differs"
    }
    fn epsilon(&self) -> f64 {
        self.1
    }
    fn prepare<'a>(
        &'a self,
        problem: &recsel::mechanisms::Problem<'a>,
    ) -> Box<dyn recsel::mechanisms::Prepared + 'a> {
        self.0.prepare(problem)
    }
    fn prepare_many<'a>(
        &'a self,
        _: &recsel::mechanisms::Problem<'a>,
    ) -> Box<dyn recsel::mechanisms::Prepared + 'a> {
        Box::new(BadPrepared(0))
    }
}

static OUT_OF_RANGE: MechanismSpec = MechanismSpec {
    name: "always-k",
    private: false,
    build: |p| boxed(BadOutput::new(p.epsilon)),
    ..LAPLACE_STUB
};

const LAPLACE_STUB: MechanismSpec = MechanismSpec {
    name: "stub",
    guarantee: "eps-DP",
    private: true,
    params: &[],
    summary: "test",
    use_when: "never (a test stub)",
    audit_reference: false,
    build: |p| boxed(LaplaceMax::new(p.epsilon, 2.0)),
};

/// Returns k (out of range) on problems with more than 3 candidates.
#[derive(Debug)]
struct BadOutput(f64);

impl BadOutput {
    fn new(eps: f64) -> recsel::Result<Self> {
        LaplaceMax::new(eps, 2.0).map(|_| BadOutput(eps))
    }
}

impl recsel::mechanisms::Mechanism for BadOutput {
    fn name(&self) -> &'static str {
        "always-k"
    }
    fn epsilon(&self) -> f64 {
        self.0
    }
    fn prepare<'a>(
        &'a self,
        problem: &recsel::mechanisms::Problem<'a>,
    ) -> Box<dyn recsel::mechanisms::Prepared + 'a> {
        Box::new(BadPrepared(problem.len()))
    }
}

struct BadPrepared(usize);

impl recsel::mechanisms::Prepared for BadPrepared {
    fn sample(&self, _: &mut recsel::rng::Rng) -> usize {
        if self.0 > 3 {
            self.0
        } else {
            0
        }
    }
}

#[test]
fn generic_checks_pass_the_example_and_catch_broken_mechanisms() {
    let d = MechParams::default();
    check_mechanism(&LAPLACE_MAX, &d, 20_000).unwrap();
    // Every built-in that is not an audit reference passes the same checks.
    for spec in recsel::mechanisms::REGISTRY
        .iter()
        .filter(|s| !s.audit_reference)
    {
        check_mechanism(spec, &d, 20_000).unwrap();
    }
    // Noise 4x too small while claiming eps: the audit check refutes it.
    let e = check_mechanism(&MISCALIBRATED, &d, 20_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("audit_finds_no_violation"), "{e}");
    // An index outside the candidates.
    let e = check_mechanism(&OUT_OF_RANGE, &d, 20_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outputs_in_range_and_reproducible"), "{e}");
    // A prepare_many that draws from another law than prepare.
    let e = check_mechanism(&MANY_DIFFERS, &d, 20_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("prepare_many_agrees_with_prepare"), "{e}");
    // A spec whose mechanism answers to another name (its random streams would be another's).
    let e = check_mechanism(&NAME_MISMATCH, &d, 20_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("reports_its_name_and_epsilon"), "{e}");
}

/// Every parameter the example's mechanism declares reaches the front ends through the registry
/// alone: it is an option (a flag of the command line and a keyword of the Python binding, whose
/// text both parse with the declaration), a key of the `[synth]` and `[select]` tables next to
/// the tables' own keys, and a value the mechanism is built with. The binary's side of the
/// command line is the unit test `cli::common::tests` over the same example.
#[test]
fn the_example_parameters_reach_every_front_end() {
    use recsel::experiments::select::SelectOptions;
    use recsel::experiments::SynthOptions;
    use recsel::mechanisms::MechValues;

    let r = custom_mechanism::registry().unwrap();
    let spec = r.get("laplace-max").unwrap();
    assert!(!spec.params.is_empty());
    for p in spec.params {
        let text = p.default_value().to_string();
        // Command line and Python: the option and the parser of its text.
        let option = r.options().into_iter().find(|o| o.key == p.name);
        let option = option.unwrap_or_else(|| panic!("{} is not an option", p.name));
        assert!((option.check)(&text).is_ok() && (option.check)("not-a-value").is_err());
        let value = r.param(p.name).unwrap().parse(&text).unwrap();
        let toml_value = toml::Value::try_from(&value).unwrap();
        let key = format!("mechanisms = \"laplace-max\"\n{} = {toml_value}\n", p.name);
        // [synth]: validated against the run's registry and recorded in the resolved table.
        let options: SynthOptions = toml::from_str(&key).unwrap();
        let mut synth = options.config(|| 0);
        synth.registry = r.clone();
        let resolved = synth.resolved().unwrap();
        assert_eq!(resolved.params.get(p.name), Some(&value), "{}", p.name);
        // [select]: the same key beside the select options.
        let select: SelectOptions =
            toml::from_str(&format!("dataset = \"synthetic\"\n{key}")).unwrap();
        select.check_with(&r).unwrap();
        assert_eq!(select.params.get(p.name), Some(&value));
        // Power: the built-in registry does not know the key, and says so.
        let e = select.check().unwrap_err().to_string();
        assert!(e.contains(&format!("`{}`", p.name)), "{e}");
        // Built with the value.
        let params = r.resolve(&MechValues::new().with(p.name, value)).unwrap();
        r.build("laplace-max", &params).unwrap();
    }
}
