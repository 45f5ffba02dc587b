//! Helpers shared by the integration tests: the statistical helpers below, the shared-data and
//! CLI helpers, and the HTTP harness of the `recsel serve` tests ([`http`]).
//!
//! Every statistical test uses a fixed seed and rejects at p < 1e-6, so a correct implementation
//! fails spuriously about once in a million runs; each also has a power check — the same test
//! applied with ε (or γ) misstated by ±30% must reject (docs/ARCHITECTURE.md, after OpenDP and Tumult).

#[cfg(feature = "serve")]
pub mod http;

use rayon::prelude::*;
use recsel::mechanisms::{Mechanism, Problem};
use recsel::numerics::hypothesis::{chi_square_gof, chi_square_homogeneity};
use recsel::rng::Streams;

/// Rejection threshold of every statistical test.
pub const ALPHA: f64 = 1e-6;

/// Output counts of `n` selections, selection i on its own stream of `seed`, prepared for many
/// selections ([`Mechanism::prepare_many`]).
pub fn counts(mech: &dyn Mechanism, q: &[f64], d: &[f64], n: u64, seed: u64) -> Vec<u64> {
    counts_with(mech, q, d, n, seed, true)
}

/// As [`counts`], through [`Mechanism::prepare`] when `many` is false.
pub fn counts_with(
    mech: &dyn Mechanism,
    q: &[f64],
    d: &[f64],
    n: u64,
    seed: u64,
    many: bool,
) -> Vec<u64> {
    let problem = Problem::new(q, d).unwrap();
    let prepared = if many {
        mech.prepare_many(&problem)
    } else {
        mech.prepare(&problem)
    };
    let streams = Streams::new(seed);
    (0..n)
        .into_par_iter()
        .fold(
            || vec![0u64; q.len()],
            |mut c, i| {
                let mut rng = streams.stream(1, 0, 0, i as u32);
                c[prepared.sample(&mut rng)] += 1;
                c
            },
        )
        .reduce(
            || vec![0u64; q.len()],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// Asserts the counts fit `probs` (p ≥ 1e-6).
pub fn assert_fits(counts: &[u64], probs: &[f64], what: &str) {
    let r = chi_square_gof(counts, probs);
    assert!(
        r.p_value >= ALPHA,
        "{what}: counts {counts:?} do not fit {probs:?} (chi2 {:.2}, dof {}, p {:.3e})",
        r.statistic,
        r.dof,
        r.p_value
    );
}

/// Asserts the counts do not fit `probs` (p < 1e-6): the power check.
pub fn assert_rejects(counts: &[u64], probs: &[f64], what: &str) {
    let r = chi_square_gof(counts, probs);
    assert!(
        r.p_value < ALPHA,
        "{what}: the test has no power: counts {counts:?} fit the wrong {probs:?} (p {:.3e})",
        r.p_value
    );
}

/// Asserts two count vectors come from one distribution (p ≥ 1e-6), or not.
pub fn assert_same(a: &[u64], b: &[u64], expect_same: bool, what: &str) {
    let r = chi_square_homogeneity(a, b);
    if expect_same {
        assert!(
            r.p_value >= ALPHA,
            "{what}: {a:?} vs {b:?} differ (p {:.3e})",
            r.p_value
        );
    } else {
        assert!(
            r.p_value < ALPHA,
            "{what}: no power: {a:?} vs {b:?} (p {:.3e})",
            r.p_value
        );
    }
}

/// Noise of a noisy-max mechanism, for the exact distribution below.
#[derive(Clone, Copy)]
pub enum NoiseLaw {
    /// Exp(mean = scale).
    Exponential,
    /// Lap(scale).
    Laplace,
}

impl NoiseLaw {
    fn pdf(self, z: f64, b: f64) -> f64 {
        match self {
            NoiseLaw::Exponential => {
                if z < 0.0 {
                    0.0
                } else {
                    (-z / b).exp() / b
                }
            }
            NoiseLaw::Laplace => (-z.abs() / b).exp() / (2.0 * b),
        }
    }

    fn cdf(self, z: f64, b: f64) -> f64 {
        match self {
            NoiseLaw::Exponential => {
                if z < 0.0 {
                    0.0
                } else {
                    -(-z / b).exp_m1()
                }
            }
            NoiseLaw::Laplace => {
                if z < 0.0 {
                    0.5 * (z / b).exp()
                } else {
                    1.0 - 0.5 * (-z / b).exp()
                }
            }
        }
    }
}

/// Exact output distribution of `argmax_a q_a + Z_a`, Z_a independent with scale `scales[a]`:
/// `P(a) = ∫ f_a(x − q_a) Π_{b≠a} F_b(x − q_b) dx`, by composite Simpson's rule on the pieces
/// between the kinks at the scores (error far below the sampling error of any test here).
pub fn noisy_max_exact(q: &[f64], scales: &[f64], law: NoiseLaw) -> Vec<f64> {
    let bmax = scales.iter().cloned().fold(0.0, f64::max);
    let lo = q.iter().cloned().fold(f64::INFINITY, f64::min) - 60.0 * bmax;
    let hi = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max) + 60.0 * bmax;
    let mut knots: Vec<f64> = q.to_vec();
    knots.push(lo);
    knots.push(hi);
    knots.sort_by(f64::total_cmp);
    knots.dedup();
    let k = q.len();
    let integrand = |a: usize, x: f64| {
        let mut v = law.pdf(x - q[a], scales[a]);
        for b in 0..k {
            if b != a {
                v *= law.cdf(x - q[b], scales[b]);
            }
        }
        v
    };
    (0..k)
        .map(|a| {
            let mut total = 0.0;
            for w in knots.windows(2) {
                let (x0, x1) = (w[0], w[1]);
                let m = 20_000;
                let h = (x1 - x0) / m as f64;
                let mut s = integrand(a, x0) + integrand(a, x1);
                for i in 1..m {
                    let x = x0 + i as f64 * h;
                    s += if i % 2 == 1 { 4.0 } else { 2.0 } * integrand(a, x);
                }
                total += s * h / 3.0;
            }
            total
        })
        .collect()
}

/// Exact distribution of `rnm` (exponential noise, mean 2Δ/ε).
pub fn rnm_exact(q: &[f64], d: &[f64], eps: f64) -> Vec<f64> {
    let dmax = d.iter().cloned().fold(0.0, f64::max);
    noisy_max_exact(q, &vec![2.0 * dmax / eps; q.len()], NoiseLaw::Exponential)
}

/// Softmax `∝ exp(ε q_a / (2Δ))`.
pub fn softmax(q: &[f64], d: &[f64], eps: f64) -> Vec<f64> {
    let dmax = d.iter().cloned().fold(0.0, f64::max);
    let qmax = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = q
        .iter()
        .map(|x| (eps * (x - qmax) / (2.0 * dmax)).exp())
        .collect();
    let s: f64 = w.iter().sum();
    w.iter().map(|x| x / s).collect()
}

/// Whether the tests run under CI (`CI` set to anything but empty, `0` or `false`): then a missing
/// prerequisite fails the test instead of skipping it.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

/// Printed when the test binary exits: how many tests skipped work and why. Written to the
/// process's stderr directly, which the test harness does not capture.
extern "C" fn print_skip_summary() {
    use std::io::Write as _;
    let list = SKIPPED.lock().map(|l| l.clone()).unwrap_or_default();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\nrecsel tests: {} skipped for a missing prerequisite (they fail under CI=true):",
        list.len()
    );
    for line in list {
        let _ = writeln!(err, "  SKIPPED {line}");
    }
}

/// A prerequisite of `test` is missing (`what`, and how to get it). Under CI this panics, so the
/// test fails and says which prerequisite; otherwise it prints a SKIPPED line straight to the
/// terminal (past the harness's capture) and adds it to the summary printed at exit.
pub fn missing_prerequisite(test: &str, what: &str) {
    if under_ci() {
        panic!("{test}: {what} (CI is set, so a missing prerequisite fails the test)");
    }
    use std::io::Write as _;
    let line = format!("{test}: {what}");
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {line}");
    let mut list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if list.is_empty() {
        // SAFETY: registers a plain `extern "C" fn()` with the C runtime; it only locks a mutex
        // and writes to stderr.
        unsafe {
            atexit(print_skip_summary);
        }
    }
    list.push(line);
}

/// The shared data sets (`../shared/data` beside the checkout; for one data set, its folder
/// `sub`), or `None` after [`missing_prerequisite`].
pub fn shared_data(test: &str, sub: &str) -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    let p = root.join(sub);
    if p.exists() {
        Some(root)
    } else {
        missing_prerequisite(
            test,
            &format!(
                "data set not found: {} (the shared data sets belong beside the checkout)",
                p.display()
            ),
        );
        None
    }
}

/// A Python interpreter that imports every module of `modules`, or `None` after
/// [`missing_prerequisite`].
pub fn python_with(test: &str, modules: &[&str]) -> Option<String> {
    let import = format!("import {}", modules.join(", "));
    let found = ["/tmp/sansa-ref/bin/python", "python3"]
        .into_iter()
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", &import])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        missing_prerequisite(
            test,
            &format!("no Python that can `{import}` (.ci/run installs them with pip)"),
        );
    }
    found.map(str::to_string)
}

/// An end-to-end audit of a private configuration: it claims `claim`, and every lower bound is
/// consistent with it (`what` names the configuration in the messages).
pub fn assert_audit_consistent(
    r: &recsel::audit::end_to_end::EndToEndReport,
    claim: Option<f64>,
    what: &str,
) {
    assert_eq!(r.claimed, claim, "{what}");
    assert_eq!(r.verdict(), "consistent", "{what}");
    let claim = claim.unwrap_or_else(|| panic!("{what}: no claim"));
    assert!(r.max_eps_lb <= claim, "{what}: max eps_LB {}", r.max_eps_lb);
}

/// An end-to-end audit of a known leak: no claim, flagged, its largest lower bound above `above`
/// (the power of the audit).
pub fn assert_audit_flags(r: &recsel::audit::end_to_end::EndToEndReport, above: f64, what: &str) {
    assert_eq!(r.claimed, None, "{what}");
    assert_eq!(r.verdict(), "flagged (not private)", "{what}");
    assert!(r.max_eps_lb > above, "{what}: max eps_LB {}", r.max_eps_lb);
}

/// Runs the recsel binary with `args` and returns its output.
pub fn recsel(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(args)
        .output()
        .expect("run recsel")
}

/// `o`, after asserting that the run succeeded (the failure names its stderr).
pub fn succeeded(o: std::process::Output) -> std::process::Output {
    assert!(
        o.status.success(),
        "recsel failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Runs the recsel binary with `args` and asserts that it succeeded (the failure names the
/// arguments and the stderr).
pub fn ok(args: &[&str]) -> std::process::Output {
    let o = recsel(args);
    assert!(
        o.status.success(),
        "recsel {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The standard output of a run, as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The model options of the small synthetic example release: SANSA (`exact`), λ = 200, density
/// 0.01.
pub const SYNTHETIC_MODEL: &[&str] = &["--method", "exact", "--l2", "200", "--density", "0.01"];

/// A model directory with its release: `recsel fit --dataset synthetic EXTRA --out DIR`,
/// asserted to succeed.
pub fn fit_synthetic(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut a = vec!["fit", "--dataset", "synthetic"];
    a.extend_from_slice(extra);
    a.extend(["--out", dir.to_str().unwrap()]);
    ok(&a)
}

/// The served users of a split: its test users, as (user id, item columns of the history).
pub fn test_users(data: &recsel::data::Dataset) -> Vec<(String, Vec<u32>)> {
    (0..data.test_input.rows())
        .map(|u| {
            let h = data.test_input.outer_view(u).unwrap().indices().to_vec();
            (data.test_user_ids[u].clone(), h)
        })
        .collect()
}

/// Every array of the `.npz` archive at `path`, parsed, in the archive's order (tests that
/// rewrite a release's or a tuning's arrays as an attacker would).
pub fn npz_arrays(path: &std::path::Path) -> Vec<(String, recsel::model::io::NpyArray)> {
    use recsel::model::io::{parse_npy, read_npz};
    let bytes = std::fs::read(path).unwrap();
    read_npz(path, &bytes)
        .unwrap()
        .into_iter()
        .map(|(n, b)| {
            let a = parse_npy(path, &b).unwrap();
            (n, a)
        })
        .collect()
}

/// `cal` with every user of `est` holding out only the least popular item of the release (one no
/// list or row shows): what the tuner's estimation users see changes while its selection users'
/// rows stay as they were — the power check of "chosen on users the estimate did not read".
pub fn estimation_users_hold_out_the_rarest_item(
    cal: &recsel::data::HeldOutRows,
    est: &[usize],
    release: &recsel::recommend::release::Release,
    n_items: usize,
) -> recsel::data::HeldOutRows {
    let pop = release.popularity.as_deref().expect("release popularity");
    let rare = (0..pop.len()).min_by_key(|&j| pop[j]).expect("an item") as u32;
    let rows: Vec<Vec<u32>> = (0..cal.rows())
        .map(|u| {
            if est.contains(&u) {
                vec![rare]
            } else {
                recsel::data::row_items(&cal.heldout, u).to_vec()
            }
        })
        .collect();
    recsel::data::HeldOutRows {
        heldout: recsel::data::csr_from_rows(&rows, n_items),
        ..cal.clone()
    }
}

/// A copy of the files of the directory `from` (a model directory: model, release, tuning) in
/// `to`, created if needed; returns `to`.
pub fn copy_files(from: &std::path::Path, to: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    to.to_path_buf()
}
