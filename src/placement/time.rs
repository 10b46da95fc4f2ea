//! RFC 3339 timestamps (`metadata.creationTimestamp`), reduced to an orderable instant.

/// Seconds and nanoseconds since the Unix epoch, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    pub seconds: i64,
    pub nanos: u32,
}

impl Timestamp {
    /// Parses `2026-03-20T03:59:51Z`, with optional fraction and numeric offset. Returns `None`
    /// for anything else; callers report the field.
    pub fn parse(text: &str) -> Option<Timestamp> {
        let nanos = crate::vocab::time::parse(text)?.as_nanosecond();
        // Whole seconds round down, so the fraction is never negative (as Kubernetes orders).
        Some(Timestamp {
            seconds: i64::try_from(nanos.div_euclid(1_000_000_000)).ok()?,
            nanos: nanos.rem_euclid(1_000_000_000) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_timestamps() {
        let epoch = Timestamp::parse("1970-01-01T00:00:00Z").unwrap();
        assert_eq!(epoch.seconds, 0);
        let t = Timestamp::parse("2026-03-20T03:59:51Z").unwrap();
        assert_eq!(t.seconds, 1_773_979_191);
        let offset = Timestamp::parse("2026-03-20T04:59:51.5+01:00").unwrap();
        assert_eq!(offset.seconds, t.seconds);
        assert_eq!(offset.nanos, 500_000_000);
        assert!(Timestamp::parse("yesterday").is_none());
        assert!(Timestamp::parse("2026-13-20T03:59:51Z").is_none());
    }
}
