//! The Gram matrix `XᵀX` of a binary user × item matrix (docs/sansa.md), lower triangle, computed in
//! parallel over item columns: column j sums the rows of the users who have item j. The diagonal
//! entry of every column is stored, first.
//!
//! Hand-written rather than sprs's product `Xᵀ · X` (`&xt * &x`): sprs forms the full symmetric
//! product on one thread (its parallel product needs the `multi_thread` feature) and would then be
//! cut to the lower triangle; `cargo bench --bench sparse_kernels -- gram` measures both (README,
//! "Design notes").

use rayon::prelude::*;

use super::sparse::{from_columns, SparseMat};
use crate::data::Csr;

/// Lower triangle (with diagonal) of `XᵀX` as a CSC matrix.
pub fn gram_lower(x: &Csr) -> SparseMat {
    let n = x.cols();
    let xt = x.transpose_view().to_csr(); // item × user
    let cols: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
        .into_par_iter()
        .map_init(
            || (vec![0u32; n], Vec::<u32>::new()),
            |(count, touched), j| {
                if let Some(users) = xt.outer_view(j) {
                    for &u in users.indices() {
                        let row = x.outer_view(u as usize).expect("row in range");
                        let items = row.indices();
                        // Rows are sorted: only items ≥ j contribute to the lower triangle.
                        let start = items.partition_point(|&i| (i as usize) < j);
                        for &i in &items[start..] {
                            if count[i as usize] == 0 {
                                touched.push(i);
                            }
                            count[i as usize] += 1;
                        }
                    }
                }
                // The diagonal is always stored (first, rows are ≥ j), even for an unused item, so
                // that λ can be added in place.
                if count[j] == 0 {
                    touched.push(j as u32);
                }
                touched.sort_unstable();
                let rows = std::mem::take(touched);
                let vals = rows
                    .iter()
                    .map(|&i| std::mem::replace(&mut count[i as usize], 0) as f64)
                    .collect();
                (rows, vals)
            },
        )
        .collect();
    from_columns(n, cols)
}
