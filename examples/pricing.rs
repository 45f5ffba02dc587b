//! Pricing a digital good with the exponential mechanism (the lecture notes of seed 003, Examples
//! 1.2 and 1.6; docs/statistics.md, "Worked examples").
//!
//! n people each state the most they would pay, x_i; at price p the revenue is
//! `q(p) = p·#{i : x_i ≥ p}`, which one person moves by at most p ≤ Δ = 1.99. The prices are
//! $0.01, …, $1.99 (d = 199; the lecture rounds to 200). `em` picks p with probability
//! ∝ exp(ε q(p)/(2Δ)), and Proposition 1.4 (6) bounds its expected revenue loss by
//! `2Δ(ln d + 1)/ε` = 25.05/ε. The lecture's "about 31/ε" is `2·1.999·log₂ 200` = 30.6 — a
//! base-2 logarithm; with the natural logarithm its own formula 2·1.999·ln 200 gives 21.2/ε, and
//! with the "+ 1" of (6) 25.2/ε. All are upper bounds; the exact expected losses computed here
//! from em's exact law are below every one of them.
//!
//! Run with `cargo run --release --example pricing`.

use recsel::mechanisms::{ExponentialMechanism, Problem};

/// Prices in cents: 1..=199.
pub const PRICES: usize = 199;
/// The sensitivity bound of the lecture's table.
pub const DELTA: f64 = 1.99;

/// The revenue of every price on the stated values `x` (dollars).
pub fn revenues(x: &[f64]) -> Vec<f64> {
    (1..=PRICES)
        .map(|c| {
            let p = c as f64 / 100.0;
            p * x.iter().filter(|&&v| v >= p).count() as f64
        })
        .collect()
}

/// The exact expected revenue loss `E[q_max − q(P)]` of em at ε.
pub fn expected_loss(x: &[f64], eps: f64) -> f64 {
    let q = revenues(x);
    let sens = vec![DELTA; q.len()];
    let problem = Problem::new(&q, &sens).expect("finite revenues");
    let law = ExponentialMechanism::new(eps)
        .expect("eps > 0")
        .probabilities(&problem);
    let qmax = q.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    law.iter().zip(&q).map(|(p, r)| p * (qmax - r)).sum()
}

/// The bound of Proposition 1.4 (6) times ε: 2Δ(ln d + 1).
pub fn bound_times_eps() -> f64 {
    2.0 * DELTA * ((PRICES as f64).ln() + 1.0)
}

/// The lecture's constant: 2·1.999·log₂ 200.
pub fn lecture_constant() -> f64 {
    2.0 * 1.999 * 200f64.log2()
}

/// The survey populations of the example: everyone at $0.70 (the lecture's case), values spread
/// evenly over [0, 1], and a population split between $0.30 and $1.50.
pub fn populations(n: usize) -> Vec<(&'static str, Vec<f64>)> {
    vec![
        ("all at $0.70", vec![0.70; n]),
        (
            "uniform on [0, 1]",
            (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect(),
        ),
        (
            "80% at $0.30, 20% at $1.50",
            (0..n)
                .map(|i| if i * 5 < n * 4 { 0.30 } else { 1.50 })
                .collect(),
        ),
    ]
}

/// ε·E[loss] for every population of n people and every ε.
pub fn table(n: usize, epsilons: &[f64]) -> Vec<(&'static str, f64, f64)> {
    let mut rows = Vec::new();
    for (name, x) in populations(n) {
        for &eps in epsilons {
            rows.push((name, eps, eps * expected_loss(&x, eps)));
        }
    }
    rows
}

#[allow(dead_code)]
fn main() {
    println!(
        "pricing: d = {PRICES} prices, Delta = {DELTA}; bound eps*E[loss] <= 2*Delta*(ln d + 1) = {:.2}; \
         the lecture's 2*1.999*log2(200) = {:.2}",
        bound_times_eps(),
        lecture_constant()
    );
    println!(
        "{:<28} {:>5} {:>14}",
        "population (n = 1000)", "eps", "eps*E[loss]"
    );
    for (name, eps, v) in table(1000, &[0.1, 0.5, 1.0, 2.0]) {
        println!("{name:<28} {eps:>5} {v:>14.3}");
    }
}
