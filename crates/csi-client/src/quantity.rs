//! Byte quantities as people write them on a command line or in a VolumeAttributesClass:
//! `1Ti`, `100Gi`, `1.5G`, `512MiB`, `4096`.
//!
//! Binary suffixes (`Ki`, `Mi`, … with or without a trailing `B`) are powers of 1024, decimal ones
//! (`k`/`K`, `M`, `G`, … with or without `B`) powers of 1000, as in Kubernetes quantities. A fraction is
//! allowed and rounded down to whole bytes.

/// Why a quantity was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("empty quantity")]
    Empty,
    #[error("{0:?} does not start with a number")]
    NoNumber(String),
    #[error("{0:?} has an unknown unit (use e.g. Ki, Mi, Gi, Ti or k, M, G, T, optionally followed by B)")]
    UnknownUnit(String),
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// Parses a byte quantity into bytes. The result fits an `i64`, the type CSI uses for sizes.
pub fn parse_bytes(text: &str) -> Result<i64, SizeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let (number, unit) = split_number(text).ok_or_else(|| SizeError::NoNumber(text.to_string()))?;
    let multiplier = unit_multiplier(unit).ok_or_else(|| SizeError::UnknownUnit(text.to_string()))?;
    scale(number, multiplier).ok_or_else(|| SizeError::TooLarge(text.to_string()))
}

/// A non-negative decimal number as written: integer digits and optional fraction digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal<'a> {
    pub integer: &'a str,
    pub fraction: &'a str,
}

impl Decimal<'_> {
    pub fn is_zero(&self) -> bool {
        self.integer.bytes().chain(self.fraction.bytes()).all(|b| b == b'0')
    }
}

/// Splits `12.5Gi` into the number `12.5` and the unit `Gi`. No sign, no exponent.
pub fn split_number(text: &str) -> Option<(Decimal<'_>, &str)> {
    let digits_end = |s: &str| s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    let int_len = digits_end(text);
    let integer = &text[..int_len];
    let rest = &text[int_len..];
    let (fraction, unit) = match rest.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = digits_end(after_dot);
            (&after_dot[..frac_len], &after_dot[frac_len..])
        }
        None => ("", rest),
    };
    if integer.is_empty() && fraction.is_empty() {
        return None;
    }
    Some((Decimal { integer, fraction }, unit))
}

/// Bytes per unit for a size suffix; `None` for anything unknown.
pub fn unit_multiplier(unit: &str) -> Option<u128> {
    let unit = unit.strip_suffix('B').unwrap_or(unit);
    let value = match unit {
        "" => 1,
        "k" | "K" => 1000,
        "M" => 1000u128.pow(2),
        "G" => 1000u128.pow(3),
        "T" => 1000u128.pow(4),
        "P" => 1000u128.pow(5),
        "E" => 1000u128.pow(6),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return None,
    };
    Some(value)
}

/// `number * multiplier`, rounded down, if it fits an `i64`.
pub fn scale(number: Decimal<'_>, multiplier: u128) -> Option<i64> {
    // 39 digits overflow u128; anything that long is too large for an i64 anyway.
    if number.integer.trim_start_matches('0').len() > 19 {
        return None;
    }
    let integer: u128 = if number.integer.is_empty() { 0 } else { number.integer.parse().ok()? };
    let mut total = integer.checked_mul(multiplier)?;
    // Only the first 18 fraction digits can matter below 2^63 bytes.
    let fraction = &number.fraction[..number.fraction.len().min(18)];
    if !fraction.is_empty() {
        let numerator: u128 = fraction.parse().ok()?;
        let denominator = 10u128.pow(fraction.len() as u32);
        total = total.checked_add(numerator.checked_mul(multiplier)? / denominator)?;
    }
    i64::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quantities() {
        let cases: &[(&str, Result<i64, SizeError>)] = &[
            ("0", Ok(0)),
            ("4096", Ok(4096)),
            ("1Ki", Ok(1024)),
            ("1KiB", Ok(1024)),
            ("100Gi", Ok(100 << 30)),
            ("1Ti", Ok(1 << 40)),
            ("1TiB", Ok(1 << 40)),
            ("2k", Ok(2000)),
            ("2K", Ok(2000)),
            ("2KB", Ok(2000)),
            ("1G", Ok(1_000_000_000)),
            ("1.5Gi", Ok(3 << 29)),
            (".5Ki", Ok(512)),
            ("1.0001", Ok(1)),
            ("7Ei", Ok(7 << 60)),
            (" 10Mi ", Ok(10 << 20)),
            ("512B", Ok(512)),
            ("", Err(SizeError::Empty)),
            ("Gi", Err(SizeError::NoNumber("Gi".into()))),
            ("-1Gi", Err(SizeError::NoNumber("-1Gi".into()))),
            ("1Xi", Err(SizeError::UnknownUnit("1Xi".into()))),
            ("1 Gi", Err(SizeError::UnknownUnit("1 Gi".into()))),
            ("1gi", Err(SizeError::UnknownUnit("1gi".into()))),
            ("8Ei", Err(SizeError::TooLarge("8Ei".into()))),
            (
                "99999999999999999999999999999999999999999",
                Err(SizeError::TooLarge("99999999999999999999999999999999999999999".into())),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&parse_bytes(text), want, "parse_bytes({text:?})");
        }
    }
}
