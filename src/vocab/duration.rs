//! The one duration grammar, read the same way by the spec (`maxRunDuration`, a job's
//! `duration`), every command-line flag that takes a duration, and the local target's
//! `GKQ_LOCAL_*` settings, so a value written in one place is accepted in all of them.
//!
//! A duration is one or more `<number><unit>` parts: `90s`, `30m`, `6h`, `7d`, `250ms`, `1h30m`,
//! `1m 30s`, `1.5h`. Units are `ms`, `s`, `m`, `h` and `d`; spaces may separate the parts and a
//! number from its unit. Only command-line flags also take a bare number of seconds (`0`,
//! `30`), as they always have; in files a unit is required, so `10` is never a guess.
//!
//! This is not protobuf's JSON `Duration` (`"21600s"`, the form GKE's REST API carries); the
//! emulator checks that wire form on its own (`emulator::wire::is_proto_json_duration`).

use std::time::Duration;

/// The units, for messages.
const UNITS: &str = "ms, s, m, h or d";

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// Fraction digits beyond this many are below a nanosecond even for days, so they are dropped
/// rather than risk overflowing the arithmetic.
const MAX_FRACTION_DIGITS: usize = 18;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("`{text}` is not a duration (write e.g. 90s, 30m, 1h30m or 250ms; units {UNITS})")]
    Malformed { text: String },
    #[error("unknown unit `{unit}` in `{text}` (units {UNITS})")]
    UnknownUnit { text: String, unit: String },
    #[error("`{text}` needs a unit after {number} ({UNITS})")]
    MissingUnit { text: String, number: String },
    #[error("`{text}` is too long a duration")]
    Overflow { text: String },
    #[error("`{text}` is not a whole number of seconds")]
    NotWholeSeconds { text: String },
}

/// Parses a duration in which every number has a unit (spec files, environment settings).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    parse_with(text, false)
}

/// Parses a command-line flag's duration: the grammar of [`parse`], or a bare number of
/// seconds (`0`, `30`, `1.5`). Shaped for clap's `value_parser`.
pub fn parse_flag(text: &str) -> Result<Duration, String> {
    parse_with(text, true).map_err(|e| e.to_string())
}

/// Parses a duration that must be whole seconds, as GKE's `maxRunDuration` and Kueue's
/// `provreq.kueue.x-k8s.io/MaxRunDurationSeconds` count them.
pub fn parse_whole_seconds(text: &str) -> Result<u64, DurationError> {
    let duration = parse(text)?;
    if duration.subsec_nanos() != 0 {
        return Err(DurationError::NotWholeSeconds { text: text.into() });
    }
    Ok(duration.as_secs())
}

/// Parses a duration as whole milliseconds (the local target's clock), dropping any finer part.
pub fn parse_millis(text: &str) -> Result<u64, DurationError> {
    u64::try_from(parse(text)?.as_millis())
        .map_err(|_| DurationError::Overflow { text: text.into() })
}

fn parse_with(text: &str, bare_seconds: bool) -> Result<Duration, DurationError> {
    let malformed = || DurationError::Malformed { text: text.into() };
    let overflow = || DurationError::Overflow { text: text.into() };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(malformed());
    }
    if bare_seconds && let Some(nanos) = number_nanos(rest, NANOS_PER_SECOND, text)? {
        return to_duration(nanos).ok_or_else(overflow);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(malformed());
        }
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_nanos = match unit {
            "ms" => 1_000_000,
            "s" => NANOS_PER_SECOND,
            "m" => 60 * NANOS_PER_SECOND,
            "h" => 3600 * NANOS_PER_SECOND,
            "d" => 86_400 * NANOS_PER_SECOND,
            "" => {
                return Err(DurationError::MissingUnit {
                    text: text.into(),
                    number: number.into(),
                });
            }
            other => {
                return Err(DurationError::UnknownUnit {
                    text: text.into(),
                    unit: other.into(),
                });
            }
        };
        let nanos = number_nanos(number, unit_nanos, text)?.ok_or_else(malformed)?;
        total = total.checked_add(nanos).ok_or_else(overflow)?;
        rest = after.trim_start();
    }
    to_duration(total).ok_or_else(overflow)
}

/// `number` (digits with an optional fraction) times `unit_nanos`, in nanoseconds; `None` when
/// `number` is not a plain decimal number.
fn number_nanos(number: &str, unit_nanos: u128, text: &str) -> Result<Option<u128>, DurationError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Ok(None);
    }
    let overflow = || DurationError::Overflow { text: text.into() };
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| overflow())?
    };
    let fraction = &fraction[..fraction.len().min(MAX_FRACTION_DIGITS)];
    let fraction_nanos = if fraction.is_empty() {
        0
    } else {
        let value: u128 = fraction.parse().map_err(|_| overflow())?;
        value * unit_nanos / 10u128.pow(fraction.len() as u32)
    };
    let nanos = whole
        .checked_mul(unit_nanos)
        .and_then(|n| n.checked_add(fraction_nanos))
        .ok_or_else(overflow)?;
    Ok(Some(nanos))
}

fn to_duration(nanos: u128) -> Option<Duration> {
    let seconds = u64::try_from(nanos / NANOS_PER_SECOND).ok()?;
    Some(Duration::new(seconds, (nanos % NANOS_PER_SECOND) as u32))
}

/// A short wait or run time for people: `250ms`, `45s`, `2m`, `1m 30s` (sub-second parts of
/// longer times are dropped). Reads back with [`parse`].
pub fn format_ms(ms: u64) -> String {
    let s = ms / 1000;
    match (s / 60, s % 60, ms % 1000) {
        (0, 0, m) => format!("{m}ms"),
        (0, s, _) => format!("{s}s"),
        (m, 0, _) => format!("{m}m"),
        (m, s, _) => format!("{m}m {s}s"),
    }
}

/// Whole seconds as the spec would write them: `7d`, `36h`, `90m`, `45s`, or combinations
/// such as `1d12h`. Reads back with [`parse`].
pub fn format_seconds(seconds: u64) -> String {
    if seconds == 0 {
        return "0s".to_string();
    }
    let mut rest = seconds;
    let mut text = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        let count = rest / size;
        if count > 0 {
            text.push_str(&format!("{count}{unit}"));
            rest %= size;
        }
    }
    text
}

/// `3m12s`, `45s`, `1h05m`.
pub fn human(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(text: &str) -> Result<u64, DurationError> {
        parse_whole_seconds(text)
    }

    #[test]
    fn the_spec_forms() {
        assert_eq!(secs("90s"), Ok(90));
        assert_eq!(secs("30m"), Ok(1800));
        assert_eq!(secs("6h"), Ok(21_600));
        assert_eq!(secs("7d"), Ok(604_800));
        assert_eq!(secs("1h30m"), Ok(5400));
        assert_eq!(secs("1d12h"), Ok(129_600));
        assert_eq!(secs(" 21600s "), Ok(21_600));
    }

    #[test]
    fn the_flag_forms() {
        assert_eq!(parse_flag("0"), Ok(Duration::ZERO));
        assert_eq!(parse_flag("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_flag("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_flag("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_flag("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_flag("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_flag("2h"), Ok(Duration::from_secs(7200)));
        // What the spec accepts, flags now accept too.
        assert_eq!(parse_flag("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_flag("7d"), Ok(Duration::from_secs(604_800)));
    }

    #[test]
    fn combinations_spaces_and_fractions() {
        assert_eq!(parse("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1m30s500ms"), Ok(Duration::from_millis(90_500)));
        assert_eq!(parse("250 ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0.001s"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn bare_numbers_only_on_flags() {
        assert!(matches!(
            parse("10"),
            Err(DurationError::MissingUnit { .. })
        ));
        assert!(matches!(
            parse("1h30"),
            Err(DurationError::MissingUnit { .. })
        ));
        assert!(parse_flag("1h30").is_err());
    }

    #[test]
    fn errors_name_the_text_and_the_units() {
        let unknown = parse_flag("10 parsecs").unwrap_err();
        assert_eq!(
            unknown,
            "unknown unit `parsecs` in `10 parsecs` (units ms, s, m, h or d)"
        );
        let soon = parse_flag("soon").unwrap_err();
        assert!(
            soon.contains("`soon`") && soon.contains("ms, s, m, h or d"),
            "{soon}"
        );
        assert_eq!(
            parse("5w").unwrap_err().to_string(),
            "unknown unit `w` in `5w` (units ms, s, m, h or d)"
        );
        for bad in ["", "  ", "h", "1..5s", "-5s", "1h-30m", "1.2.3s", "s5"] {
            assert!(parse_flag(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn overflow_is_refused() {
        let huge = format!("{}s", u64::MAX);
        assert_eq!(parse(&huge), Ok(Duration::from_secs(u64::MAX)));
        for text in [
            format!("{}d", u64::MAX),
            format!("{}s1s", u64::MAX),
            "9".repeat(60) + "s",
        ] {
            assert!(
                matches!(parse(&text), Err(DurationError::Overflow { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn milliseconds() {
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("1m 30s"), Ok(90_000));
        assert!(parse_millis(&format!("{}s", u64::MAX)).is_err());
    }

    #[test]
    fn whole_seconds_refuse_fractions() {
        assert_eq!(secs("1.5m"), Ok(90));
        assert_eq!(secs("2000ms"), Ok(2));
        assert!(matches!(
            secs("1.5s"),
            Err(DurationError::NotWholeSeconds { .. })
        ));
    }

    #[test]
    fn formats() {
        assert_eq!(format_ms(250), "250ms");
        assert_eq!(format_ms(45_000), "45s");
        assert_eq!(format_ms(120_000), "2m");
        assert_eq!(format_ms(90_000), "1m 30s");
        assert_eq!(format_seconds(0), "0s");
        assert_eq!(format_seconds(129_600), "1d12h");
        assert_eq!(format_seconds(3725), "1h2m5s");
    }

    proptest! {
        #[test]
        fn whole_seconds_read_back(seconds in any::<u64>()) {
            prop_assert_eq!(secs(&format_seconds(seconds)), Ok(seconds));
        }

        #[test]
        fn short_waits_read_back(ms in prop_oneof![0u64..1000, (0u64..10_000_000).prop_map(|s| s * 1000)]) {
            prop_assert_eq!(parse(&format_ms(ms)), Ok(Duration::from_millis(ms)));
        }
    }
}
