//! Kubernetes `resource.Quantity`: parsing, exact comparison and canonical formatting.
//!
//! This mirrors `k8s.io/apimachinery/pkg/api/resource` (v0.36): the same grammar
//! (`[+-]digits[.digits][suffix]`, suffixes `n u m k M G T P E`, `Ki .. Ei` and exponents such
//! as `e3`), the same rounding (a non-zero value below one nano-unit rounds *up*, away from
//! zero), the same cap for binary quantities (2^63-1) and the same canonical `String()` form
//! (`1000m` prints as `1`, `1024Mi` as `1Gi`, `1.5` as `1500m`).
//!
//! Values are held exactly as a signed count of nano-units in an `i128`, so comparisons never
//! involve floating point. The one intentional difference from Kubernetes: magnitudes above
//! 10^27 units (far beyond any real quota; Kubernetes itself only keeps 2^63-1 for binary
//! quantities) are rejected with [`QuantityError::TooLarge`] instead of being carried in
//! arbitrary precision.
//!
//! It is vocabulary, not placement's: placement, spec validation, diff normalisation and the
//! local simulator all compare quantities by value with it (`"1000m" == "1"`, `"0.5" == "500m"`).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;
/// Largest magnitude accepted, in nano-units (10^27 units).
const MAX_NANOS: i128 = 1_000_000_000_000_000_000_000_000_000_000_000_000;
/// Kubernetes caps binary-SI quantities at `math.MaxInt64` units.
const MAX_BINARY_UNITS: i128 = i64::MAX as i128;

/// How Kubernetes prints a quantity; remembered from the suffix it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Format {
    /// `m`, `k`, `M`, `G`, ... or no suffix.
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`, ...
    BinarySI,
    /// `e3`, `E-6`, ...
    DecimalExponent,
}

/// Why a string is not a Kubernetes quantity. Each variant carries the offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("invalid quantity \"\": a quantity cannot be empty")]
    Empty,
    #[error(
        "invalid quantity {input:?}: expected a number with an optional suffix, like 500m, 4Gi, 20G or 1e3 ({detail})"
    )]
    Format { input: String, detail: String },
    #[error(
        "invalid quantity {input:?}: unknown suffix {suffix:?}; expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3"
    )]
    Suffix { input: String, suffix: String },
    #[error("invalid quantity {input:?}: magnitude above 10^27 is not supported")]
    TooLarge { input: String },
    #[error("invalid quantity {input}: expected a string or a number")]
    NotAQuantity { input: String },
}

/// A Kubernetes resource quantity with exact value semantics.
///
/// Equality, ordering and hashing use the value only (`"1Gi" == "1024Mi"`), as
/// `Quantity.Cmp` does in Kubernetes; the format only affects printing.
#[derive(Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl Quantity {
    /// Zero, printed as `0`.
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// Parses a quantity exactly as `resource.ParseQuantity` does (no surrounding whitespace).
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        parse_quantity(input)
    }

    /// Reads a quantity from a JSON value: a string, or a number (YAML `nominalQuota: 10`).
    /// Whitespace around a string is trimmed, as `Quantity.UnmarshalJSON` does.
    pub fn from_json(value: &Value) -> Result<Quantity, QuantityError> {
        match value {
            Value::String(s) => parse_quantity(s.trim()),
            Value::Number(n) => parse_quantity(&n.to_string()),
            other => Err(QuantityError::NotAQuantity {
                input: other.to_string(),
            }),
        }
    }

    /// `units` whole units in the given format (like `resource.NewQuantity`).
    pub fn from_units(units: i128, format: Format) -> Quantity {
        Quantity {
            nanos: units.saturating_mul(NANO).clamp(-MAX_NANOS, MAX_NANOS),
            format,
        }
    }

    /// `milli` thousandths of a unit (like `resource.NewMilliQuantity`).
    pub fn from_milli(milli: i128, format: Format) -> Quantity {
        Quantity {
            nanos: milli.saturating_mul(1_000_000).clamp(-MAX_NANOS, MAX_NANOS),
            format,
        }
    }

    /// The exact value in nano-units (10^-9).
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whole units, rounded up away from zero (`Quantity.Value()`).
    pub fn value(&self) -> i128 {
        div_ceil_away(self.nanos, NANO)
    }

    /// Thousandths, rounded up away from zero (`Quantity.MilliValue()`).
    pub fn milli_value(&self) -> i128 {
        div_ceil_away(self.nanos, 1_000_000)
    }

    /// An approximation for display (bar widths); never use it to compare.
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    /// Sum; the format of `self` is kept (as `Quantity.Add` does). Saturates at the supported range.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self
                .nanos
                .saturating_add(other.nanos)
                .clamp(-MAX_NANOS, MAX_NANOS),
            format: self.format,
        }
    }

    /// Difference; the format of `self` is kept. Saturates at the supported range.
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self
                .nanos
                .saturating_sub(other.nanos)
                .clamp(-MAX_NANOS, MAX_NANOS),
            format: self.format,
        }
    }

    /// The larger of two quantities (by value); ties keep `self`.
    pub fn max_by_value(self, other: Quantity) -> Quantity {
        if other.nanos > self.nanos {
            other
        } else {
            self
        }
    }

    /// The same value, printed in `format` (`Quantity.Format` set to it).
    pub fn in_format(self, format: Format) -> Quantity {
        Quantity { format, ..self }
    }

    /// The canonical Kubernetes string (`Quantity.String()` after canonicalisation).
    pub fn to_canonical_string(&self) -> String {
        canonical_string(self.nanos, self.format)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({})", self.to_canonical_string())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_canonical_string())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Quantity::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// Division rounding up away from zero (Kubernetes' `RoundUp`).
fn div_ceil_away(value: i128, divisor: i128) -> i128 {
    // 64-bit division is much cheaper than a 128-bit library call; most values fit.
    if let (Ok(value), Ok(divisor)) = (i64::try_from(value), i64::try_from(divisor)) {
        let quotient = value / divisor;
        let adjusted = if value % divisor == 0 {
            quotient
        } else if value > 0 {
            quotient + 1
        } else {
            quotient - 1
        };
        return i128::from(adjusted);
    }
    let quotient = value / divisor;
    if value % divisor == 0 {
        quotient
    } else if value > 0 {
        quotient + 1
    } else {
        quotient - 1
    }
}

struct Parts<'a> {
    negative: bool,
    integer: &'a str,
    fraction: &'a str,
    suffix: &'a str,
}

/// Splits a quantity the way `parseQuantityString` does, including its quirks: `.` and `-`
/// alone parse as zero, `1.` and `.5` are accepted.
fn split_quantity(input: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = input.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut negative = false;
    if let Some(&first) = bytes.first() {
        if first == b'-' {
            negative = true;
            pos += 1;
        } else if first == b'+' {
            pos += 1;
        }
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            negative,
            integer: "0",
            fraction: "",
            suffix: "",
        });
    }
    let integer_start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let integer = &input[integer_start..pos];
    let mut fraction = "";
    if pos < end && bytes[pos] == b'.' {
        pos += 1;
        let fraction_start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        fraction = &input[fraction_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        let offending = input[pos..].chars().next().unwrap_or(' ');
        return Err(QuantityError::Format {
            input: input.to_string(),
            detail: format!("unexpected {offending:?} at byte {pos}"),
        });
    }
    Ok(Parts {
        negative,
        integer: if integer.is_empty() { "0" } else { integer },
        fraction,
        suffix: &input[suffix_start..],
    })
}

enum Scale {
    /// Multiply by 10^exponent.
    Decimal(i64),
    /// Multiply by 2^exponent.
    Binary(u32),
}

fn interpret_suffix(suffix: &str) -> Option<(Scale, Format)> {
    let decimal = |exponent| Some((Scale::Decimal(exponent), Format::DecimalSI));
    let binary = |exponent| Some((Scale::Binary(exponent), Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            if rest.is_empty() {
                return None;
            }
            // Kubernetes parses the exponent as int64 then narrows it to int32.
            let exponent: i64 = rest.parse().ok()?;
            Some((Scale::Decimal(exponent), Format::DecimalExponent))
        }
    }
}

/// Parses a run of ASCII digits into an `i128`, or `None` on overflow.
fn digits_to_i128(digits: &str) -> Option<i128> {
    let mut value: i128 = 0;
    for byte in digits.bytes() {
        value = value
            .checked_mul(10)?
            .checked_add(i128::from(byte - b'0'))?;
    }
    Some(value)
}

fn pow10(exponent: u32) -> Option<i128> {
    10i128.checked_pow(exponent)
}

/// `digits × 10^exponent` in nano-units, rounded up away from zero; `None` when too large.
fn decimal_nanos(digits: &str, exponent: i64) -> Option<i128> {
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let shift = exponent.checked_add(9)?;
    if shift >= 0 {
        let shift = u32::try_from(shift).ok()?;
        let factor = pow10(shift)?;
        return digits_to_i128(digits)?.checked_mul(factor);
    }
    // Drop the digits below one nano-unit; any non-zero dropped digit rounds up.
    let drop = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
    if drop >= digits.len() {
        return Some(1);
    }
    let (kept, dropped) = digits.split_at(digits.len() - drop);
    let kept = digits_to_i128(kept)?;
    if dropped.bytes().any(|b| b != b'0') {
        kept.checked_add(1)
    } else {
        Some(kept)
    }
}

/// `digits / 10^fraction_len × 2^exponent` in nano-units, rounded up; `None` when too large.
fn binary_nanos(digits: &str, fraction_len: usize, exponent: u32) -> Option<i128> {
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let numerator = digits_to_i128(digits)?
        .checked_mul(1i128.checked_shl(exponent)?)?
        .checked_mul(NANO)?;
    let denominator = pow10(u32::try_from(fraction_len).ok()?)?;
    Some(div_ceil_away(numerator, denominator))
}

fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::Empty);
    }
    let parts = split_quantity(input)?;
    let Some((scale, mut format)) = interpret_suffix(parts.suffix) else {
        return Err(QuantityError::Suffix {
            input: input.to_string(),
            suffix: parts.suffix.to_string(),
        });
    };
    let too_large = || QuantityError::TooLarge {
        input: input.to_string(),
    };
    let digits = format!("{}{}", parts.integer, parts.fraction);
    let magnitude = match scale {
        Scale::Decimal(exponent) => {
            // The exponent Kubernetes keeps is an int32.
            let exponent = i64::from(exponent as i32);
            let fraction_len = i64::try_from(parts.fraction.len()).map_err(|_| too_large())?;
            decimal_nanos(&digits, exponent - fraction_len).ok_or_else(too_large)?
        }
        Scale::Binary(exponent) => {
            match binary_nanos(&digits, parts.fraction.len(), exponent) {
                Some(nanos) => nanos.min(MAX_BINARY_UNITS * NANO),
                // Anything that overflows i128 is far above the binary cap.
                None => MAX_BINARY_UNITS * NANO,
            }
        }
    };
    if magnitude > MAX_NANOS {
        return Err(too_large());
    }
    if format == Format::BinarySI && magnitude > 0 && magnitude < NANO {
        format = Format::DecimalSI;
    }
    let nanos = if parts.negative {
        -magnitude
    } else {
        magnitude
    };
    Ok(Quantity { nanos, format })
}

/// Removes factors of `base` from `value`, returning the rest and how many were removed.
fn remove_factors(mut value: i128, base: i128, max: u32) -> (i128, u32) {
    let mut times = 0;
    while value != 0 && value % base == 0 && times < max {
        value /= base;
        times += 1;
    }
    (value, times)
}

fn canonical_string(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    let mut format = format;
    if format == Format::BinarySI && (nanos.abs() < 1024 * NANO || nanos % NANO != 0) {
        // Kubernetes prints small or fractional binary quantities as decimal.
        format = Format::DecimalSI;
    }
    if format == Format::BinarySI {
        let (mantissa, times) = remove_factors(nanos / NANO, 1024, 6);
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][times as usize];
        return format!("{mantissa}{suffix}");
    }
    // Decimal: strip factors of ten, then align the exponent on a multiple of three.
    let (mut mantissa, times) = remove_factors(nanos, 10, u32::MAX);
    let mut exponent = i64::from(times) - 9;
    while exponent.rem_euclid(3) != 0 {
        mantissa *= 10;
        exponent -= 1;
    }
    let suffix = match (format, exponent) {
        (Format::DecimalExponent, 0) => String::new(),
        (Format::DecimalExponent, e) => format!("e{e}"),
        (_, -9) => "n".to_string(),
        (_, -6) => "u".to_string(),
        (_, -3) => "m".to_string(),
        (_, 0) => String::new(),
        (_, 3) => "k".to_string(),
        (_, 6) => "M".to_string(),
        (_, 9) => "G".to_string(),
        (_, 12) => "T".to_string(),
        (_, 15) => "P".to_string(),
        (_, 18) => "E".to_string(),
        // Kubernetes has no SI suffix beyond E and prints a wrong value here; an exponent is exact.
        (_, e) => format!("e{e}"),
    };
    format!("{mantissa}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_and_prints_canonically() {
        for (input, canonical) in [
            ("500m", "500m"),
            ("4Gi", "4Gi"),
            ("1e3", "1e3"),
            ("20G", "20G"),
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Ki", "512"),
            ("10", "10"),
            ("1000000000Gi", "1000000000Gi"),
            ("-1Gi", "-1Gi"),
            ("0", "0"),
            ("1n", "1n"),
            ("1e-10", "1e-9"),
        ] {
            assert_eq!(q(input).to_canonical_string(), canonical, "{input}");
        }
    }

    #[test]
    fn compares_by_value() {
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert!(q("20G") < q("20Gi"));
        assert!(q("500m") < q("1"));
    }

    #[test]
    fn rejects_bad_suffix_precisely() {
        let err = Quantity::parse("20Gii").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid quantity \"20Gii\": unknown suffix \"Gii\"; expected one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3"
        );
        assert!(matches!(
            Quantity::parse("abc"),
            Err(QuantityError::Format { .. })
        ));
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
    }

    #[test]
    fn values_round_up_like_kubernetes() {
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("0.1m").milli_value(), 1);
        assert_eq!(q("-1500m").value(), -2);
    }

    #[test]
    fn reads_json_numbers() {
        assert_eq!(
            Quantity::from_json(&serde_json::json!(10)).unwrap(),
            q("10")
        );
        assert_eq!(
            Quantity::from_json(&serde_json::json!(0.5)).unwrap(),
            q("500m")
        );
        assert_eq!(
            Quantity::from_json(&serde_json::json!(" 2Gi ")).unwrap(),
            q("2Gi")
        );
    }
}
