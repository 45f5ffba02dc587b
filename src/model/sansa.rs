//! SANSA (Spišák et al. 2023), docs/sansa.md: a sparse approximation of EASE's inverse Gram matrix as
//! `P ≈ Wᵀ D⁻¹ W`, with `W = K·Π` and `K ≈ L⁻¹` from a sparse `L D Lᵀ` of the permuted Gram matrix.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use std::time::Instant;

use faer::reborrow::{Reborrow, ReborrowMut};

use super::factor::{
    dense_cholesky, dense_cholesky_in_place, exact_cholesky, incomplete_cholesky, to_unit_ldl,
    ZeroedSquare,
};
use super::gram::{gram_lower, gram_pattern, relabel_items, DenseGramEdit, ItemUsers};
use super::ordering::{
    amd_ordering, amd_ordering_dense, amd_ordering_pattern, permute_dense_symmetric,
};
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
    /// `W_r = D⁻¹ W` with column j scaled by `−1/diag_j`, stored by rows: one user is scored a
    /// touched row at a time ([`Sansa::score_into`]). Private, as `w` is: `w_r_bands` is derived
    /// from it.
    w_r_rows: SparseWeights,
    /// The same `W_r` by columns, cut into bands of consecutive rows: a block of users is scored
    /// a band at a time ([`Sansa::score_block`]).
    w_r_bands: Bands,
}

/// Users [`Sansa::score_block`] scores together: `W_r` is read once per block. At the netflix
/// shape, on two threads, blocks of 32 in bands of 1,024 rows took 0.19 ms of wall time per user,
/// against 0.27 for blocks of 8 without bands, 0.20–0.21 for blocks of 16 in bands of 4,096 and
/// 0.20–0.24 for blocks of 64 in bands of 1,024. Each stored weight reads 8 bytes per lane of `h`
/// from L2, which is what bounds the kernel.
pub const SCORE_LANES: usize = 32;

/// Rows of `W_r` in one band of [`Bands`]: the band's part of the interleaved `x Wᵀ` of a block,
/// `BAND_ROWS · SCORE_LANES · 8` bytes (256 KiB), stays in one core's L2 cache while the band's
/// columns are read (bands of 2,048 and 4,096 rows were slower on two threads). At most 2¹⁶, so a
/// row within its band fits in a `u16`.
const BAND_ROWS: usize = 1024;

/// `W_r` by columns, cut into bands of [`BAND_ROWS`] consecutive rows, each band a column-major
/// sparse matrix of its own with rows counted from the band's first (docs/sansa.md, "Scoring").
#[derive(Debug, Clone)]
struct Bands {
    bands: Vec<Band>,
}

#[derive(Debug, Clone)]
struct Band {
    /// The band's first row of `W_r`.
    first: usize,
    /// Rows in the band.
    rows: usize,
    /// Column k's entries are `[indptr[k], indptr[k + 1])`.
    indptr: Vec<usize>,
    /// Row within the band, ascending in each column.
    index: Vec<u16>,
    data: Vec<f64>,
}

impl Bands {
    /// The bands of `band_rows` rows (at most 2¹⁶) of `m` (stored by rows).
    fn new(m: &SparseWeights, band_rows: usize) -> Self {
        assert!(m.is_csr(), "the bands are cut from the row-major copy");
        assert!(
            (1..=1 << 16).contains(&band_rows),
            "a row within its band fits in a u16"
        );
        let n_rows = m.rows();
        let bands = (0..n_rows.div_ceil(band_rows))
            .map(|b| {
                let first = b * band_rows;
                let rows = band_rows.min(n_rows - first);
                // The band's rows, stored by columns (sprs numbers them from the band's first
                // and keeps each column's rows ascending).
                let cols = m.slice_outer(first..first + rows).to_csc();
                Band {
                    first,
                    rows,
                    indptr: cols.indptr().to_proper().to_vec(),
                    index: cols.indices().iter().map(|&r| r as u16).collect(),
                    data: cols.data().to_vec(),
                }
            })
            .collect();
        Bands { bands }
    }
}

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
            let dense = DenseFit {
                l2,
                max_nnz,
                umr,
                precision,
            };
            return dense.fit(x, users, &NoEdit, t, report, progress);
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

/// No change to the dense Gram matrix (the non-private fit).
struct NoEdit;

impl DenseGramEdit for NoEdit {
    fn apply<T: DenseScalar>(&self, _m: faer::MatMut<'_, T>) {}
}

/// SANSA's dense path (`exact` on a dense Gram matrix) with `edit` applied to the Gram matrix
/// before λ, the ordering and the factorisation: the DP fit's path (its noisy Gram matrix is
/// dense whatever the data). Fails with the memory it needs when the dense matrix does not fit
/// in 90% of the available memory.
#[allow(clippy::too_many_arguments)]
pub fn fit_sansa_dense_edited<E: DenseGramEdit>(
    x: &Csr,
    l2: f64,
    density: f64,
    umr: UmrConfig,
    precision: Precision,
    edit: &E,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<Sansa> {
    let n = x.cols();
    let need = precision.bytes() as f64 * n as f64 * n as f64;
    if let Some(avail) = super::ease::available_memory_bytes() {
        if need > 0.9 * avail as f64 {
            return Err(crate::Error::Invalid(format!(
                "the dense Gram matrix of {n} items needs {:.1} GiB in {} but only {:.1} GiB is \
                 available",
                need / (1u64 << 30) as f64,
                precision.name(),
                avail as f64 / (1u64 << 30) as f64
            )));
        }
    }
    let max_nnz = ((density * n as f64 * n as f64).round() as usize).max(n);
    let t = Instant::now();
    let users = edit.item_users(x);
    let dense = DenseFit {
        l2,
        max_nnz,
        umr,
        precision,
    };
    dense.fit(x, users, edit, t, report, progress)
}

/// The settings of the dense path.
struct DenseFit {
    l2: f64,
    max_nnz: usize,
    umr: UmrConfig,
    precision: Precision,
}

impl DenseFit {
    /// Gram matrix (edited), ordering, factorisation, pruning and the inverse; `t` is when the
    /// Gram stage started.
    fn fit<E: DenseGramEdit>(
        &self,
        x: &Csr,
        users: ItemUsers,
        edit: &E,
        t: Instant,
        report: &mut FitReport,
        progress: &dyn Fn(&str),
    ) -> Result<Sansa> {
        let n = x.cols();
        let keep = self.max_nnz.saturating_sub(n);
        let l2 = self.l2;
        let (l, full_nnz, fwd, inv) = match self.precision {
            Precision::F32 => fit_dense::<f32, E>(x, users, l2, keep, edit, t, report, progress)?,
            Precision::F64 => fit_dense::<f64, E>(x, users, l2, keep, edit, t, report, progress)?,
        };
        let t = Instant::now();
        let mut l = l;
        let d = to_unit_ldl(&mut l);
        report.factor_nnz = full_nnz;
        prune_global(&mut l, keep);
        report.stage("prune", t);
        finish(l, d, fwd, inv, self.max_nnz, self.umr, report, progress)
    }
}

/// The dense path of [`fit_sansa_rows`] in precision `T`: Gram matrix, ordering and in-place
/// permutation, Cholesky, pruned extraction. Returns the pruned factor (`f64`), the full factor's
/// entries and the ordering. `t` is when the Gram stage started.
#[allow(clippy::type_complexity)]
#[allow(clippy::too_many_arguments)]
fn fit_dense<T: DenseScalar, E: DenseGramEdit>(
    x: &Csr,
    users: ItemUsers,
    l2: f64,
    keep: usize,
    edit: &E,
    t: Instant,
    report: &mut FitReport,
    progress: &dyn Fn(&str),
) -> Result<(SparseMat, usize, Vec<usize>, Vec<usize>)> {
    let n = x.cols();
    progress("Gram matrix XᵀX (dense)");
    let mut square = ZeroedSquare::<T>::new(n);
    let mut m = square.as_mut();
    edit.gram(x, users, m.rb_mut());
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

    /// `W_r = D⁻¹ W` with column j scaled by `−1/diag_j`, by rows.
    pub fn w_r(&self) -> &SparseWeights {
        &self.w_r_rows
    }

    /// Number of stored weights (both factors).
    pub fn nnz(&self) -> usize {
        self.w.nnz() + self.w_r_rows.nnz()
    }

    /// A model from its two factors (any storage order; `W` is kept by columns, `W_r` both ways).
    pub fn new(w: SparseWeights, w_r: SparseWeights) -> Self {
        assert_eq!(w.shape(), w_r.shape(), "W and W_r have the same shape");
        assert_eq!(w.rows(), w.cols(), "square weights");
        let w = if w.is_csc() { w } else { w.to_csc() };
        let w_r_rows = if w_r.is_csr() { w_r } else { w_r.to_csr() };
        let w_r_bands = Bands::new(&w_r_rows, BAND_ROWS);
        Sansa {
            n: w.cols(),
            w,
            w_r_rows,
            w_r_bands,
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
            // A short last block (fewer than a quarter of the lanes) is scored with 8 lanes rather
            // than pay for all of them; the lanes do not change any user's sums.
            if chunk.len() <= SCORE_LANES / 4 {
                self.score_lanes::<{ SCORE_LANES / 4 }>(chunk, rows, h);
            } else {
                self.score_lanes::<SCORE_LANES>(chunk, rows, h);
            }
        }
    }

    /// The scoring kernel for up to `B` users. First `h_b = x_b Wᵀ` for each user, stored
    /// interleaved (`h[m·B + b]`); then every score is a dot product of a column of `W_r` with `h`,
    /// summed in ascending row order, one band of rows after another: each band adds its part to
    /// running sums kept interleaved (`acc[k·B + b]`), which are stored between bands. Storing a
    /// sum does not round it, so each lane's sum has the same terms in the same order whatever
    /// `B` is and however the rows are banded (a lane whose `h` entry is zero adds an exact zero):
    /// a user's scores do not depend on the block it is scored in. Plain multiply and add, never
    /// fused, for the same reason. `scratch` holds `h` and the sums (resized as needed, left
    /// zeroed).
    fn score_lanes<const B: usize>(
        &self,
        users: &[&[u32]],
        out: &mut [f64],
        scratch: &mut Vec<f64>,
    ) {
        let n = self.n;
        assert!(users.len() <= B, "at most {B} users per call");
        assert_eq!(out.len(), users.len() * n, "one row of scores per user");
        if scratch.len() < 2 * n * B {
            scratch.resize(2 * n * B, 0.0);
        }
        let scratch = &mut scratch[..2 * n * B];
        let (h, acc) = scratch.split_at_mut(n * B);
        for (b, items) in users.iter().enumerate() {
            for &j in items.iter() {
                if let Some(col) = self.w.outer_view(j as usize) {
                    for (m, &v) in col.iter() {
                        h[m * B + b] += v;
                    }
                }
            }
        }
        for band in &self.w_r_bands.bands {
            let h = &h[band.first * B..(band.first + band.rows) * B];
            gather_widest::<B>(band, h, acc);
        }
        for (k, sums) in acc.chunks_exact(B).enumerate() {
            for (b, &v) in sums[..users.len()].iter().enumerate() {
                out[b * n + k] = v;
            }
        }
        // Sequential passes zero `h` and the sums for the next block: cheaper than revisiting
        // the rows the users touched, which are most rows, in scattered order.
        scratch.fill(0.0);
    }
}

/// `acc[k·B + l] += Σ_i data_i · h[index_i·B + l]` over column `k`'s entries in the band, in
/// ascending order, for every column and lane (`h` is the band's part of the interleaved rows).
#[inline(always)]
fn gather<const B: usize>(band: &Band, h: &[f64], acc: &mut [f64]) {
    for (k, sums) in acc.chunks_exact_mut(B).enumerate() {
        let (lo, hi) = (band.indptr[k], band.indptr[k + 1]);
        if lo == hi {
            continue;
        }
        let sums: &mut [f64; B] = sums.try_into().expect("B sums per column");
        let mut s = *sums;
        for (&m, &v) in band.index[lo..hi].iter().zip(&band.data[lo..hi]) {
            let hm: &[f64; B] = h[m as usize * B..][..B]
                .try_into()
                .expect("B entries per row");
            for l in 0..B {
                s[l] += v * hm[l];
            }
        }
        *sums = s;
    }
}

crate::simd::widest! {
    /// [`gather`] with the widest vector instructions the processor has (the same additions, so
    /// the same bits).
    fn gather_widest<const B: usize>(band: &Band, h: &[f64], acc: &mut [f64])
        = gather, avx512: gather_avx512, avx2: gather_avx2
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng as _, SeedableRng as _};

    /// A random sparse n × n matrix with about `fill` of its entries stored, as triplets.
    fn random_weights(n: usize, fill: f64, seed: u64) -> SparseWeights {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut t = sprs::TriMatI::<f64, u32>::new((n, n));
        for i in 0..n {
            for j in 0..n {
                if rng.random::<f64>() < fill {
                    t.add_triplet(i, j, rng.random::<f64>() * 2.0 - 1.0);
                }
            }
        }
        t.to_csc()
    }

    /// Blocks of every size the kernel takes (the 32-lane and the 8-lane one), at two offsets,
    /// with `W_r` in one band and in bands of 7 rows (a last band of 6), give each user the bits
    /// of the one-user path; the AVX-512, AVX2 and baseline builds of the band kernel agree.
    #[test]
    fn banded_block_scoring_equals_scoring_each_user_alone_bit_for_bit() {
        let n = 55;
        let w = random_weights(n, 0.2, 1);
        let w_r = random_weights(n, 0.15, 2);
        let one_band = Sansa::new(w.clone(), w_r.clone());
        let mut banded = Sansa::new(w, w_r);
        banded.w_r_bands = Bands::new(&banded.w_r_rows, 7);
        assert_eq!(one_band.w_r_bands.bands.len(), 1);
        assert_eq!(banded.w_r_bands.bands.len(), 8);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        // 37 users: a block of 32 and one of 5; an empty user and one with every item.
        let mut users: Vec<Vec<u32>> = (0..35)
            .map(|_| {
                (0..n as u32)
                    .filter(|_| rng.random::<f64>() < 0.1)
                    .collect()
            })
            .collect();
        users.insert(6, Vec::new());
        users.push((0..n as u32).collect());
        let refs: Vec<&[u32]> = users.iter().map(|u| u.as_slice()).collect();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let (mut scratch, mut alone) = (Vec::new(), vec![0.0; n]);
        for model in [&one_band, &banded] {
            for shift in [0, 3, 30] {
                let mut block = vec![0.0; (refs.len() - shift) * n];
                model.score_block(&refs[shift..], &mut block, &mut scratch);
                for (u, row) in refs[shift..].iter().zip(block.chunks(n)) {
                    one_band.score_into(u, &mut alone, &mut scratch);
                    assert_eq!(bits(row), bits(&alone), "block and alone differ for {u:?}");
                }
            }
        }
        assert!(alone.iter().any(|&s| s != 0.0), "scores are not all zero");
        assert!(scratch.iter().all(|&v| v == 0.0), "scratch is left zeroed");

        // The builds of the band kernel, on interleaved rows with zeros and negative values.
        const B: usize = 8;
        let h: Vec<f64> = (0..n * B)
            .map(|_| match rng.random_range(0..4) {
                0 => 0.0,
                _ => rng.random::<f64>() * 4.0 - 2.0,
            })
            .collect();
        for band in &banded.w_r_bands.bands {
            let h = &h[band.first * B..(band.first + band.rows) * B];
            let mut base = vec![0.5; n * B];
            gather::<B>(band, h, &mut base);
            #[cfg(target_arch = "x86_64")]
            for (name, present, kernel) in [
                (
                    "avx512",
                    std::arch::is_x86_feature_detected!("avx512f"),
                    gather_avx512::<B> as unsafe fn(&Band, &[f64], &mut [f64]),
                ),
                (
                    "avx2",
                    std::arch::is_x86_feature_detected!("avx2"),
                    gather_avx2::<B>,
                ),
            ] {
                if !present {
                    eprintln!("this processor has no {name}: that build is not compared");
                    continue;
                }
                let mut wide = vec![0.5; n * B];
                // SAFETY: the processor has the feature (checked just above).
                unsafe { kernel(band, h, &mut wide) };
                assert_eq!(bits(&wide), bits(&base), "the {name} build differs");
            }
        }
    }
}
