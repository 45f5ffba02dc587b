//! The item universe of a data set: which items are columns (docs/training-privacy.md, "The item
//! universe"). A record format keeps the items some kept interaction mentions and a LightGCN
//! file takes `max id + 1`: both are facts of the data. A declared catalogue (`--catalogue
//! FILE`, one id per line) replaces them by a public list — items outside it are dropped, items
//! of it without an interaction are kept as empty columns — and a DP fit without one restricts
//! the data to the items its partition selection released ([`Dataset::keep_columns`]).

use std::path::Path;

use super::{Csr, Dataset};
use crate::error::{Error, Result};

/// Reads a catalogue: one item id per line (surrounding white space and a trailing `\r`
/// trimmed, blank lines skipped), in the file's order. A duplicate id is an error: the
/// catalogue is a set, and a repeated line is more likely a wrong file than a wish.
pub fn read_catalogue(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut ids = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (k, line) in text.lines().enumerate() {
        let id = line.trim();
        if id.is_empty() {
            continue;
        }
        if !seen.insert(id.to_string()) {
            return Err(Error::Parse {
                context: format!("{} line {}", path.display(), k + 1),
                message: format!("item '{id}' listed twice (a catalogue lists each item once)"),
            });
        }
        ids.push(id.to_string());
    }
    if ids.is_empty() {
        return Err(Error::Invalid(format!(
            "catalogue {} lists no item",
            path.display()
        )));
    }
    Ok(ids)
}

/// The columns of `m` moved by `code` (old column → new column, `u32::MAX` dropped) into a
/// matrix of `cols` columns; each row sorted again.
fn remap_columns(m: &Csr, code: &[u32], cols: usize) -> Csr {
    let ptr = m.indptr();
    let ptr = ptr.raw_storage();
    let idx = m.indices();
    let mut indptr = Vec::with_capacity(m.rows() + 1);
    indptr.push(0usize);
    let mut indices = Vec::with_capacity(idx.len());
    for u in 0..m.rows() {
        let start = indices.len();
        indices.extend(
            idx[ptr[u]..ptr[u + 1]]
                .iter()
                .map(|&j| code[j as usize])
                .filter(|&c| c != u32::MAX),
        );
        indices[start..].sort_unstable();
        indptr.push(indices.len());
    }
    let data = vec![1.0f32; indices.len()];
    Csr::new((m.rows(), cols), indptr, indices, data)
}

impl Dataset {
    /// The data set on the columns `from` (`from[k]`: the old column of new column k, or `None`
    /// for an item without any interaction), with item ids `ids`.
    fn with_columns(mut self, from: &[Option<u32>], ids: Vec<String>) -> Dataset {
        let mut code = vec![u32::MAX; self.n_items()];
        for (k, j) in from.iter().enumerate() {
            if let Some(j) = j {
                code[*j as usize] = k as u32;
            }
        }
        let n = from.len();
        let remap = |m: &Csr| remap_columns(m, &code, n);
        self.train = remap(&self.train);
        self.test_input = remap(&self.test_input);
        self.test_target = remap(&self.test_target);
        self.validation = remap(&self.validation);
        self.validation_target = remap(&self.validation_target);
        self.heldout_rows = self.heldout_rows.as_ref().map(remap);
        self.heldout_popularity = self.heldout_popularity.as_ref().map(|c| {
            from.iter()
                .map(|j| j.map_or(0, |j| c[j as usize]))
                .collect()
        });
        self.item_ids = ids;
        self
    }

    /// The data set on a declared catalogue: its columns are the catalogue's ids in the
    /// catalogue's order; an item of the data outside it is dropped (from every user's rows), an
    /// item of it the data never mention is an empty column. Returns the data set and the number
    /// of data items dropped.
    pub fn on_catalogue(self, catalogue: &[String]) -> (Dataset, usize) {
        let by_id: std::collections::HashMap<&str, u32> = self
            .item_ids
            .iter()
            .enumerate()
            .map(|(j, id)| (id.as_str(), j as u32))
            .collect();
        let from: Vec<Option<u32>> = catalogue
            .iter()
            .map(|id| by_id.get(id.as_str()).copied())
            .collect();
        let dropped = self.n_items() - from.iter().flatten().count();
        (self.with_columns(&from, catalogue.to_vec()), dropped)
    }

    /// The data set on the columns `keep` (ascending, each a column of this data set): the items
    /// a DP partition selection released, their order kept.
    pub fn keep_columns(self, keep: &[u32]) -> Dataset {
        assert!(
            keep.windows(2).all(|w| w[0] < w[1])
                && keep.last().is_none_or(|&j| (j as usize) < self.n_items()),
            "kept columns ascending and inside the data"
        );
        let ids = keep
            .iter()
            .map(|&j| self.item_ids[j as usize].clone())
            .collect();
        let from: Vec<Option<u32>> = keep.iter().map(|&j| Some(j)).collect();
        self.with_columns(&from, ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::csr_from_rows as csr;
    use crate::data::{Descriptor, Protocol};

    fn data() -> Dataset {
        let ids = ["a", "b", "c", "d"].map(String::from).to_vec();
        Dataset {
            descriptor: Descriptor::new("t", None, Protocol::Table),
            train: csr(&[vec![0, 1, 3], vec![2, 3]], 4),
            test_input: csr(&[vec![1]], 4),
            test_target: csr(&[vec![3]], 4),
            validation: csr(&[vec![0, 2]], 4),
            validation_target: Csr::zero((0, 4)),
            heldout_popularity: Some(vec![5, 6, 7, 8]),
            heldout_rows: Some(csr(&[vec![0], vec![3]], 4)),
            item_ids: ids,
            test_user_ids: vec!["u".into()],
            validation_user_ids: vec!["v".into()],
            split_rule: crate::data::split::SplitRule::files(),
        }
    }

    /// A catalogue drops the items outside it from every matrix, keeps its own order and adds
    /// its items without interactions as empty columns.
    #[test]
    fn a_catalogue_drops_and_keeps_items() {
        let cat = ["d", "z", "a", "c"].map(String::from).to_vec();
        let (d, dropped) = data().on_catalogue(&cat);
        d.validate().unwrap();
        assert_eq!(dropped, 1, "b dropped");
        assert_eq!(d.item_ids, cat);
        let rows = |m: &Csr| {
            (0..m.rows())
                .map(|u| crate::data::row_items(m, u).to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(rows(&d.train), vec![vec![0, 2], vec![0, 3]]);
        assert_eq!(rows(&d.test_input), vec![Vec::<u32>::new()]);
        assert_eq!(rows(&d.test_target), vec![vec![0]]);
        assert_eq!(rows(&d.validation), vec![vec![2, 3]]);
        assert_eq!(d.heldout_popularity, Some(vec![8, 0, 5, 7]));
        assert_eq!(
            rows(d.heldout_rows.as_ref().unwrap()),
            vec![vec![2], vec![0]]
        );
        let k = data().keep_columns(&[1, 3]);
        assert_eq!(k.item_ids, vec!["b".to_string(), "d".into()]);
        assert_eq!(rows(&k.train), vec![vec![0, 1], vec![1]]);
    }

    #[test]
    fn a_catalogue_file_is_one_id_per_line_each_once() {
        let dir = std::env::temp_dir().join(format!("recsel-cat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.txt");
        std::fs::write(&f, "10\r\n 7 \n\n3\n").unwrap();
        assert_eq!(read_catalogue(&f).unwrap(), vec!["10", "7", "3"]);
        std::fs::write(&f, "1\n2\n1\n").unwrap();
        let e = read_catalogue(&f).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("twice"), "{e}");
        std::fs::write(&f, "\n").unwrap();
        assert!(read_catalogue(&f).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
