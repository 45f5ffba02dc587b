//! Dense EASE (Steck 2019; docs/sansa.md): `G = XᵀX + λI`, `P = G⁻¹`, `B = I − P·diag(1/diag P)`,
//! scored `x·B − x` like SANSA (docs/sansa.md): `B` has a zero diagonal, and the `−x` gives each
//! item the user already has the self term −1, so that the serving path — whose candidates may
//! include the user's own items — ranks them where SANSA does. Where seen items are masked
//! (evaluation) the `−x` changes nothing. Needs a dense items × items matrix: refused with a clear
//! error when it would not fit in the available memory.

use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, Side};

use super::sparse::{Cols, SparseMat};
use crate::{Error, Result};

/// A fitted dense EASE model: `b[j * n + k] = B[j, k]`.
#[derive(Debug, Clone)]
pub struct Ease {
    /// Number of items.
    pub n: usize,
    /// Row-major weights `B`.
    pub b: Vec<f64>,
}

/// Bytes of memory the system reports as available (`MemAvailable`), if readable.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Checks that dense EASE on `n` items fits: it holds three `n × n` f64 matrices at its peak.
pub fn check_fits(n: usize) -> Result<()> {
    let need = 3u128 * (n as u128) * (n as u128) * 8;
    if let Some(avail) = available_memory_bytes() {
        if need > avail as u128 * 9 / 10 {
            return Err(Error::Invalid(format!(
                "dense EASE on {n} items needs about {:.1} GiB (three {n}x{n} matrices) but only {:.1} GiB is available; use --method exact or --method icf (SANSA), which stay sparse",
                need as f64 / (1u64 << 30) as f64,
                avail as f64 / (1u64 << 30) as f64
            )));
        }
    }
    Ok(())
}

/// Fits EASE from the lower triangle of `XᵀX`.
pub fn fit_ease(gram_lower: &SparseMat, l2: f64) -> Result<Ease> {
    let n = gram_lower.cols();
    check_fits(n)?;
    let mut g = Mat::<f64>::zeros(n, n);
    for j in 0..n {
        let (rows, vals) = gram_lower.col(j);
        for (&i, &v) in rows.iter().zip(vals) {
            g[(i as usize, j)] = v;
        }
    }
    fit_ease_dense(g, l2)
}

/// Fits EASE from a dense `n × n` matrix whose lower triangle (diagonal included) holds `XᵀX`, or
/// a noisy copy of it (the DP fit); the strict upper triangle is overwritten.
pub fn fit_ease_dense(mut g: Mat<f64>, l2: f64) -> Result<Ease> {
    let n = g.nrows();
    for j in 0..n {
        for i in j + 1..n {
            g[(j, i)] = g[(i, j)];
        }
        g[(j, j)] += l2;
    }
    let llt = g.llt(Side::Lower).map_err(|e| {
        Error::Invalid(format!(
            "EASE: XᵀX + λI is not positive definite ({e:?}); use a larger --l2"
        ))
    })?;
    drop(g);
    let p = llt.inverse();
    drop(llt);
    let mut b = vec![0.0f64; n * n];
    for j in 0..n {
        // P is symmetric: row j of B is −P[:, j] / diag(P), zero on the diagonal.
        let col = p.col(j);
        let row = &mut b[j * n..(j + 1) * n];
        for k in 0..n {
            row[k] = if k == j { 0.0 } else { -col[k] / p[(k, k)] };
        }
    }
    Ok(Ease { n, b })
}

impl Ease {
    /// Scores of a user with the given items: `x·B − x`, what SANSA's factors give (the self
    /// term −1 on every item the user has; items repeated in `items` count once per entry).
    pub fn score_into(&self, items: &[u32], out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        for &j in items {
            let row = &self.b[j as usize * self.n..(j as usize + 1) * self.n];
            for (o, &w) in out.iter_mut().zip(row) {
                *o += w;
            }
        }
        for &j in items {
            out[j as usize] -= 1.0;
        }
    }
}
