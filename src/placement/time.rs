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
        let bytes = text.as_bytes();
        if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' {
            return None;
        }
        if !matches!(bytes[10], b'T' | b't' | b' ') || bytes[16] != b':' {
            return None;
        }
        let number = |range: std::ops::Range<usize>| -> Option<i64> {
            let part = text.get(range)?;
            if !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
        let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
            return None;
        }
        if second > 60 {
            return None;
        }
        let mut rest = &text[19..];
        let mut nanos: u32 = 0;
        if let Some(fraction) = rest.strip_prefix('.') {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let mut scaled = String::from(&fraction[..digits.min(9)]);
            while scaled.len() < 9 {
                scaled.push('0');
            }
            nanos = scaled.parse().ok()?;
            rest = &fraction[digits..];
        }
        let offset_seconds = match rest {
            "Z" | "z" => 0,
            _ => {
                let sign = match rest.as_bytes().first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                    return None;
                }
                let hours: i64 = rest.get(1..3)?.parse().ok()?;
                let minutes: i64 = rest.get(4..6)?.parse().ok()?;
                sign * (hours * 3600 + minutes * 60)
            }
        };
        let days = days_from_civil(year, month, day);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
        Some(Timestamp { seconds, nanos })
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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
