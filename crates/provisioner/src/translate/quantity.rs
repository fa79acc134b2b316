//! Kubernetes resource quantities as byte counts: a claim's storage request in, a volume's capacity out.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity string Kubernetes would not accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
pub struct QuantityError;

/// The number of bytes a quantity stands for, rounded up to a whole byte away from zero, as Go's
/// `Quantity.Value()`; saturates at the `i64` range.
pub fn quantity_bytes(quantity: &Quantity) -> Result<i64, QuantityError> {
    let text = quantity.0.as_str();
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

    // value = mantissa / 10^scale * base^exponent, computed on u128 with saturation.
    let digits: String = [whole, fraction].concat();
    let digits = digits.trim_start_matches('0');
    let mut scale = fraction.len() as i64;
    let mut mantissa: u128 = 0;
    for b in digits.bytes() {
        if mantissa > u128::MAX / 100 {
            // Further digits only matter for rounding; count them as scale instead.
            scale -= 1;
            continue;
        }
        mantissa = mantissa * 10 + u128::from(b - b'0');
    }
    let magnitude = if base == 2 {
        let shifted = shift_left_saturating(mantissa, exponent as u32);
        divide_rounding_up(shifted, scale)
    } else {
        divide_rounding_up(mantissa, scale - i64::from(exponent))
    };
    let bytes = i64::try_from(magnitude).unwrap_or(i64::MAX);
    Ok(if negative { -bytes } else { bytes })
}

fn shift_left_saturating(value: u128, bits: u32) -> u128 {
    if value == 0 {
        0
    } else if value.leading_zeros() < bits {
        u128::MAX
    } else {
        value << bits
    }
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
pub fn binary_si_quantity(bytes: i64) -> Quantity {
    let sign = if bytes < 0 { "-" } else { "" };
    let magnitude = bytes.unsigned_abs();
    if magnitude < 1024 {
        let text = if magnitude == 1000 { "1k".to_string() } else { magnitude.to_string() };
        return Quantity(format!("{sign}{text}"));
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut amount = magnitude;
    let mut power = 0;
    while power < SUFFIXES.len() - 1 && amount.is_multiple_of(1024) {
        amount /= 1024;
        power += 1;
    }
    Quantity(format!("{sign}{amount}{}", SUFFIXES[power]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_requests_in_bytes() {
        // (rule, quantity, bytes)
        let table = [
            ("19: plain bytes", "1073741824", Ok(1073741824)),
            ("19: binary suffix", "1Gi", Ok(1 << 30)),
            ("19: fractional binary", "1.5Gi", Ok(1610612736)),
            ("19: decimal suffix", "5G", Ok(5_000_000_000)),
            ("19: kilo", "100k", Ok(100_000)),
            ("19: milli rounds up to a byte", "1m", Ok(1)),
            ("19: fraction rounds up", "1.0001", Ok(2)),
            ("19: exponent", "1e3", Ok(1000)),
            ("19: capital exponent", "2E6", Ok(2_000_000)),
            ("19: negative exponent rounds up", "15e-1", Ok(2)),
            ("19: explicit plus", "+1Ki", Ok(1024)),
            ("19: leading dot", ".5Ki", Ok(512)),
            ("19: zero", "0", Ok(0)),
            ("19: saturates", "100Ei", Ok(i64::MAX)),
            ("19: bad suffix", "1GB", Err(QuantityError)),
            ("19: empty", "", Err(QuantityError)),
            ("19: two dots", "1.2.3", Err(QuantityError)),
            ("19: bare exponent", "1e", Err(QuantityError)),
        ];
        for (rule, text, want) in table {
            assert_eq!(quantity_bytes(&Quantity(text.to_string())), want, "{rule}: {text}");
        }
    }

    #[test]
    fn capacities_in_binary_si() {
        // (rule, bytes, text)
        let table = [
            ("27: gibibytes", 1 << 30, "1Gi"),
            ("27: mebibytes", 5 << 20, "5Mi"),
            ("27: not a multiple of 1024", 1536, "1536"),
            ("27: kibibytes", 3072, "3Ki"),
            ("27: below 1024 prints decimal", 500, "500"),
            ("27: 1000 prints as 1k", 1000, "1k"),
            ("27: zero", 0, "0"),
            ("27: exbibytes", 2i64 << 60, "2Ei"),
            ("27: mixed", (1 << 30) + 1024, "1048577Ki"),
        ];
        for (rule, bytes, want) in table {
            assert_eq!(binary_si_quantity(bytes).0, want, "{rule}");
        }
    }
}
