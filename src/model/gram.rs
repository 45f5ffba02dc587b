//! The Gram matrix `XᵀX` of a binary user × item matrix (docs/sansa.md), lower triangle, computed in
//! parallel over item columns: column j sums the rows of the users who have item j. The diagonal
//! entry of every column is stored, first.
//!
//! The data are binary, so every entry is an integer co-occurrence count: column j is counted in a
//! `u32` array of length n (it stays in cache), and only then written out. Columns are computed in
//! blocks and appended to the final arrays in order, so the matrix is never held twice
//! (docs/sansa.md, "Memory"). Three outputs: the pattern alone ([`gram_pattern`], for the
//! ordering), the sparse lower triangle ([`gram_lower`]) and a dense column-major lower triangle
//! ([`gram_dense`], for the nearly dense case).
//!
//! Hand-written rather than sprs's product `Xᵀ · X` (`&xt * &x`): sprs forms the full symmetric
//! product on one thread (its parallel product needs the `multi_thread` feature) and would then be
//! cut to the lower triangle; `cargo bench --bench sparse_kernels -- gram` measures both (README,
//! "Design notes").

use rayon::prelude::*;

use super::sparse::SparseMat;
use crate::data::Csr;

/// Columns per parallel block: the per-column results of one block are the only transient copy.
const BLOCK: usize = 512;

/// Per-thread scratch: one column of counts and, for sparse columns, the rows touched.
struct ColumnCounter {
    count: Vec<u32>,
    touched: Vec<u32>,
    tails: Vec<(usize, usize)>,
}

impl ColumnCounter {
    fn new(n: usize) -> Self {
        ColumnCounter {
            count: vec![0; n],
            touched: Vec::new(),
            tails: Vec::new(),
        }
    }

    /// Counts column j of the lower triangle of `XᵀX` (rows ≥ j) and calls `emit(i, count)` for
    /// every stored entry in increasing row order — the diagonal always (first, possibly 0), the
    /// other rows when their count is non-zero — then resets the scratch.
    fn column(&mut self, x: &Csr, xt: &Csr, j: usize, mut emit: impl FnMut(u32, u32)) {
        let n = self.count.len();
        let (xpv, tpv) = (x.indptr(), xt.indptr());
        let (xp, xi) = (xpv.raw_storage(), x.indices());
        let (tp, ti) = (tpv.raw_storage(), xt.indices());
        // Rows are sorted: only items ≥ j contribute to the lower triangle. One binary search
        // per user; the tails are remembered as ranges of `xi`.
        let tails = &mut self.tails;
        tails.clear();
        let mut work = 0usize;
        for &u in &ti[tp[j]..tp[j + 1]] {
            let (b, e) = (xp[u as usize], xp[u as usize + 1]);
            let start = b + xi[b..e].partition_point(|&i| (i as usize) < j);
            work += e - start;
            tails.push((start, e));
        }
        let count = &mut self.count;
        if work.saturating_mul(8) >= n - j {
            // Dense enough: plain increments, then one scan of rows j..n.
            for &(b, e) in tails.iter() {
                for &i in &xi[b..e] {
                    count[i as usize] += 1;
                }
            }
            emit(j as u32, std::mem::replace(&mut count[j], 0));
            for (i, c) in count.iter_mut().enumerate().skip(j + 1) {
                if *c != 0 {
                    emit(i as u32, std::mem::replace(c, 0));
                }
            }
        } else {
            // Sparse column: remember the rows touched, sort them.
            let touched = &mut self.touched;
            for &(b, e) in tails.iter() {
                for &i in &xi[b..e] {
                    if count[i as usize] == 0 {
                        touched.push(i);
                    }
                    count[i as usize] += 1;
                }
            }
            if count[j] == 0 {
                touched.push(j as u32);
            }
            touched.sort_unstable();
            for &i in touched.iter() {
                emit(i, std::mem::replace(&mut count[i as usize], 0));
            }
            touched.clear();
        }
    }
}

/// Runs `per_column` on every column in parallel blocks and hands the results to `sink` in
/// column order (only one block of results is alive at a time).
fn by_blocks<T: Send>(
    x: &Csr,
    per_column: impl Fn(&mut ColumnCounter, &Csr, usize) -> T + Sync,
    mut sink: impl FnMut(T),
) {
    let n = x.cols();
    let xt = x.transpose_view().to_csr(); // item × user
    for lo in (0..n).step_by(BLOCK) {
        let hi = (lo + BLOCK).min(n);
        let block: Vec<T> = (lo..hi)
            .into_par_iter()
            .map_init(|| ColumnCounter::new(n), |c, j| per_column(c, &xt, j))
            .collect();
        block.into_iter().for_each(&mut sink);
    }
}

/// Lower triangle (with diagonal) of `XᵀX` as a CSC matrix of counts.
pub fn gram_lower(x: &Csr) -> SparseMat {
    let n = x.cols();
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let (mut row, mut val) = (Vec::new(), Vec::new());
    by_blocks(
        x,
        |c, xt, j| {
            let (mut r, mut v) = (Vec::new(), Vec::new());
            c.column(x, xt, j, |i, k| {
                r.push(i);
                v.push(k as f64);
            });
            (r, v)
        },
        |(r, v): (Vec<u32>, Vec<f64>)| {
            row.extend_from_slice(&r);
            val.extend_from_slice(&v);
            indptr.push(row.len());
        },
    );
    row.shrink_to_fit();
    val.shrink_to_fit();
    SparseMat::new_csc((n, n), indptr, row, val)
}

/// The pattern of the lower triangle (with diagonal) of `XᵀX`: column pointers and sorted row
/// indices, without values (a third of [`gram_lower`]'s memory), for the fill-reducing ordering.
pub fn gram_pattern(x: &Csr) -> (Vec<usize>, Vec<u32>) {
    let n = x.cols();
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let mut row = Vec::new();
    by_blocks(
        x,
        |c, xt, j| {
            let mut r = Vec::new();
            c.column(x, xt, j, |i, _| r.push(i));
            r
        },
        |r: Vec<u32>| {
            row.extend_from_slice(&r);
            indptr.push(row.len());
        },
    );
    row.shrink_to_fit();
    (indptr, row)
}

/// Lower triangle (with diagonal) of `XᵀX` written straight into a dense column-major `n × n`
/// matrix (the strict upper triangle stays zero), for a Gram matrix that fills in completely.
pub fn gram_dense(x: &Csr, m: faer::MatMut<'_, f64>) {
    let n = x.cols();
    assert!(
        m.nrows() == n && m.ncols() == n,
        "dense Gram matrix of the wrong size"
    );
    let xt = x.transpose_view().to_csr();
    m.par_col_iter_mut().enumerate().for_each_init(
        || ColumnCounter::new(n),
        |c, (j, mut col)| {
            c.column(x, &xt, j, |i, k| col[i as usize] = k as f64);
        },
    );
}

/// An upper bound of the stored entries of [`gram_lower`] without counting them: column j has at
/// most `n − j` rows and at most as many as the increments it takes (binary searches only).
pub fn gram_nnz_bound(x: &Csr) -> usize {
    let n = x.cols();
    let xt = x.transpose_view().to_csr();
    let (xpv, tpv) = (x.indptr(), xt.indptr());
    let (xp, xi) = (xpv.raw_storage(), x.indices());
    let (tp, ti) = (tpv.raw_storage(), xt.indices());
    (0..n)
        .into_par_iter()
        .map(|j| {
            let work: usize = ti[tp[j]..tp[j + 1]]
                .iter()
                .map(|&u| {
                    let items = &xi[xp[u as usize]..xp[u as usize + 1]];
                    items.len() - items.partition_point(|&i| (i as usize) < j)
                })
                .sum();
            work.max(1).min(n - j)
        })
        .sum()
}

/// `X` with item j renamed `inv[j]` (rows sorted again): the Gram matrix of the result is the
/// symmetric permutation `Π XᵀX Πᵀ` of the original, formed without permuting a matrix.
pub fn relabel_items(x: &Csr, inv: &[usize]) -> Csr {
    let (indptr, indices, data) = x.clone().into_raw_storage();
    let mut indices = indices;
    let mut chunks: Vec<&mut [u32]> = Vec::with_capacity(x.rows());
    let mut rest: &mut [u32] = &mut indices;
    for w in indptr.windows(2) {
        let (c, r) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        chunks.push(c);
        rest = r;
    }
    chunks.into_par_iter().for_each(|row| {
        for i in row.iter_mut() {
            *i = inv[*i as usize] as u32;
        }
        row.sort_unstable();
    });
    Csr::new((x.rows(), x.cols()), indptr, indices, data)
}
