//! Time in the ledger: instants as milliseconds since the Unix epoch (UTC), and the budget's
//! periods as UTC calendar windows (docs/ledger.md, "Periods").
//!
//! Calendar arithmetic uses the proleptic Gregorian calendar through Howard Hinnant's
//! `days_from_civil` / `civil_from_days` algorithms (exact integer arithmetic, no time-zone data):
//! a day starts at 00:00 UTC, a week on Monday 00:00 UTC (ISO 8601), a month on its first day at
//! 00:00 UTC.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::LedgerError;

const MS_PER_DAY: i64 = 86_400_000;

/// An instant: milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The system clock now.
    pub fn now() -> Self {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_millis() as i64)
    }

    /// Midnight (UTC) of a calendar date.
    pub fn from_date(year: i64, month: u32, day: u32) -> Self {
        Timestamp(days_from_civil(year, month, day) * MS_PER_DAY)
    }

    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Whole seconds from `self` to `later`, rounded up (0 if `later` is not after `self`): the
    /// value of an HTTP `Retry-After` header.
    pub fn seconds_until(self, later: Timestamp) -> u64 {
        let ms = later.0.saturating_sub(self.0);
        if ms <= 0 {
            0
        } else {
            (ms as u64).div_ceil(1000)
        }
    }

    /// Parses RFC 3339 in UTC as [`fmt::Display`] writes it (`2026-11-25T09:07:46.123Z`; the
    /// fraction is optional) or a plain date (`2026-11-25`, midnight UTC).
    pub fn parse(text: &str) -> Result<Self, LedgerError> {
        let bad = || {
            LedgerError::Invalid(format!(
                "'{text}' is not a UTC time; write 2026-11-25T09:07:46Z or 2026-11-25"
            ))
        };
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
        let (date, time) = match text.split_once('T') {
            Some((d, t)) => (d, Some(t.strip_suffix('Z').ok_or_else(bad)?)),
            None => (text, None),
        };
        let mut d = date.splitn(3, '-');
        let (y, m, dd) = (
            num(d.next().ok_or_else(bad)?)?,
            num(d.next().ok_or_else(bad)?)?,
            num(d.next().ok_or_else(bad)?)?,
        );
        if !(1..=12).contains(&m) || dd < 1 || dd > days_in_month(y, m as u32) as i64 {
            return Err(bad());
        }
        let mut ms = days_from_civil(y, m as u32, dd as u32) * MS_PER_DAY;
        if let Some(t) = time {
            let (hms, frac) = match t.split_once('.') {
                Some((a, b)) => (a, Some(b)),
                None => (t, None),
            };
            let mut p = hms.splitn(3, ':');
            let (h, mi, s) = (
                num(p.next().ok_or_else(bad)?)?,
                num(p.next().ok_or_else(bad)?)?,
                num(p.next().ok_or_else(bad)?)?,
            );
            if !(0..24).contains(&h) || !(0..60).contains(&mi) || !(0..60).contains(&s) {
                return Err(bad());
            }
            ms += ((h * 60 + mi) * 60 + s) * 1000;
            if let Some(f) = frac {
                if f.is_empty() || f.len() > 3 || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                ms += num(f)? * 10i64.pow(3 - f.len() as u32);
            }
        }
        Ok(Timestamp(ms))
    }
}

/// RFC 3339 in UTC with milliseconds: `2026-11-25T09:07:46.123Z`.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(MS_PER_DAY);
        let ms = self.0.rem_euclid(MS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (mi, rest) = (rest / 60_000, rest % 60_000);
        let (s, milli) = (rest / 1000, rest % 1000);
        write!(f, "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
    }
}

/// How long a budget lasts before it is granted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// A UTC calendar day.
    Day,
    /// An ISO week, Monday 00:00 UTC to the next Monday.
    Week,
    /// A UTC calendar month.
    Month,
    /// Never: the budget is for the ledger's whole life.
    None,
}

/// One budget window of a [`Period`]: `[start, end)`, with no end for [`Period::None`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Window {
    /// First instant of the window (`Timestamp(i64::MIN)` for [`Period::None`]).
    pub start: Timestamp,
    /// First instant after it: when a refused user may ask again.
    pub end: Option<Timestamp>,
}

impl Period {
    /// `day`, `week`, `month` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::None => "none",
        }
    }

    /// The window that contains `t`.
    pub fn window(self, t: Timestamp) -> Window {
        let days = t.0.div_euclid(MS_PER_DAY);
        let (start, end) = match self {
            Period::None => {
                return Window {
                    start: Timestamp(i64::MIN),
                    end: None,
                }
            }
            Period::Day => (days, days + 1),
            Period::Week => {
                // 1970-01-01 was a Thursday: Monday-based weekday = (days + 3) mod 7.
                let monday = days - (days + 3).rem_euclid(7);
                (monday, monday + 7)
            }
            Period::Month => {
                let (y, m, _) = civil_from_days(days);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (days_from_civil(y, m, 1), days_from_civil(ny, nm, 1))
            }
        };
        Window {
            start: Timestamp(start * MS_PER_DAY),
            end: Some(Timestamp(end * MS_PER_DAY)),
        }
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Period {
    type Err = LedgerError;
    fn from_str(s: &str) -> Result<Self, LedgerError> {
        match s {
            "day" => Ok(Period::Day),
            "week" => Ok(Period::Week),
            "month" => Ok(Period::Month),
            "none" => Ok(Period::None),
            _ => Err(LedgerError::Invalid(format!(
                "unknown period '{s}'; valid: day, week, month, none"
            ))),
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            Some(end) => write!(f, "{} to {end}", self.start),
            None => f.write_str("all time"),
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Hinnant).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (days_from_civil(ny, nm, 1) - days_from_civil(y, m, 1)) as u32
}

/// How far this process's clock may be from the ledger's before a charging command refuses to
/// start (docs/ledger.md, "Clocks"): NTP keeps hosts within milliseconds, so five minutes only
/// trips on a clock that is wrong.
pub const CLOCK_TOLERANCE: std::time::Duration = std::time::Duration::from_secs(300);

/// Checks this process's clock `now` against the ledger's before it charges (docs/ledger.md,
/// "Clocks"): it may be at most [`CLOCK_TOLERANCE`] from a database server's clock (which every
/// replica shares), and at most that much behind the newest event stored. A clock ahead charges
/// users into windows that have not begun, and every replica with a right clock then refuses
/// them as "the clock went backwards"; a clock behind the newest event refuses them itself.
pub fn check_clock(ledger: &dyn super::Ledger, now: Timestamp) -> super::Result<()> {
    let tolerance = CLOCK_TOLERANCE.as_millis() as i64;
    let secs = |ms: i64| format!("{:.1} s", ms as f64 / 1000.0);
    if let Some(server) = ledger.server_time()? {
        let skew = now.0.saturating_sub(server.0);
        if skew.abs() > tolerance {
            return Err(LedgerError::Invalid(format!(
                "{}: this machine's clock ({now}) is {} {} the ledger database's clock \
                 ({server}); the tolerance is {}. A replica whose clock is off charges users \
                 into the wrong windows, and the other replicas then refuse those users (\"the \
                 clock went backwards\"). Fix the clock (NTP) and start again (docs/ledger.md, \
                 \"Clocks\")",
                ledger.location(),
                secs(skew.abs()),
                if skew > 0 { "ahead of" } else { "behind" },
                secs(tolerance)
            )));
        }
    }
    if let Some(newest) = ledger.newest_event_time()? {
        let behind = newest.0.saturating_sub(now.0);
        if behind > tolerance {
            return Err(LedgerError::Invalid(format!(
                "{}: the ledger's newest event is at {newest}, {} ahead of this machine's clock \
                 ({now}); the tolerance is {}. Either this clock is behind, or a process with a \
                 clock running ahead charged the ledger; users charged in later windows would \
                 be refused here (\"the clock went backwards\"). Fix the clock (NTP) and start \
                 again (docs/ledger.md, \"Clocks\")",
                ledger.location(),
                secs(behind),
                secs(tolerance)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_dates_match_known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
        for z in -800_000..800_000i64 {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn windows_are_utc_calendar_periods() {
        // 2026-11-25 (a Wednesday) 09:07:46.123Z.
        let t = Timestamp::parse("2026-11-25T09:07:46.123Z").unwrap();
        assert_eq!(t.to_string(), "2026-11-25T09:07:46.123Z");
        let w = Period::Day.window(t);
        assert_eq!(w.start, Timestamp::from_date(2026, 11, 25));
        assert_eq!(w.end, Some(Timestamp::from_date(2026, 11, 26)));
        let w = Period::Week.window(t);
        assert_eq!(w.start, Timestamp::from_date(2026, 11, 23)); // Monday
        assert_eq!(w.end, Some(Timestamp::from_date(2026, 11, 30)));
        let w = Period::Month.window(Timestamp::parse("2026-12-31T23:59:59.999Z").unwrap());
        assert_eq!(w.start, Timestamp::from_date(2026, 12, 1));
        assert_eq!(w.end, Some(Timestamp::from_date(2027, 1, 1)));
        // The end of a window is the start of the next one.
        let end = Period::Day.window(t).end.unwrap();
        assert_eq!(Period::Day.window(end).start, end);
        assert_eq!(Period::Day.window(Timestamp(end.0 - 1)).end, Some(end));
        assert_eq!(Period::None.window(t).end, None);
        assert_eq!(t.seconds_until(end), 53_534);
        assert!(Timestamp::parse("2026-02-29").is_err());
        assert!(Timestamp::parse("2026-11-25T24:00:00Z").is_err());
        assert_eq!(
            Timestamp::parse("2026-11-25T00:00:01.5Z").unwrap().0,
            Timestamp::from_date(2026, 11, 25).0 + 1_500
        );
    }
}
