//! SANSA (Spišák et al. 2023), docs/sansa.md: a sparse approximation of EASE's inverse Gram matrix as
//! `P ≈ Wᵀ D⁻¹ W`, with `W = K·Π` and `K ≈ L⁻¹` from a sparse `L D Lᵀ` of the permuted Gram matrix.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use std::time::Instant;

use faer::reborrow::{Reborrow, ReborrowMut};

use super::factor::{
    amd_ordering, amd_ordering_dense, amd_ordering_pattern, dense_cholesky,
    dense_cholesky_in_place, exact_cholesky, incomplete_cholesky, permute_dense_symmetric,
    to_unit_ldl, ZeroedSquare,
};
use super::gram::{gram_dense, gram_lower, gram_pattern, relabel_items, ItemUsers};
use super::sparse::{permute_lower, prune_global, symmetric_col_sq_norms, SparseMat};
use super::umr::{umr_inverse, UmrConfig};
use super::{DenseScalar, FitReport, Method, Precision};
use crate::data::Csr;
use crate::Result;

/// Sparse weight matrix (`f64` values, `u32` indices): the fitting pipeline's [`SparseMat`].
pub type SparseWeights = SparseMat;

/// A fitted SANSA model. Scores of a user row `x` are `(x Wᵀ) W_r`, which equals EASE's
/// `x·B − x` (docs/sansa.md, step 4); seen items are masked by the caller.
#[derive(Debug, Clone)]
pub struct Sansa {
    /// Number of items.
    pub n: usize,
    /// `W = K·Π`, stored by columns (column j belongs to item j).
    w: SparseWeights,
    /// `W_r = D⁻¹ W` with column j scaled by `−1/diag_j`, stored by columns: a block of users is
    /// scored a column at a time ([`Sansa::score_block`]). Private, as `w` is: `w_r_rows` and
    /// `col_order` are derived from it.
    w_r: SparseWeights,
    /// The same `W_r` stored by rows: one user is scored a touched row at a time
    /// ([`Sansa::score_into`]).
    w_r_rows: SparseWeights,
    /// The columns of `W_r` by their first stored row: columns taken in this order read
    /// neighbouring parts of `x Wᵀ` one after another ([`Sansa::score_block`]).
    col_order: Vec<u32>,
}

/// Users [`Sansa::score_block`] scores together: the interleaved `x Wᵀ` of eight users is 8·8·n
/// bytes (1.1 MB at the netflix shape, about one core's L2 cache).
pub const SCORE_LANES: usize = 8;

/// Adds `shift` to the diagonal, which must be stored first in every column (as
/// [`gram_lower`] does).
pub fn add_diagonal_in_place(lower: &mut SparseMat, shift: f64) {
    for (j, mut col) in lower.outer_iterator_mut().enumerate() {
        let (i, v) = col
            .iter_mut()
            .next()
            .expect("every column stores its diagonal");
        assert!(i == j, "diagonal entry of column {j} missing");
        *v += shift;
    }
}

/// Scales a lower-triangular symmetric matrix `A` in place to `S A S` with
/// `s_j = 1/sqrt(‖A_{:,j}‖₂)` (column norms of the full symmetric matrix), the symmetric scaling
/// SANSA applies before ICF.
pub fn scale_symmetric_in_place(lower: &mut SparseMat) {
    let s: Vec<f64> = symmetric_col_sq_norms(lower)
        .iter()
        .map(|&sq| {
            if sq > 0.0 {
                1.0 / sq.sqrt().sqrt()
            } else {
                1.0
            }
        })
        .collect();
    for (j, mut col) in lower.outer_iterator_mut().enumerate() {
        for (i, v) in col.iter_mut() {
            *v *= s[j] * s[i];
        }
    }
}

/// Fits SANSA from the lower triangle of `XᵀX` (without λ). `progress` is told each stage's name.
pub fn fit_sansa(
    gram_lower: SparseMat,
    method: Method,
    l2: f64,
    density: f64,
    umr: UmrConfig,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<Sansa> {
    let n = gram_lower.cols();
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
    let a_perm = permute_lower(a, &inv);
    report.stage("ordering", t);

    let t = Instant::now();
    // A Gram matrix with more than a quarter of its entries stored fills in completely anyway:
    // factorise it as one dense matrix when that fits in half the available memory.
    let dense = goes_dense(n, a_perm.nnz(), 8);
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
        prune_global(&mut l, max_nnz.saturating_sub(n));
    }
    report.stage("factorization", t);
    finish(l, d, fwd, inv, max_nnz, umr, report, progress)
}

/// Whether the factorisation of an `n × n` Gram matrix with `nnz` stored lower-triangle entries
/// goes dense: more than a quarter of its entries stored (it fills in completely anyway) and the
/// dense matrix (`bytes` per entry) fits in half the available memory.
fn goes_dense(n: usize, nnz: usize, bytes: usize) -> bool {
    let dense_bytes = bytes as f64 * n as f64 * n as f64;
    nnz as f64 > 0.125 * n as f64 * n as f64
        && super::ease::available_memory_bytes().is_some_and(|m| dense_bytes < 0.5 * m as f64)
}

/// Fits SANSA from the training rows `x` (docs/sansa.md, "Memory"): the Gram matrix's pattern is
/// formed first and ordered, then the Gram matrix of the relabelled rows is formed directly in
/// the permuted order — into the dense matrix that is factorised in place when it is nearly
/// dense, otherwise as the sparse matrix the factorisation reads. No permuted copy, no second
/// copy of the values. Same model as [`fit_sansa`] on `gram_lower(x)` (up to rounding in the
/// last bits) with `precision` [`Precision::F64`]; `precision` only matters on the dense path.
/// `progress` is told each stage's name.
#[allow(clippy::too_many_arguments)]
pub fn fit_sansa_rows(
    x: &Csr,
    method: Method,
    l2: f64,
    density: f64,
    umr: UmrConfig,
    precision: Precision,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<Sansa> {
    let n = x.cols();
    let max_nnz = ((density * n as f64 * n as f64).round() as usize).max(n);

    let t = Instant::now();
    // Dense path (exact on a nearly dense Gram matrix): one Gram pass straight into the dense
    // matrix, the ordering read from it, the matrix permuted in place. The decision uses an upper
    // bound of the stored entries (it only decides where the same factor is computed).
    if method != Method::Icf {
        let users = ItemUsers::new(x);
        if goes_dense(n, users.nnz_bound(), precision.bytes()) {
            let keep = max_nnz.saturating_sub(n);
            let (l, full_nnz, fwd, inv) = match precision {
                Precision::F32 => fit_dense::<f32>(x, users, l2, keep, t, report, progress)?,
                Precision::F64 => fit_dense::<f64>(x, users, l2, keep, t, report, progress)?,
            };
            let t = Instant::now();
            let mut l = l;
            let d = to_unit_ldl(&mut l);
            report.factor_nnz = full_nnz;
            prune_global(&mut l, keep);
            report.stage("prune", t);
            return finish(l, d, fwd, inv, max_nnz, umr, report, progress);
        }
    }

    // Sparse path: the pattern, its ordering, then the Gram matrix of the relabelled rows.
    progress("Gram pattern and ordering (AMD)");
    let (ptr, rows) = gram_pattern(x);
    let (fwd, inv) = amd_ordering_pattern(n, &ptr, &rows)?;
    let nnz = rows.len();
    drop((ptr, rows));
    check_memory(nnz, x.nnz())?;
    let xp = relabel_items(x, &inv);
    report.stage("ordering", t);

    let t = Instant::now();
    progress("Gram matrix XᵀX (permuted)");
    let mut a = gram_lower(&xp);
    drop(xp);
    if method == Method::Icf {
        // As in fit_sansa: scale first, then regularise the scaled matrix.
        scale_symmetric_in_place(&mut a);
    }
    add_diagonal_in_place(&mut a, l2);
    report.stage("gram", t);
    let t = Instant::now();
    let (mut l, full_nnz) = if method == Method::Icf {
        progress("incomplete Cholesky (ICF)");
        let l = incomplete_cholesky(&a, max_nnz)?;
        let nnz = l.nnz();
        (l, nnz)
    } else {
        progress("sparse Cholesky, pruned to the target density");
        exact_cholesky(&a, Some(max_nnz.saturating_sub(n)))?
    };
    drop(a);
    report.stage("factorization", t);
    let t = Instant::now();
    let d = to_unit_ldl(&mut l);
    report.factor_nnz = full_nnz;
    if method != Method::Icf {
        prune_global(&mut l, max_nnz.saturating_sub(n));
    }
    report.stage("prune", t);
    finish(l, d, fwd, inv, max_nnz, umr, report, progress)
}

/// The dense path of [`fit_sansa_rows`] in precision `T`: Gram matrix, ordering and in-place
/// permutation, Cholesky, pruned extraction. Returns the pruned factor (`f64`), the full factor's
/// entries and the ordering. `t` is when the Gram stage started.
#[allow(clippy::type_complexity)]
fn fit_dense<T: DenseScalar>(
    x: &Csr,
    users: ItemUsers,
    l2: f64,
    keep: usize,
    t: Instant,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<(SparseMat, usize, Vec<usize>, Vec<usize>)> {
    let n = x.cols();
    progress("Gram matrix XᵀX (dense)");
    let mut square = ZeroedSquare::<T>::new(n);
    let mut m = square.as_mut();
    gram_dense(x, &users, m.rb_mut());
    drop(users);
    report.stage("gram", t);
    progress("ordering (AMD)");
    let t = Instant::now();
    let (fwd, inv) = amd_ordering_dense(m.rb())?;
    permute_dense_symmetric(m.rb_mut(), &fwd);
    let shift = T::from_f64(l2);
    for j in 0..n {
        m[(j, j)] += shift;
    }
    report.stage("ordering", t);
    progress("dense Cholesky (nearly dense Gram matrix), pruned to the target density");
    let t = Instant::now();
    let (l, full_nnz) = dense_cholesky_in_place(m, Some(keep))?;
    drop(square);
    report.stage("factorization", t);
    Ok((l, full_nnz, fwd, inv))
}

/// Fails with the memory it needs when the sparse Gram matrix (12 bytes per stored entry) and
/// the renamed copy of the rows (8 bytes per interaction) do not fit in the available memory
/// (docs/sansa.md, "Memory").
fn check_memory(gram_nnz: usize, interactions: usize) -> Result<()> {
    let need = 12.0 * gram_nnz as f64 + 8.0 * interactions as f64;
    if let Some(avail) = super::ease::available_memory_bytes() {
        if need > 0.9 * avail as f64 {
            let gib = |b: f64| b / (1u64 << 30) as f64;
            return Err(crate::Error::Invalid(format!(
                "the sparse Gram matrix ({gram_nnz} stored entries) and the renamed rows need \
                 about {:.1} GiB but only {:.1} GiB is available",
                gib(need),
                gib(avail as f64)
            )));
        }
    }
    Ok(())
}

/// Steps 3 and 4 of docs/sansa.md on the unit factor `l` and `d` (shared by both fits).
#[allow(clippy::too_many_arguments)]
fn finish(
    l: SparseMat,
    d: Vec<f64>,
    fwd: Vec<usize>,
    inv: Vec<usize>,
    max_nnz: usize,
    umr: UmrConfig,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<Sansa> {
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

/// Builds `W` and `W_r` from `K ≈ L⁻¹` (permuted order), `D` and the ordering (docs/sansa.md, step 4):
/// `W = K·Π` is sprs's column permutation (column j of W is column `inv[j]` of K), `W_r` its scaled
/// copy.
pub fn assemble(k: &SparseMat, d: &[f64], fwd: &[usize], inv: &[usize]) -> Sansa {
    let _ = fwd;
    let perm = sprs::PermOwnedI::new(inv.iter().map(|&i| i as u32).collect());
    let w = sprs::permute_cols(k.view(), perm.view());
    // diag_j = Σ_m W_mj² / d_m (the diagonal of P ≈ Wᵀ D⁻¹ W).
    let diag: Vec<f64> = w
        .outer_iterator()
        .map(|col| col.iter().map(|(m, &v)| v * v / d[m]).sum())
        .collect();
    let mut w_r = w.clone();
    for (j, mut col) in w_r.outer_iterator_mut().enumerate() {
        for (m, v) in col.iter_mut() {
            *v = *v / d[m] * (-1.0 / diag[j]);
        }
    }
    Sansa::new(w, w_r)
}

impl Sansa {
    /// `W = K·Π`, by columns (column j belongs to item j).
    pub fn w(&self) -> &SparseWeights {
        &self.w
    }

    /// `W_r = D⁻¹ W` with column j scaled by `−1/diag_j`, by columns.
    pub fn w_r(&self) -> &SparseWeights {
        &self.w_r
    }

    /// Number of stored weights (both factors).
    pub fn nnz(&self) -> usize {
        self.w.nnz() + self.w_r.nnz()
    }

    /// A model from its two factors (any storage order; `W` is kept by columns, `W_r` both ways).
    pub fn new(w: SparseWeights, w_r: SparseWeights) -> Self {
        assert_eq!(w.shape(), w_r.shape(), "W and W_r have the same shape");
        assert_eq!(w.rows(), w.cols(), "square weights");
        let w = if w.is_csc() { w } else { w.to_csc() };
        let (w_r, w_r_rows) = if w_r.is_csc() {
            let rows = w_r.to_csr();
            (w_r, rows)
        } else {
            (w_r.to_csc(), w_r)
        };
        let first_row = |k: usize| w_r.outer_view(k).and_then(|c| c.indices().first().copied());
        let mut col_order: Vec<u32> = (0..w_r.cols() as u32).collect();
        col_order.sort_by_key(|&k| (first_row(k as usize), k));
        Sansa {
            n: w.cols(),
            w,
            w_r,
            w_r_rows,
            col_order,
        }
    }

    /// Scores `(x Wᵀ) W_r` of one user with the given items: bit for bit what
    /// [`Sansa::score_block`] gives the user (the same products, added in ascending row order of
    /// `W_r`), reading only the rows of `W_r` the user touches. `h` is scratch space (resized as
    /// needed, left zeroed).
    pub fn score_into(&self, items: &[u32], out: &mut [f64], h: &mut Vec<f64>) {
        assert_eq!(out.len(), self.n, "one score per item");
        if h.len() < self.n {
            h.resize(self.n, 0.0);
        }
        let h = &mut h[..self.n];
        for &j in items {
            if let Some(col) = self.w.outer_view(j as usize) {
                for (m, &v) in col.iter() {
                    h[m] += v;
                }
            }
        }
        out.fill(0.0);
        for (m, hm) in h.iter_mut().enumerate() {
            // A zero adds nothing to any score: skipping it leaves every sum as it is.
            if *hm != 0.0 {
                let hm = std::mem::replace(hm, 0.0);
                if let Some(row) = self.w_r_rows.outer_view(m) {
                    for (k, &v) in row.iter() {
                        out[k] += hm * v;
                    }
                }
            }
        }
    }

    /// Scores a block of users at once: row `b` of `out` (`users.len()` rows of `n`) receives the
    /// scores of `users[b]`, bit for bit what [`Sansa::score_into`] gives that user alone. `W_r` is
    /// read once per [`SCORE_LANES`] users instead of once per user (docs/sansa.md, "Scoring").
    pub fn score_block(&self, users: &[&[u32]], out: &mut [f64], h: &mut Vec<f64>) {
        assert_eq!(
            out.len(),
            users.len() * self.n,
            "one row of scores per user"
        );
        for (chunk, rows) in users
            .chunks(SCORE_LANES)
            .zip(out.chunks_mut(SCORE_LANES * self.n))
        {
            self.score_lanes::<SCORE_LANES>(chunk, rows, h);
        }
    }

    /// The scoring kernel for up to `B` users. First `h_b = x_b Wᵀ` for each user, stored
    /// interleaved (`h[m·B + b]`); then every score is a dot product of a column of `W_r` with `h`,
    /// summed in ascending row order. Each lane's sum has the same terms in the same order whatever
    /// `B` is (a lane whose `h` entry is zero adds an exact zero), so a user's scores do not depend
    /// on the block it is scored in. Plain multiply and add, never fused, for the same reason.
    fn score_lanes<const B: usize>(&self, users: &[&[u32]], out: &mut [f64], h: &mut Vec<f64>) {
        let n = self.n;
        assert!(users.len() <= B, "at most {B} users per call");
        assert_eq!(out.len(), users.len() * n, "one row of scores per user");
        if h.len() != n * B {
            h.clear();
            h.resize(n * B, 0.0);
        }
        for (b, items) in users.iter().enumerate() {
            for &j in items.iter() {
                if let Some(col) = self.w.outer_view(j as usize) {
                    for (m, &v) in col.iter() {
                        h[m * B + b] += v;
                    }
                }
            }
        }
        let indptr = self.w_r.indptr();
        let indptr = indptr.to_proper();
        let cols = Columns {
            indptr: &indptr,
            indices: self.w_r.indices(),
            data: self.w_r.data(),
            order: &self.col_order,
        };
        gather_widest::<B>(&cols, h, out, users.len());
        // One sequential pass zeroes `h` for the next block: cheaper than revisiting the rows
        // the users touched, which are most rows, in scattered order.
        h.fill(0.0);
    }
}

/// A column-major sparse matrix's raw arrays.
struct Columns<'a> {
    indptr: &'a [usize],
    indices: &'a [u32],
    data: &'a [f64],
    /// The order in which the columns are taken.
    order: &'a [u32],
}

/// `out[b·n + k] = Σ_i data_i · h[indices_i·B + b]` over column `k`'s entries in ascending order,
/// for the first `users` lanes. Each lane's sum has the same terms in the same order whatever `B`
/// is: a user's scores do not depend on the block it is scored in.
#[inline(always)]
fn gather<const B: usize>(cols: &Columns, h: &[f64], out: &mut [f64], users: usize) {
    let n = cols.indptr.len() - 1;
    for &k in cols.order {
        let k = k as usize;
        let (lo, hi) = (cols.indptr[k], cols.indptr[k + 1]);
        let mut acc = [0.0f64; B];
        for i in lo..hi {
            let (m, v) = (cols.indices[i] as usize, cols.data[i]);
            let hm: &[f64; B] = h[m * B..][..B].try_into().expect("B entries per row");
            for l in 0..B {
                acc[l] += v * hm[l];
            }
        }
        for b in 0..users {
            out[b * n + k] = acc[b];
        }
    }
}

crate::simd::widest! {
    /// [`gather`] with the widest vector instructions the processor has (the same additions, so
    /// the same bits).
    fn gather_widest<const B: usize>(cols: &Columns, h: &[f64], out: &mut [f64], users: usize)
        = gather, avx512: gather_avx512, avx2: gather_avx2
}
