//! Byte quantities as people write them on a command line or in a VolumeAttributesClass:
//! `1Ti`, `100Gi`, `1.5G`, `512MiB`, `4096`.
//!
//! Binary suffixes (`Ki`, `Mi`, … with or without a trailing `B`) are powers of 1024, decimal ones
//! (`k`/`K`, `M`, `G`, … with or without `B`) powers of 1000, as in Kubernetes quantities. A fraction is
//! allowed and rounded down to whole bytes.
//!
//! The sidecars read and write Kubernetes' own `resource.Quantity` syntax exactly: [`quantity_bytes`] and
//! [`binary_si`] (no `B` suffixes, exponents, rounding up as Go's `Quantity.Value()`).

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

/// A quantity string Kubernetes would not accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
pub struct QuantityError;

/// The number of bytes a Kubernetes quantity (`resource.Quantity`) stands for, rounded up to a whole byte away from zero, as Go's
/// `Quantity.Value()`; saturates at the `i64` range.
pub fn quantity_bytes(text: &str) -> Result<i64, QuantityError> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(QuantityError);
    }
    let (base, exponent): (u32, i32) = match suffix {
        "" => (10, 0),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        _ => {
            let digits = suffix.strip_prefix(['e', 'E']).ok_or(QuantityError)?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError);
            }
            (10, digits.parse::<i32>().map_err(|_| QuantityError)?)
        }
    };

    // value = digits / 10^scale * base^exponent. A binary factor multiplies the digits exactly first, so that no
    // saturation comes before the division.
    let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0').collect();
    let mut scale = fraction.len() as i64;
    if base == 2 {
        multiply_digits(&mut digits, 1u128 << exponent);
    } else {
        scale -= i64::from(exponent);
    }
    let mut mantissa: u128 = 0;
    let mut dropped_nonzero = false;
    for &d in digits.iter().skip_while(|&&d| d == 0) {
        // Leaves room for the guard digit below.
        if mantissa > u128::MAX / 1000 {
            // Further digits only matter for rounding; count them as scale, and note whether any is not zero.
            scale -= 1;
            dropped_nonzero |= d != 0;
            continue;
        }
        mantissa = mantissa * 10 + u128::from(d);
    }
    if dropped_nonzero {
        // A guard digit 1 for the dropped ones: the value stays strictly between the same two whole bytes.
        mantissa = mantissa * 10 + 1;
        scale += 1;
    }
    let bytes = i64::try_from(divide_rounding_up(mantissa, scale)).unwrap_or(i64::MAX);
    Ok(if negative { -bytes } else { bytes })
}

/// `digits * factor` in place, on decimal digits (most significant first).
fn multiply_digits(digits: &mut Vec<u8>, factor: u128) {
    let mut carry = 0u128;
    for d in digits.iter_mut().rev() {
        let x = u128::from(*d) * factor + carry;
        *d = (x % 10) as u8;
        carry = x / 10;
    }
    let mut high = Vec::new();
    while carry > 0 {
        high.push((carry % 10) as u8);
        carry /= 10;
    }
    digits.splice(0..0, high.into_iter().rev());
}

/// `value / 10^scale` rounded up; a negative scale multiplies.
fn divide_rounding_up(value: u128, scale: i64) -> u128 {
    if value == 0 {
        return 0;
    }
    if scale <= 0 {
        let mut out = value;
        for _ in 0..(-scale).min(40) {
            out = out.saturating_mul(10);
        }
        return out;
    }
    if scale > 38 {
        return 1;
    }
    let divisor = 10u128.pow(scale as u32);
    value.div_ceil(divisor)
}

/// A byte count as Kubernetes writes it in binary-SI form: `1Gi`, `1536`, and — because values below 1024 are
/// printed in decimal-SI — `1k` for 1000.
pub fn binary_si(bytes: i64) -> String {
    let sign = if bytes < 0 { "-" } else { "" };
    let magnitude = bytes.unsigned_abs();
    if magnitude < 1024 {
        let text = if magnitude == 1000 { "1k".to_string() } else { magnitude.to_string() };
        return format!("{sign}{text}");
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut amount = magnitude;
    let mut power = 0;
    while power < SUFFIXES.len() - 1 && amount.is_multiple_of(1024) {
        amount /= 1024;
        power += 1;
    }
    format!("{sign}{amount}{}", SUFFIXES[power])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_quantities_in_bytes() {
        // (case, quantity, bytes)
        let table = [
            ("plain bytes", "1073741824", Ok(1073741824)),
            ("binary suffix", "1Gi", Ok(1 << 30)),
            ("fractional binary", "1.5Gi", Ok(1610612736)),
            ("decimal suffix", "5G", Ok(5_000_000_000)),
            ("kilo", "100k", Ok(100_000)),
            ("milli rounds up to a byte", "1m", Ok(1)),
            ("milli rounds up", "1500m", Ok(2)),
            ("fraction rounds up", "1.0001", Ok(2)),
            ("exponent", "1e3", Ok(1000)),
            ("capital exponent", "2E6", Ok(2_000_000)),
            ("negative exponent rounds up", "15e-1", Ok(2)),
            ("explicit plus", "+1Ki", Ok(1024)),
            ("leading dot", ".5Ki", Ok(512)),
            ("negative", "-1Mi", Ok(-(1 << 20))),
            ("zero", "0", Ok(0)),
            ("saturates", "100Ei", Ok(i64::MAX)),
            ("bad suffix", "1GB", Err(QuantityError)),
            ("empty", "", Err(QuantityError)),
            ("two dots", "1.2.3", Err(QuantityError)),
            ("bare exponent", "1e", Err(QuantityError)),
            (
                "a binary factor does not saturate before the fraction divides",
                ".310000000000000000000000000Ti",
                Ok(340848604611),
            ),
            ("digits past u128 still round up", &format!("1.{}1", "0".repeat(45)), Ok(2)),
        ];
        for (case, text, want) in table {
            assert_eq!(quantity_bytes(text), want, "{case}: {text}");
        }
    }

    #[test]
    fn byte_counts_in_binary_si() {
        // (case, bytes, text)
        let table = [
            ("gibibytes", 1 << 30, "1Gi"),
            ("mebibytes", 5 << 20, "5Mi"),
            ("not a multiple of 1024", 1536, "1536"),
            ("a large one that is not", 5_000_000_000, "5000000000"),
            ("kibibytes", 3072, "3Ki"),
            ("below 1024 prints decimal", 500, "500"),
            ("1000 prints as 1k", 1000, "1k"),
            ("zero", 0, "0"),
            ("exbibytes", 2i64 << 60, "2Ei"),
            ("mixed", (1 << 30) + 1024, "1048577Ki"),
            ("negative", -(2 << 30), "-2Gi"),
        ];
        for (case, bytes, want) in table {
            assert_eq!(binary_si(bytes), want, "{case}");
            assert_eq!(quantity_bytes(&binary_si(bytes)), Ok(bytes), "{case}: round trip");
        }
    }

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
