//! The sparse matrix type of the fitting pipeline — sprs's compressed-column matrix
//! ([`SparseMat`], `f64` values, `u32` row indices) — and the structural kernels SANSA needs that
//! sprs does not offer: a symmetric permutation that reads and writes only the lower triangle,
//! global magnitude pruning, and a dense accumulator for column-by-column products.
//!
//! Why each kernel is hand-written rather than composed from sprs is measured in
//! `benches/sparse_kernels.rs` and stated on the kernel (docs/design.md).

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

/// Sparse `f64` matrix with `u32` indices and `usize` offsets (sprs). The fitting pipeline stores
/// square matrices by columns (CSC); the scoring factors use both orientations.
pub type SparseMat = sprs::CsMatI<f64, u32, usize>;

/// Column (outer slice) access as plain slices, for the kernels below.
pub trait Cols {
    /// Rows and values of outer slice `j` (column `j` of a CSC matrix).
    fn col(&self, j: usize) -> (&[u32], &[f64]);
}

impl Cols for SparseMat {
    #[inline]
    fn col(&self, j: usize) -> (&[u32], &[f64]) {
        let r = self.indptr().outer_inds_sz(j);
        (&self.indices()[r.clone()], &self.data()[r])
    }
}

/// Builds a square CSC matrix from per-column (sorted) entry lists; sprs checks the structure.
pub fn from_columns(n: usize, cols: Vec<(Vec<u32>, Vec<f64>)>) -> SparseMat {
    let nnz = cols.iter().map(|c| c.0.len()).sum();
    let mut indptr = Vec::with_capacity(n + 1);
    let mut row = Vec::with_capacity(nnz);
    let mut val = Vec::with_capacity(nnz);
    indptr.push(0);
    for (r, v) in cols {
        row.extend_from_slice(&r);
        val.extend_from_slice(&v);
        indptr.push(row.len());
    }
    SparseMat::new_csc((n, n), indptr, row, val)
}

/// Symmetric permutation of a symmetric matrix given by its lower triangle (CSC), keeping the
/// lower triangle: `B[a, b] = A[fwd[a], fwd[b]]` for `a ≥ b`, with `inv` the inverse of `fwd`.
/// Consumes `a` so that only one copy of the entries is alive besides the result.
///
/// Hand-written because sprs's [`sprs::transform_mat_papt`] permutes a *full* matrix: building
/// the full symmetric matrix from the lower triangle, permuting it and keeping the lower half
/// holds four half-sized copies at once instead of two and was slower in
/// `cargo bench --bench sparse_kernels -- permute` (numbers in
/// docs/results.md, "Hand-written kernels against library paths").
pub fn permute_lower(a: SparseMat, inv: &[usize]) -> SparseMat {
    let n = a.cols();
    let place = |i: usize, j: usize| {
        let (p, q) = (inv[i], inv[j]);
        if p >= q {
            (p, q)
        } else {
            (q, p)
        }
    };
    let mut col_ptr = vec![0usize; n + 1];
    for j in 0..n {
        for &i in a.col(j).0 {
            col_ptr[place(i as usize, j).1 + 1] += 1;
        }
    }
    for b in 0..n {
        col_ptr[b + 1] += col_ptr[b];
    }
    let nnz = col_ptr[n];
    let mut row = vec![0u32; nnz];
    let mut val = vec![0.0f64; nnz];
    let mut next = col_ptr.clone();
    for j in 0..n {
        let (r, v) = a.col(j);
        for (&i, &x) in r.iter().zip(v) {
            let (p, q) = place(i as usize, j);
            row[next[q]] = p as u32;
            val[next[q]] = x;
            next[q] += 1;
        }
    }
    drop(a);
    // Sort every column by row.
    let mut rest_r: &mut [u32] = &mut row;
    let mut rest_v: &mut [f64] = &mut val;
    let mut chunks = Vec::with_capacity(n);
    for b in 0..n {
        let len = col_ptr[b + 1] - col_ptr[b];
        let (cr, tr) = std::mem::take(&mut rest_r).split_at_mut(len);
        let (cv, tv) = std::mem::take(&mut rest_v).split_at_mut(len);
        chunks.push((cr, cv));
        rest_r = tr;
        rest_v = tv;
    }
    chunks.into_par_iter().for_each(|(cr, cv)| {
        if !cr.windows(2).all(|w| w[0] < w[1]) {
            let mut e: Vec<(u32, f64)> = cr.iter().copied().zip(cv.iter().copied()).collect();
            e.sort_unstable_by_key(|x| x.0);
            for (k, (r, v)) in e.into_iter().enumerate() {
                cr[k] = r;
                cv[k] = v;
            }
        }
    });
    SparseMat::new_csc((n, n), col_ptr, row, val)
}

/// Squared 2-norms of the columns of the symmetric matrix whose lower triangle is `a`.
pub fn symmetric_col_sq_norms(a: &SparseMat) -> Vec<f64> {
    let mut norms = vec![0.0; a.cols()];
    for (j, col) in a.outer_iterator().enumerate() {
        for (i, &x) in col.iter() {
            norms[j] += x * x;
            if i != j {
                norms[i] += x * x;
            }
        }
    }
    norms
}

/// Keeps the diagonal and the `budget` largest-magnitude off-diagonal entries of a square CSC
/// matrix (one global threshold; SANSA's pruning to the target density). Returns which columns
/// lost entries. sprs has no filtering operation, hence the kernel.
pub fn prune_global(m: &mut SparseMat, budget: usize) -> Vec<bool> {
    let n = m.cols();
    let mut mags: Vec<f64> = (0..n)
        .flat_map(|j| {
            let (r, v) = m.col(j);
            r.iter()
                .zip(v)
                .filter(move |(&i, _)| i as usize != j)
                .map(|(_, &x)| x.abs())
        })
        .collect();
    let mut changed = vec![false; n];
    if mags.len() <= budget {
        return changed;
    }
    let k = mags.len() - budget; // entries to drop
    let (_, &mut threshold, _) = mags.select_nth_unstable_by(k - 1, |a, b| a.total_cmp(b));
    // Drop everything ≤ threshold, then give back ties until the budget is met.
    let above = mags.iter().filter(|&&x| x > threshold).count();
    drop(mags);
    let mut ties_left = budget.saturating_sub(above);
    let mut indptr = Vec::with_capacity(n + 1);
    let mut row = Vec::with_capacity(budget + n);
    let mut val = Vec::with_capacity(budget + n);
    indptr.push(0);
    for j in 0..n {
        let (r, v) = m.col(j);
        for (&i, &x) in r.iter().zip(v) {
            let keep = if i as usize == j || x.abs() > threshold {
                true
            } else if x.abs() == threshold && ties_left > 0 {
                ties_left -= 1;
                true
            } else {
                false
            };
            if keep {
                row.push(i);
                val.push(x);
            } else {
                changed[j] = true;
            }
        }
        indptr.push(row.len());
    }
    *m = SparseMat::new_csc((n, n), indptr, row, val);
    changed
}

/// Dense accumulator with a list of touched positions, reused across columns (the sparse
/// accumulator of Gilbert, Moler and Schreiber; sprs keeps its own private to its products).
#[derive(Debug, Clone)]
pub struct Accumulator {
    /// Values (zero outside the touched positions).
    values: Vec<f64>,
    /// Whether a position has been touched since the last reset.
    mark: Vec<bool>,
    /// Positions written since the last reset, in the order they were first written.
    touched: Vec<u32>,
}

impl Accumulator {
    /// An accumulator of dimension `n`.
    pub fn new(n: usize) -> Self {
        Accumulator {
            values: vec![0.0; n],
            mark: vec![false; n],
            touched: Vec::new(),
        }
    }

    /// Adds `v` at `i`.
    #[inline]
    pub fn add(&mut self, i: u32, v: f64) {
        let iu = i as usize;
        if !self.mark[iu] {
            self.mark[iu] = true;
            self.touched.push(i);
        }
        self.values[iu] += v;
    }

    /// The positions touched since the last reset, in the order they were first touched.
    pub fn touched(&self) -> &[u32] {
        &self.touched
    }

    /// The value at `i` (zero when untouched).
    #[inline]
    pub fn value(&self, i: u32) -> f64 {
        self.values[i as usize]
    }

    /// Whether `i` has been touched since the last reset.
    #[inline]
    pub fn is_touched(&self, i: u32) -> bool {
        self.mark[i as usize]
    }

    /// Resets without collecting anything.
    pub fn clear(&mut self) {
        for &i in &self.touched {
            self.mark[i as usize] = false;
            self.values[i as usize] = 0.0;
        }
        self.touched.clear();
    }

    /// Sum of squares of the touched values, in the order they were first touched, then resets
    /// (no sorting).
    pub fn drain_sq_norm(&mut self) -> f64 {
        let s = self
            .touched
            .iter()
            .map(|&i| self.values[i as usize].powi(2))
            .sum();
        self.clear();
        s
    }

    /// Takes the touched entries (sorted by index) and resets.
    pub fn drain_sorted(&mut self) -> (Vec<u32>, Vec<f64>) {
        self.touched.sort_unstable();
        let rows = std::mem::take(&mut self.touched);
        let vals: Vec<f64> = rows
            .iter()
            .map(|&i| {
                let iu = i as usize;
                self.mark[iu] = false;
                std::mem::replace(&mut self.values[iu], 0.0)
            })
            .collect();
        (rows, vals)
    }
}
