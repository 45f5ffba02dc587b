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
//! cut to the lower triangle; `cargo bench --bench sparse_kernels -- gram` measures both
//! (docs/results.md, "Hand-written kernels against library paths").

use rayon::prelude::*;

use super::sparse::SparseMat;
use super::DenseScalar;
use crate::data::{split_at_bounds_mut, Csr};
use crate::hugepages;

/// Columns per parallel block: the per-column results of one block are the only transient copy.
const BLOCK: usize = 512;

/// The item → user transpose of `X`, reduced to what the Gram pass reads: for every (item j,
/// user u) entry, where u's *tail* starts — the position in `X`'s index array of u's first item
/// ≥ j — and its length (the number of u's items ≥ j, j included). Column j of the lower triangle
/// of `XᵀX` sums exactly those tails of the rows of its users, so each is found with no binary
/// search and no lookup of the row's bounds: the random reads of those lookups took most of the
/// Gram pass (docs/sansa.md, "Memory"). 12 bytes per interaction with the copy of the index
/// array the tails are read from; users within an item are in increasing order.
pub struct ItemUsers {
    /// A copy of `X`'s index array in huge pages (`crate::hugepages`), which the tails are read
    /// from: the reads start at scattered places, and with 4 KiB pages most of them also missed
    /// the address-translation cache. 4 bytes per interaction while the transpose lives.
    items: Vec<u32>,
    ptr: Vec<usize>,
    start: Vec<u32>,
    tail: Vec<u32>,
    /// Every (item, user) entry's integer user weight ([`ItemUsers::weighted`]); empty for the
    /// binary matrix. 2 bytes per interaction.
    weight: Vec<u16>,
}

impl ItemUsers {
    /// One counting-sort pass over the rows of `x` (sorted, distinct items per row).
    ///
    /// # Panics
    /// When `x` has 2³² interactions or more (positions are stored in 32 bits).
    pub fn new(x: &Csr) -> Self {
        Self::build(x, None)
    }

    /// The transpose of `x` with user u's rows counted `weights[u]` times: the Gram pass of
    /// [`gram_dense_weighted`] sums `Σ_u weights[u] x_u x_uᵀ` (the DP fit's per-user weighting,
    /// `super::dp`).
    ///
    /// # Panics
    /// When `weights` does not have one entry per row of `x`.
    pub fn weighted(x: &Csr, weights: &[u16]) -> Self {
        assert_eq!(weights.len(), x.rows(), "one weight per user");
        Self::build(x, Some(weights))
    }

    fn build(x: &Csr, weights: Option<&[u16]>) -> Self {
        let n = x.cols();
        let xpv = x.indptr();
        let (xp, xi) = (xpv.raw_storage(), x.indices());
        assert!(
            xi.len() < u32::MAX as usize,
            "{} interactions: the Gram pass stores positions in 32 bits",
            xi.len()
        );
        // Two halves of the users, counted and placed in parallel: within every item the first
        // half's users come first, so users stay in increasing order.
        let users = x.rows();
        let halves = [0..users / 2, users / 2..users];
        let counts: Vec<Vec<usize>> = halves
            .par_iter()
            .map(|h| {
                let mut c = vec![0usize; n];
                for &i in &xi[xp[h.start]..xp[h.end]] {
                    c[i as usize] += 1;
                }
                c
            })
            .collect();
        let mut ptr = Vec::with_capacity(n + 1);
        ptr.push(0usize);
        for (a, b) in counts[0].iter().zip(&counts[1]) {
            ptr.push(ptr.last().copied().unwrap_or(0) + a + b);
        }
        let nnz = ptr[n];
        let (mut start, mut tail) = (hugepages::zeroed(nnz), hugepages::zeroed(nnz));
        let mut weight = vec![0u16; if weights.is_some() { nnz } else { 0 }];
        // Every item's range split into the two halves' parts, in item order.
        let bounds: Vec<usize> = (0..n)
            .flat_map(|j| [ptr[j], ptr[j] + counts[0][j]])
            .chain([nnz])
            .collect();
        type Part<'a> = (&'a mut [u32], &'a mut [u32], &'a mut [u16]);
        let mut parts: [Vec<Part>; 2] = [Vec::with_capacity(n), Vec::with_capacity(n)];
        let weight_bounds = if weights.is_some() {
            bounds.clone()
        } else {
            vec![0; bounds.len()]
        };
        let pieces = split_at_bounds_mut(&mut start, &bounds)
            .into_iter()
            .zip(split_at_bounds_mut(&mut tail, &bounds))
            .zip(split_at_bounds_mut(&mut weight, &weight_bounds));
        for (k, ((s, t), w)) in pieces.enumerate() {
            parts[k % 2].push((s, t, w));
        }
        halves.into_par_iter().zip(parts).for_each(|(h, mut part)| {
            let mut filled = vec![0usize; n];
            for u in h {
                let (a, b) = (xp[u], xp[u + 1]);
                for (k, &i) in xi[a..b].iter().enumerate() {
                    let (f, (s, t, w)) = (&mut filled[i as usize], &mut part[i as usize]);
                    s[*f] = (a + k) as u32;
                    t[*f] = (b - a - k) as u32;
                    if let Some(ws) = weights {
                        w[*f] = ws[u];
                    }
                    *f += 1;
                }
            }
        });
        let mut items = hugepages::zeroed(xi.len());
        items.copy_from_slice(xi);
        ItemUsers {
            items,
            ptr,
            start,
            tail,
            weight,
        }
    }

    /// The (tail start, tail length) pairs of item j.
    fn of(&self, j: usize) -> (&[u32], &[u32]) {
        let r = self.ptr[j]..self.ptr[j + 1];
        (&self.start[r.clone()], &self.tail[r])
    }

    /// An upper bound of the stored entries of the lower triangle of `XᵀX` without counting them:
    /// column j has at most `n − j` rows and at most as many as the increments it takes (the sum
    /// of its tails).
    pub fn nnz_bound(&self) -> usize {
        let n = self.ptr.len() - 1;
        (0..n)
            .into_par_iter()
            .map(|j| {
                let work: usize = self.of(j).1.iter().map(|&t| t as usize).sum();
                work.max(1).min(n - j)
            })
            .sum()
    }
}

/// How many users ahead [`ColumnCounter::column`] prefetches a tail.
const PREFETCH: usize = 8;

/// Hints the processor to load the first cache lines of `items` (at most four: longer tails are
/// streamed by the hardware prefetcher once started). A hint only: no effect on results.
#[inline(always)]
fn prefetch(items: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    for k in (0..items.len().min(64)).step_by(16) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch of a valid address (a
        // slice element) reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(items[k..].as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}

/// Per-thread scratch: one column of counts and, for sparse columns, the rows touched.
struct ColumnCounter {
    count: Vec<u32>,
    touched: Vec<u32>,
}

impl ColumnCounter {
    fn new(n: usize) -> Self {
        ColumnCounter {
            count: vec![0; n],
            touched: Vec::new(),
        }
    }

    /// Counts column j of the lower triangle of `XᵀX` (rows ≥ j) and calls `emit(i, count)` for
    /// every stored entry in increasing row order — the diagonal always (first, possibly 0), the
    /// other rows when their count is non-zero — then resets the scratch.
    fn column(&mut self, t: &ItemUsers, j: usize, mut emit: impl FnMut(u32, u32)) {
        let n = self.count.len();
        let xi = &t.items[..];
        // Rows are sorted: only the last `tail` items of each user (those ≥ j) contribute to the
        // lower triangle.
        let (starts, tails) = t.of(j);
        let work: usize = tails.iter().map(|&t| t as usize).sum();
        let tail = |k: usize| {
            let s = starts[k] as usize;
            &xi[s..s + tails[k] as usize]
        };
        // The tails start at scattered places of the rows (one cache miss each, which dominated
        // the pass): ask for the tail PREFETCH users ahead while counting this one.
        let items = |k: usize| {
            if k + PREFETCH < starts.len() {
                prefetch(tail(k + PREFETCH));
            }
            tail(k)
        };
        let count: &mut [u32] = &mut self.count;
        if work.saturating_mul(8) >= n - j {
            // Dense enough: plain increments, then one scan of rows j..n.
            for row in (0..starts.len()).map(items) {
                for &i in row {
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
            for row in (0..starts.len()).map(items) {
                for &i in row {
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

impl ColumnCounter {
    /// Column j of the lower triangle of `Σ_u w_u x_u x_uᵀ` for the integer weights of a
    /// [`ItemUsers::weighted`] transpose, added into `out` (length n; rows ≥ j are written). The
    /// sums are integers below 2⁵³ (checked by the caller), hence exact in `f64`.
    fn column_weighted(t: &ItemUsers, j: usize, out: &mut [f64]) {
        let xi = &t.items[..];
        let (starts, tails) = t.of(j);
        let weights = &t.weight[t.ptr[j]..t.ptr[j + 1]];
        let tail = |k: usize| {
            let s = starts[k] as usize;
            &xi[s..s + tails[k] as usize]
        };
        for (k, &w) in weights.iter().enumerate() {
            if k + PREFETCH < starts.len() {
                prefetch(tail(k + PREFETCH));
            }
            let w = f64::from(w);
            for &i in tail(k) {
                out[i as usize] += w;
            }
        }
    }
}

/// Runs `per_column` on every column in parallel blocks and hands the results to `sink` in
/// column order (only one block of results is alive at a time).
fn by_blocks<T: Send>(
    x: &Csr,
    per_column: impl Fn(&mut ColumnCounter, &ItemUsers, usize) -> T + Sync,
    mut sink: impl FnMut(T),
) {
    let n = x.cols();
    let xt = ItemUsers::new(x);
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
            c.column(xt, j, |i, k| {
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
            c.column(xt, j, |i, _| r.push(i));
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
/// `t` is `ItemUsers::new(x)`. The counts are integers, exact in `f32` below 2²⁴ (every count is
/// at most the number of users, checked).
pub fn gram_dense<T: DenseScalar>(x: &Csr, t: &ItemUsers, m: faer::MatMut<'_, T>) {
    let n = x.cols();
    assert!(
        m.nrows() == n && m.ncols() == n,
        "dense Gram matrix of the wrong size"
    );
    assert!(
        (x.rows() as f64) < T::EXACT_INTEGERS,
        "{} users: co-occurrence counts are not exact in the dense matrix's precision",
        x.rows()
    );
    m.par_col_iter_mut().enumerate().for_each_init(
        || ColumnCounter::new(n),
        |c, (j, col)| {
            let col = super::col_slice_mut(col);
            c.column(t, j, |i, k| col[i as usize] = T::from_f64(k as f64));
        },
    );
}

/// Lower triangle (with diagonal) of the weighted Gram matrix `Σ_u w_u x_u x_uᵀ` of the
/// integer weights of `t` (an [`ItemUsers::weighted`] transpose) into a dense column-major
/// matrix, the strict upper triangle left as it is. Each column's rows j..n are summed exactly
/// in `f64`, handed to `finish(j, rows)` (which may change them: the DP fit adds its noise and
/// rescales there, while the sums are still exact), and only then rounded to `T`.
///
/// # Panics
/// When `t` is not weighted, or the sum of all weights reaches 2⁵³ (the sums would not be
/// exact).
pub fn gram_dense_weighted<T: DenseScalar>(
    t: &ItemUsers,
    m: faer::MatMut<'_, T>,
    finish: impl Fn(usize, &mut [f64]) + Sync,
) {
    let n = t.ptr.len() - 1;
    assert!(
        m.nrows() == n && m.ncols() == n,
        "dense Gram matrix of the wrong size"
    );
    assert!(
        t.weight.len() == t.start.len(),
        "gram_dense_weighted needs a weighted transpose"
    );
    let total: f64 = t.weight.iter().map(|&w| f64::from(w)).sum();
    assert!(
        total < 9_007_199_254_740_992.0,
        "weights summing to {total}: the weighted Gram sums are not exact in f64"
    );
    m.par_col_iter_mut().enumerate().for_each_init(
        || vec![0.0f64; n],
        |acc, (j, col)| {
            let col = super::col_slice_mut(col);
            ColumnCounter::column_weighted(t, j, acc);
            finish(j, &mut acc[j..]);
            for (c, a) in col[j..].iter_mut().zip(acc[j..].iter_mut()) {
                *c = T::from_f64(std::mem::take(a));
            }
        },
    );
}

/// A change made to the dense lower triangle of `XᵀX` (diagonal included, column-major, the
/// strict upper triangle zero) before it is factorised: the DP fit adds its noise here
/// (`super::dp`). Generic over the dense precision.
pub trait DenseGramEdit: Sync {
    /// Edits the lower triangle of `m` in place.
    fn apply<T: DenseScalar>(&self, m: faer::MatMut<'_, T>);

    /// The transpose the Gram pass of `x` reads: the binary one unless the edit weighs users.
    fn item_users(&self, x: &Csr) -> ItemUsers {
        ItemUsers::new(x)
    }

    /// The edited dense Gram matrix of `x` (zeroed `m`, `users` from
    /// [`DenseGramEdit::item_users`], dropped as soon as the Gram pass is done): by default
    /// [`gram_dense`], then [`DenseGramEdit::apply`].
    fn gram<T: DenseScalar>(&self, x: &Csr, users: ItemUsers, mut m: faer::MatMut<'_, T>) {
        gram_dense(x, &users, m.as_mut());
        drop(users);
        self.apply(m);
    }
}

/// An upper bound of the stored entries of [`gram_lower`] without counting them
/// ([`ItemUsers::nnz_bound`]).
pub fn gram_nnz_bound(x: &Csr) -> usize {
    ItemUsers::new(x).nnz_bound()
}

/// `X` with item j renamed `inv[j]` (rows sorted again): the Gram matrix of the result is the
/// symmetric permutation `Π XᵀX Πᵀ` of the original, formed without permuting a matrix.
pub fn relabel_items(x: &Csr, inv: &[usize]) -> Csr {
    let (indptr, indices, data) = x.clone().into_raw_storage();
    let mut indices = indices;
    split_at_bounds_mut(&mut indices, &indptr)
        .into_par_iter()
        .for_each(|row| {
            for i in row.iter_mut() {
                *i = inv[*i as usize] as u32;
            }
            row.sort_unstable();
        });
    Csr::new((x.rows(), x.cols()), indptr, indices, data)
}
