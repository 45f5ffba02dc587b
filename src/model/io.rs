//! Model files. A model directory holds
//!
//! * `model.json` — format version, recsel version, method and hyperparameters, the item id map,
//!   the fingerprint of the training data, and the size and CRC-32 of every weight file;
//! * SANSA: `w.npz` and `w_r.npz`, the two factors as scipy CSR matrices, so that Python reads them
//!   with `scipy.sparse.load_npz` and scores `(x @ W.T) @ W_r`;
//! * EASE: `b.npy` (dense `B`, row-major); most-popular: `popularity.npy`.
//!
//! `.npz` files are plain zip archives of `.npy` arrays (stored, not compressed), written here with
//! no extra dependency. Every file is written to a temporary name and renamed into place, weight
//! files first and `model.json` last, so a crash never leaves a directory that looks complete.

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
    /// Fingerprint of the training data (hex of [`Dataset::fingerprint`](crate::data::Dataset::fingerprint)).
    pub data_fingerprint: String,
    /// Number of items.
    pub n_items: usize,
    /// Original id of each item column.
    pub item_ids: Vec<String>,
    /// Weight files with sizes and checksums.
    pub files: Vec<FileEntry>,
}

// ---------------------------------------------------------------------------------------------
// CRC-32, .npy and stored .zip

/// CRC-32 (IEEE 802.3, as in zip and gzip).
pub fn crc32(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut c = !0u32;
    for &b in bytes {
        c = table[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
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

/// Serialises one array as `.npy` version 1.0 (1-D unless `Bytes`).
pub fn npy_bytes(a: &NpyArray) -> Vec<u8> {
    let (descr, shape, payload): (String, String, Vec<u8>) = match a {
        NpyArray::F64(v) => (
            "<f8".into(),
            format!("({},)", v.len()),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyArray::I32(v) => (
            "<i4".into(),
            format!("({},)", v.len()),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyArray::I64(v) => (
            "<i8".into(),
            format!("({},)", v.len()),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyArray::Bytes(b) => (format!("|S{}", b.len()), "()".into(), b.clone()),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in \n.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + payload.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&payload);
    out
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("corrupt model file {}: {what}", path.display()))
}

/// Parses a `.npy` file written by [`npy_bytes`] (little-endian, C order).
pub fn parse_npy(path: &Path, bytes: &[u8]) -> Result<NpyArray> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(corrupt(path, "not a .npy array"));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(
        bytes
            .get(10..10 + hlen)
            .ok_or_else(|| corrupt(path, "truncated .npy header"))?,
    )
    .map_err(|_| corrupt(path, "bad .npy header"))?;
    let data = &bytes[10 + hlen..];
    let descr = header
        .split("'descr': '")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .ok_or_else(|| corrupt(path, "no descr in .npy header"))?;
    let chunks = |w: usize| -> Result<std::slice::ChunksExact<'_, u8>> {
        if data.len() % w != 0 {
            return Err(corrupt(
                path,
                "array data length is not a multiple of the item size",
            ));
        }
        Ok(data.chunks_exact(w))
    };
    Ok(match descr {
        "<f8" => NpyArray::F64(
            chunks(8)?
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "<i4" => NpyArray::I32(
            chunks(4)?
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        "<i8" => NpyArray::I64(
            chunks(8)?
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        d if d.starts_with("|S") => NpyArray::Bytes(data.to_vec()),
        d => return Err(corrupt(path, format!("unsupported dtype {d}"))),
    })
}

/// A zip archive with stored (uncompressed) entries.
pub fn zip_stored(entries: &[(&str, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    // DOS date 1980-01-01 00:00 (fixed, so files are reproducible).
    let (time, date) = (0u16, (1 << 5) | 1u16);
    for (name, data) in entries {
        if data.len() >= u32::MAX as usize || out.len() >= u32::MAX as usize {
            return Err(Error::Invalid(
                "model weights exceed 4 GiB, too large for a .npz file".into(),
            ));
        }
        let crc = crc32(data);
        let offset = out.len() as u32;
        let mut local = Vec::new();
        local.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        local.extend_from_slice(&20u16.to_le_bytes()); // version needed
        local.extend_from_slice(&0u16.to_le_bytes()); // flags
        local.extend_from_slice(&0u16.to_le_bytes()); // method: stored
        local.extend_from_slice(&time.to_le_bytes());
        local.extend_from_slice(&date.to_le_bytes());
        local.extend_from_slice(&crc.to_le_bytes());
        local.extend_from_slice(&(data.len() as u32).to_le_bytes());
        local.extend_from_slice(&(data.len() as u32).to_le_bytes());
        local.extend_from_slice(&(name.len() as u16).to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&local);
        out.extend_from_slice(data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // version made by
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&time.to_le_bytes());
        central.extend_from_slice(&date.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        // extra length, comment length, disk number, internal (2 bytes each), external attributes (4).
        central.extend_from_slice(&[0u8; 12]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]); // disk numbers
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    Ok(out)
}

/// Reads the stored entries of a zip archive written by [`zip_stored`] (checks each CRC).
pub fn unzip_stored(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut p = 0usize;
    let u16_at = |p: usize| -> Result<u16> {
        bytes
            .get(p..p + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| corrupt(path, "truncated zip"))
    };
    let u32_at = |p: usize| -> Result<u32> {
        bytes
            .get(p..p + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| corrupt(path, "truncated zip"))
    };
    while u32_at(p)? == 0x0403_4b50 {
        if u16_at(p + 8)? != 0 {
            return Err(corrupt(
                path,
                "compressed zip entries are not supported (recsel writes stored entries)",
            ));
        }
        let crc = u32_at(p + 14)?;
        let size = u32_at(p + 18)? as usize;
        let name_len = u16_at(p + 26)? as usize;
        let extra_len = u16_at(p + 28)? as usize;
        let name_start = p + 30;
        let data_start = name_start + name_len + extra_len;
        let name = bytes
            .get(name_start..name_start + name_len)
            .ok_or_else(|| corrupt(path, "truncated zip"))?;
        let data = bytes
            .get(data_start..data_start + size)
            .ok_or_else(|| corrupt(path, "truncated zip entry"))?;
        if crc32(data) != crc {
            return Err(corrupt(
                path,
                format!(
                    "checksum mismatch in entry {}",
                    String::from_utf8_lossy(name)
                ),
            ));
        }
        out.push((String::from_utf8_lossy(name).into_owned(), data.to_vec()));
        p = data_start + size;
    }
    Ok(out)
}

/// Serialises a CSR matrix as a scipy `.npz` (`format`, `shape`, `data`, `indices`, `indptr`).
pub fn csr_npz(m: &SparseWeights) -> Result<Vec<u8>> {
    let csr = if m.is_csr() { m.clone() } else { m.to_csr() };
    let small = csr.nnz() < i32::MAX as usize;
    let idx = |v: Vec<usize>| {
        if small {
            NpyArray::I32(v.iter().map(|&x| x as i32).collect())
        } else {
            NpyArray::I64(v.iter().map(|&x| x as i64).collect())
        }
    };
    let indices = idx(csr.indices().iter().map(|&x| x as usize).collect());
    let indptr = idx(csr.indptr().raw_storage().to_vec());
    zip_stored(&[
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

/// Reads a CSR `.npz` written by [`csr_npz`] (or by scipy with `compressed=False`).
pub fn read_csr_npz(path: &Path, bytes: &[u8]) -> Result<SparseWeights> {
    let entries = unzip_stored(path, bytes)?;
    let get = |name: &str| -> Result<NpyArray> {
        let (_, data) = entries
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| corrupt(path, format!("missing array {name}")))?;
        parse_npy(path, data)
    };
    if get("format.npy")? != NpyArray::Bytes(b"csr".to_vec()) {
        return Err(corrupt(path, "not a CSR matrix"));
    }
    let shape = as_usize(path, &get("shape.npy")?)?;
    let NpyArray::F64(data) = get("data.npy")? else {
        return Err(corrupt(path, "data is not float64"));
    };
    let indices: Vec<u32> = as_usize(path, &get("indices.npy")?)?
        .into_iter()
        .map(|x| x as u32)
        .collect();
    let indptr = as_usize(path, &get("indptr.npy")?)?;
    if shape.len() != 2 {
        return Err(corrupt(path, "shape must have two entries"));
    }
    SparseWeights::try_new((shape[0], shape[1]), indptr, indices, data)
        .map_err(|e| corrupt(path, format!("invalid CSR structure: {e:?}")))
}

// ---------------------------------------------------------------------------------------------
// Save / load

/// Saves a model into directory `dir` (created if needed).
pub fn save(
    dir: &Path,
    model: &Model,
    params: &ModelParams,
    dataset: &str,
    fingerprint: u64,
    item_ids: &[String],
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let files: Vec<(&str, Vec<u8>)> = match model {
        Model::Sansa(m) => vec![("w.npz", csr_npz(&m.w)?), ("w_r.npz", csr_npz(&m.w_r)?)],
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
        data_fingerprint: format!("{fingerprint:016x}"),
        n_items: model.n_items(),
        item_ids: item_ids.to_vec(),
        files: entries,
    };
    let json = serde_json::to_vec_pretty(&meta)
        .map_err(|e| Error::Invalid(format!("serialising model.json: {e}")))?;
    write_atomic(&dir.join("model.json"), &json)
}

/// Loads a model directory. With `expect_fingerprint`, a model fitted on other data is an error.
pub fn load(dir: &Path, expect_fingerprint: Option<u64>) -> Result<(Model, ModelMeta)> {
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
    if let Some(fp) = expect_fingerprint {
        let want = format!("{fp:016x}");
        if meta.data_fingerprint != want {
            return Err(Error::Invalid(format!(
                "{}: model was fitted on different data (fingerprint {}, this data {want})",
                meta_path.display(),
                meta.data_fingerprint
            )));
        }
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
            Model::Sansa(Sansa {
                n,
                w: w.to_csc(),
                w_r,
            })
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
