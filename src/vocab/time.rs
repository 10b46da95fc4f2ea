//! RFC 3339 timestamps as Kubernetes and GKE write them, through jiff (the time library
//! `k8s-openapi` already brings). Pure: callers read the clock and pass the instant in.

pub use k8s_openapi::jiff::Timestamp;

/// The instant `ms` milliseconds after the Unix epoch (the local target's and the emulator's
/// clocks); instants past jiff's range (year 9999) are clamped to its end.
pub fn from_unix_ms(ms: u64) -> Timestamp {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::MAX)
}

/// To the second, as Kubernetes writes `metav1.Time` (`2026-03-20T03:59:51Z`).
pub fn format_seconds(t: Timestamp) -> String {
    format!("{t:.0}")
}

/// With nine fraction digits, as GKE writes timestamps (`2024-06-10T13:05:05.921000000Z`).
pub fn format_nanos(t: Timestamp) -> String {
    format!("{t:.9}")
}

/// Parses an RFC 3339 timestamp with a `Z` or numeric offset (`2026-03-20T03:59:51Z`,
/// `2026-03-20T04:59:51.5+01:00`); `None` for anything else, and callers report the field.
pub fn parse(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_writes_seconds() {
        assert_eq!(format_seconds(from_unix_ms(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_seconds(from_unix_ms(1_773_979_191_999)),
            "2026-03-20T03:59:51Z"
        );
    }

    #[test]
    fn gke_writes_nanoseconds() {
        assert_eq!(
            format_nanos(from_unix_ms(1_718_024_305_921)),
            "2024-06-10T12:58:25.921000000Z"
        );
        assert_eq!(
            format_nanos(from_unix_ms(951_782_400_000)),
            "2000-02-29T00:00:00.000000000Z"
        );
    }

    #[test]
    fn parses_offsets_and_fractions() {
        let t = parse("2026-03-20T03:59:51Z").unwrap();
        assert_eq!(t.as_second(), 1_773_979_191);
        let offset = parse("2026-03-20T04:59:51.5+01:00").unwrap();
        assert_eq!(offset.as_second(), t.as_second());
        assert_eq!(offset.subsec_nanosecond(), 500_000_000);
        assert!(parse("yesterday").is_none());
        assert!(parse("2026-13-20T03:59:51Z").is_none());
        assert_eq!(from_unix_ms(u64::MAX), Timestamp::MAX);
    }
}
