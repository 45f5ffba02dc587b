//! Loading a [`Recommender`] from a model directory (docs/deployment.md, "Serving"): the model
//! and its release, checked against each other, the privacy report with the tuning entry, and
//! the configuration the directory's `tuning.json` resolves a request to. Every file is read
//! once, at start: the answer of another length a tuned recommender is asked for
//! ([`Recommender::for_k`]) is resolved from what was read then, so the configuration served and
//! the privacy report always come from the same `tuning.json`, whatever happens to the directory
//! while it serves.

use std::path::Path;
use std::sync::Arc;

use super::{release, tuned, worth, RecommendConfig, Recommender, Release};
use crate::error::{Error, Result};
use crate::model::{self, Model};
use crate::privacy::report::PrivacyReport;
use crate::privacy::{Population, PopulationPrivacy};

impl Recommender {
    /// Loads the model and the release artifact in `dir` and builds the mechanism of `cfg`. The
    /// mechanism [`tuned::TUNED`] serves the tuned row of `dir/tuning.json` for `cfg`'s ε.
    pub fn load(dir: &Path, cfg: &RecommendConfig) -> Result<Self> {
        let release = Release::read(dir)?;
        let (model, meta) = model::io::load(dir)?;
        if meta.release_id != release.manifest.release_id {
            return Err(Error::Invalid(format!(
                "{}: release id '{}' is not the model's ('{}'): the release was written for \
                 another model",
                dir.join(release::MANIFEST).display(),
                release.manifest.release_id,
                meta.release_id
            )));
        }
        if meta.item_ids != release.manifest.item_ids {
            return Err(Error::Invalid(format!(
                "{}: the release's item ids differ from the model's",
                dir.display()
            )));
        }
        let report = match &release.privacy {
            Some(r) => r.clone(),
            None => release.report_of_meta(&meta),
        };
        let tuning = tuned::Tuning::read_if_any(dir)?.map(Arc::new);
        let report = match &tuning {
            Some(t) => report.with("tuning", t.privacy.clone()),
            None => report,
        };
        Self::load_parts(dir, cfg, Arc::new(model), release, report, tuning)
    }

    /// [`Recommender::load`] once the model, the release (as read), its privacy report (with
    /// the tuning entry) and `tuning.json` (as read) are in memory: what [`Recommender::for_k`]
    /// resolves another length with.
    pub(super) fn load_parts(
        dir: &Path,
        cfg: &RecommendConfig,
        model: Arc<Model>,
        mut release: Release,
        mut report: PrivacyReport,
        tuning: Option<Arc<tuned::Tuning>>,
    ) -> Result<Self> {
        let (resolved, bounds, tuned, worth, list_row) =
            worth::resolve(dir, cfg, &release, tuning.as_deref())?;
        let exact_clip = bounds.as_ref().map(|(c, _)| *c);
        if let Some((_, b)) = bounds {
            if b.lower.len() != release.manifest.n_items {
                return Err(Error::Invalid(format!(
                    "{}: the tuned clip bounds cover {} items, the model {}",
                    dir.display(),
                    b.lower.len(),
                    release.manifest.n_items
                )));
            }
            release.sens = b;
        }
        if let Some((lo, hi)) = exact_clip {
            report = report.with(
                "tuned clip range",
                PopulationPrivacy::public(
                    Population::Calibration,
                    &format!(
                        "the served clip range p{lo}/p{hi} is a pair of exact percentiles of the \
                         calibration users' scores, chosen by `recsel tune` ({})",
                        tuned::BOUNDS
                    ),
                ),
            );
        }
        let mut rec = Self::with_model(model, release, &resolved)?;
        rec.exact_clip = exact_clip;
        rec.tuned = tuned;
        rec.worth = worth;
        rec.report = report;
        rec.origin = (cfg.mechanism == tuned::TUNED).then(|| (dir.to_path_buf(), cfg.clone()));
        rec.tuning = tuning;
        rec.tuned_list = list_row
            .map(|r| {
                let items = rec.public_items(&r)?;
                Ok::<_, Error>((r, items))
            })
            .transpose()?;
        Ok(rec)
    }
}

/// The privacy report of the release in the model directory `dir`, as `recsel privacy` prints
/// it: the release is read and checked ([`Release::read`]: the checksums of `model.json`, the
/// arrays and `privacy.json`), a release written before the report is reported from
/// `model.json` and its manifest (exact statistics), and the tuning entry of `tuning.json` is
/// added.
pub fn release_privacy_report(dir: &Path) -> Result<PrivacyReport> {
    let release = Release::read(dir)?;
    let report = match &release.privacy {
        Some(r) => r.clone(),
        None => {
            let path = dir.join("model.json");
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let meta: model::io::ModelMeta = serde_json::from_slice(&bytes)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
            release.report_of_meta(&meta)
        }
    };
    with_tuning_of(report, dir)
}

/// `report` with the tuning entry of the model directory's `tuning.json` (its `privacy` field;
/// a file without one was chosen non-privately), when the file exists. What `recsel privacy`
/// prints of a directory; a loaded recommender takes the entry from the `tuning.json` it read.
fn with_tuning_of(report: PrivacyReport, dir: &Path) -> Result<PrivacyReport> {
    let path = dir.join(tuned::TUNING);
    if !path.exists() {
        return Ok(report);
    }
    let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let v: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    let privacy = match v.get("privacy") {
        Some(p) if !p.is_null() => serde_json::from_value(p.clone())
            .map_err(|e| Error::Invalid(format!("{}: field privacy: {e}", path.display())))?,
        _ => tuned::public_privacy(),
    };
    Ok(report.with("tuning", privacy))
}
