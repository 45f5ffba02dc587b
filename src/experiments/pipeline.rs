//! Pipeline files: one TOML file per figure under `pipelines/`, run by `recsel run <file>`.
//!
//! ```toml
//! figure = "fig2"
//! description = "Scenarios 1-3"
//! out = "out/fig2"
//!
//! [synth]            # or [twocand], [select] or [bandit]; every key optional, defaults of SPEC §4
//! scenario = "1"
//! ```
//!
//! Unknown keys anywhere are errors (`deny_unknown_fields`), so a typo cannot silently fall back to
//! a default.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::experiments::bandit::BanditConfig;
use crate::experiments::select_pipeline::SelectPipeline;
use crate::experiments::twocand::TwocandConfig;
use crate::experiments::SynthConfig;

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
    pub synth: Option<SynthConfig>,
    /// Two-candidate grids (figs 3, 15, 16, 17).
    pub twocand: Option<TwocandConfig>,
    /// Real-data private selection (figs 13, 21).
    pub select: Option<SelectPipeline>,
    /// Bandit under distribution shift (fig 14).
    pub bandit: Option<BanditConfig>,
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

    /// Reads, parses and validates a pipeline file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Exactly one of `[synth]`, `[twocand]`, `[select]` and `[bandit]`, each valid.
    pub fn validate(&self) -> Result<()> {
        match (&self.synth, &self.twocand, &self.select, &self.bandit) {
            (Some(s), None, None, None) => s.validate(),
            (None, Some(t), None, None) => t.validate(),
            (None, None, Some(r), None) => r.validate(),
            (None, None, None, Some(b)) => b.validate(),
            _ => Err(Error::Invalid(
                "a pipeline needs exactly one of the tables [synth], [twocand], [select] and \
                 [bandit]"
                    .into(),
            )),
        }
    }
}
