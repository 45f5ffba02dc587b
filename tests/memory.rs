//! Peak memory is bounded by design (docs/results.md, "Memory bound"): the peak resident memory
//! (VmHWM, Linux) of `recsel fit` and `recsel select` stays under a formula in the numbers of
//! users, items and stored interactions. The shape (many users, few items) is chosen so that the formula is well
//! below one users × items matrix of f64: a regression that held such a matrix would fail.

use std::io::Write;
use std::path::Path;

/// The bound of docs/results.md, "Memory bound", in bytes: a fixed 64 MiB (the binary, its libraries, thread
/// stacks) + 32 B per stored interaction + 16 B per item pair + 256 B per user, plus for `select`
/// 24 B (three f64) per (user, mechanism, ε) cell of the per-user results and 12 B per kept
/// candidate (`candidates` = test users × top).
fn bound_bytes(users: u64, items: u64, nnz: u64, cells: u64, candidates: u64) -> u64 {
    (64 << 20) + 32 * nnz + 16 * items * items + 256 * users + 24 * cells * users + 12 * candidates
}

/// A CSV of `users` users with 10–25 distinct items each out of `items`, popularity skewed.
fn write_csv(path: &Path, users: u32, items: u32) -> u64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "user,item").unwrap();
    let mut nnz = 0;
    let mut seen = vec![u32::MAX; items as usize];
    for u in 0..users {
        let k: u32 = rng.random_range(10..=25);
        let mut got = 0;
        while got < k {
            // Squaring a uniform skews towards low item ids (popular items).
            let i = ((rng.random::<f64>().powi(2)) * f64::from(items)) as u32;
            if seen[i as usize] != u {
                seen[i as usize] = u;
                writeln!(f, "{u},{i}").unwrap();
                got += 1;
            }
        }
        nnz += k as u64;
    }
    nnz
}

fn run_json(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recsel"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn fit_and_select_peak_memory_stay_under_the_documented_formula() {
    if !Path::new("/proc/self/status").exists() {
        crate::util::missing_prerequisite(
            "fit_and_select_peak_memory_stay_under_the_documented_formula",
            "/proc/self/status (VmHWM is Linux only)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("x.csv");
    let (users, items) = (60_000u64, 800u64);
    let nnz = write_csv(&csv, users as u32, items as u32);
    let dense_matrix = 8 * users * items;
    let data = [
        "--format",
        "csv",
        "--path",
        csv.to_str().unwrap(),
        "--user-col",
        "user",
        "--item-col",
        "item",
        "--l2",
        "50",
        "--density",
        "0.05",
    ];
    for method in ["exact", "icf"] {
        let bound = bound_bytes(users, items, nnz, 0, 0);
        // Power: one users × items f64 matrix alone exceeds the bound.
        assert!(bound < dense_matrix, "{bound} >= {dense_matrix}");
        let mut args = vec!["fit", "--method", method, "--json"];
        args.extend_from_slice(&data);
        let v = run_json(&args);
        let peak = v["peak_rss_mb"].as_f64().unwrap() * 1048576.0;
        eprintln!(
            "fit {method}: peak {:.1} MiB, bound {:.1} MiB",
            peak / 1048576.0,
            bound as f64 / 1048576.0
        );
        assert!(
            peak < bound as f64,
            "fit {method}: peak {peak} B > bound {bound} B"
        );
    }
    let mechs = "rnm,gem,mgem,rs";
    let cells = 4 * 11;
    // The split keeps a tenth of the users as test users on data this small (docs/protocol.md),
    // each with up to `--top` 500 candidates.
    let candidates = users / 10 * 500;
    let bound = bound_bytes(users, items, nnz, cells, candidates);
    assert!(bound < dense_matrix, "{bound} >= {dense_matrix}");
    let out = dir.path().join("sel");
    let mut args = vec![
        "select",
        "--method",
        "exact",
        "--mech",
        mechs,
        "--trials",
        "2",
        "--seed",
        "1",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&data);
    let v = run_json(&args);
    // Each user is a test user with probability 0.1 (a keyed hash of their id), so the count is
    // binomial: within five standard deviations of a tenth.
    let tested = v["users"].as_u64().unwrap() + v["users_without_candidates"].as_u64().unwrap();
    let sd = (users as f64 * 0.09).sqrt();
    assert!(
        (tested as f64 - users as f64 / 10.0).abs() <= 5.0 * sd,
        "{tested} test users of {users}"
    );
    let peak = v["peak_rss_mb"].as_f64().unwrap() * 1048576.0;
    eprintln!(
        "select: peak {:.1} MiB, bound {:.1} MiB",
        peak / 1048576.0,
        bound as f64 / 1048576.0
    );
    assert!(
        peak < bound as f64,
        "select: peak {peak} B > bound {bound} B"
    );
}
