//! Kueue's integer quota arithmetic (`pkg/resources/amount.go`, `resource_formatter.go`).
//!
//! Kueue converts every quantity to an `int64` before doing quota math: CPU in millicores,
//! everything else in whole units, both rounded up (`ResourceValue`). Quotas that do not fit
//! become the `Unlimited` sentinel and arithmetic saturates instead of wrapping. Reproducing
//! this exactly matters for the borderline cases ("16 more needed") and for the seed's
//! "infinite" DWS quota of `1000000000Gi`.

use std::fmt;

use crate::vocab::quantity::{Format, Quantity};

/// The Kubernetes CPU resource name; the only resource Kueue counts in thousandths.
pub const CPU: &str = "cpu";
/// The memory resource name; printed in binary units.
pub const MEMORY: &str = "memory";
/// The pod-count resource; a ClusterQueue covering it charges `count` per podset.
pub const PODS: &str = "pods";

/// A quota amount in Kueue units (millicores for `cpu`, base units otherwise), with an
/// `Unlimited` sentinel, exactly like Kueue's `resources.Amount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Amount(i64);

impl Amount {
    pub const ZERO: Amount = Amount(0);
    /// Kueue's `Unlimited`: any sum involving it stays unlimited.
    pub const UNLIMITED: Amount = Amount(i64::MAX);

    pub const fn new(value: i64) -> Amount {
        Amount(value)
    }

    pub fn is_unlimited(self) -> bool {
        self.0 == i64::MAX
    }

    /// The raw value; `i64::MAX` when unlimited.
    pub fn get(self) -> i64 {
        self.0
    }

    /// The quota amount of a quantity for `resource` (`AmountFromQuantity`).
    pub fn from_quota(resource: &str, quantity: Quantity) -> Amount {
        let value = if resource == CPU {
            quantity.milli_value()
        } else {
            quantity.value()
        };
        if value >= i128::from(i64::MAX) {
            Amount::UNLIMITED
        } else {
            Amount(value.max(i128::from(i64::MIN)) as i64)
        }
    }

    /// Kueue's `Add`: saturating addition that keeps `Unlimited`.
    pub fn plus(self, other: Amount) -> Amount {
        if self.is_unlimited() || other.is_unlimited() {
            return Amount::UNLIMITED;
        }
        Amount(self.0.saturating_add(other.0))
    }

    /// Adds a bounded request value.
    pub fn add_value(self, value: i64) -> Amount {
        if self.is_unlimited() {
            return self;
        }
        Amount(self.0.saturating_add(value))
    }

    /// Kueue's `Sub`: `Unlimited - x = Unlimited`, `x - Unlimited = i64::MIN`,
    /// `Unlimited - Unlimited = 0`.
    pub fn minus(self, other: Amount) -> Amount {
        match (self.is_unlimited(), other.is_unlimited()) {
            (true, true) => Amount(0),
            (true, false) => Amount::UNLIMITED,
            (false, true) => Amount(i64::MIN),
            (false, false) => Amount(self.0.saturating_sub(other.0)),
        }
    }

    pub fn min(self, other: Amount) -> Amount {
        if self <= other { self } else { other }
    }

    pub fn max(self, other: Amount) -> Amount {
        if self >= other { self } else { other }
    }
}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // i64::MAX is both the sentinel and the largest value, so plain ordering is Kueue's Cmp.
        self.0.cmp(&other.0)
    }
}

/// A request value for `resource` (`ResourceValue`): millicores for CPU, units otherwise,
/// rounded up and clamped to `i64`.
pub fn request_value(resource: &str, quantity: Quantity) -> i64 {
    let value = if resource == CPU {
        quantity.milli_value()
    } else {
        quantity.value()
    };
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The quantity Kueue prints for an amount of `resource` (`ResourceFormatter.ResourceQuantity`):
/// CPU as millicores in decimal SI, memory, ephemeral storage and hugepages in canonical binary SI,
/// everything else in decimal SI.
pub fn quantity_of(resource: &str, value: i64) -> Quantity {
    if resource == CPU {
        return Quantity::from_milli(i128::from(value), Format::DecimalSI);
    }
    let binary =
        resource == MEMORY || resource == "ephemeral-storage" || resource.starts_with("hugepages-");
    let format = if binary {
        Format::BinarySI
    } else {
        Format::DecimalSI
    };
    Quantity::from_units(i128::from(value), format)
}

/// Kueue's `AmountQuantityString`: `<unlimited>` for the sentinel, else the quantity string.
///
/// Equal to `quantity_of(resource, value).to_canonical_string()`, computed on `i64` because
/// messages for large queues format many amounts.
pub fn format_amount(resource: &str, amount: Amount) -> String {
    if amount.is_unlimited() {
        return "<unlimited>".to_string();
    }
    let value = amount.0;
    if value == 0 {
        return "0".to_string();
    }
    if resource == CPU {
        return decimal_si(value, -3);
    }
    let binary =
        resource == MEMORY || resource == "ephemeral-storage" || resource.starts_with("hugepages-");
    if binary && value.unsigned_abs() >= 1024 {
        let mut mantissa = value;
        let mut times = 0;
        while times < 6 && mantissa % 1024 == 0 {
            mantissa /= 1024;
            times += 1;
        }
        return format!(
            "{mantissa}{}",
            ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][times]
        );
    }
    decimal_si(value, 0)
}

/// Canonical decimal-SI text of `mantissa × 10^exponent` (non-zero).
fn decimal_si(mut mantissa: i64, mut exponent: i64) -> String {
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    // Align on a multiple of three; i128 keeps the widened mantissa exact.
    let mut wide = i128::from(mantissa);
    while exponent.rem_euclid(3) != 0 {
        wide *= 10;
        exponent -= 1;
    }
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return format!("{wide}e{exponent}"),
    };
    format!("{wide}{suffix}")
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unlimited() {
            f.write_str("<unlimited>")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn converts_like_kueue() {
        assert_eq!(Amount::from_quota("cpu", q("40")), Amount::new(40_000));
        assert_eq!(
            Amount::from_quota("memory", q("1000000000Gi")),
            Amount::new(1_073_741_824_000_000_000)
        );
        assert_eq!(Amount::from_quota("memory", q("8Ei")), Amount::UNLIMITED);
        assert_eq!(request_value("cpu", q("2500m")), 2500);
        assert_eq!(request_value("memory", q("0.5")), 1);
    }

    #[test]
    fn formats_like_kueue() {
        assert_eq!(format_amount("cpu", Amount::new(24_000)), "24");
        assert_eq!(format_amount("cpu", Amount::new(2_500)), "2500m");
        assert_eq!(format_amount("memory", Amount::new(68_719_476_736)), "64Gi");
        assert_eq!(format_amount("memory", Amount::new(1_000)), "1k");
        assert_eq!(format_amount("google.com/tpu", Amount::new(16)), "16");
        assert_eq!(
            format_amount("google.com/tpu", Amount::UNLIMITED),
            "<unlimited>"
        );
    }

    #[test]
    fn fast_formatting_matches_quantity_formatting() {
        for resource in ["cpu", "memory", "google.com/tpu", "hugepages-2Mi"] {
            for value in [
                1,
                7,
                500,
                999,
                1000,
                1024,
                1500,
                2048,
                2500,
                24_000,
                68_719_476_736,
                1_000_000_000,
                1_073_741_824_000_000_000,
                -1500,
                -1024,
                i64::MAX - 1,
            ] {
                assert_eq!(
                    format_amount(resource, Amount::new(value)),
                    quantity_of(resource, value).to_canonical_string(),
                    "{resource} {value}"
                );
            }
        }
    }

    #[test]
    fn saturates_like_kueue() {
        assert_eq!(Amount::UNLIMITED.plus(Amount::new(5)), Amount::UNLIMITED);
        assert_eq!(
            Amount::new(5).minus(Amount::UNLIMITED),
            Amount::new(i64::MIN)
        );
        assert_eq!(Amount::UNLIMITED.minus(Amount::UNLIMITED), Amount::ZERO);
        assert_eq!(Amount::new(i64::MAX - 1).add_value(10), Amount::UNLIMITED);
    }
}
