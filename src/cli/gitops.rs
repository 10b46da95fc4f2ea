//! The flags the commands that apply share: `--lock-timeout` and its duration grammar.

use std::time::Duration;

use clap::Args;

/// `--lock-timeout`, shared by the commands that apply.
#[derive(Debug, Args, Clone, Default)]
pub struct LockArgs {
    /// How long to wait when another apply holds the cluster's lock (`30s`, `10m`); 0 fails at
    /// once, naming the holder (on the local target after waiting out holds of a moment).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub lock_timeout: Duration,
}

/// Parses `250ms`, `30s`, `10m`, `2h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (use 30s, 10m, 2h or 250ms)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use ms, s, m or h)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
