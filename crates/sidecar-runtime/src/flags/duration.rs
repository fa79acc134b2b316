//! Go's `time.ParseDuration` syntax, which every upstream duration flag uses
//! (`15s`, `1m30s`, `500ms`, `2h`, `1.5h`, `0`).

use std::time::Duration;

/// Why a duration flag value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("missing unit in duration {0:?} (use ns, us, ms, s, m or h)")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {input:?} (use ns, us, ms, s, m or h)")]
    UnknownUnit { input: String, unit: String },
    #[error("negative duration {0:?} is not allowed here")]
    Negative(String),
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

const NANOS_PER_UNIT: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // micro sign, as Go accepts
    ("\u{3bc}s", 1_000), // Greek small letter mu, as Go accepts
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration. Like Go, a bare `0` is the only value without a unit;
/// unlike Go, negative values are refused because no sidecar flag means anything
/// by them.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    let mut rest = input;
    let mut negative = false;
    if let Some(stripped) = rest.strip_prefix('-') {
        negative = true;
        rest = stripped;
    } else if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }

    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after_int) = rest.split_at(int_len);
        let (frac_digits, after_number) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(invalid());
        }
        let unit_len = after_number.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_string()));
        }
        let Some(&(_, unit_nanos)) = NANOS_PER_UNIT.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::UnknownUnit { input: input.to_string(), unit: unit.to_string() });
        };

        let overflow = || DurationError::Overflow(input.to_string());
        let whole: u128 = if int_digits.is_empty() { 0 } else { int_digits.parse().map_err(|_| overflow())? };
        let mut nanos = whole.checked_mul(unit_nanos).ok_or_else(overflow)?;
        // The fraction's whole nanoseconds, exactly, by long multiplication of its digits by the unit from the last
        // one: what carries out of the first is the whole part (always less than a unit, so it cannot overflow).
        let fraction_nanos =
            frac_digits.bytes().rev().fold(0u128, |carry, digit| (u128::from(digit - b'0') * unit_nanos + carry) / 10);
        nanos = nanos.checked_add(fraction_nanos).ok_or_else(overflow)?;
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(overflow)?;
        rest = after_unit;
    }

    if negative && total_nanos > 0 {
        return Err(DurationError::Negative(input.to_string()));
    }
    // Go's limit is i64 nanoseconds (about 290 years); keep it.
    if total_nanos > i64::MAX as u128 {
        return Err(DurationError::Overflow(input.to_string()));
    }
    Ok(Duration::from_nanos(total_nanos as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_go_syntax() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("15s", Duration::from_secs(15)),
            ("10s", Duration::from_secs(10)),
            ("5m", Duration::from_secs(300)),
            ("1m30s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("2h", Duration::from_secs(7200)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("100us", Duration::from_micros(100)),
            ("100\u{b5}s", Duration::from_micros(100)),
            ("100\u{3bc}s", Duration::from_micros(100)),
            ("42ns", Duration::from_nanos(42)),
            ("1.000000001s", Duration::from_nanos(1_000_000_001)),
            ("3m0.5s", Duration::from_millis(180_500)),
            // A fraction whose digits times the unit exceed u128.
            (".10000000000000000000000000000h", Duration::from_secs(360)),
            ("0.999999999999999999999999999999999999999999ns", Duration::ZERO),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_go_duration(input).as_ref(), Ok(expected), "input {input:?}");
        }
    }

    type IsExpected = fn(&DurationError) -> bool;

    #[test]
    fn refuses_what_go_refuses_and_negatives() {
        let cases: &[(&str, IsExpected)] = &[
            ("", |e| matches!(e, DurationError::Invalid(_))),
            ("s", |e| matches!(e, DurationError::Invalid(_))),
            (".s", |e| matches!(e, DurationError::Invalid(_))),
            ("-", |e| matches!(e, DurationError::Invalid(_))),
            ("15", |e| matches!(e, DurationError::MissingUnit(_))),
            ("1m30", |e| matches!(e, DurationError::MissingUnit(_))),
            ("15 s", |e| matches!(e, DurationError::UnknownUnit { .. })),
            ("3d", |e| matches!(e, DurationError::UnknownUnit { .. })),
            ("1S", |e| matches!(e, DurationError::UnknownUnit { .. })),
            ("-5s", |e| matches!(e, DurationError::Negative(_))),
            ("9999999999h", |e| matches!(e, DurationError::Overflow(_))),
        ];
        for (input, is_expected) in cases {
            let err = parse_go_duration(input).expect_err(input);
            assert!(is_expected(&err), "input {input:?} gave {err:?}");
        }
    }
}
