//! Pipeline files: one TOML file per figure under `pipelines/`, run by `recsel run <file>`.
//!
//! ```toml
//! figure = "fig2"
//! description = "Scenarios 1-3"
//! out = "out/fig2"
//!
//! [synth]            # or [twocand], [select], [bandit] or [illustrate]; every key optional
//! scenario = "1"
//! ```
//!
//! Unknown keys anywhere are errors (`deny_unknown_fields`), so a typo cannot silently fall back to
//! a default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::experiments::bandit::BanditOptions;
use crate::experiments::illustrate::IllustrateConfig;
use crate::experiments::select::SelectOptions;
use crate::experiments::twocand::TwocandOptions;
use crate::experiments::SynthOptions;

/// One pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// The figure it regenerates (`fig2`, …).
    pub figure: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// Output directory (relative paths are relative to the working directory).
    pub out: PathBuf,
    /// Synthetic scenarios (figs 2, 8, 10, 12, 18).
    pub synth: Option<SynthOptions>,
    /// Two-candidate grids (figs 3, 15, 16, 17).
    pub twocand: Option<TwocandOptions>,
    /// Real-data private selection (figs 13, 21).
    pub select: Option<SelectOptions>,
    /// Bandit under distribution shift (fig 14).
    pub bandit: Option<BanditOptions>,
    /// Illustrations computed exactly (figs 4, 22).
    pub illustrate: Option<IllustrateConfig>,
}

impl Pipeline {
    /// Parses and validates TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let p: Pipeline = toml::from_str(text).map_err(|e| Error::Parse {
            context: origin.to_string(),
            message: e.to_string(),
        })?;
        p.validate().map_err(|e| Error::Parse {
            context: origin.to_string(),
            message: e.to_string(),
        })?;
        Ok(p)
    }

    /// Reads, parses and validates a pipeline file — or the resolved `config.toml` written beside
    /// a run's results ([`Pipeline::from_resolved`]).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let origin = path.display().to_string();
        if let Ok(v) = text.parse::<toml::Table>() {
            if v.get("tool").and_then(|t| t.as_str()) == Some("recsel") {
                let dir = path.parent().unwrap_or(Path::new("."));
                return Self::from_resolved(v, dir, &origin);
            }
        }
        Self::parse(&text, &origin)
    }

    /// The pipeline that reruns a finished run from its resolved configuration (`tool`,
    /// `version`, `command`, `[config]`; docs/protocol.md, "Rerunning a run"), writing into
    /// `dir` (the run's own folder) unless `recsel run --out` says otherwise. For `select` the
    /// table is `[config.pipeline]`; for the other commands `[config]` is the table itself.
    pub fn from_resolved(mut resolved: toml::Table, dir: &Path, origin: &str) -> Result<Self> {
        let err = |message: String| Error::Parse {
            context: origin.to_string(),
            message,
        };
        let command = match resolved.get("command").and_then(|c| c.as_str()) {
            Some(c) => c.to_string(),
            None => return Err(err("a resolved configuration without `command`".into())),
        };
        let mut config = match resolved.remove("config") {
            Some(toml::Value::Table(t)) => t,
            _ => return Err(err("a resolved configuration without [config]".into())),
        };
        let table = if command == "select" {
            match config.remove("pipeline") {
                Some(t) => t,
                None => {
                    return Err(err(
                        "this select configuration has no [config.pipeline] table (written by \
                         recsel before it recorded one); rerun the original command instead"
                            .into(),
                    ))
                }
            }
        } else {
            toml::Value::Table(config)
        };
        let mut p = toml::Table::new();
        p.insert("figure".into(), format!("{command} (rerun)").into());
        p.insert(
            "description".into(),
            format!("rerun of the {command} run in {}", dir.display()).into(),
        );
        p.insert("out".into(), dir.display().to_string().into());
        p.insert(command, table);
        let text = toml::to_string(&p).map_err(|e| err(e.to_string()))?;
        Self::parse(&text, origin)
    }

    /// Exactly one of `[synth]`, `[twocand]`, `[select]`, `[bandit]` and `[illustrate]`, each
    /// valid.
    pub fn validate(&self) -> Result<()> {
        match (
            &self.synth,
            &self.twocand,
            &self.select,
            &self.bandit,
            &self.illustrate,
        ) {
            (Some(s), None, None, None, None) => s.check(),
            (None, Some(t), None, None, None) => t.check(),
            (None, None, Some(r), None, None) => r.check(),
            (None, None, None, Some(b), None) => b.check(),
            (None, None, None, None, Some(i)) => i.validate(),
            _ => Err(Error::Invalid(
                "a pipeline needs exactly one of the tables [synth], [twocand], [select], \
                 [bandit] and [illustrate]"
                    .into(),
            )),
        }
    }
}
