//! Privacy budgets and charges as integers (docs/ledger.md, "Units").
//!
//! One unit is 10⁻⁹ ε. A decimal (`"0.1"`, `"2.5e-3"`) or a double is converted to units exactly
//! once, where it enters the ledger, and every sum, comparison and stored value after that is an
//! integer: ten charges of 0.1 are exactly 10⁹ units, the same as a budget of 1, so the tenth
//! charge exhausts the budget and the eleventh is refused. Floating-point budgets break at that
//! boundary (`0.1 + … + 0.1 = 0.9999999999999999`, so an eleventh charge would pass, or
//! `1.0000000000000002 > 1.0`, so the tenth would be refused).
//!
//! The two conversions round in opposite directions, both in favour of the protected user:
//!
//! * a **charge** rounds **up** to the next unit, so the ledger never records less privacy loss
//!   than the mechanism spent;
//! * a **budget** rounds **down**, so the ledger never grants more than the operator allowed.
//!
//! Rounding can therefore only refuse a request that exact real arithmetic would have allowed
//! (by less than one unit, 10⁻⁹ ε), never allow one it would have refused.
//!
//! A double is read as the decimal it prints as (Rust's shortest round-trip form: `0.1_f64` is
//! `"0.1"`, which is what an operator typed as `--eps 0.1`), not as its binary expansion
//! (`0.1000000000000000055…`, which would round up to 100,000,001 units). Where the exact binary
//! value matters — the secure path's effective ε, a dyadic rational — [`Units::ceil_exact`]
//! converts it exactly.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::LedgerError;

/// A non-negative amount of ε in units of 10⁻⁹, at most [`Units::MAX`] (`i64::MAX`, so every
/// amount fits a signed 64-bit database column).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Units(u64);

/// Which way a conversion rounds a value that is not a whole number of units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Towards +∞: charges.
    Up,
    /// Towards 0: budgets.
    Down,
}

impl Units {
    /// Units per ε.
    pub const PER_EPSILON: u64 = 1_000_000_000;
    /// Decimal digits of one unit below ε (10⁻⁹).
    pub const SCALE: u32 = 9;
    /// Zero.
    pub const ZERO: Units = Units(0);
    /// The largest amount: `i64::MAX` units (about 9.2·10⁹ ε).
    pub const MAX: Units = Units(i64::MAX as u64);

    /// `n` units; an error above [`Units::MAX`].
    pub fn new(n: u64) -> Result<Self, LedgerError> {
        if n > Self::MAX.0 {
            return Err(LedgerError::Units(format!(
                "{n} units is above the largest amount, {} units",
                Self::MAX.0
            )));
        }
        Ok(Units(n))
    }

    /// The number of units.
    pub fn get(self) -> u64 {
        self.0
    }

    /// A charge given as decimal text (`"0.1"`, `"1e-3"`), rounded up.
    pub fn charge(text: &str) -> Result<Self, LedgerError> {
        parse_decimal(text, Rounding::Up)
    }

    /// A budget given as decimal text, rounded down.
    pub fn budget(text: &str) -> Result<Self, LedgerError> {
        parse_decimal(text, Rounding::Down)
    }

    /// A charge given as a double, read as the decimal it prints as, rounded up.
    pub fn charge_f64(epsilon: f64) -> Result<Self, LedgerError> {
        from_f64(epsilon, Rounding::Up)
    }

    /// A budget given as a double, read as the decimal it prints as, rounded down.
    pub fn budget_f64(epsilon: f64) -> Result<Self, LedgerError> {
        from_f64(epsilon, Rounding::Down)
    }

    /// The exact binary value of `x` (not its printed decimal) rounded up to a whole unit: for an
    /// ε that is exactly what a mechanism guarantees, such as the secure path's dyadic ε.
    pub fn ceil_exact(x: f64) -> Result<Self, LedgerError> {
        check_finite(x)?;
        if x == 0.0 {
            return Ok(Units::ZERO);
        }
        let bits = x.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1u64 << 52) - 1);
        // x = m · 2^e exactly.
        let (m, e) = if exp == 0 {
            (frac, -1074)
        } else {
            (frac | (1u64 << 52), exp - 1075)
        };
        let scaled = m as u128 * Self::PER_EPSILON as u128; // < 2^83
        let n = if e >= 0 {
            if e > 40 {
                return Err(too_large(&x.to_string()));
            }
            scaled << e
        } else if -e >= 128 {
            1 // 0 < x·10⁹ < 1
        } else {
            let d = 1u128 << (-e);
            scaled.div_ceil(d)
        };
        Units::new(u64::try_from(n).map_err(|_| too_large(&x.to_string()))?)
    }

    /// `self + other`, or an error on overflow.
    pub fn checked_add(self, other: Units) -> Result<Units, LedgerError> {
        self.0
            .checked_add(other.0)
            .and_then(|n| Units::new(n).ok())
            .ok_or_else(|| {
                LedgerError::Units(format!("{self} + {other} is above the largest amount"))
            })
    }

    /// `self − other`, or `None` when `other` is larger.
    pub fn checked_sub(self, other: Units) -> Option<Units> {
        self.0.checked_sub(other.0).map(Units)
    }

    /// `self − other`, or zero when `other` is larger.
    pub fn saturating_sub(self, other: Units) -> Units {
        Units(self.0.saturating_sub(other.0))
    }

    /// The amount in ε as a double (for display and plots only: never compare these).
    pub fn as_epsilon(self) -> f64 {
        self.0 as f64 / Self::PER_EPSILON as f64
    }
}

/// The exact decimal in ε with the trailing zeros removed: `1`, `0.1`, `0.000000001`.
impl fmt::Display for Units {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / Self::PER_EPSILON;
        let frac = self.0 % Self::PER_EPSILON;
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{frac:09}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

fn check_finite(x: f64) -> Result<(), LedgerError> {
    if !x.is_finite() || x < 0.0 || (x == 0.0 && x.is_sign_negative()) {
        return Err(LedgerError::Units(format!(
            "an amount of epsilon must be finite and >= 0, got {x}"
        )));
    }
    Ok(())
}

fn too_large(text: &str) -> LedgerError {
    LedgerError::Units(format!(
        "epsilon '{text}' is above the largest amount, {}",
        Units::MAX
    ))
}

fn from_f64(x: f64, rounding: Rounding) -> Result<Units, LedgerError> {
    check_finite(x)?;
    // Rust prints the shortest decimal that reads back as the same double, without an exponent.
    parse_decimal(&x.to_string(), rounding)
}

/// Parses `[digits][.digits][(e|E)[+|-]digits]` exactly and rounds it to units.
fn parse_decimal(text: &str, rounding: Rounding) -> Result<Units, LedgerError> {
    let bad = |why: &str| {
        LedgerError::Units(format!(
            "'{text}' is not an amount of epsilon ({why}); write a non-negative decimal such as \
             0.1 or 1e-3"
        ))
    };
    let s = text.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(p) => {
            let e: i64 = s[p + 1..].parse().map_err(|_| bad("a bad exponent"))?;
            (&s[..p], e)
        }
        None => (s, 0),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(p) => (&mantissa[..p], &mantissa[p + 1..]),
        None => (mantissa, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return Err(bad("no digits"));
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad("only digits, one '.' and an exponent are allowed"));
    }
    // value = digits · 10^(exponent − frac.len()); units = value · 10^9.
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(Units::ZERO);
    }
    let shift = exponent
        .checked_sub(frac.len() as i64)
        .and_then(|x| x.checked_add(Units::SCALE as i64))
        .ok_or_else(|| bad("the exponent is out of range"))?;
    let n: u128 = if shift >= 0 {
        // Every digit lands at or above the units place: the value is a whole number of units.
        if digits.len() as i64 + shift > 20 {
            return Err(too_large(text));
        }
        let mut n: u128 = digits.parse().map_err(|_| too_large(text))?;
        for _ in 0..shift {
            n *= 10;
        }
        n
    } else {
        // The last `-shift` digits are below one unit: keep the rest, round on what is dropped.
        let cut = (-shift) as usize;
        let (keep, dropped) = if cut >= digits.len() {
            ("", digits)
        } else {
            digits.split_at(digits.len() - cut)
        };
        if keep.len() > 20 {
            return Err(too_large(text));
        }
        let mut n: u128 = if keep.is_empty() {
            0
        } else {
            keep.parse().map_err(|_| too_large(text))?
        };
        let inexact = dropped.bytes().any(|b| b != b'0');
        if inexact && rounding == Rounding::Up {
            n += 1;
        }
        n
    };
    let n = u64::try_from(n).map_err(|_| too_large(text))?;
    Units::new(n).map_err(|_| too_large(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_convert_exactly_and_round_the_stated_way() {
        assert_eq!(Units::charge("0.1").unwrap().get(), 100_000_000);
        assert_eq!(Units::budget("1.0").unwrap().get(), 1_000_000_000);
        assert_eq!(Units::charge("1e-3").unwrap().get(), 1_000_000);
        assert_eq!(Units::charge("2.5E+1").unwrap().get(), 25_000_000_000);
        assert_eq!(Units::charge(".5").unwrap().get(), 500_000_000);
        assert_eq!(Units::charge("0.0000000001").unwrap().get(), 1);
        assert_eq!(Units::budget("0.0000000001").unwrap().get(), 0);
        assert_eq!(Units::charge("0.1000000001").unwrap().get(), 100_000_001);
        assert_eq!(Units::budget("0.1000000019").unwrap().get(), 100_000_001);
        assert_eq!(Units::charge("000").unwrap(), Units::ZERO);
        for bad in ["", ".", "-1", "1.2.3", "abc", "1e", "inf", "NaN", "1e99"] {
            assert!(Units::charge(bad).is_err(), "{bad}");
        }
        assert_eq!(Units::charge("9223372036.854775807").unwrap(), Units::MAX);
        assert!(Units::charge("9223372036.854775808").is_err());
    }

    #[test]
    fn doubles_are_read_as_the_decimal_they_print_as() {
        assert_eq!(Units::charge_f64(0.1).unwrap().get(), 100_000_000);
        assert_eq!(Units::budget_f64(1.0).unwrap().get(), 1_000_000_000);
        assert_eq!(Units::charge_f64(1e-12).unwrap().get(), 1);
        assert_eq!(Units::budget_f64(1e-12).unwrap().get(), 0);
        assert!(Units::charge_f64(-0.1).is_err());
        assert!(Units::charge_f64(f64::NAN).is_err());
        assert!(Units::charge_f64(f64::INFINITY).is_err());
        // The binary expansion of 0.1 is above 0.1, so the exact conversion rounds up one unit.
        assert_eq!(Units::ceil_exact(0.1).unwrap().get(), 100_000_001);
        assert_eq!(Units::ceil_exact(0.5).unwrap().get(), 500_000_000);
        assert_eq!(Units::ceil_exact(3.0).unwrap().get(), 3_000_000_000);
        assert_eq!(Units::ceil_exact(f64::MIN_POSITIVE).unwrap().get(), 1);
        // The secure path's ε for 0.1: ⌊0.1·2^32⌋/2^32, just below 0.1.
        let secure = (0.1f64 * 4294967296.0).floor() / 4294967296.0;
        assert_eq!(Units::ceil_exact(secure).unwrap().get(), 100_000_000);
    }

    #[test]
    fn ten_charges_of_a_tenth_are_exactly_one() {
        let tenth = Units::charge_f64(0.1).unwrap();
        let mut sum = Units::ZERO;
        for _ in 0..10 {
            sum = sum.checked_add(tenth).unwrap();
        }
        assert_eq!(sum, Units::budget("1").unwrap());
        assert_eq!(sum.to_string(), "1");
        assert_eq!(tenth.to_string(), "0.1");
        assert_eq!(Units(1).to_string(), "0.000000001");
        assert!(Units::MAX.checked_add(Units(1)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn display_reads_back_exactly(n in 0u64..=i64::MAX as u64) {
            let u = Units(n);
            proptest::prop_assert_eq!(Units::charge(&u.to_string()).unwrap(), u);
            proptest::prop_assert_eq!(Units::budget(&u.to_string()).unwrap(), u);
        }

        #[test]
        fn a_charge_is_never_below_the_double_and_a_budget_never_above(x in 0.0f64..1e6) {
            let up = Units::charge_f64(x).unwrap().get() as f64 / 1e9;
            let down = Units::budget_f64(x).unwrap().get() as f64 / 1e9;
            // Compared in f64 with a tolerance of one rounding of the division only.
            proptest::prop_assert!(up >= x * (1.0 - 1e-15));
            proptest::prop_assert!(down <= x * (1.0 + 1e-15));
            let exact = Units::ceil_exact(x).unwrap().get();
            proptest::prop_assert!(exact as f64 / 1e9 >= x * (1.0 - 1e-15));
        }
    }
}
