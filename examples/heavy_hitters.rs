//! Heavy hitters with the exponential mechanism (the lecture notes of seed 003, Examples 1.1 and
//! 1.5; docs/statistics.md, "Worked examples").
//!
//! d websites, each user's record a subset of them; website j's score is the number of users who
//! named it, which one user moves by at most Δ = 1. The exponential mechanism `em` returns j with
//! probability ∝ exp(ε q_j / 2). The utility bound (Proposition 1.4): with probability at least
//! 1 − e^{−t} its output scores above `q_max − (2Δ/ε)(ln d + t)`. The lecture's number 36.8 is
//! that margin at d = 100, ε = 0.5, t = ln 100 (so 1 − e^{−t} = 0.99): 4·(ln 100 + ln 100) =
//! 8 ln 100 = 36.84.
//!
//! Everything printed here comes from em's exact output law (`ExponentialMechanism::probabilities`),
//! not from the closed form: the probability of a bad output on the worst case for the bound (every
//! other website just at the margin), the probability of naming the winner when it leads by 39
//! votes (the lecture: "with high probability"), and the same on a Zipf-like count vector.
//!
//! Run with `cargo run --release --example heavy_hitters`.

use recsel::mechanisms::{ExponentialMechanism, Problem};

/// The lecture's setting.
pub const D: usize = 100;
/// ε of Example 1.5.
pub const EPS: f64 = 0.5;

/// The margin `(2Δ/ε)(ln d + t)` of Proposition 1.4 with Δ = 1.
pub fn margin(d: usize, eps: f64, t: f64) -> f64 {
    2.0 / eps * ((d as f64).ln() + t)
}

/// em's exact output law on these counts (Δ = 1 for every website).
pub fn law(counts: &[f64], eps: f64) -> Vec<f64> {
    let sens = vec![1.0; counts.len()];
    let problem = Problem::new(counts, &sens).expect("finite counts");
    ExponentialMechanism::new(eps)
        .expect("eps > 0")
        .probabilities(&problem)
}

/// The exact probability that em's output scores at most `q_max − margin` (the bad event).
pub fn p_bad(counts: &[f64], eps: f64, margin: f64) -> f64 {
    let qmax = counts.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    law(counts, eps)
        .iter()
        .zip(counts)
        .filter(|(_, &q)| q <= qmax - margin)
        .map(|(p, _)| p)
        .sum()
}

/// One website at `top` and the d − 1 others `lead` votes behind.
pub fn one_leader(d: usize, top: f64, lead: f64) -> Vec<f64> {
    let mut c = vec![top - lead; d];
    c[0] = top;
    c
}

/// Counts falling like 1/rank from `top` (a popular site and a long tail), rounded to votes.
pub fn zipf(d: usize, top: f64) -> Vec<f64> {
    (0..d).map(|j| (top / (j + 1) as f64).round()).collect()
}

/// The numbers of the worked example.
#[derive(Debug, Clone, Copy)]
pub struct HeavyHitters {
    /// The margin at t = ln 100: 36.84.
    pub margin: f64,
    /// The bound on the bad event, e^{−t} = 0.01.
    pub bound: f64,
    /// The exact P(bad) when the 99 others sit exactly at the margin (worst case, real scores).
    pub p_bad_worst: f64,
    /// The exact P(bad) when they sit at the first whole vote beyond it (37 behind).
    pub p_bad_votes: f64,
    /// The exact probability em names the winner when it leads everyone by 39 votes.
    pub p_winner_by_39: f64,
    /// The exact P(bad) on the Zipf counts with 1000 votes at the top.
    pub p_bad_zipf: f64,
    /// The exact expected shortfall E[q_max − q(Y)] on the Zipf counts, against the bound
    /// (2/ε)(ln d + 1) of Proposition 1.4.
    pub expected_shortfall_zipf: f64,
}

/// Computes every number from em's exact law.
pub fn run() -> HeavyHitters {
    let t = (D as f64).ln();
    let margin = margin(D, EPS, t);
    let zipf_counts = zipf(D, 1000.0);
    let p = law(&zipf_counts, EPS);
    let shortfall = p
        .iter()
        .zip(&zipf_counts)
        .map(|(p, q)| p * (1000.0 - q))
        .sum();
    HeavyHitters {
        margin,
        bound: (-t).exp(),
        p_bad_worst: p_bad(&one_leader(D, 500.0, margin), EPS, margin),
        p_bad_votes: p_bad(&one_leader(D, 500.0, margin.ceil()), EPS, margin),
        p_winner_by_39: law(&one_leader(D, 500.0, 39.0), EPS)[0],
        p_bad_zipf: p_bad(&zipf_counts, EPS, margin),
        expected_shortfall_zipf: shortfall,
    }
}

#[allow(dead_code)]
fn main() {
    let h = run();
    println!("heavy hitters: d = {D}, eps = {EPS}, t = ln {D} (exact laws of em)");
    println!(
        "  margin (2/eps)(ln d + t)                        {:.2}",
        h.margin
    );
    println!(
        "  bound on P(score <= q_max - margin) = e^-t       {:.4}",
        h.bound
    );
    println!(
        "  exact P(bad), 99 others exactly at the margin    {:.5}",
        h.p_bad_worst
    );
    println!(
        "  exact P(bad), 99 others 37 votes behind          {:.5}",
        h.p_bad_votes
    );
    println!(
        "  exact P(em names the winner), lead of 39 votes   {:.5}",
        h.p_winner_by_39
    );
    println!(
        "  Zipf counts (1000/rank): exact P(bad) {:.2e}, E[q_max - q(Y)] {:.2e} (bound {:.2})",
        h.p_bad_zipf,
        h.expected_shortfall_zipf,
        2.0 / EPS * ((D as f64).ln() + 1.0)
    );
}
