//! Fill-reducing orderings of the Gram matrix before its factorisation (docs/sansa.md, step 2):
//! approximate minimum degree (faer) of a sparse, a lower-triangular or a dense pattern, and the
//! symmetric permutation of a dense matrix.

// Index loops mirror the matrix formulas of docs/sansa.md (column j, row i).
#![allow(clippy::needless_range_loop)]

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::sparse::SymbolicSparseColMatRef;
use rayon::prelude::*;

use super::sparse::SparseMat;
use super::DenseScalar;
use crate::{Error, Result};

/// A fill-reducing ordering of the symmetric matrix whose lower triangle is `lower` (approximate
/// minimum degree, faer; it orders the pattern of `A + Aᵀ`): returns (fwd, inv) with
/// `permuted[a, b] = original[fwd[a], fwd[b]]`. Only the pattern is read; see
/// [`amd_ordering_pattern`].
pub fn amd_ordering(lower: &SparseMat) -> Result<(Vec<usize>, Vec<usize>)> {
    amd_ordering_pattern(lower.cols(), lower.indptr().raw_storage(), lower.indices())
}

/// The "dense" degree threshold of approximate minimum degree (faer's default, as SuiteSparse's):
/// a node with more than `max(16, min(n, 10·√n))` neighbours is set aside and ordered last.
fn amd_dense_threshold(n: usize) -> usize {
    ((10.0 * (n as f64).sqrt()) as usize).min(n).max(16)
}

/// [`amd_ordering`] from a lower-triangular pattern (column pointers, sorted rows, diagonal
/// optional), with the same result as ordering the full pattern ([`amd_ordering_full`]) but
/// without its workspace of 2.4 × 2 × nnz indices when many nodes are dense (docs/sansa.md,
/// "Memory").
///
/// Approximate minimum degree removes every node whose degree exceeds the threshold
/// `t = max(16, min(n, 10·√n))` before it starts and orders those nodes last, by index; their own
/// adjacency lists are never read again, only their membership in the lists of the other nodes.
/// So the edges between two dense nodes can be replaced by any edges that keep every dense node
/// dense: here a circular band over the dense nodes, each joined to the next `t/2 + 1`, so each
/// has `2·(t/2 + 1)`, more than `t`, neighbours. A Gram matrix that is nearly dense then orders in a fraction of the
/// memory and time; `tests/model.rs` checks the equality with the full ordering.
pub fn amd_ordering_pattern(
    n: usize,
    col_ptr: &[usize],
    rows: &[u32],
) -> Result<(Vec<usize>, Vec<usize>)> {
    amd_ordering_by_columns(n, |j| rows[col_ptr[j]..col_ptr[j + 1]].iter().copied())
}

/// [`amd_ordering_pattern`] of a dense column-major `n × n` matrix whose lower triangle holds the
/// matrix (its non-zero entries are the pattern; the upper triangle is not read).
pub fn amd_ordering_dense<T: DenseScalar>(
    m: faer::MatRef<'_, T>,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let n = m.nrows();
    amd_ordering_by_columns(n, |j| {
        let col = super::col_slice(m.col(j));
        (j..n)
            .filter(move |&i| col[i] != T::from_f64(0.0))
            .map(|i| i as u32)
    })
}

/// [`amd_ordering_pattern`] with column j's sorted rows (≥ j, diagonal optional) given by `col(j)`.
fn amd_ordering_by_columns<I: Iterator<Item = u32>>(
    n: usize,
    col: impl Fn(usize) -> I,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let thr = amd_dense_threshold(n);
    let mut deg = vec![0usize; n];
    for j in 0..n {
        for i in col(j) {
            if i as usize != j {
                deg[i as usize] += 1;
                deg[j] += 1;
            }
        }
    }
    let dense: Vec<usize> = (0..n).filter(|&i| deg[i] > thr).collect();
    let half = thr / 2 + 1;
    let m = dense.len();
    drop(deg);
    let mut ptr = Vec::with_capacity(n + 1);
    ptr.push(0usize);
    let mut out: Vec<u32> = Vec::new();
    if m < 2 * half + 2 {
        // Too few dense nodes for the band: the full pattern.
        for j in 0..n {
            out.extend(col(j));
            ptr.push(out.len());
        }
        return amd_ordering_full(n, &ptr, &out);
    }
    let mut rank = vec![usize::MAX; n];
    for (k, &d) in dense.iter().enumerate() {
        rank[d] = k;
    }
    let mut band: Vec<u32> = Vec::with_capacity(2 * half);
    for j in 0..n {
        band.clear();
        let kj = rank[j];
        if kj != usize::MAX {
            // Band neighbours of dense node kj with a larger index (lower triangle).
            for s in 1..=half {
                for k in [(kj + s) % m, (kj + m - s) % m] {
                    if dense[k] > j {
                        band.push(dense[k] as u32);
                    }
                }
            }
            band.sort_unstable();
            band.dedup();
        }
        let kept = col(j)
            .filter(|&i| kj == usize::MAX || i as usize == j || rank[i as usize] == usize::MAX);
        // Merge two sorted lists (disjoint: band rows are dense, kept rows are not, except j).
        let mut b = band.iter().copied().peekable();
        for i in kept {
            while let Some(&bi) = b.peek() {
                if bi < i {
                    out.push(bi);
                    b.next();
                } else {
                    break;
                }
            }
            out.push(i);
        }
        out.extend(b);
        ptr.push(out.len());
    }
    amd_ordering_full(n, &ptr, &out)
}

/// Symmetric permutation in place of the dense column-major matrix whose lower triangle holds a
/// symmetric `A`: afterwards the lower triangle holds `B[a, b] = A[fwd[a], fwd[b]]`. The upper
/// triangle is overwritten (first with the mirror image of the lower one). No second matrix:
/// rows are gathered column by column through one scratch column, then columns are moved along
/// the cycles of the permutation.
pub fn permute_dense_symmetric<T: DenseScalar>(mut m: faer::MatMut<'_, T>, fwd: &[usize]) {
    let n = m.nrows();
    // Mirror the lower triangle into the upper one, in square tiles (cache-friendly transpose).
    const T: usize = 64;
    for jb in (0..n).step_by(T) {
        for ib in (jb..n).step_by(T) {
            for j in jb..(jb + T).min(n) {
                for i in ib.max(j + 1)..(ib + T).min(n) {
                    let v = m[(i, j)];
                    m[(j, i)] = v;
                }
            }
        }
    }
    m.rb_mut().par_col_iter_mut().for_each_init(
        || vec![T::from_f64(0.0); n],
        |tmp, col| {
            let c = super::col_slice_mut(col);
            for (a, t) in tmp.iter_mut().enumerate() {
                *t = c[fwd[a]];
            }
            c.copy_from_slice(tmp);
        },
    );
    // Columns along the cycles of `fwd`: column b receives column fwd[b].
    let mut done = vec![false; n];
    let zero = T::from_f64(0.0);
    let (mut first, mut moving) = (vec![zero; n], vec![zero; n]);
    let read = |m: &faer::MatMut<'_, T>, j: usize, out: &mut [T]| {
        out.copy_from_slice(
            m.rb()
                .col(j)
                .try_as_col_major()
                .expect("contiguous")
                .as_slice(),
        );
    };
    for s in 0..n {
        if done[s] {
            continue;
        }
        read(&m, s, &mut first);
        let mut b = s;
        loop {
            done[b] = true;
            let src = fwd[b];
            if src == s {
                write_col(m.rb_mut(), b, &first);
                break;
            }
            read(&m, src, &mut moving);
            write_col(m.rb_mut(), b, &moving);
            b = src;
        }
    }
}

fn write_col<T: DenseScalar>(m: faer::MatMut<'_, T>, j: usize, v: &[T]) {
    super::col_slice_mut(m.col_mut(j)).copy_from_slice(v);
}

/// Approximate minimum degree on the full given pattern (faer), the reference for
/// [`amd_ordering_pattern`].
pub fn amd_ordering_full(
    n: usize,
    col_ptr: &[usize],
    rows: &[u32],
) -> Result<(Vec<usize>, Vec<usize>)> {
    if rows.len() >= u32::MAX as usize {
        return Err(Error::Invalid(format!(
            "{} stored entries exceed the 32-bit index range",
            rows.len()
        )));
    }
    let col_ptr: Vec<u32> = col_ptr.iter().map(|&p| p as u32).collect();
    let sym = SymbolicSparseColMatRef::<u32>::new_checked(n, n, &col_ptr, None, rows);
    let mut fwd = vec![0u32; n];
    let mut inv = vec![0u32; n];
    let req = faer::sparse::linalg::amd::order_scratch::<u32>(n, rows.len());
    let mut buf = MemBuffer::new(req);
    faer::sparse::linalg::amd::order(
        &mut fwd,
        &mut inv,
        sym,
        Default::default(),
        MemStack::new(&mut buf),
    )
    .map_err(|e| Error::Invalid(format!("AMD ordering failed: {e:?}")))?;
    Ok((
        fwd.iter().map(|&x| x as usize).collect(),
        inv.iter().map(|&x| x as usize).collect(),
    ))
}
