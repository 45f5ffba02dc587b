//! The `select` experiment split over partitions of the users, for clusters (docs/python.md, "Ray").
//!
//! A distributed run has three phases, each built from the functions the single-machine run uses:
//!
//! 1. per partition, [`sketch_users`] keeps each item's score tails; the sketches merge exactly
//!    ([`PercentileSketch::merge`]) into the global per-item percentiles and sensitivities;
//! 2. per partition, [`run_partition`] runs every mechanism × ε × trial for its users with the
//!    global sensitivities and the candidate pass of the diagnostics, from one scoring pass
//!    ([`super::run_range_pass`]);
//! 3. [`merge`] puts the partitions back in user order, and [`super::analysis_from`] computes the
//!    MSE table, the Spearman summary, the diagnostics and the rules.
//!
//! Every user draws from its own streams (user, mechanism, ε index, trial), so the rows do not
//! depend on how users are split, and the merged counts and samples equal those of one pass: the
//! result is the single-machine result, bit for bit, for any number of partitions. The
//! single-machine run (`recsel select`) is the one-partition case of the same functions.
//!
//! [`sketch_users`]: crate::scoring::sketch_users
//! [`PercentileSketch::merge`]: crate::scoring::PercentileSketch::merge

use std::ops::Range;
use std::path::Path;

use super::{
    parse_line, random_sample, run_range_pass, user_line, CandidateSample, ItemCounts,
    SelectConfig, UserRow, SCATTER_USERS,
};
use crate::error::{Error, Result};
use crate::scoring::{ByteReader, Sensitivities, UserScorer};

/// Splits `n_users` users into `parts` contiguous ranges of near-equal size (the first
/// `n_users % parts` one user larger); errors when `parts` is 0.
pub fn split_users(n_users: usize, parts: usize) -> Result<Vec<Range<usize>>> {
    if parts == 0 {
        return Err(Error::Invalid(
            "partitions must be at least 1, got 0".into(),
        ));
    }
    let (base, extra) = (n_users / parts, n_users % parts);
    let mut start = 0;
    Ok((0..parts)
        .map(|p| {
            let len = base + usize::from(p < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect())
}

/// What one partition contributes to a `select` run.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionResult {
    /// The users of the partition (indices into all test users).
    pub users: Range<usize>,
    /// Rows of its users with candidates, in user order.
    pub rows: Vec<UserRow>,
    /// Its users without candidates.
    pub skipped: u64,
    /// Its per-item candidate counts; `bound_mgem` has one entry per user of the range.
    pub counts: ItemCounts,
    /// The candidates of its users in the run's scatter sample.
    pub sample: CandidateSample,
}

/// Runs phase 2 for the users in `users`: selection with the global `sens` and the candidate pass
/// over the users of the run's scatter sample ([`super::random_sample`] of all `scorer.n_users()`)
/// that fall in the range, both from one scoring pass ([`super::run_range_pass`], equal to
/// [`super::run_range`] and [`super::candidate_pass_range`]).
pub fn run_partition<S: UserScorer>(
    scorer: &S,
    sens: &Sensitivities,
    cfg: &SelectConfig,
    users: Range<usize>,
) -> Result<PartitionResult> {
    if users.start > users.end || users.end > scorer.n_users() {
        return Err(Error::Invalid(format!(
            "partition {}..{} is not within the {} test users",
            users.start,
            users.end,
            scorer.n_users()
        )));
    }
    let mechs = cfg.build()?;
    let sample: Vec<usize> = random_sample(scorer.n_users(), SCATTER_USERS, cfg.seed)
        .into_iter()
        .filter(|u| users.contains(u))
        .collect();
    // One scoring pass for both (run_range_pass).
    let (computed, counts, sample) =
        run_range_pass(scorer, sens, cfg, &mechs, users.clone(), &sample, None)?;
    let rows: Vec<UserRow> = computed.into_iter().flatten().collect();
    let skipped = (users.len() - rows.len()) as u64;
    Ok(PartitionResult {
        users,
        rows,
        skipped,
        counts,
        sample,
    })
}

/// All partitions put back together.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// Every user's row, in user order.
    pub rows: Vec<UserRow>,
    /// Users without candidates.
    pub skipped: u64,
    /// Per-item candidate counts and every user's bound-rule bits.
    pub counts: ItemCounts,
    /// The candidates of the scatter sample.
    pub sample: CandidateSample,
}

/// Merges partition results (in any order) that cover users `0..n_users` exactly once; errors
/// name a gap or an overlap.
pub fn merge(mut parts: Vec<PartitionResult>, n_users: usize) -> Result<Merged> {
    parts.sort_by_key(|p| (p.users.start, p.users.end));
    let n_items = parts.first().map_or(0, |p| p.counts.appearances.len());
    let mut m = Merged {
        rows: Vec::new(),
        skipped: 0,
        counts: ItemCounts {
            appearances: vec![0; n_items],
            outside: vec![0; n_items],
            bound_mgem: Vec::with_capacity(n_users),
        },
        sample: CandidateSample::default(),
    };
    let mut next = 0;
    for p in parts {
        if p.users.start != next {
            return Err(Error::Invalid(format!(
                "partitions do not cover the users exactly once: expected one starting at user {next}, found {}..{}",
                p.users.start, p.users.end
            )));
        }
        if p.counts.appearances.len() != n_items || p.counts.bound_mgem.len() != p.users.len() {
            return Err(Error::Invalid(format!(
                "partition {}..{} has counts for {} items and {} users (expected {n_items} and {})",
                p.users.start,
                p.users.end,
                p.counts.appearances.len(),
                p.counts.bound_mgem.len(),
                p.users.len()
            )));
        }
        next = p.users.end;
        m.rows.extend(p.rows);
        m.skipped += p.skipped;
        for j in 0..n_items {
            m.counts.appearances[j] += p.counts.appearances[j];
            m.counts.outside[j] += p.counts.outside[j];
        }
        m.counts.bound_mgem.extend(p.counts.bound_mgem);
        m.sample.users += p.sample.users;
        m.sample.scores.extend(p.sample.scores);
        m.sample.deltas.extend(p.sample.deltas);
    }
    if next != n_users {
        return Err(Error::Invalid(format!(
            "partitions cover users 0..{next}, not all {n_users} test users"
        )));
    }
    Ok(m)
}

/// Magic and version of [`PartitionResult::to_bytes`].
const PART_MAGIC: &[u8; 8] = b"RSPART02";

fn put_u64s(b: &mut Vec<u8>, v: &[u64]) {
    b.extend_from_slice(&(v.len() as u64).to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
}

fn put_f64s(b: &mut Vec<u8>, v: &[f64]) {
    b.extend_from_slice(&(v.len() as u64).to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
}

impl PartitionResult {
    /// A little-endian encoding for shipping results between processes (e.g. Ray's object
    /// store). The rows travel as lines of the resumable chunk format ([`super::user_line`]),
    /// which round-trips every f64 exactly.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(PART_MAGIC);
        for x in [self.users.start as u64, self.users.end as u64, self.skipped] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        put_u64s(&mut b, &self.counts.appearances);
        put_u64s(&mut b, &self.counts.outside);
        put_u64s(&mut b, &self.counts.bound_mgem);
        b.extend_from_slice(&self.sample.users.to_le_bytes());
        put_f64s(&mut b, &self.sample.scores);
        put_f64s(&mut b, &self.sample.deltas);
        let cells = self.rows.first().map_or(0, |r| r.mse.len());
        let bottom = self.rows.first().is_some_and(|r| !r.bottom.is_empty());
        let mut text = String::new();
        for r in &self.rows {
            text.push_str(&user_line(r));
            text.push('\n');
        }
        b.extend_from_slice(&(cells as u64).to_le_bytes());
        b.extend_from_slice(&u64::from(bottom).to_le_bytes());
        b.extend_from_slice(&(text.len() as u64).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        b
    }

    /// Decodes [`PartitionResult::to_bytes`]; errors name what is wrong and where.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut r = ByteReader::new(bytes, "partition result");
        if r.take(8)? != PART_MAGIC {
            return Err(r.bad("not a recsel partition result (bad magic)"));
        }
        let (start, end, skipped) = (r.u64()? as usize, r.u64()? as usize, r.u64()?);
        let counts = ItemCounts {
            appearances: r.u64s()?,
            outside: r.u64s()?,
            bound_mgem: r.u64s()?,
        };
        let sample = CandidateSample {
            users: r.u64()?,
            scores: r.f64s()?,
            deltas: r.f64s()?,
        };
        let cells = r.u64()? as usize;
        let bottom = r.u64()? != 0;
        let len = r.count()?;
        let text =
            std::str::from_utf8(r.take(len)?).map_err(|_| r.bad("the rows are not UTF-8 text"))?;
        r.finish()?;
        let source = Path::new("<partition result>");
        let rows = text
            .lines()
            .enumerate()
            .map(|(i, l)| parse_line(source, i + 1, l, cells, bottom))
            .collect::<Result<Vec<_>>>()?;
        Ok(PartitionResult {
            users: start..end,
            rows,
            skipped,
            counts,
            sample,
        })
    }
}
