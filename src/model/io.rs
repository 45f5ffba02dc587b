//! Model files. A model directory holds
//!
//! * `model.json` — format version, recsel version, method and hyperparameters, the item id map,
//!   a random release identifier (never a hash of the data: docs/privacy-report.md, "What a
//!   release holds"), and the size and CRC-32 of every weight file;
//! * SANSA: `w.npz` and `w_r.npz`, the two factors as scipy CSR matrices, so that Python reads them
//!   with `scipy.sparse.load_npz` and scores `(x @ W.T) @ W_r`;
//! * EASE: `b.npy` (dense `B`, row-major); most-popular: `popularity.npy`.
//!
//! `.npy` arrays are encoded and decoded by `npyz`, `.npz` archives by `zip` (recsel writes stored
//! entries; it reads stored and deflated ones, so `scipy.sparse.save_npz`'s default compressed
//! files load too), checksums by `crc32fast`. Every file is written to a temporary name and renamed
//! into place, weight files first and `model.json` last, so a crash never leaves a directory that
//! looks complete.

use crate::io::write_atomic;
use std::path::{Path, PathBuf};

use super::sansa::{Sansa, SparseWeights};
use super::{Ease, Model, ModelParams};
use crate::{Error, Result};

/// Version of the model directory layout.
pub const FORMAT_VERSION: u32 = 1;

/// One weight file listed in `model.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileEntry {
    /// File name inside the model directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 (IEEE) of the content.
    pub crc32: u32,
}

/// Content of `model.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelMeta {
    /// Layout version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// recsel version that wrote the model.
    pub recsel_version: String,
    /// Hyperparameters.
    pub params: ModelParams,
    /// Dataset name.
    pub dataset: String,
    /// A random identifier of this saved model and its release ([`new_release_id`]): drawn from
    /// the operating system's randomness, never from the data, so two fits on neighbouring data
    /// sets cannot be told apart by it. Empty in artifacts written before it existed; those
    /// carried a `data_fingerprint` (a hash of the training data), which is ignored on reading
    /// and never written again.
    #[serde(default)]
    pub release_id: String,
    /// Number of items.
    pub n_items: usize,
    /// Original id of each item column.
    pub item_ids: Vec<String>,
    /// Weight files with sizes and checksums.
    pub files: Vec<FileEntry>,
    /// The training users' privacy when the model was fitted with differential privacy; absent
    /// when the training data were treated as public.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_privacy: Option<crate::privacy::PopulationPrivacy>,
    /// What the item universe is (a declared catalogue, a DP output, or data-derived), for the
    /// release's privacy report; absent in a model saved without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_universe: Option<crate::privacy::PopulationPrivacy>,
    /// The private choice of a DP fit's shift among a grid (the grid, the chosen shift and the
    /// calibration users' entry); absent without `--dp-shift-grid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_choice: Option<super::options::ShiftChoice>,
}

// ---------------------------------------------------------------------------------------------
// .npy arrays (npyz) inside .npz zip archives (zip), as numpy and scipy write them

/// CRC-32 (IEEE 802.3, as in zip and gzip) of a weight file, recorded in `model.json`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// A typed array for `.npy` files.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyArray {
    /// `<f8`.
    F64(Vec<f64>),
    /// `<i4`.
    I32(Vec<i32>),
    /// `<i8`.
    I64(Vec<i64>),
    /// `|S{n}` scalar (shape `()`).
    Bytes(Vec<u8>),
}

/// Serialises one array as `.npy` (1-D unless `Bytes`, which is a scalar byte string).
pub fn npy_bytes(a: &NpyArray) -> Vec<u8> {
    use npyz::WriterBuilder;
    fn write<T: npyz::AutoSerialize + Copy>(v: &[T]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[v.len() as u64])
            .writer(&mut out)
            .begin_nd()?;
        w.extend(v.iter().copied())?;
        w.finish()?;
        Ok(out)
    }
    let written = match a {
        NpyArray::F64(v) => write(v),
        NpyArray::I32(v) => write(v),
        NpyArray::I64(v) => write(v),
        NpyArray::Bytes(b) => (|| {
            let mut out = Vec::new();
            let dtype = npyz::DType::Plain(
                format!("|S{}", b.len())
                    .parse::<npyz::TypeStr>()
                    .expect("valid type string"),
            );
            let mut w = npyz::WriteOptions::<[u8]>::new()
                .dtype(dtype)
                .shape(&[])
                .writer(&mut out)
                .begin_nd()?;
            w.push(b)?;
            w.finish()?;
            Ok(out)
        })(),
    };
    // Writing into a Vec cannot fail; the dtypes above are all serialisable.
    written.expect("serialising an array into memory")
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("corrupt model file {}: {what}", path.display()))
}

/// Parses a `.npy` array of one of the dtypes of [`NpyArray`] (any byte order numpy writes;
/// `float32` data is widened to `float64`, `|S` arrays are read as one byte string).
pub fn parse_npy(path: &Path, bytes: &[u8]) -> Result<NpyArray> {
    let npy = npyz::NpyFile::new(bytes).map_err(|e| corrupt(path, format!(".npy header: {e}")))?;
    let bad = |e: std::io::Error| corrupt(path, format!(".npy data: {e}"));
    let npy = match npy.try_data::<f64>() {
        Ok(r) => {
            return Ok(NpyArray::F64(
                r.collect::<std::io::Result<_>>().map_err(bad)?,
            ))
        }
        Err(npy) => npy,
    };
    let npy = match npy.try_data::<f32>() {
        Ok(r) => {
            let v: Vec<f32> = r.collect::<std::io::Result<_>>().map_err(bad)?;
            return Ok(NpyArray::F64(v.into_iter().map(f64::from).collect()));
        }
        Err(npy) => npy,
    };
    let npy = match npy.try_data::<i32>() {
        Ok(r) => {
            return Ok(NpyArray::I32(
                r.collect::<std::io::Result<_>>().map_err(bad)?,
            ))
        }
        Err(npy) => npy,
    };
    let npy = match npy.try_data::<i64>() {
        Ok(r) => {
            return Ok(NpyArray::I64(
                r.collect::<std::io::Result<_>>().map_err(bad)?,
            ))
        }
        Err(npy) => npy,
    };
    match npy.try_data::<Vec<u8>>() {
        Ok(r) => Ok(NpyArray::Bytes(
            r.collect::<std::io::Result<Vec<Vec<u8>>>>()
                .map_err(bad)?
                .concat(),
        )),
        Err(npy) => Err(corrupt(
            path,
            format!("unsupported dtype {}", npy.dtype().descr()),
        )),
    }
}

/// A `.npz` archive of `(name, .npy bytes)` entries. Entries are stored uncompressed (fast to write
/// and read; numpy and scipy read stored and deflated entries alike); entries of 4 GiB or more get
/// zip64 records.
pub fn write_npz(entries: &[(&str, Vec<u8>)]) -> Result<Vec<u8>> {
    let zip_err = |e: zip::result::ZipError| Error::Invalid(format!("writing a .npz archive: {e}"));
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        // No `time` feature: every entry carries the fixed DOS date 1980-01-01, so files are
        // reproducible.
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(data.len() as u64 >= u32::MAX as u64);
        zip.start_file(*name, options).map_err(zip_err)?;
        std::io::Write::write_all(&mut zip, data)
            .map_err(|e| Error::Invalid(format!("writing a .npz archive: {e}")))?;
    }
    Ok(zip.finish().map_err(zip_err)?.into_inner())
}

/// Reads every entry of a `.npz` (zip) archive — stored or deflated, as numpy writes with `savez`
/// and `savez_compressed` and scipy with `save_npz` — checking each entry's CRC-32.
pub fn read_npz(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| corrupt(path, format!("not a readable zip archive: {e}")))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| corrupt(path, format!("zip entry {i}: {e}")))?;
        let name = entry.name().to_string();
        let mut data = Vec::with_capacity(entry.size() as usize);
        // Reading to the end makes zip verify the entry's CRC-32.
        entry
            .read_to_end(&mut data)
            .map_err(|e| corrupt(path, format!("entry {name}: {e}")))?;
        out.push((name, data));
    }
    Ok(out)
}

/// Serialises a sparse matrix in scipy's `save_npz` layout (`format`, `shape`, `data`, `indices`,
/// `indptr`) as CSR, with 32-bit indices when they fit (as scipy does).
pub fn csr_npz(m: &SparseWeights) -> Result<Vec<u8>> {
    let csr = if m.is_csr() { m.clone() } else { m.to_csr() };
    let small = csr.nnz() < i32::MAX as usize && csr.cols() < i32::MAX as usize;
    let idx = |v: Vec<usize>| {
        if small {
            NpyArray::I32(v.iter().map(|&x| x as i32).collect())
        } else {
            NpyArray::I64(v.iter().map(|&x| x as i64).collect())
        }
    };
    let indices = idx(csr.indices().iter().map(|&x| x as usize).collect());
    let indptr = idx(csr.indptr().to_proper().to_vec());
    write_npz(&[
        ("format.npy", npy_bytes(&NpyArray::Bytes(b"csr".to_vec()))),
        (
            "shape.npy",
            npy_bytes(&NpyArray::I64(vec![csr.rows() as i64, csr.cols() as i64])),
        ),
        ("data.npy", npy_bytes(&NpyArray::F64(csr.data().to_vec()))),
        ("indices.npy", npy_bytes(&indices)),
        ("indptr.npy", npy_bytes(&indptr)),
    ])
}

fn as_usize(path: &Path, a: &NpyArray) -> Result<Vec<usize>> {
    match a {
        NpyArray::I32(v) => v
            .iter()
            .map(|&x| usize::try_from(x).map_err(|_| corrupt(path, "negative index")))
            .collect(),
        NpyArray::I64(v) => v
            .iter()
            .map(|&x| usize::try_from(x).map_err(|_| corrupt(path, "negative index")))
            .collect(),
        _ => Err(corrupt(path, "index array has a non-integer dtype")),
    }
}

/// Reads a sparse matrix saved by [`csr_npz`] or by scipy's `save_npz` (CSR or CSC, compressed or
/// not, float64 or float32 data, 32- or 64-bit indices); sprs checks the structure.
pub fn read_csr_npz(path: &Path, bytes: &[u8]) -> Result<SparseWeights> {
    let entries = read_npz(path, bytes)?;
    let get = |name: &str| -> Result<NpyArray> {
        let (_, data) = entries
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| corrupt(path, format!("missing array {name}")))?;
        parse_npy(path, data)
    };
    let format = match get("format.npy")? {
        NpyArray::Bytes(f) => f,
        _ => return Err(corrupt(path, "format is not a byte string")),
    };
    let shape = as_usize(path, &get("shape.npy")?)?;
    let NpyArray::F64(data) = get("data.npy")? else {
        return Err(corrupt(path, "data is not float64 or float32"));
    };
    let indices = as_usize(path, &get("indices.npy")?)?
        .into_iter()
        .map(|x| u32::try_from(x).map_err(|_| corrupt(path, format!("index {x} exceeds 32 bits"))))
        .collect::<Result<Vec<u32>>>()?;
    let indptr = as_usize(path, &get("indptr.npy")?)?;
    if shape.len() != 2 {
        return Err(corrupt(path, "shape must have two entries"));
    }
    let shape = (shape[0], shape[1]);
    let m = match &format[..] {
        b"csr" => SparseWeights::try_new(shape, indptr, indices, data),
        b"csc" => SparseWeights::try_new_csc(shape, indptr, indices, data),
        f => {
            return Err(corrupt(
                path,
                format!(
                    "sparse format {:?} is not supported (csr or csc)",
                    String::from_utf8_lossy(f)
                ),
            ))
        }
    };
    m.map_err(|e| corrupt(path, format!("invalid sparse structure: {e:?}")))
}

// ---------------------------------------------------------------------------------------------
// Save / load

/// A fresh release identifier: 128 bits from the operating system's randomness, in hex. It names
/// one saved model and the release written beside it (the ledger keys batches by it); it says
/// nothing about the data. Under the whole-release audit's seed
/// ([`AUDIT_NOISE_SEED`](crate::rng::AUDIT_NOISE_SEED)) it is drawn from that seed instead, so
/// two audited fits carry the same identifier (such a fit is an audit, not a release: its
/// training entry says so).
pub fn new_release_id() -> Result<String> {
    use rand::{RngCore as _, SeedableRng as _};
    if let Some(seed) = crate::rng::audit_noise_seed() {
        let a = crate::rng::mix64(seed ^ u64::from(crate::rng::name_id("release-id")));
        return Ok(format!("{a:016x}{:016x}", crate::rng::mix64(a)));
    }
    let mut rng = rand_chacha::ChaCha20Rng::try_from_os_rng().map_err(|e| {
        Error::Invalid(format!(
            "cannot read OS entropy for the release identifier: {e}"
        ))
    })?;
    Ok(format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64()))
}

/// Saves a model into directory `dir` (created if needed), its training data treated as public
/// (no `training_privacy` entry), under a fresh [`new_release_id`].
pub fn save(
    dir: &Path,
    model: &Model,
    params: &ModelParams,
    dataset: &str,
    item_ids: &[String],
) -> Result<()> {
    save_with_training_privacy(dir, model, params, dataset, item_ids, None)
}

/// [`save`] with the training users' privacy entry of a DP fit (`None`: the training data are
/// treated as public).
pub fn save_with_training_privacy(
    dir: &Path,
    model: &Model,
    params: &ModelParams,
    dataset: &str,
    item_ids: &[String],
    training_privacy: Option<crate::privacy::PopulationPrivacy>,
) -> Result<()> {
    let release_id = new_release_id()?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let files: Vec<(&str, Vec<u8>)> = match model {
        Model::Sansa(m) => vec![("w.npz", csr_npz(m.w())?), ("w_r.npz", csr_npz(m.w_r())?)],
        Model::Ease(m) => vec![("b.npy", npy_bytes(&NpyArray::F64(m.b.clone())))],
        Model::Popular(p) => vec![("popularity.npy", npy_bytes(&NpyArray::F64(p.clone())))],
    };
    let mut entries = Vec::new();
    for (name, bytes) in &files {
        write_atomic(&dir.join(name), bytes)?;
        entries.push(FileEntry {
            name: name.to_string(),
            bytes: bytes.len() as u64,
            crc32: crc32(bytes),
        });
    }
    let meta = ModelMeta {
        format_version: FORMAT_VERSION,
        recsel_version: env!("CARGO_PKG_VERSION").to_string(),
        params: *params,
        dataset: dataset.to_string(),
        release_id,
        n_items: model.n_items(),
        item_ids: item_ids.to_vec(),
        files: entries,
        training_privacy,
        item_universe: None,
        shift_choice: None,
    };
    let json = serde_json::to_vec_pretty(&meta)
        .map_err(|e| Error::Invalid(format!("serialising model.json: {e}")))?;
    write_atomic(&dir.join("model.json"), &json)
}

/// Records the item universe entry in the `model.json` of `dir` (written by [`save`] just
/// before; the release written after it records the file's checksum).
pub fn record_item_universe(dir: &Path, entry: crate::privacy::PopulationPrivacy) -> Result<()> {
    let path = dir.join("model.json");
    let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let mut meta: ModelMeta = serde_json::from_slice(&text)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    meta.item_universe = Some(entry);
    let json = serde_json::to_vec_pretty(&meta)
        .map_err(|e| Error::Invalid(format!("serialising model.json: {e}")))?;
    write_atomic(&path, &json)
}

/// Records the private shift choice in the `model.json` of `dir` (written by [`save`] just
/// before; the release written after it records the file's checksum).
pub fn record_shift_choice(dir: &Path, choice: super::options::ShiftChoice) -> Result<()> {
    let path = dir.join("model.json");
    let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let mut meta: ModelMeta = serde_json::from_slice(&text)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    meta.shift_choice = Some(choice);
    let json = serde_json::to_vec_pretty(&meta)
        .map_err(|e| Error::Invalid(format!("serialising model.json: {e}")))?;
    write_atomic(&path, &json)
}

/// Loads a model directory. A model directory records nothing about its training data beyond
/// its item ids, so whether it was fitted on some data is the caller's to check (by the item
/// ids, or or by a fingerprint the caller keeps beside it, as the experiment runner's model cache does).
pub fn load(dir: &Path) -> Result<(Model, ModelMeta)> {
    let meta_path = dir.join("model.json");
    let text = std::fs::read(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
    let meta: ModelMeta = serde_json::from_slice(&text).map_err(|e| corrupt(&meta_path, e))?;
    if meta.format_version != FORMAT_VERSION {
        return Err(Error::Invalid(format!(
            "{}: model format version {} is not supported (this recsel reads version {FORMAT_VERSION})",
            meta_path.display(),
            meta.format_version
        )));
    }
    if meta.item_ids.len() != meta.n_items {
        return Err(corrupt(
            &meta_path,
            "item id map does not match the item count",
        ));
    }
    let mut blobs: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for f in &meta.files {
        let path = dir.join(&f.name);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        if bytes.len() as u64 != f.bytes || crc32(&bytes) != f.crc32 {
            return Err(corrupt(&path, "size or checksum differs from model.json"));
        }
        blobs.push((path, bytes));
    }
    let n = meta.n_items;
    let find = |name: &str| -> Result<&(PathBuf, Vec<u8>)> {
        blobs
            .iter()
            .find(|(p, _)| p.file_name().is_some_and(|f| f == name))
            .ok_or_else(|| corrupt(&meta_path, format!("{name} is not listed")))
    };
    let model = match meta.params.method {
        super::Method::Exact | super::Method::Icf => {
            let (p, b) = find("w.npz")?;
            let w = read_csr_npz(p, b)?;
            let (p2, b2) = find("w_r.npz")?;
            let w_r = read_csr_npz(p2, b2)?;
            if w.shape() != (n, n) || w_r.shape() != (n, n) {
                return Err(corrupt(p, format!("weights are not {n}x{n}")));
            }
            Model::Sansa(Sansa::new(w, w_r))
        }
        super::Method::Ease => {
            let (p, b) = find("b.npy")?;
            match parse_npy(p, b)? {
                NpyArray::F64(v) if v.len() == n * n => Model::Ease(Ease { n, b: v }),
                _ => return Err(corrupt(p, format!("expected {n}x{n} float64 weights"))),
            }
        }
        super::Method::Popular => {
            let (p, b) = find("popularity.npy")?;
            match parse_npy(p, b)? {
                NpyArray::F64(v) if v.len() == n => Model::Popular(v),
                _ => return Err(corrupt(p, format!("expected {n} float64 counts"))),
            }
        }
    };
    Ok((model, meta))
}
