//! Seed 001's figure 13 as one image: the three `select` runs of `pipelines/fig13_*.toml`, read
//! back from their folders, side by side.

use std::path::{Path, PathBuf};

use super::super::plot;
use crate::error::Result;
use crate::experiments::select::{random_sample, UserRow, SCATTER_USERS};
use crate::experiments::synthetic::MseRow as PlotRow;

/// The folders of seed 001's three fig 13 runs (`pipelines/fig13_*.toml`), in column order.
pub const FIG13_RUNS: [&str; 3] = ["fig13_ml20m", "fig13_netflix", "fig13_amazon_book"];

fn read_text(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).map_err(|e| crate::error::Error::io(p, e))
}

fn bad(p: &Path, what: String) -> crate::error::Error {
    crate::error::Error::Parse {
        context: p.display().to_string(),
        message: what,
    }
}

/// One finished `select` run's fig 13 panels, read back from its folder (`config.json`,
/// `users.csv`, `mse.csv`): the same values its own fig 13 plots were drawn from.
pub fn fig13_column(dir: &Path) -> Result<plot::Fig13Column> {
    let cp = dir.join("config.json");
    let config: serde_json::Value =
        serde_json::from_str(&read_text(&cp)?).map_err(|e| bad(&cp, e.to_string()))?;
    let c = &config["config"];
    let title = c["dataset"].as_str().unwrap_or("?").to_string();
    let seed = c["select"]["seed"].as_u64().unwrap_or(0);
    let epsilons: Vec<f64> = c["select"]["epsilons"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    let scatter_eps = c["scatter_eps"]
        .as_f64()
        .unwrap_or_else(|| crate::experiments::select::SelectOptions::default().scatter_eps());
    // users.csv: the first column is the user id (possibly quoted), the rest are numbers.
    let up = dir.join("users.csv");
    let text = read_text(&up)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let numbers: Vec<Vec<f64>> = lines
        .enumerate()
        .map(|(i, l)| {
            let mut f: Vec<&str> = l.rsplitn(header.len().max(1), ',').collect();
            f.reverse();
            f.iter()
                .skip(1)
                .map(|x| x.parse::<f64>())
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(|_| {
                    bad(
                        &up,
                        format!("line {}: not numbers after the user id", i + 2),
                    )
                })
        })
        .collect::<Result<_>>()?;
    let at = |row: &Vec<f64>, c: usize| row[c - 1];
    let sp = col("spearman").ok_or_else(|| bad(&up, "no spearman column".into()))?;
    let spearman: Vec<f64> = numbers.iter().map(|r| at(r, sp)).collect();
    let rows: Vec<UserRow> = spearman
        .iter()
        .map(|&v| UserRow {
            user: 0,
            candidates: 0,
            spearman: v,
            pearson: 0.0,
            weighted: 0.0,
            max_score: 0.0,
            mean_selected: Vec::new(),
            mse: Vec::new(),
            random_mse: 0.0,
            hit: Vec::new(),
            in_history: Vec::new(),
            bottom: Vec::new(),
        })
        .collect();
    let summary = crate::experiments::select::spearman_summary(&rows);
    let e = (0..epsilons.len()).min_by(|&a, &b| {
        let d = |i: usize| (epsilons[i] / scatter_eps).ln().abs();
        d(a).total_cmp(&d(b))
    });
    let scatter = e.and_then(|e| {
        let eps = epsilons[e];
        let (mg, g) = (
            col(&format!("mean_mgem_eps{eps}"))?,
            col(&format!("mean_gem_eps{eps}"))?,
        );
        let (mut points, mut left_out) = (Vec::new(), 0u64);
        for i in random_sample(numbers.len(), SCATTER_USERS, seed) {
            let (a, b) = (at(&numbers[i], mg), at(&numbers[i], g));
            if a > 0.0 && b > 0.0 {
                points.push((spearman[i], (a / b).ln()));
            } else {
                left_out += 1;
            }
        }
        Some((points, left_out, eps))
    });
    let mp = dir.join("mse.csv");
    let text = read_text(&mp)?;
    let mut lines = text.lines();
    // Columns by name: the table gains columns over time (guarantee, hit@1, ...).
    let mheader: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mcol = |name: &str| {
        mheader
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| bad(&mp, format!("no `{name}` column")))
    };
    let (c_mech, c_private, c_eps, c_mse, c_se, c_users, c_trials) = (
        mcol("mechanism")?,
        mcol("private")?,
        mcol("epsilon")?,
        mcol("mse")?,
        mcol("se")?,
        mcol("users")?,
        mcol("trials")?,
    );
    let c_guarantee = mcol("guarantee").ok();
    let mse = lines
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |k: usize| f.get(k).and_then(|x| x.parse::<f64>().ok());
            match (
                f.get(c_mech),
                num(c_eps),
                num(c_mse),
                num(c_se),
                num(c_users),
                num(c_trials),
            ) {
                (Some(mech), Some(epsilon), Some(mse), Some(se), Some(users), Some(trials)) => {
                    Ok(PlotRow {
                        scenario: title.clone(),
                        mechanism: mech.to_string(),
                        private: f.get(c_private) == Some(&"true"),
                        guarantee: c_guarantee
                            .and_then(|c| f.get(c))
                            .map_or(String::new(), |g| g.to_string()),
                        epsilon,
                        mse,
                        se,
                        trials: (users * trials) as u64,
                    })
                }
                _ => Err(bad(
                    &mp,
                    format!("line {}: not a row of an MSE table", i + 2),
                )),
            }
        })
        .collect::<Result<_>>()?;
    Ok(plot::Fig13Column {
        title,
        spearman,
        summary,
        scatter,
        mse,
    })
}

/// Writes `fig13.png` (and `.svg` with `--svg`) into `parent` when the three fig 13 runs
/// [`FIG13_RUNS`] exist under it (each with its `mse.csv`); returns the path written, or `None`
/// when a run is missing.
pub fn write_fig13_combined(parent: &Path) -> Result<Option<PathBuf>> {
    let dirs: Vec<PathBuf> = FIG13_RUNS.iter().map(|r| parent.join(r)).collect();
    if !dirs.iter().all(|d| d.join("mse.csv").exists()) {
        return Ok(None);
    }
    let columns = dirs
        .iter()
        .map(|d| fig13_column(d))
        .collect::<Result<Vec<_>>>()?;
    let path = parent.join("fig13.png");
    plot::fig13_combined_png(&path, &columns)?;
    Ok(Some(path))
}
