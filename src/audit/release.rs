//! The whole-release neighbour audit (docs/privacy-report.md, "The whole-release audit"): two
//! release directories made the same way — same seeds, same noise streams
//! ([`crate::rng::AUDIT_NOISE_SEED`]) — from neighbouring data sets must agree byte for byte in
//! every field of every file, except the declared noisy outputs ([`NOISY_OUTPUTS`]): the fields
//! a DP part of the release computes from noise, which differ between neighbours only where the
//! data moved them. Any other difference is a data-derived fact that no guarantee covers.
//!
//! JSON files are compared field by field (objects by key, arrays of objects element by
//! element, arrays of plain values as one field), `.npz` archives entry by entry, every other
//! file as bytes. A noisy output is declared only while the release's own privacy report says
//! the part that produced it is differentially private — the weights of a fit without DP are
//! data, not noise.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// One declared noisy output: a field of a file (`field` a prefix of the field's path, `""` for
/// the whole file or every entry of an archive) and the part of the privacy report that releases
/// it with noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoisyOutput {
    /// The file in the release directory.
    pub file: &'static str,
    /// The field path prefix (`rows[0].private`, an npz entry name, or `""`).
    pub field: &'static str,
    /// The privacy report's part (`parts[].part`) that must be DP for the field to be noisy.
    pub part: &'static str,
    /// Why it is noisy.
    pub why: &'static str,
}

/// The "part" of a random identifier: drawn for each release from the operating system (or the
/// audit's noise seed), independent of the data, so declared whatever the privacy report says.
pub const RANDOM: &str = "random identifier";

/// The part of the DP item universe ([`crate::model::options::ITEM_UNIVERSE`]): its outputs are
/// declared only while the report's entry for it is a DP output (not a declared public
/// catalogue, whose items never differ between neighbours, and not a universe derived from the
/// data).
const UNIVERSE: &str = crate::model::options::ITEM_UNIVERSE;

/// Every declared noisy output of a release: the one list the audit reads (with
/// `TUNING_OUTPUTS`, the fields of each row of a private tuning). A field computed only from
/// DP outputs (post-processing) is declared under the part that makes those DP.
pub const NOISY_OUTPUTS: &[NoisyOutput] = &[
    NoisyOutput {
        file: "model.json",
        field: "release_id",
        part: RANDOM,
        why: "a random identifier drawn for each release, not derived from the data",
    },
    NoisyOutput {
        file: "release.json",
        field: "release_id",
        part: RANDOM,
        why: "the model's random identifier",
    },
    NoisyOutput {
        file: "model.json",
        field: "item_ids",
        part: UNIVERSE,
        why: "the items the DP partition selection released",
    },
    NoisyOutput {
        file: "model.json",
        field: "n_items",
        part: UNIVERSE,
        why: "the number of items the DP partition selection released",
    },
    NoisyOutput {
        file: "model.json",
        field: "item_universe.mechanism",
        part: UNIVERSE,
        why: "the partition selection described, with the number of items it released",
    },
    NoisyOutput {
        file: "model.json",
        field: "training_privacy.mechanism",
        part: UNIVERSE,
        why: "the DP fit described, with the number of items the partition selection released",
    },
    NoisyOutput {
        file: "model.json",
        field: "training_privacy.note",
        part: UNIVERSE,
        why: "the λ used, computed from the number of released items (the positive-definite \
              floor grows with it)",
    },
    NoisyOutput {
        file: "release.json",
        field: "item_ids",
        part: UNIVERSE,
        why: "the items the DP partition selection released",
    },
    NoisyOutput {
        file: "release.json",
        field: "n_items",
        part: UNIVERSE,
        why: "the number of items the DP partition selection released",
    },
    NoisyOutput {
        file: "privacy.json",
        field: "parts[item universe, training users].mechanism",
        part: UNIVERSE,
        why: "the partition selection described, with the number of items it released",
    },
    NoisyOutput {
        file: "privacy.json",
        field: "parts[model weights, training users].mechanism",
        part: UNIVERSE,
        why: "the DP fit described, with the number of items the partition selection released",
    },
    NoisyOutput {
        file: "privacy.json",
        field: "parts[model weights, training users].note",
        part: UNIVERSE,
        why: "the λ used, computed from the number of released items",
    },
    NoisyOutput {
        file: "model.json",
        field: "shift_choice.chosen",
        part: crate::privacy::report::SHIFT_CHOICE,
        why: "the shift the exponential mechanism chose on the calibration users",
    },
    NoisyOutput {
        file: "w.npz",
        field: "",
        part: "model weights",
        why: "SANSA weights, post-processing of the noisy Gram matrix",
    },
    NoisyOutput {
        file: "w_r.npz",
        field: "",
        part: "model weights",
        why: "SANSA weights, post-processing of the noisy Gram matrix",
    },
    NoisyOutput {
        file: "b.npy",
        field: "",
        part: "model weights",
        why: "EASE weights, post-processing of the noisy Gram matrix",
    },
    NoisyOutput {
        file: "model.json",
        field: "files",
        part: "model weights",
        why: "sizes and checksums of the noisy weight files",
    },
    NoisyOutput {
        file: "release.json",
        field: "model_file",
        part: "model weights",
        why: "size and checksum of model.json, which holds the weight files' checksums",
    },
    NoisyOutput {
        file: "release.json",
        field: "files",
        part: "model weights",
        why: "sizes and checksums of calibration.npz (noisy arrays) and privacy.json",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "p1.npy",
        part: "clip ranges",
        why: "clip ranges derived from the (noisy) model weights",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "p99.npy",
        part: "clip ranges",
        why: "clip ranges derived from the (noisy) model weights",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "delta.npy",
        part: "clip ranges",
        why: "sensitivities derived from the (noisy) model weights",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "count.npy",
        part: "clip ranges",
        why: "derived with the clip ranges",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "popularity.npy",
        part: "popularity counts",
        why: "DP item counts",
    },
    NoisyOutput {
        file: "calibration.npz",
        field: "heldout.npy",
        part: "held-out counts",
        why: "DP held-out counts",
    },
    NoisyOutput {
        file: "tuning.json",
        field: "release_file",
        part: "model weights",
        why: "size and checksum of release.json, which holds noisy files' checksums",
    },
];

/// The private tuner's released outputs, per row of `tuning.json`: its choice, the chosen
/// configuration's noisy score (a sum), the margin rule's noisy held-out estimates (sums over a
/// noisy count) and what is computed from those alone — the served mechanism and its ε, the
/// best free option by its noisy estimate, the reason text that prints them. Nothing else of a
/// row (how many runs it made, how many users it read) is a declared output.
const TUNING_OUTPUTS: &[&str] = &[
    "mechanism",
    "candidates",
    "prior",
    "spends",
    "best_pool",
    "best_prior",
    "clip",
    "calibration_hit",
    "calibration_se",
    "free_option",
    "free_hit",
    "reason",
    "private.noisy_score",
    "private.threshold",
    "private.gain",
];

/// One field that differs between two releases.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The file.
    pub file: String,
    /// The field's path inside it (`""`: the whole file).
    pub field: String,
    /// The value in the first release (shortened), or `absent`.
    pub a: String,
    /// The value in the second release.
    pub b: String,
    /// The declared noisy output that covers it, if any.
    pub declared: Option<NoisyOutput>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.field.is_empty() {
            self.file.clone()
        } else {
            format!("{}: {}", self.file, self.field)
        };
        match &self.declared {
            Some(d) => write!(f, "declared noisy ({}): {at}", d.part),
            None => write!(f, "UNDECLARED {at}: {} ≠ {}", self.a, self.b),
        }
    }
}

/// Two differing values as shown in a report: whole when short, else a window of each around
/// their first difference, with their lengths.
fn show_pair(a: &str, b: &str) -> (String, String) {
    let (ca, cb): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if ca.len() <= 120 && cb.len() <= 120 {
        return (a.to_string(), b.to_string());
    }
    let p = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
    let from = p.saturating_sub(40);
    let window = |c: &[char]| {
        let to = (p + 40).min(c.len());
        format!(
            "…{}… ({} chars, first difference at {p})",
            c[from.min(c.len())..to].iter().collect::<String>(),
            c.len()
        )
    };
    (window(&ca), window(&cb))
}

/// The leaves of a JSON value: objects by key, arrays of objects or arrays by index, arrays of
/// plain values and plain values as one field each.
fn leaves(v: &Value, path: String, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(x, p, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{path}[{i}]"), out);
            }
        }
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// The release's parts that its privacy report calls differentially private (ε given), and
/// the tuning when `tuning.json` records a private selection.
fn private_parts(dir: &Path) -> Vec<String> {
    let mut parts = Vec::new();
    if let Ok(bytes) = std::fs::read(dir.join("privacy.json")) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            for p in v["parts"].as_array().into_iter().flatten() {
                let public_input = p["unit"] == crate::model::options::PUBLIC_INPUT_UNIT;
                if !p["epsilon"].is_null() && !public_input {
                    if let Some(name) = p["part"].as_str() {
                        parts.push(name.to_string());
                    }
                }
            }
        }
    }
    if let Ok(bytes) = std::fs::read(dir.join("tuning.json")) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            let rows = v["rows"].as_array().cloned().unwrap_or_default();
            if !rows.is_empty() && rows.iter().all(|r| !r["private"].is_null()) {
                parts.push("tuning".into());
            }
        }
    }
    parts
}

/// The declared noisy output covering `field` of `file`, given the parts that are DP in both
/// releases.
fn declared(file: &str, field: &str, private: &[String]) -> Option<NoisyOutput> {
    if file == "tuning.json" && private.iter().any(|p| p == "tuning") {
        if let Some(rest) = field.strip_prefix("rows[") {
            let inner = rest.split_once("].").map_or("", |(_, f)| f);
            if TUNING_OUTPUTS
                .iter()
                .any(|o| inner == *o || inner.starts_with(&format!("{o}.")))
            {
                return Some(NoisyOutput {
                    file: "tuning.json",
                    field: "rows",
                    part: "tuning",
                    why: "the private tuner's choice, its noisy scores and what they alone give",
                });
            }
        }
    }
    NOISY_OUTPUTS.iter().copied().find(|d| {
        d.file == file
            && (d.part == RANDOM || private.iter().any(|p| p == d.part))
            && (d.field.is_empty()
                || field == d.field
                || field.starts_with(&format!("{}.", d.field))
                || field.starts_with(&format!("{}[", d.field)))
    })
}

/// The fields of one file: JSON leaves, npz entries, or the file's bytes (hex of a hash and the
/// length, enough to tell them apart).
fn fields(path: &Path) -> Result<BTreeMap<String, String>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    let mut out = BTreeMap::new();
    if name.ends_with(".json") {
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        leaves(&v, String::new(), &mut out);
        if name == crate::privacy::report::PRIVACY {
            out = key_parts(&v, out);
        }
    } else if name.ends_with(".npz") {
        for (entry, data) in crate::model::io::read_npz(path, &bytes)? {
            out.insert(entry, digest(&data));
        }
    } else {
        out.insert(String::new(), digest(&bytes));
    }
    Ok(out)
}

/// The privacy report's fields with each part named by its name and population (`parts[model
/// weights, training users].mechanism`) rather than by position, so that a part present in
/// only one release (a held-out count) does not shift the others.
fn key_parts(v: &Value, out: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let names: Vec<String> = v["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(
            |(i, p)| match (p["part"].as_str(), p["population"].as_str()) {
                (Some(a), Some(b)) => format!("{a}, {b}"),
                _ => i.to_string(),
            },
        )
        .collect();
    out.into_iter()
        .map(|(k, x)| {
            for (i, name) in names.iter().enumerate() {
                if let Some(rest) = k.strip_prefix(&format!("parts[{i}]")) {
                    return (format!("parts[{name}]{rest}"), x);
                }
            }
            (k, x)
        })
        .collect()
}

/// A short, exact description of bytes: their length and 64-bit FNV hash.
fn digest(bytes: &[u8]) -> String {
    let mut h = crate::data::Fnv64::new();
    h.write(bytes);
    format!("{} bytes, fnv {:016x}", bytes.len(), h.finish())
}

/// The files of a release directory (sorted names; sub-directories and temporary files skipped).
fn files(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        if e.path().is_file() {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Every field of every file that differs between the release directories `a` and `b`, each
/// marked with the declared noisy output that covers it (the part must be DP in both releases).
pub fn compare_releases(a: &Path, b: &Path) -> Result<Vec<Difference>> {
    let pa = private_parts(a);
    let pb = private_parts(b);
    let private: Vec<String> = pa.into_iter().filter(|p| pb.contains(p)).collect();
    let (fa, fb) = (files(a)?, files(b)?);
    let mut names: Vec<String> = fa.iter().chain(&fb).cloned().collect();
    names.sort();
    names.dedup();
    let mut diffs = Vec::new();
    for name in names {
        let (in_a, in_b) = (fa.contains(&name), fb.contains(&name));
        if !(in_a && in_b) {
            diffs.push(Difference {
                file: name.clone(),
                field: String::new(),
                a: if in_a { "present" } else { "absent" }.into(),
                b: if in_b { "present" } else { "absent" }.into(),
                declared: None,
            });
            continue;
        }
        let (x, y) = (fields(&a.join(&name))?, fields(&b.join(&name))?);
        let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (u, v) = (x.get(k), y.get(k));
            if u != v {
                let absent = "absent".to_string();
                let (sa, sb) = show_pair(u.unwrap_or(&absent), v.unwrap_or(&absent));
                diffs.push(Difference {
                    file: name.clone(),
                    field: k.clone(),
                    a: sa,
                    b: sb,
                    declared: declared(&name, k, &private),
                });
            }
        }
    }
    Ok(diffs)
}

/// The differences no declared noisy output covers: what the audit flags.
pub fn undeclared(diffs: &[Difference]) -> Vec<&Difference> {
    diffs.iter().filter(|d| d.declared.is_none()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("recsel-ar-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Identical files give nothing; a changed plain field is flagged with both values; a noisy
    /// output is declared only while its part is DP in both privacy reports.
    #[test]
    fn differences_are_found_and_declared_only_under_a_dp_part() {
        let (a, b) = (dir("a"), dir("b"));
        let privacy = r#"{"parts":[{"part":"model weights","epsilon":1.0}]}"#;
        for d in [&a, &b] {
            std::fs::write(d.join("privacy.json"), privacy).unwrap();
            std::fs::write(d.join("b.npy"), b"same").unwrap();
        }
        let model = |n: u32, crc: u32| {
            format!(r#"{{"n_items":{n},"item_ids":["1","2"],"files":[{{"crc32":{crc}}}]}}"#)
        };
        std::fs::write(a.join("model.json"), model(2, 7)).unwrap();
        std::fs::write(b.join("model.json"), model(2, 7)).unwrap();
        assert!(compare_releases(&a, &b).unwrap().is_empty());
        std::fs::write(b.join("model.json"), model(3, 8)).unwrap();
        std::fs::write(b.join("b.npy"), b"other").unwrap();
        let d = compare_releases(&a, &b).unwrap();
        let flagged: Vec<String> = undeclared(&d).iter().map(|d| d.to_string()).collect();
        assert_eq!(flagged, vec!["UNDECLARED model.json: n_items: 2 ≠ 3"]);
        assert_eq!(d.len(), 3, "{d:?}");
        // Without a DP part nothing is noisy.
        std::fs::write(b.join("privacy.json"), r#"{"parts":[]}"#).unwrap();
        let d = compare_releases(&a, &b).unwrap();
        let flagged: Vec<String> = undeclared(&d).iter().map(|d| d.to_string()).collect();
        assert!(
            flagged.iter().any(|f| f.starts_with("UNDECLARED b.npy")),
            "{flagged:?}"
        );
        assert!(flagged
            .iter()
            .any(|f| f.starts_with("UNDECLARED model.json: files[0].crc32")));
        std::fs::remove_dir_all(&a).ok();
        std::fs::remove_dir_all(&b).ok();
    }
}
