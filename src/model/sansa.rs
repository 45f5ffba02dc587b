//! SANSA (Spišák et al. 2023), SPEC §6: a sparse approximation of EASE's inverse Gram matrix as
//! `P ≈ Wᵀ D⁻¹ W`, with `W = K·Π` and `K ≈ L⁻¹` from a sparse `L D Lᵀ` of the permuted Gram matrix.

// Index loops mirror the matrix formulas of SPEC §6 (column j, row i).
#![allow(clippy::needless_range_loop)]

use std::time::Instant;

use rayon::prelude::*;

use super::factor::{
    amd_ordering, dense_cholesky, exact_cholesky, incomplete_cholesky, to_unit_ldl,
};
use super::sparse::SparseCols;
use super::umr::{umr_inverse, UmrConfig};
use super::{FitReport, Method};
use crate::Result;

/// Sparse weight matrix (`f64` values, `u32` indices).
pub type SparseWeights = sprs::CsMatI<f64, u32, usize>;

/// A fitted SANSA model. Scores of a user row `x` are `(x Wᵀ) W_r`, which equals EASE's
/// `x·B − x` (SPEC §6 step 4); seen items are masked by the caller.
#[derive(Debug, Clone)]
pub struct Sansa {
    /// Number of items.
    pub n: usize,
    /// `W = K·Π`, stored by columns (column j belongs to item j).
    pub w: SparseWeights,
    /// `W_r = D⁻¹ W` with column j scaled by `−1/diag_j`, stored by rows.
    pub w_r: SparseWeights,
}

/// Adds `shift` to the diagonal of a lower-triangular matrix, inserting missing diagonal entries.
pub fn add_diagonal(lower: &SparseCols, shift: f64) -> SparseCols {
    let cols = (0..lower.n)
        .map(|j| {
            let (r, v) = lower.col(j);
            let (mut r, mut v) = (r.to_vec(), v.to_vec());
            if r.first() == Some(&(j as u32)) {
                v[0] += shift;
            } else {
                r.insert(0, j as u32);
                v.insert(0, shift);
            }
            (r, v)
        })
        .collect();
    SparseCols::from_columns(lower.n, cols)
}

/// Scales a lower-triangular symmetric matrix `A` to `S A S` with `s_j = 1/sqrt(‖A_{:,j}‖₂)`
/// (column norms of the full symmetric matrix), the symmetric scaling SANSA applies before ICF.
pub fn scale_symmetric(lower: &SparseCols, full: &SparseCols) -> SparseCols {
    let s: Vec<f64> = (0..full.n)
        .map(|j| {
            let norm = full.col(j).1.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                1.0 / norm.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let mut out = lower.clone();
    for j in 0..out.n {
        let (a, b) = (out.col_ptr[j], out.col_ptr[j + 1]);
        for p in a..b {
            out.val[p] *= s[j] * s[out.row[p] as usize];
        }
    }
    out
}

/// Adds `shift` to the diagonal, which must be stored first in every column (as
/// [`gram_lower`](super::gram::gram_lower) does).
pub fn add_diagonal_in_place(lower: &mut SparseCols, shift: f64) {
    for j in 0..lower.n {
        let p = lower.col_ptr[j];
        assert!(
            lower.col_ptr[j + 1] > p && lower.row[p] as usize == j,
            "diagonal entry of column {j} missing"
        );
        lower.val[p] += shift;
    }
}

/// In-place version of [`scale_symmetric`].
pub fn scale_symmetric_in_place(lower: &mut SparseCols) {
    let s: Vec<f64> = lower
        .symmetric_col_sq_norms()
        .iter()
        .map(|&sq| {
            if sq > 0.0 {
                1.0 / sq.sqrt().sqrt()
            } else {
                1.0
            }
        })
        .collect();
    for j in 0..lower.n {
        let (a, b) = (lower.col_ptr[j], lower.col_ptr[j + 1]);
        for p in a..b {
            lower.val[p] *= s[j] * s[lower.row[p] as usize];
        }
    }
}

/// Fits SANSA from the lower triangle of `XᵀX` (without λ). `progress` is told each stage's name.
pub fn fit_sansa(
    gram_lower: SparseCols,
    method: Method,
    l2: f64,
    density: f64,
    umr: UmrConfig,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<Sansa> {
    let n = gram_lower.n;
    let max_nnz = ((density * n as f64 * n as f64).round() as usize).max(n);

    progress("ordering (AMD)");
    let t = Instant::now();
    let mut a = gram_lower;
    if method == Method::Icf {
        // ICF: scale XᵀX symmetrically first, then regularise the scaled matrix, so λ acts on a
        // matrix with an O(1) diagonal (the reference's λ = 20 for ICF versus hundreds for
        // `exact` reflects this); the scaling is never undone (item-specific regularisation).
        scale_symmetric_in_place(&mut a);
    }
    add_diagonal_in_place(&mut a, l2);
    let (fwd, inv) = amd_ordering(&a)?;
    let a_perm = a.permute_lower(&inv);
    report.stage("ordering", t);

    let t = Instant::now();
    // A Gram matrix with more than a quarter of its entries stored fills in completely anyway:
    // factorise it as one dense matrix when that fits in half the available memory.
    let dense_bytes = 8.0 * n as f64 * n as f64;
    let dense = a_perm.nnz() as f64 > 0.125 * n as f64 * n as f64
        && super::ease::available_memory_bytes().is_some_and(|m| dense_bytes < 0.5 * m as f64);
    let (mut l, full_nnz) = match method {
        Method::Icf => {
            progress("incomplete Cholesky (ICF)");
            let l = incomplete_cholesky(&a_perm, max_nnz)?;
            drop(a_perm);
            let nnz = l.nnz();
            (l, nnz)
        }
        _ if dense => {
            progress("dense Cholesky (nearly dense Gram matrix), pruned to the target density");
            dense_cholesky(a_perm, Some(max_nnz.saturating_sub(n)))?
        }
        _ => {
            progress("sparse Cholesky, pruned to the target density");
            let r = exact_cholesky(&a_perm, Some(max_nnz.saturating_sub(n)))?;
            drop(a_perm);
            r
        }
    };
    let d = to_unit_ldl(&mut l);
    report.factor_nnz = full_nnz;
    if method != Method::Icf {
        // Exact count (ties at the threshold may have kept a few more).
        l.prune_global(max_nnz.saturating_sub(n));
    }
    report.stage("factorization", t);

    progress("approximate inverse (UMR)");
    let t = Instant::now();
    let (k, residual) = umr_inverse(&l, max_nnz, umr);
    report.umr_residual = residual;
    drop(l);
    report.stage("inverse", t);

    progress("assembling weights");
    let t = Instant::now();
    let model = assemble(&k, &d, &fwd, &inv);
    report.stage("assemble", t);
    Ok(model)
}

/// Builds `W` and `W_r` from `K ≈ L⁻¹` (permuted order), `D` and the ordering (SPEC §6 step 4).
pub fn assemble(k: &SparseCols, d: &[f64], fwd: &[usize], inv: &[usize]) -> Sansa {
    let n = k.n;
    // Column j of W is column inv[j] of K.
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let mut indices = Vec::with_capacity(k.nnz());
    let mut data = Vec::with_capacity(k.nnz());
    for j in 0..n {
        let (r, v) = k.col(inv[j]);
        indices.extend_from_slice(r);
        data.extend_from_slice(v);
        indptr.push(indices.len());
    }
    let _ = fwd;
    // diag_j = Σ_m W_mj² / d_m (the diagonal of P ≈ Wᵀ D⁻¹ W).
    let diag: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|j| {
            (indptr[j]..indptr[j + 1])
                .map(|p| data[p] * data[p] / d[indices[p] as usize])
                .sum()
        })
        .collect();
    let mut data_r = data.clone();
    for j in 0..n {
        for p in indptr[j]..indptr[j + 1] {
            data_r[p] = data[p] / d[indices[p] as usize] * (-1.0 / diag[j]);
        }
    }
    let w = SparseWeights::new_csc((n, n), indptr.clone(), indices.clone(), data);
    let w_r = SparseWeights::new_csc((n, n), indptr, indices, data_r).to_csr();
    Sansa { n, w, w_r }
}

impl Sansa {
    /// Number of stored weights (both factors).
    pub fn nnz(&self) -> usize {
        self.w.nnz() + self.w_r.nnz()
    }

    /// Scores `(x Wᵀ) W_r` of a user with the given items. `h` is a scratch vector of length n.
    pub fn score_into(
        &self,
        items: &[u32],
        out: &mut [f64],
        h: &mut [f64],
        touched: &mut Vec<u32>,
    ) {
        out.iter_mut().for_each(|v| *v = 0.0);
        touched.clear();
        for &j in items {
            if let Some(col) = self.w.outer_view(j as usize) {
                for (m, &v) in col.iter() {
                    if h[m] == 0.0 {
                        touched.push(m as u32);
                    }
                    h[m] += v;
                }
            }
        }
        for &m in touched.iter() {
            let hm = std::mem::replace(&mut h[m as usize], 0.0);
            if let Some(row) = self.w_r.outer_view(m as usize) {
                for (k, &v) in row.iter() {
                    out[k] += hm * v;
                }
            }
        }
    }
}
