//! `go_duration` against a model of Go's `time.ParseDuration`: each part is its whole units plus its fraction of a
//! unit truncated to whole nanoseconds, the parts add up, and more than `i64::MAX` nanoseconds is an error.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

const UNITS: &[(&str, u128)] = &[
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ns", 1),
];

/// One `12.5ms`: integer digits, fraction digits (`None`: no point), unit.
#[derive(Clone, Debug)]
struct Part {
    whole: String,
    fraction: Option<String>,
    unit: (&'static str, u128),
}

impl Part {
    fn text(&self) -> String {
        let fraction = self.fraction.as_ref().map(|f| format!(".{f}")).unwrap_or_default();
        format!("{}{fraction}{}", self.whole, self.unit.0)
    }

    /// Whole units plus the fraction's nanoseconds rounded down; fractions of at most 24 digits.
    fn nanos(&self) -> u128 {
        let whole: u128 = if self.whole.is_empty() { 0 } else { self.whole.parse().unwrap() };
        let fraction = self.fraction.as_deref().unwrap_or("");
        let numerator: u128 = if fraction.is_empty() { 0 } else { fraction.parse().unwrap() };
        whole * self.unit.1 + numerator * self.unit.1 / 10u128.pow(fraction.len() as u32)
    }
}

fn part(fraction_digits: usize) -> impl Strategy<Value = Part> {
    let whole = prop_oneof![
        4 => "[0-9]{0,4}",
        2 => "[0-9]{0,12}",
        1 => "0{0,30}[0-9]{0,25}",
    ];
    let fraction = prop::option::of(proptest::string::string_regex(&format!("[0-9]{{0,{fraction_digits}}}")).unwrap());
    (whole, fraction, prop::sample::select(UNITS))
        .prop_filter("some digit", |(whole, fraction, _)| {
            !whole.is_empty() || fraction.as_ref().is_some_and(|f| !f.is_empty())
        })
        .prop_map(|(whole, fraction, unit)| Part { whole, fraction, unit })
}

/// Go's `Duration.String`: `0s`; below a second one unit (`1.5ms`, `2µs`, `7ns`); else `1h2m3.5s`, `2m0s`, `4.25s`,
/// the fraction without trailing zeros.
fn go_string(d: Duration) -> String {
    let nanos = d.as_nanos();
    let split = |value: u128, precision: u32| {
        let unit = 10u128.pow(precision);
        let fraction = value % unit;
        let text = if fraction == 0 {
            String::new()
        } else {
            format!(".{:0width$}", fraction, width = precision as usize).trim_end_matches('0').to_string()
        };
        (value / unit, text)
    };
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (precision, unit) = match nanos {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "\u{b5}s"),
            _ => (6, "ms"),
        };
        let (whole, fraction) = split(nanos, precision);
        return format!("{whole}{fraction}{unit}");
    }
    let (seconds, fraction) = split(nanos, 9);
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}{fraction}s"),
        (0, _) => format!("{minutes}m{seconds}{fraction}s"),
        _ => format!("{hours}h{minutes}m{seconds}{fraction}s"),
    }
}

/// Durations Go can hold (non-negative), many of them round.
fn duration() -> impl Strategy<Value = Duration> {
    let nanos = prop_oneof![
        0u64..=i64::MAX as u64,
        0u64..1_000,
        0u64..1_000_000_000,
        (0u64..2_562_047, prop::sample::select(vec![1u64, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000]))
            .prop_map(|(n, unit)| (n * unit).min(i64::MAX as u64)),
        (i64::MAX as u64 - 1_000)..=i64::MAX as u64,
    ];
    nanos.prop_map(Duration::from_nanos)
}

#[test]
fn the_printer_writes_go_forms() {
    let table = [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(7), "7ns"),
        (Duration::from_nanos(1_500), "1.5\u{b5}s"),
        (Duration::from_micros(1_500), "1.5ms"),
        (Duration::from_millis(4_250), "4.25s"),
        (Duration::from_secs(120), "2m0s"),
        (Duration::from_millis(3_723_500), "1h2m3.5s"),
        (Duration::from_nanos(i64::MAX as u64), "2562047h47m16.854775807s"),
    ];
    for (duration, want) in table {
        assert_eq!(go_string(duration), want);
    }
}

proptest! {
    #[test]
    fn a_sum_of_parts_is_what_the_parts_add_up_to(
        sign in prop::sample::select(vec!["", "+", "-"]),
        parts in prop::collection::vec(part(24), 1..6),
    ) {
        let text = format!("{sign}{}", parts.iter().map(Part::text).collect::<String>());
        let total: u128 = parts.iter().map(Part::nanos).sum();
        let want = if sign == "-" && total > 0 {
            Err(DurationError::Negative(text.clone()))
        } else if total > i64::MAX as u128 {
            Err(DurationError::Overflow(text.clone()))
        } else {
            Ok(Duration::from_nanos(total as u64))
        };
        prop_assert_eq!(go_duration(&text), want, "{:?}", text);
    }

    #[test]
    fn long_fractions_lose_less_than_a_nanosecond_per_part(parts in prop::collection::vec(part(60), 1..6)) {
        // Digits past the 24th move a part by less than a nanosecond: the total lies between the model's (on the
        // first 24 digits) and that plus one per part.
        let cut = |p: &Part| Part { fraction: p.fraction.as_ref().map(|f| f.chars().take(24).collect()), ..p.clone() };
        let text: String = parts.iter().map(Part::text).collect();
        let low: u128 = parts.iter().map(|p| cut(p).nanos()).sum();
        match go_duration(&text) {
            Ok(d) => prop_assert!((low..=low + parts.len() as u128).contains(&d.as_nanos()), "{:?}: {:?}", text, d),
            Err(DurationError::Overflow(_)) => prop_assert!(low + parts.len() as u128 > i64::MAX as u128, "{:?}", text),
            Err(e) => prop_assert!(false, "{:?}: {:?}", text, e),
        }
    }

    #[test]
    fn go_printed_durations_parse_back(d in duration()) {
        let text = go_string(d);
        prop_assert_eq!(go_duration(&text), Ok(d), "{:?}", text);
    }

    #[test]
    fn one_nanosecond_past_the_limit_is_an_error_not_a_wrap(extra in 1u128..=u64::MAX as u128, split in any::<bool>()) {
        let nanos = i64::MAX as u128 + extra;
        let text = if split {
            // The same total in hours and nanoseconds, so the excess comes from adding parts.
            let hours = nanos / 3_600_000_000_000;
            format!("{hours}h{}ns", nanos % 3_600_000_000_000)
        } else {
            format!("{nanos}ns")
        };
        prop_assert_eq!(go_duration(&text), Err(DurationError::Overflow(text.clone())));
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".*") {
        let _ = go_duration(&text);
    }

    #[test]
    fn duration_like_text_never_panics(text in "[-+]?[0-9.hmsun\u{b5}\u{3bc}]{0,40}") {
        if let Ok(d) = go_duration(&text) {
            prop_assert!(d.as_nanos() <= i64::MAX as u128, "{:?}", text);
        }
    }
}
