//! Percentiles over partitions of the users: each partition keeps every item's bottom and top
//! score tails ([`PercentileSketch`]); the sketches merge exactly into the percentiles of all
//! users (docs/python.md, "Ray"), and travel as bytes ([`ByteReader`] reads them back).

use rayon::prelude::*;

use super::{
    interpolate, keep_high, keep_low, position, top_candidates, CandidateCache, PercentileUsers,
    Sensitivities, SensitivityConfig, Tails, UserScorer, ITEM_TILE, USER_BLOCK,
};
use crate::error::{Error, Result};
use crate::model::SCORE_LANES;

/// The tails of every item's scores over some of the users (one partition): per item its
/// ⌊h_lower⌋ + 2 smallest and n − ⌊h_upper⌋ largest scores, where n is the item's count over
/// *all* users. The global tails are contained in the union of the partitions' tails, so merging
/// sketches ([`PercentileSketch::merge`]) and reading the percentiles off the merged tails gives
/// exactly the single-machine percentiles (docs/python.md, "Ray").
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileSketch {
    /// Lower and upper percentile the tails are sized for.
    pub lower: f64,
    /// Upper percentile.
    pub upper: f64,
    /// Per item, the number of scores over all users ([`super::percentile_counts`]).
    pub counts: Vec<u64>,
    /// Per item, the smallest scores seen, ascending.
    pub low: Vec<Vec<f64>>,
    /// Per item, the largest scores seen, ascending.
    pub high: Vec<Vec<f64>>,
}

/// Magic and version of [`PercentileSketch::to_bytes`].
const SKETCH_MAGIC: &[u8; 8] = b"RSSKETC1";

impl PercentileSketch {
    fn caps(&self, j: usize) -> (usize, usize) {
        let n = self.counts[j];
        if n == 0 {
            (0, 0)
        } else {
            (keep_low(n, self.lower), keep_high(n, self.upper))
        }
    }

    /// The union of two partitions' tails, cut back to the tail sizes: exact, associative and
    /// commutative. Errors when the two were made for different percentiles or counts.
    pub fn merge(mut self, other: &PercentileSketch) -> Result<Self> {
        if self.lower != other.lower || self.upper != other.upper || self.counts != other.counts {
            return Err(Error::Invalid(format!(
                "cannot merge percentile sketches of different runs (percentiles {}/{} vs {}/{}, {} vs {} items, or other per-item counts)",
                self.lower,
                self.upper,
                other.lower,
                other.upper,
                self.counts.len(),
                other.counts.len()
            )));
        }
        for j in 0..self.counts.len() {
            let (cl, ch) = self.caps(j);
            let low = &mut self.low[j];
            low.extend_from_slice(&other.low[j]);
            low.sort_by(f64::total_cmp);
            low.truncate(cl);
            let high = &mut self.high[j];
            high.extend_from_slice(&other.high[j]);
            high.sort_by(f64::total_cmp);
            let cut = high.len().saturating_sub(ch);
            high.drain(..cut);
        }
        Ok(self)
    }

    /// Whether every item's tails are full (a sketch of fewer users than a tail holds is not;
    /// [`PercentileSketch::sensitivities`] needs full tails).
    pub fn is_complete(&self) -> bool {
        (0..self.counts.len()).all(|j| {
            let (cl, ch) = self.caps(j);
            self.low[j].len() == cl && self.high[j].len() == ch
        })
    }

    /// The percentiles and sensitivities of the merged tails (`cfg.floor` for a zero spread).
    /// Exact once the sketches of all users are merged; panics if tails are missing (users not
    /// folded in), which is a caller bug.
    pub fn sensitivities(&self, cfg: &SensitivityConfig) -> Sensitivities {
        let n_items = self.counts.len();
        let mut out = Sensitivities {
            lower: vec![0.0; n_items],
            upper: vec![0.0; n_items],
            delta: vec![cfg.floor; n_items],
            counts: self.counts.clone(),
        };
        for j in 0..n_items {
            let n = self.counts[j];
            if n == 0 {
                continue;
            }
            let (low, high) = (&self.low[j], &self.high[j]);
            let lo = interpolate(low, 0, position(n, self.lower));
            let hi = interpolate(high, n - high.len() as u64, position(n, self.upper));
            out.lower[j] = lo;
            out.upper[j] = hi;
            let spread = hi - lo;
            out.delta[j] = if spread > 0.0 { spread } else { cfg.floor };
        }
        out
    }

    /// A compact little-endian encoding (for shipping sketches between processes, e.g. Ray tasks).
    pub fn to_bytes(&self) -> Vec<u8> {
        let vals: usize = self.low.iter().chain(&self.high).map(Vec::len).sum();
        let mut b = Vec::with_capacity(32 + 24 * self.counts.len() + 8 * vals);
        b.extend_from_slice(SKETCH_MAGIC);
        b.extend_from_slice(&self.lower.to_le_bytes());
        b.extend_from_slice(&self.upper.to_le_bytes());
        b.extend_from_slice(&(self.counts.len() as u64).to_le_bytes());
        for j in 0..self.counts.len() {
            b.extend_from_slice(&self.counts[j].to_le_bytes());
            for tail in [&self.low[j], &self.high[j]] {
                b.extend_from_slice(&(tail.len() as u64).to_le_bytes());
                for v in tail {
                    b.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        b
    }

    /// Decodes [`PercentileSketch::to_bytes`]; errors name what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(bytes, "percentile sketch");
        if r.take(8)? != SKETCH_MAGIC {
            return Err(r.bad("not a recsel percentile sketch (bad magic)"));
        }
        let lower = r.f64()?;
        let upper = r.f64()?;
        let n = r.count()?;
        let mut s = PercentileSketch {
            lower,
            upper,
            counts: Vec::with_capacity(n),
            low: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
        };
        for _ in 0..n {
            s.counts.push(r.u64()?);
            s.low.push(r.f64s()?);
            s.high.push(r.f64s()?);
        }
        r.finish()?;
        Ok(s)
    }
}

/// Reads the little-endian encodings of sketches and partition results; every error names what
/// was being decoded and the byte offset.
#[derive(Debug)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A reader of `bytes`, which hold a `what`.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        ByteReader {
            bytes,
            pos: 0,
            what,
        }
    }

    /// The error "`what`: `message` at byte `pos`".
    pub fn bad(&self, message: &str) -> Error {
        Error::Parse {
            context: format!("{} ({} bytes)", self.what, self.bytes.len()),
            message: format!("{message} at byte {}", self.pos),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() - self.pos < n {
            return Err(self.bad(&format!("truncated: {n} more bytes expected")));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// An f64.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// A length, checked against the bytes left (each element takes at least one byte).
    pub fn count(&mut self) -> Result<usize> {
        let n = self.u64()?;
        if n > (self.bytes.len() - self.pos) as u64 {
            return Err(self.bad(&format!("length {n} exceeds the bytes left")));
        }
        Ok(n as usize)
    }

    /// A length-prefixed list of f64.
    pub fn f64s(&mut self) -> Result<Vec<f64>> {
        let n = self.count()?;
        (0..n).map(|_| self.f64()).collect()
    }

    /// A length-prefixed list of u64.
    pub fn u64s(&mut self) -> Result<Vec<u64>> {
        let n = self.count()?;
        (0..n).map(|_| self.u64()).collect()
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Errors unless every byte was read.
    pub fn finish(&self) -> Result<()> {
        if self.pos != self.bytes.len() {
            return Err(self.bad("trailing bytes"));
        }
        Ok(())
    }
}

/// The [`PercentileSketch`] of the users in `users` (one partition), with tails sized for the
/// per-item `counts` over all users ([`super::percentile_counts`]). Users are scored in parallel blocks;
/// the tails are updated in parallel over item ranges, so the result does not depend on the
/// number of threads. `progress` receives the number of users folded in after each block.
pub fn sketch_users<S: UserScorer>(
    scorer: &S,
    cfg: &SensitivityConfig,
    counts: &[u64],
    users: std::ops::Range<usize>,
    progress: &(dyn Fn(u64) + Sync),
) -> PercentileSketch {
    sketch_inner(scorer, cfg, counts, users, None, progress).0
}

/// [`sketch_users`], and with `top` the users' candidates ([`CandidateCache`]; empty without).
pub(super) fn sketch_inner<S: UserScorer>(
    scorer: &S,
    cfg: &SensitivityConfig,
    counts: &[u64],
    users: std::ops::Range<usize>,
    top: Option<usize>,
    progress: &(dyn Fn(u64) + Sync),
) -> (PercentileSketch, CandidateCache) {
    let n_items = scorer.n_items();
    let per_user = top.map_or(0, |t| t.min(n_items));
    let mut cache = CandidateCache {
        first: users.start,
        start: vec![0],
        // Reserved, not touched: only what is written becomes resident.
        items: Vec::with_capacity(per_user * users.len()),
        raw: Vec::with_capacity(per_user * users.len()),
    };
    assert_eq!(counts.len(), n_items, "one count per item");
    assert!(users.end <= scorer.n_users(), "users within the scorer's");
    let without_item = cfg.population == PercentileUsers::WithoutItem;
    let mut tails: Vec<Tails> = counts
        .iter()
        .map(|&n| {
            let (cl, ch) = if n == 0 {
                (0, 0)
            } else {
                (keep_low(n, cfg.lower), keep_high(n, cfg.upper))
            };
            Tails::new(cl, ch)
        })
        .collect();
    // Per item, the values a new score must beat to enter a tail: a compact array the fold streams
    // through, so the tails (far larger than the caches) are touched only by the few scores that
    // enter them.
    let mut thresholds: Vec<(f64, f64)> = tails.iter().map(|t| (t.low_th, t.high_th)).collect();
    let mut block = vec![0.0f64; USER_BLOCK.min(users.len()) * n_items];
    let item_chunk = n_items.div_ceil(4 * rayon::current_num_threads()).max(64);
    for start in users.clone().step_by(USER_BLOCK) {
        let end = (start + USER_BLOCK).min(users.end);
        // Users are scored SCORE_LANES at a time (the model's weights are read once per group).
        let picked: Vec<Option<(Vec<u32>, Vec<f64>)>> = block[..(end - start) * n_items]
            .par_chunks_mut(n_items * SCORE_LANES)
            .enumerate()
            .map_init(
                || scorer.scratch(),
                |scratch, (g, rows)| {
                    let first = start + g * SCORE_LANES;
                    let group = first..first + rows.len() / n_items.max(1);
                    scorer.score_block(group.clone(), rows, scratch);
                    let mut picked = Vec::with_capacity(group.len());
                    for (u, row) in group.zip(rows.chunks_mut(n_items)) {
                        picked.push(top.map(|top| {
                            let items = top_candidates(row, scorer.excluded(u), top);
                            let raw = items.iter().map(|&j| row[j as usize]).collect();
                            (items, raw)
                        }));
                        // NaN marks "not a score of this user" for the fold below.
                        if without_item {
                            for &j in scorer.excluded(u) {
                                row[j as usize] = f64::NAN;
                            }
                        }
                    }
                    picked
                },
            )
            .flatten_iter()
            .collect();
        for (items, raw) in picked.into_iter().flatten() {
            cache.items.extend_from_slice(&items);
            cache.raw.extend_from_slice(&raw);
            cache.start.push(cache.items.len());
        }
        let rows = &block[..(end - start) * n_items];
        tails
            .par_chunks_mut(item_chunk)
            .zip(thresholds.par_chunks_mut(item_chunk))
            .enumerate()
            .for_each(|(c, (chunk, thr))| {
                // Tiles of items small enough that their heaps stay in cache while every user of
                // the block is folded in (a push into a cold heap costs a cache miss per level).
                for t0 in (0..chunk.len()).step_by(ITEM_TILE) {
                    let t1 = (t0 + ITEM_TILE).min(chunk.len());
                    let j0 = c * item_chunk + t0;
                    for row in rows.chunks_exact(n_items) {
                        let vals = &row[j0..j0 + (t1 - t0)];
                        for ((t, th), &v) in
                            chunk[t0..t1].iter_mut().zip(&mut thr[t0..t1]).zip(vals)
                        {
                            // NaN (an excluded item) fails both comparisons.
                            if v < th.0 || v > th.1 {
                                *th = t.push(v);
                            }
                        }
                    }
                }
            });
        progress((end - start) as u64);
    }
    let (mut low, mut high) = (Vec::with_capacity(n_items), Vec::with_capacity(n_items));
    for t in tails {
        let (l, h) = t.finish();
        low.push(l);
        high.push(h);
    }
    let sketch = PercentileSketch {
        lower: cfg.lower,
        upper: cfg.upper,
        counts: counts.to_vec(),
        low,
        high,
    };
    (sketch, cache)
}
