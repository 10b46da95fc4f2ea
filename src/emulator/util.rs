//! Small helpers: time, hashes, ids, JSON merging.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// RFC 3339 UTC with nanosecond digits, as GKE writes timestamps
/// (`2024-06-10T13:05:05.921000000Z`).
pub fn rfc3339(ms: u64) -> String {
    crate::vocab::time::format_nanos(crate::vocab::time::from_unix_ms(ms))
}

pub fn sha256_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A stable 12-digit project number for a project id (GKE links use the number).
pub fn project_number(project: &str) -> String {
    let h = sha256_hex(&["project-number", project]);
    let n = u64::from_str_radix(&h[..15], 16).unwrap_or(1) % 900_000_000_000 + 100_000_000_000;
    n.to_string()
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from a hash.
pub fn uuid_like(parts: &[&str]) -> String {
    let h = sha256_hex(parts);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Sets `obj[key]` only when absent.
pub fn default_key(obj: &mut Map<String, Value>, key: &str, v: Value) {
    if !obj.contains_key(key) {
        obj.insert(key.to_string(), v);
    }
}

/// The object at `obj[key]`, created when absent.
pub fn obj_at<'a>(obj: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("just made an object")
}

/// Percent-decoding for path segments and query strings (`+` is a space only in queries).
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%'
            && i + 3 <= bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
            out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
            i += 3;
            continue;
        }
        out.push(if b == b'+' && plus_is_space { b' ' } else { b });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_format() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339(1_718_024_305_921), "2024-06-10T12:58:25.921000000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000000000Z");
    }

    #[test]
    fn decoding() {
        assert_eq!(
            percent_decode("%24alt=json%3Benum-encoding%3Dint", true),
            "$alt=json;enum-encoding=int"
        );
        assert_eq!(percent_decode("a%3Ab+c%", false), "a:b+c%");
        assert_eq!(percent_decode("%zz%4", true), "%zz%4");
    }

    #[test]
    fn numbers() {
        let n = project_number("my-project");
        assert_eq!(n.len(), 12);
        assert_eq!(n, project_number("my-project"));
    }
}
