//! Storage sizes: a Kubernetes quantity and the byte count it stands for.
//!
//! Minimal on purpose; the provisioner has the same two conversions (see the crate docs on what should move down).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity string Kubernetes would not accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
pub struct QuantityError;

/// A size as written in the API, with its byte count (rounded up to a whole byte, as Go's `Quantity.Value()`).
/// Sizes compare by bytes, as Go's `Quantity.Cmp` compares them for any size a volume can have.
#[derive(Clone, Debug, PartialEq)]
pub struct Size {
    pub quantity: Quantity,
    pub bytes: i64,
}

impl Size {
    pub fn parse(quantity: &Quantity) -> Result<Size, QuantityError> {
        Ok(Size { quantity: quantity.clone(), bytes: quantity_bytes(quantity)? })
    }

    /// The size a driver answered, written in binary-SI form.
    pub fn from_bytes(bytes: i64) -> Size {
        Size { quantity: binary_si_quantity(bytes), bytes }
    }

    /// Go's zero `Quantity`, which a missing map entry reads as.
    pub fn zero() -> Size {
        Size { quantity: Quantity("0".to_string()), bytes: 0 }
    }
}

/// The byte count of a quantity, rounded up to a whole byte; saturates at the `i64` range.
pub fn quantity_bytes(quantity: &Quantity) -> Result<i64, QuantityError> {
    let text = quantity.0.as_str();
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let split = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(QuantityError);
    }
    let (mut exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E']).ok_or(QuantityError)?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError);
            }
            (exponent.parse::<i64>().map_err(|_| QuantityError)?, 0)
        }
    };
    exp10 -= fraction.len() as i64;

    // mantissa × 10^exp10 × 2^exp2; digits that do not fit only shift the exponent (and force rounding up).
    let mut mantissa: u128 = 0;
    let mut inexact = false;
    for digit in whole.bytes().chain(fraction.bytes()).map(|b| u128::from(b - b'0')) {
        if mantissa > u128::MAX / 100 {
            exp10 += 1;
            inexact |= digit != 0;
        } else {
            mantissa = mantissa * 10 + digit;
        }
    }
    let mut value = if mantissa == 0 || exp2 < mantissa.leading_zeros() { mantissa << exp2 } else { u128::MAX };
    if exp10 >= 0 {
        for _ in 0..exp10.min(40) {
            value = value.saturating_mul(10);
        }
    } else if exp10 < -38 {
        value = u128::from(value > 0);
    } else {
        let divisor = 10u128.pow((-exp10) as u32);
        inexact |= value % divisor != 0;
        value /= divisor;
        value += u128::from(inexact);
    }
    let bytes = i64::try_from(value).unwrap_or(i64::MAX);
    Ok(if negative { -bytes } else { bytes })
}

/// A byte count in binary-SI form: `2Gi`, `5Mi`, or plain digits when not a multiple of 1024.
pub fn binary_si_quantity(bytes: i64) -> Quantity {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut amount = bytes;
    let mut power = 0;
    while amount != 0 && amount % 1024 == 0 && power < SUFFIXES.len() - 1 {
        amount /= 1024;
        power += 1;
    }
    Quantity(format!("{amount}{}", SUFFIXES[power]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_bytes() {
        // (case, quantity, bytes)
        let table = [
            ("plain bytes", "1073741824", Ok(1 << 30)),
            ("binary suffix", "2Gi", Ok(2 << 30)),
            ("fractional binary", "1.5Gi", Ok(1_610_612_736)),
            ("decimal suffix", "5G", Ok(5_000_000_000)),
            ("milli rounds up", "1500m", Ok(2)),
            ("exponent", "1e3", Ok(1000)),
            ("negative exponent rounds up", "15e-1", Ok(2)),
            ("leading dot", ".5Ki", Ok(512)),
            ("explicit plus", "+1Mi", Ok(1 << 20)),
            ("zero", "0", Ok(0)),
            ("saturates", "100Ei", Ok(i64::MAX)),
            ("bad suffix", "1GB", Err(QuantityError)),
            ("empty", "", Err(QuantityError)),
            ("two dots", "1.2.3", Err(QuantityError)),
            ("bare exponent", "1e", Err(QuantityError)),
        ];
        for (case, text, want) in table {
            assert_eq!(quantity_bytes(&Quantity(text.to_string())), want, "{case}: {text}");
        }
    }

    #[test]
    fn capacities_in_binary_si() {
        // (case, bytes, text)
        let table = [
            ("gibibytes", 1 << 30, "1Gi"),
            ("mebibytes", 5 << 20, "5Mi"),
            ("not a multiple of 1024", 5_000_000_000, "5000000000"),
            ("mixed", (1 << 30) + 1024, "1048577Ki"),
            ("zero", 0, "0"),
        ];
        for (case, bytes, want) in table {
            assert_eq!(binary_si_quantity(bytes).0, want, "{case}");
            assert_eq!(quantity_bytes(&binary_si_quantity(bytes)), Ok(bytes), "{case}: round trip");
        }
    }
}
