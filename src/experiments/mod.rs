//! Experiments of seed 001: synthetic scenarios 1–8 and the correlation sweep (docs/experiments.md), the share
//! sweep of fig 18, the two-candidate grids (figs 3, 15–17), and the pipeline files that regenerate
//! each figure.

pub mod bandit;
pub mod baselines;
pub mod illustrate;
pub mod picks;
pub mod pipeline;
pub mod scenarios;
pub mod select;
pub mod synthetic;
pub mod twocand;
pub mod winners;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mechanisms::{MechParams, MechValues, MechanismSpec, Registry};
use crate::options::option_table;
use crate::rng::Streams;
use scenarios::{Dataset, Scenario, ScenarioSet, CORR_T};
use synthetic::{CorrRow, MseRow};

option_table! {
    /// The options of a synthetic run (`recsel synth`, a pipeline's `[synth]` table), declared
    /// once with their defaults (docs/experiments.md). Mechanism parameters sit beside the other
    /// keys (`gamma = 0.05`); a key that is neither is an error naming it
    /// ([`SynthConfig::validate`]).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct SynthOptions {
        /// Scenarios, comma separated: 1..8, corr (correlation sweep), share (fig 18 share sweep
        /// of scenarios 1-3), fig6 (the two scenarios of figs 6/24), or all (1..8 and corr).
        #[option(flag = "scenario", group = "Synthetic")]
        pub scenarios: Vec<ScenarioSet> = vec![ScenarioSet::All],
        /// Mechanisms: `all` or a comma-separated list (see `recsel mechanisms`).
        #[option(flag = "mech", value_name = "LIST", group = "Synthetic")]
        pub mechanisms: String = "all".to_string(),
        /// ε grid, comma separated (docs/experiments.md: 17 log-spaced values from 0.01 to 16).
        #[option(flag = "eps", value_name = "E1,E2,...", group = "Synthetic")]
        pub epsilons: Vec<f64> = default_epsilons(),
        /// Number of candidates k.
        #[option(group = "Synthetic")]
        pub k: usize = 100,
        /// Trials N of scenarios 1-6 and the correlation sweep.
        #[option(group = "Synthetic")]
        pub trials: u64 = 10_000,
        /// Users of scenarios 7 and 8, two equal groups (default: trials when it is given, else
        /// 5000).
        #[option(group = "Synthetic")]
        pub polarised_users: u64,
        /// t values of the correlation sweep, comma separated.
        #[option(value_name = "T1,T2,...", group = "Synthetic")]
        pub corr_t: Vec<f64> = CORR_T.to_vec(),
        /// Shares of high scores of the fig 18 sweep, comma separated.
        #[option(value_name = "S1,S2,...", group = "Synthetic")]
        pub shares: Vec<f64> = (1..=19).map(|i| f64::from(i) / 20.0).collect(),
        /// ε of the fig 18 share sweep.
        #[option(flag = "share-eps", value_name = "E", group = "Synthetic")]
        pub share_epsilon: f64 = 2.0,
        /// Lower and upper percentile that set Δ and the clipping of scenarios 4-6 and the
        /// correlation sweep (seed 001: 10,90; seed 000's figure 2: 5,95). Scenarios 7 and 8
        /// always use 5,95 (appendix F).
        #[option(value_name = "LO,HI", group = "Synthetic")]
        pub percentiles: Vec<f64> = scenarios::DEFAULT_PERCENTILES.to_vec(),
        /// Seed of every random stream, data and selections (default: drawn from OS entropy and
        /// reported, so the run can be repeated).
        #[option(group = "Randomness")]
        pub seed: u64,
        /// Mechanism parameters by name (γ, β, η, c, chooser, …; `recsel mechanisms`).
        #[flatten]
        pub params: MechValues,
    }
}

/// Users of scenarios 7 and 8 when neither `polarised_users` nor `trials` is given
/// (docs/experiments.md).
const POLARISED_USERS: u64 = 5_000;

impl SynthOptions {
    /// The run these options describe, every option resolved; the seed is the one given, else
    /// `entropy()` (a front end draws one and reports it). Not yet validated
    /// ([`SynthConfig::validate`]).
    pub fn config(&self, entropy: impl FnOnce() -> u64) -> SynthConfig {
        SynthConfig {
            scenarios: self.scenarios(),
            mechanisms: self.mechanisms(),
            epsilons: self.epsilons(),
            k: self.k(),
            trials: self.trials(),
            polarised_users: self
                .polarised_users
                .or(self.trials)
                .unwrap_or(POLARISED_USERS),
            params: self.params.clone(),
            corr_t: self.corr_t(),
            shares: self.shares(),
            share_epsilon: self.share_epsilon(),
            percentiles: self.percentiles(),
            seed: self.seed.unwrap_or_else(entropy),
            registry: Registry::builtin(),
        }
    }

    /// Checks the options without running them (the seed, if not given, is not drawn).
    pub fn check(&self) -> Result<()> {
        self.config(|| 0).validate()
    }
}

/// A synthetic run with every option resolved ([`SynthOptions::config`]): what the runner reads
/// and, with the parameters of its mechanisms filled in ([`SynthConfig::resolved`]), what is
/// recorded beside the results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SynthConfig {
    /// Each `1`..`8`, `corr`, `share` (fig 18), `fig6` (figs 6/24) or `all` (1–8 and corr).
    pub scenarios: Vec<ScenarioSet>,
    /// `all` or a comma-separated list of mechanism names.
    pub mechanisms: String,
    /// The ε grid (docs/experiments.md: 0.01 to 16, log-spaced).
    pub epsilons: Vec<f64>,
    /// Number of candidates k.
    pub k: usize,
    /// Trials N of scenarios 1–6 and the correlation sweep.
    pub trials: u64,
    /// Users of scenarios 7 and 8 (two equal groups).
    pub polarised_users: u64,
    /// Mechanism parameters by name (γ, β, η, c, chooser, …; `recsel mechanisms`).
    #[serde(flatten)]
    pub params: MechValues,
    /// The t values of the correlation sweep.
    pub corr_t: Vec<f64>,
    /// Shares of high scores of the fig 18 sweep.
    pub shares: Vec<f64>,
    /// ε of the fig 18 sweep.
    pub share_epsilon: f64,
    /// The (lower, upper) percentiles of scenarios 4–6 and the correlation sweep.
    pub percentiles: Vec<f64>,
    /// Seed of every random stream (data and selections).
    pub seed: u64,
    /// Where `mechanisms` are looked up: the built-ins unless the caller registered more.
    #[serde(skip)]
    pub registry: Registry,
}

/// docs/experiments.md's ε grid, 0.01 to 16 log-spaced: `10^(−2 + i/5)` for i = 0..15 rounded to three
/// significant digits (0.01, 0.0158, …, 0.1, …, 1, …, 10), then 16 (ratio 1.6 ≈ 10^0.2). The
/// decades 0.01, 0.1, 1 and 10 lie exactly on the grid, so tables can be compared across runs.
pub fn default_epsilons() -> Vec<f64> {
    (0..16)
        .map(|i| {
            let v = 10f64.powf(-2.0 + f64::from(i) / 5.0);
            let scale = 10f64.powi(2 - v.log10().floor() as i32);
            (v * scale).round() / scale
        })
        .chain([16.0])
        .collect()
}

impl SynthConfig {
    /// The mechanism parameters (ε is set per cell): the given values, the others at their
    /// defaults; an error names an unknown key.
    pub fn mech_params(&self) -> Result<MechParams> {
        self.registry.resolve(&self.params)
    }

    /// The configuration as it is recorded beside the results: validated, with the values of
    /// the parameters its mechanisms read filled in.
    pub fn resolved(&self) -> Result<SynthConfig> {
        self.validate()?;
        let names: Vec<String> = self
            .mechanism_specs()?
            .iter()
            .map(|s| s.name.to_string())
            .collect();
        let mut cfg = self.clone();
        cfg.params = self.registry.table_values(&names, &self.mech_params()?);
        Ok(cfg)
    }

    /// The mechanisms named by `mechanisms`.
    pub fn mechanism_specs(&self) -> Result<Vec<&'static MechanismSpec>> {
        self.registry.parse_list(&self.mechanisms)
    }

    /// The scenarios this run draws, in order.
    pub fn scenarios(&self) -> Vec<Scenario> {
        let corr = || self.corr_t.iter().map(|&t| Scenario::Corr(t));
        let mut out: Vec<Scenario> = Vec::new();
        for set in &self.scenarios {
            let more: Vec<Scenario> = match set {
                ScenarioSet::One(n) => vec![Scenario::Numbered(*n)],
                ScenarioSet::Corr => corr().collect(),
                ScenarioSet::Share => (1..=3)
                    .flat_map(|base| {
                        self.shares
                            .iter()
                            .map(move |&share| Scenario::Share { base, share })
                    })
                    .collect(),
                ScenarioSet::Fig6 => vec![Scenario::Exceptional(1), Scenario::Exceptional(2)],
                ScenarioSet::All => (1..=8).map(Scenario::Numbered).chain(corr()).collect(),
            };
            for s in more {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// The ε values run on `scenario`: the grid, or `share_epsilon` for the share sweep.
    pub fn epsilons_for(&self, scenario: &Scenario) -> Vec<f64> {
        match scenario {
            Scenario::Share { .. } => vec![self.share_epsilon],
            _ => self.epsilons.clone(),
        }
    }

    /// Trials of `scenario`.
    pub fn trials_for(&self, scenario: &Scenario) -> usize {
        if scenario.is_polarised() {
            self.polarised_users as usize
        } else {
            self.trials as usize
        }
    }

    /// Checks every field once, naming the bad value: mechanism names and parameters (by building
    /// each mechanism at every ε), grid sizes, scenarios.
    pub fn validate(&self) -> Result<()> {
        self.registry.check_table_keys(&self.params, "[synth]")?;
        let specs = self.mechanism_specs()?;
        let params = self.mech_params()?;
        crate::mechanisms::private_candidates::scores::refuse_approximate(
            &specs,
            &params,
            "synth (it compares eps-DP mechanisms at each eps)",
        )?;
        if self.scenarios.is_empty() {
            return Err(Error::Invalid("the scenario list is empty".into()));
        }
        if self.epsilons.is_empty() {
            return Err(Error::Invalid("the epsilon list is empty".into()));
        }
        for &e in self.epsilons.iter().chain([&self.share_epsilon]) {
            for s in &specs {
                s.build(&params.with_epsilon(e))?;
            }
        }
        if self.k < 2 {
            return Err(Error::Invalid(format!(
                "k must be at least 2, got {}",
                self.k
            )));
        }
        if self.trials < 2 || self.polarised_users < 2 {
            return Err(Error::Invalid(format!(
                "trials and polarised_users must be at least 2, got {} and {}",
                self.trials, self.polarised_users
            )));
        }
        if self.trials > u64::from(u32::MAX) || self.polarised_users > u64::from(u32::MAX) {
            return Err(Error::Invalid("at most 2^32 - 1 trials".into()));
        }
        scenarios::check_percentiles(&self.percentiles)?;
        check_seed(self.seed)?;
        for s in self.scenarios() {
            s.validate()?;
        }
        Ok(())
    }
}

/// Everything one synthetic run produced.
#[derive(Debug, Clone)]
pub struct SynthResults {
    /// The drawn datasets, in run order.
    pub datasets: Vec<Dataset>,
    /// One row per (scenario, mechanism, ε).
    pub rows: Vec<MseRow>,
    /// Correlations of each scenario's mean scores and sensitivities.
    pub correlations: Vec<CorrRow>,
    /// Pick shares of every mechanism on the fig 6 scenarios at ε = 0.05 (fig 6 e–h).
    pub picks: Vec<picks::PickRow>,
}

/// Total work units of `cfg` (trials × mechanisms × ε's), for a progress bar.
pub fn synth_work_units(cfg: &SynthConfig) -> Result<u64> {
    let m = cfg.mechanism_specs()?.len() as u64;
    Ok(cfg
        .scenarios()
        .iter()
        .map(|s| cfg.trials_for(s) as u64 * cfg.epsilons_for(s).len() as u64 * m)
        .sum())
}

/// Runs the synthetic experiment of `cfg` (docs/experiments.md and docs/mechanisms.md).
pub fn run_synth(cfg: &SynthConfig, progress: &(dyn Fn(u64) + Sync)) -> Result<SynthResults> {
    cfg.validate()?;
    let specs = cfg.mechanism_specs()?;
    let streams = Streams::new(cfg.seed);
    let data_streams = scenarios::data_streams(&streams);
    let params = cfg.mech_params()?;
    let mut out = SynthResults {
        datasets: Vec::new(),
        rows: Vec::new(),
        correlations: Vec::new(),
        picks: Vec::new(),
    };
    for scenario in cfg.scenarios() {
        let data = scenarios::generate_with(
            scenario,
            cfg.k,
            cfg.trials_for(&scenario),
            &data_streams,
            (cfg.percentiles[0], cfg.percentiles[1]),
        )?;
        let eps = cfg.epsilons_for(&scenario);
        out.rows.extend(synthetic::run_mse(
            &data, &specs, &eps, &params, &streams, progress,
        )?);
        out.correlations.extend(synthetic::correlations(&data));
        if let Scenario::Exceptional(_) = scenario {
            out.picks.extend(picks::picks(
                &data,
                &specs,
                &params,
                picks::FIG6_PICKS_EPSILON,
                &streams,
            )?);
        }
        out.datasets.push(data);
    }
    Ok(out)
}

/// Seeds below 2^63, so the resolved configuration can be written as TOML (a signed 64-bit
/// integer).
pub fn check_seed(seed: u64) -> Result<()> {
    if seed > i64::MAX as u64 {
        return Err(Error::Invalid(format!(
            "seed must be below 2^63 (TOML integers are signed), got {seed}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_grid_is_log_spaced_with_exact_decades() {
        let g = default_epsilons();
        assert_eq!(g.len(), 17);
        for d in [0.01, 0.1, 1.0, 10.0, 16.0] {
            assert!(g.contains(&d), "{d} missing from {g:?}");
        }
        assert!(
            g.windows(2).all(|w| (1.5..1.7).contains(&(w[1] / w[0]))),
            "{g:?}"
        );
    }
}
