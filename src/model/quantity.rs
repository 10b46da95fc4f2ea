//! Kubernetes resource quantities (`500m`, `75Gi`, `1e3`), parsed exactly.

use std::cmp::Ordering;
use std::fmt;

/// A quantity as an exact number of thousandths (milli-units), so `500m`, `0.5` and `1/2 of 1`
/// compare equal without floating point. Values beyond ±1.7e35 are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    milli: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity `{text}`: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: String,
}

impl Quantity {
    pub fn from_milli(milli: i128) -> Self {
        Self { milli }
    }

    pub fn from_units(units: i64) -> Self {
        Self {
            milli: units as i128 * 1000,
        }
    }

    pub fn milli(&self) -> i128 {
        self.milli
    }

    /// Whole units, rounded up (Kubernetes rounds requests up).
    pub fn ceil_units(&self) -> i128 {
        self.milli.div_euclid(1000) + i128::from(self.milli.rem_euclid(1000) != 0)
    }

    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let err = |reason: &str| QuantityError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(err("it is empty"));
        }
        let (sign, body) = match t.as_bytes()[0] {
            b'-' => (-1i128, &t[1..]),
            b'+' => (1, &t[1..]),
            _ => (1, t),
        };
        let num_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(num_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err("it does not start with a number"));
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        // Decimal digits as an integer and a power-of-ten exponent.
        let digits = format!("{int_part}{frac_part}");
        let mut mantissa: i128 = digits
            .trim_start_matches('0')
            .parse::<i128>()
            .or_else(|e| {
                if digits.trim_start_matches('0').is_empty() {
                    Ok(0)
                } else {
                    Err(e)
                }
            })
            .map_err(|_| err("the number is too large"))?;
        let mut exp10: i32 = -(frac_part.len() as i32);
        let mut binary: u32 = 0;
        match suffix {
            "" => {}
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            "Ki" => binary = 10,
            "Mi" => binary = 20,
            "Gi" => binary = 30,
            "Ti" => binary = 40,
            "Pi" => binary = 50,
            "Ei" => binary = 60,
            s if s.starts_with(['e', 'E']) => {
                let e: i32 = s[1..]
                    .parse()
                    .map_err(|_| err("the exponent after `e` is not a whole number"))?;
                if !(-40..=40).contains(&e) {
                    return Err(err("the exponent is out of range"));
                }
                exp10 += e;
            }
            other => {
                return Err(err(&format!(
                    "unknown suffix `{other}` (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)"
                )));
            }
        }
        let overflow = || err("the number is too large");
        mantissa = mantissa.checked_mul(1i128 << binary).ok_or_else(overflow)?;
        // to milli-units
        exp10 += 3;
        let milli = if exp10 >= 0 {
            mantissa
                .checked_mul(10i128.checked_pow(exp10 as u32).ok_or_else(overflow)?)
                .ok_or_else(overflow)?
        } else {
            let div = 10i128.checked_pow((-exp10) as u32).unwrap_or(i128::MAX);
            // Kubernetes rounds up to the nearest milli-unit.
            mantissa / div + i128::from(mantissa % div != 0)
        };
        if milli > 10i128.pow(38) / 1000 {
            return Err(overflow());
        }
        Ok(Self {
            milli: sign * milli,
        })
    }

    pub fn is_negative(&self) -> bool {
        self.milli < 0
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Self) -> Self {
        Self {
            milli: self.milli.saturating_add(rhs.milli),
        }
    }
}

impl std::ops::Mul<i128> for Quantity {
    type Output = Quantity;
    fn mul(self, rhs: i128) -> Self {
        Self {
            milli: self.milli.saturating_mul(rhs),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli % 1000 == 0 {
            let units = self.milli / 1000;
            for (suffix, shift) in [
                ("Ei", 60),
                ("Pi", 50),
                ("Ti", 40),
                ("Gi", 30),
                ("Mi", 20),
                ("Ki", 10),
            ] {
                let unit = 1i128 << shift;
                if units != 0 && units % unit == 0 && units.abs() >= unit {
                    return write!(f, "{}{suffix}", units / unit);
                }
            }
            write!(f, "{units}")
        } else {
            write!(f, "{}m", self.milli)
        }
    }
}

impl PartialOrd<i64> for Quantity {
    fn partial_cmp(&self, other: &i64) -> Option<Ordering> {
        Some(self.milli.cmp(&(*other as i128 * 1000)))
    }
}

impl PartialEq<i64> for Quantity {
    fn eq(&self, other: &i64) -> bool {
        self.milli == *other as i128 * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_forms() {
        let q = |s| Quantity::parse(s).unwrap().milli();
        assert_eq!(q("500m"), 500);
        assert_eq!(q("0.5"), 500);
        assert_eq!(q("2"), 2000);
        assert_eq!(q("4Gi"), 4 * 1024 * 1024 * 1024 * 1000);
        assert_eq!(q("1e3"), 1_000_000);
        assert_eq!(q("1k"), 1_000_000);
        assert_eq!(q("1000000000Gi"), 1_000_000_000i128 * (1 << 30) * 1000);
        assert_eq!(q("0.1m"), 1);
    }

    #[test]
    fn rejects_bad_forms() {
        for bad in ["20Gii", "", "Gi", "1.2.3", "abc", "5 Gi", "1e", "--1"] {
            assert!(Quantity::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn displays_compactly() {
        assert_eq!(Quantity::parse("16Gi").unwrap().to_string(), "16Gi");
        assert_eq!(Quantity::parse("1500m").unwrap().to_string(), "1500m");
        assert_eq!(Quantity::parse("40").unwrap().to_string(), "40");
    }
}
