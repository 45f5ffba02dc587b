//! The comparison table of docs/bandit.md ("Duff against the standard quantile"): mean absolute
//! error of the private quantile against the sample's own quantile, for the standard
//! exponential-mechanism quantile and for Duff's utility, by n and ε, on the bandit's reward laws.
//!
//! Run with `cargo run --release --example quantile_table [REPS] [SEED]` (defaults 1000 and 1);
//! it prints the markdown table.

use recsel::experiments::bandit::duff::{quantile_error_table, QUANTILE_CASES};

/// Four decimals, or two significant digits below 0.001 (0 stays 0).
fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x < 1e-3 {
        format!("{x:.1e}")
    } else {
        format!("{x:.4}")
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let seed: u64 = args.next().map_or(Ok(1), |a| a.parse())?;
    let ns = [50, 200, 1000];
    let epsilons = [0.1, 0.5, 1.0, 2.0];
    let rows = quantile_error_table(&ns, &epsilons, reps, seed)?;
    for case in QUANTILE_CASES {
        println!(
            "\n{} (mean |private − x_(m)| ± s.e., {reps} samples)\n",
            case.label
        );
        println!("| n | ε | em | duff |");
        println!("|---|---|---|---|");
        for &n in &ns {
            for &eps in &epsilons {
                let cell = |method: &str| {
                    rows.iter()
                        .find(|r| {
                            r.case == case.label
                                && r.n == n
                                && r.epsilon == eps
                                && r.method == method
                        })
                        .map_or("-".to_string(), |r| {
                            format!("{} ± {}", num(r.mean_abs_error), num(r.se))
                        })
                };
                println!("| {n} | {eps} | {} | {} |", cell("em"), cell("duff"));
            }
        }
    }
    Ok(())
}
