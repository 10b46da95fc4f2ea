//! The ids and times the store stamps on objects.

use sha2::{Digest, Sha256};

/// RFC 3339 with second precision, as Kubernetes writes `metadata.creationTimestamp`.
pub fn timestamp(ms: u64) -> String {
    crate::vocab::time::format_seconds(crate::vocab::time::from_unix_ms(ms))
}

/// A UUID-shaped id derived from `seed`.
pub fn uid(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
