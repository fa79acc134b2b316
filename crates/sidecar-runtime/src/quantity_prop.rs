//! `quantity_bytes` and `binary_si_quantity` against a model that works on the digits as written: the exact value,
//! rounded up to a whole byte away from zero, its magnitude saturated at `i64::MAX`.

use proptest::prelude::*;

use super::*;

/// A quantity as the grammar builds it: sign, integer digits, fraction digits (`None`: no point), suffix.
#[derive(Clone, Debug)]
struct Written {
    sign: &'static str,
    whole: String,
    fraction: Option<String>,
    suffix: Suffix,
}

#[derive(Clone, Debug)]
enum Suffix {
    /// `Ki` … `Ei`: times 2^bits.
    Binary(&'static str, u32),
    /// `n` … `E` or none: times 10^power.
    Decimal(&'static str, i64),
    /// `e3`, `E-2`, `e+07`: times 10^power, as written.
    Exponent(String, i64),
}

impl Written {
    fn text(&self) -> String {
        let suffix = match &self.suffix {
            Suffix::Binary(s, _) | Suffix::Decimal(s, _) => s.to_string(),
            Suffix::Exponent(s, _) => s.clone(),
        };
        let fraction = self.fraction.as_ref().map(|f| format!(".{f}")).unwrap_or_default();
        format!("{}{}{fraction}{suffix}", self.sign, self.whole)
    }
}

const LIMIT: u128 = i64::MAX as u128;

/// The ceiling of a decimal digit string whose first `point` digits are left of the decimal point (`point` may be
/// negative or past the end), saturated at `LIMIT`: the digits left of the point are the integer part, any non-zero
/// digit right of it adds one.
fn ceil_decimal(digits: &str, point: i64) -> u128 {
    let trimmed = digits.trim_start_matches('0');
    let point = point - (digits.len() - trimmed.len()) as i64;
    if trimmed.is_empty() {
        return 0;
    }
    let int_len = point.clamp(0, trimmed.len() as i64) as usize;
    let (int_part, rest) = trimmed.split_at(int_len);
    let padding = (point - trimmed.len() as i64).max(0);
    if int_part.len() as i64 + padding > 19 {
        return LIMIT;
    }
    let mut integer: u128 = if int_part.is_empty() { 0 } else { int_part.parse().unwrap() };
    for _ in 0..padding {
        integer *= 10;
    }
    if rest.bytes().any(|b| b != b'0') {
        integer += 1;
    }
    integer.min(LIMIT)
}

/// The model's magnitude for a written quantity.
fn model_magnitude(q: &Written) -> u128 {
    let fraction = q.fraction.clone().unwrap_or_default();
    match &q.suffix {
        Suffix::Decimal(_, power) | Suffix::Exponent(_, power) => {
            ceil_decimal(&format!("{}{fraction}", q.whole), q.whole.len() as i64 + power)
        }
        Suffix::Binary(_, bits) => {
            // Integer part × 2^bits, plus the ceiling of fraction × 2^bits by long multiplication of its digits.
            let whole = q.whole.trim_start_matches('0');
            if whole.len() > 20 {
                return LIMIT;
            }
            let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().unwrap() };
            let factor = 1u128 << bits;
            let mut carry = 0u128;
            let mut inexact = false;
            for d in fraction.bytes().rev() {
                let x = u128::from(d - b'0') * factor + carry;
                inexact |= !x.is_multiple_of(10);
                carry = x / 10;
            }
            let total = whole.saturating_mul(factor).saturating_add(carry).saturating_add(u128::from(inexact));
            total.min(LIMIT)
        }
    }
}

fn model(q: &Written) -> i64 {
    let magnitude = model_magnitude(q) as i64;
    if q.sign == "-" { -magnitude } else { magnitude }
}

fn digits(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::string::string_regex(&format!("[0-9]{{0,{}}}", max.min(6))).unwrap(),
        2 => proptest::string::string_regex(&format!("[0-9]{{0,{max}}}")).unwrap(),
        1 => proptest::string::string_regex(&format!("0{{0,5}}[0-9]{{0,{max}}}0{{0,20}}")).unwrap(),
    ]
}

fn suffix() -> impl Strategy<Value = Suffix> {
    let binary = prop::sample::select(vec![("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)])
        .prop_map(|(s, b)| Suffix::Binary(s, b));
    let decimal = prop::sample::select(vec![
        ("", 0),
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ])
    .prop_map(|(s, p)| Suffix::Decimal(s, p));
    let power = prop_oneof![4 => -45i64..45, 1 => any::<i32>().prop_map(i64::from)];
    let exponent =
        (prop::sample::select(vec!["e", "E"]), any::<bool>(), power, 0usize..3).prop_map(|(e, plus, power, zeros)| {
            let sign = if power < 0 {
                "-"
            } else if plus {
                "+"
            } else {
                ""
            };
            Suffix::Exponent(format!("{e}{sign}{}{}", "0".repeat(zeros), power.unsigned_abs()), power)
        });
    prop_oneof![3 => binary, 3 => decimal, 2 => exponent]
}

fn written() -> impl Strategy<Value = Written> {
    (prop::sample::select(vec!["", "", "+", "-"]), digits(22), prop::option::of(digits(45)), suffix())
        .prop_filter("some digit", |(_, whole, fraction, _)| {
            !whole.is_empty() || fraction.as_ref().is_some_and(|f| !f.is_empty())
        })
        .prop_map(|(sign, whole, fraction, suffix)| Written { sign, whole, fraction, suffix })
}

/// Byte counts, many of them multiples of a power of 1024 (binary-SI prints those with a suffix).
fn bytes() -> impl Strategy<Value = i64> {
    prop_oneof![
        0i64..=i64::MAX,
        0i64..5000,
        (0i64..1 << 20, 0u32..7).prop_map(|(n, p)| n.checked_mul(1 << (10 * p)).unwrap_or(n)),
        (1i64..16, 0u32..7).prop_map(|(n, p)| n.checked_mul(1 << (10 * p)).unwrap_or(i64::MAX)),
    ]
}

fn parse(text: &str) -> Result<i64, QuantityError> {
    quantity_bytes(&Quantity(text.to_string()))
}

proptest! {
    #[test]
    fn binary_si_parses_back_to_the_same_bytes(b in bytes()) {
        let quantity = binary_si_quantity(b);
        prop_assert_eq!(quantity_bytes(&quantity), Ok(b), "{:?}", quantity.0);
    }

    #[test]
    fn written_quantities_are_their_exact_value_rounded_up(q in written()) {
        let text = q.text();
        prop_assert_eq!(parse(&text), Ok(model(&q)), "{:?}", text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".*") {
        let _ = parse(&text);
    }

    #[test]
    fn quantity_like_text_never_panics(text in "[0-9.eEKMGTPi+-]{0,30}") {
        if let Ok(bytes) = parse(&text) {
            prop_assert!(bytes > i64::MIN, "{:?}", text);
        }
    }
}
