//! A selection mechanism defined outside recsel, registered and run through `select`, `synth`
//! and `audit` (docs/extending.md).
//!
//! The mechanism, `laplace-max`, is Report Noisy Max with Laplace noise of scale `scale·Δ/ε`:
//! ε-DP for every `scale ≥ 2` (docs/mechanisms.md, "Report Noisy Max"; a larger scale only adds
//! noise). With `noise = "gumbel"` the noise is Gumbel of the same scale instead: the argmax is
//! then the exponential mechanism with weights `exp(q_a·ε/(scale·Δ))`, ε-DP for `scale ≥ 2` too.
//! `scale` and `noise` are its own typed parameters (a real, and a choice): declared once below,
//! they are validated, defaulted, taken as table keys, flags and keyword arguments, recorded in
//! the resolved configurations and listed without any edit to recsel.
//!
//! Run with `cargo run --release --example custom_mechanism [OUT_DIR]` (default
//! `out/custom-mechanism`).

use std::path::{Path, PathBuf};

use recsel::audit::{self, builtin_pairs, AuditConfig, AuditReport};
use recsel::data::load::{load_dataset, DataSource, NamedDataset};
use recsel::data::synthetic::SyntheticShape;
use recsel::experiments::scenarios::ScenarioSet;
use recsel::experiments::select::{self, ChunkStore, MseRow, SelectConfig};
use recsel::experiments::{run_synth, SynthConfig, SynthOptions, SynthResults};
use recsel::mechanisms::{
    boxed, MechParams, Mechanism, MechanismSpec, ParamSpec, Prepared, Problem, Registry,
};
use recsel::model::{self, Method, ModelParams};
use recsel::numerics::distributions::laplace1;
use recsel::rng::{NoiseMode, Rng};
use recsel::scoring::{item_sensitivities, ModelScorer, SensitivityConfig};

/// The declared parameter: a real in [2, 100], default 2.
pub static SCALE: ParamSpec = ParamSpec::real(
    "scale",
    "Laplace noise scale in units of Delta/eps (>= 2 keeps eps-DP)",
    2.0,
    2.0,
    100.0,
);

/// The second declared parameter: the noise's law, a choice.
pub static NOISE: ParamSpec = ParamSpec::choice(
    "noise",
    "Law of the noise: laplace, or gumbel (then the argmax is the exponential mechanism)",
    "laplace",
    &["laplace", "gumbel"],
);

/// Laplace (or Gumbel) noisy max with noise `scale·Δ/ε`, Δ the largest sensitivity.
#[derive(Debug)]
pub struct LaplaceMax {
    epsilon: f64,
    scale: f64,
    gumbel: bool,
}

impl LaplaceMax {
    /// Validates ε (finite, > 0); `scale` was validated by [`SCALE`]. Public so that a test can
    /// also build a deliberately miscalibrated copy (scale < 2) and see the audit catch it.
    pub fn new(epsilon: f64, scale: f64) -> recsel::Result<Self> {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(recsel::Error::Invalid(format!(
                "laplace-max: epsilon must be finite and > 0, got {epsilon}"
            )));
        }
        Ok(LaplaceMax {
            epsilon,
            scale,
            gumbel: false,
        })
    }

    /// The same mechanism with Gumbel noise instead of Laplace noise.
    pub fn with_gumbel(self, gumbel: bool) -> Self {
        LaplaceMax { gumbel, ..self }
    }
}

/// A standard Gumbel draw, `−ln(−ln U)` with U uniform on (0, 1).
fn gumbel1(rng: &mut Rng) -> f64 {
    use rand::Rng as _;
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    -(-u.ln()).ln()
}

struct PreparedMax<'a> {
    scores: &'a [f64],
    b: f64,
    gumbel: bool,
}

impl Prepared for PreparedMax<'_> {
    fn sample(&self, rng: &mut Rng) -> usize {
        let mut best = (f64::NEG_INFINITY, 0);
        for (a, &q) in self.scores.iter().enumerate() {
            let noise = if self.gumbel {
                gumbel1(rng)
            } else {
                laplace1(rng)
            };
            let v = q + self.b * noise;
            if v > best.0 {
                best = (v, a);
            }
        }
        best.1
    }
}

impl Mechanism for LaplaceMax {
    fn name(&self) -> &'static str {
        "laplace-max"
    }

    fn epsilon(&self) -> f64 {
        self.epsilon
    }

    fn prepare<'a>(&'a self, problem: &Problem<'a>) -> Box<dyn Prepared + 'a> {
        Box::new(PreparedMax {
            scores: problem.scores(),
            b: self.scale * problem.max_sensitivity() / self.epsilon,
            gumbel: self.gumbel,
        })
    }
}

/// The registry entry: name, guarantee, declared parameters and the validating builder.
pub static LAPLACE_MAX: MechanismSpec = MechanismSpec {
    name: "laplace-max",
    guarantee: "eps-DP",
    private: true,
    params: &[SCALE, NOISE],
    summary: "argmax q_a + Lap(scale*Delta/eps), or Gumbel noise (example mechanism from outside \
              the crate)",
    use_when: "an example: a noisy max with a tunable noise scale and law",
    audit_reference: false,
    build: |p| {
        let gumbel = p.word(&NOISE)? == "gumbel";
        boxed(LaplaceMax::new(p.epsilon, p.get(&SCALE)?).map(|m| m.with_gumbel(gumbel)))
    },
};

/// The built-ins plus `laplace-max`.
pub fn registry() -> recsel::Result<Registry> {
    let mut r = Registry::builtin();
    r.register(&LAPLACE_MAX)?;
    Ok(r)
}

/// Everything the example produced.
pub struct Outcome {
    /// `select` on the embedded synthetic data: MSE per (mechanism, ε).
    pub select: Vec<MseRow>,
    /// `synth` scenario 1: one row per (mechanism, ε).
    pub synth: SynthResults,
    /// `audit` of `laplace-max` at ε = 1 on the built-in neighbouring pairs.
    pub audit: AuditReport,
}

/// Runs `select`, `synth` and `audit` with `laplace-max` (scale 3) beside `rnm` and `random`,
/// writing the resumable selection chunks under `out`.
pub fn run(out: &Path) -> recsel::Result<Outcome> {
    let registry = registry()?;
    let mechanisms = ["rnm", "laplace-max", "random"].map(String::from).to_vec();
    let params = MechParams::default().with_param("scale", 3.0);

    // select: the embedded synthetic data set, a small EASE model, 3 trials per user.
    let source = DataSource::Named {
        dataset: NamedDataset::Synthetic(SyntheticShape::Small),
        data_dir: PathBuf::from("data"),
    };
    let data = load_dataset(&source, 42)?;
    let model_params = ModelParams::new(Method::Ease, 200.0, 1.0)?;
    let (model, _) = model::fit(&data.train, &model_params, &|_| {})?;
    let cfg = SelectConfig {
        mechanisms: mechanisms.clone(),
        params: params.clone(),
        epsilons: vec![1.0, 100.0], // Δ is wide on this data: a large ε shows the noisy max work
        trials: 3,
        top: 100,
        candidates: None,
        prior: None,
        clip: true,
        percentile_users: Default::default(),
        seed: 7,
        source_fingerprint: select::source_fingerprint(&data, &model_params),
        noise: NoiseMode::Fast,
        registry: registry.clone(),
    };
    let scorer = ModelScorer::new(&model, &data.test_input);
    let sens = item_sensitivities(&scorer, &SensitivityConfig::default(), &|_| {});
    let store = ChunkStore::open(out, &cfg, true)?;
    let (rows, _) = select::run_all(&scorer, &sens, &cfg, &store, &|_| {}, None)?;
    let select = select::mse_table(&cfg, &rows);

    // synth: scenario 1 of docs/experiments.md with 2,000 trials.
    let synth_cfg = SynthConfig {
        scenarios: vec![ScenarioSet::One(1)],
        mechanisms: mechanisms.join(","),
        epsilons: vec![1.0, 8.0],
        trials: 2_000,
        params: params.values.clone(),
        registry: registry.clone(),
        seed: 1,
        ..SynthOptions::default().config(|| 0)
    };
    let synth = run_synth(&synth_cfg, &|_| {})?;

    // audit: the mechanism as built from the registry, at ε = 1.
    let mech = registry.build("laplace-max", &params.with_epsilon(1.0))?;
    let pairs = builtin_pairs(&[0.0, 0.25, 0.5, 0.75, 1.0], &[0.2, 1.0, 0.5, 2.0, 1.0], 5)?;
    let audit = audit::audit(&*mech, &pairs, &AuditConfig::new(20_000, 1e-4, 3)?, &|_| {})?;
    Ok(Outcome {
        select,
        synth,
        audit,
    })
}

#[allow(dead_code)] // the tests include this file as a module and call `run`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("out/custom-mechanism"), PathBuf::from);
    let o = run(&out)?;
    println!("select (synthetic data), MSE per user:");
    for r in &o.select {
        println!(
            "  {:<12} eps={:<4} {:.5} ± {:.5}",
            r.mechanism, r.epsilon, r.mse, r.se
        );
    }
    println!("synth (scenario 1), MSE:");
    for r in &o.synth.rows {
        println!("  {:<12} eps={:<4} {:.5}", r.mechanism, r.epsilon, r.mse);
    }
    println!(
        "audit: laplace-max claims {}, max eps_LB = {:.3}: {}",
        o.audit.guarantee,
        o.audit.max_eps_lb,
        o.audit.verdict()
    );
    Ok(())
}
