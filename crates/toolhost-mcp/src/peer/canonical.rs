//! JSON as one string of bytes whatever order its maps keep, hashed: what
//! binds an answer to the arguments of the one call it was asked about
//! (a policy question in `server/round_trip.rs`, an upstream server's in
//! [`relay`](super::relay)).
//!
//! ```ignore
//! let a = arguments_digest(&serde_json::json!({"a": 1, "b": [true]}));
//! let b = arguments_digest(&serde_json::json!({"b": [true], "a": 1}));
//! assert_eq!(a, b);
//! ```

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A SHA-256 of `args` as canonical JSON: object keys sorted at every
/// level, compact, whatever order the map keeps them in.
pub(crate) fn arguments_digest(args: &Value) -> [u8; 32] {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    fn canonical(value: &Value, out: &mut Hashing) -> std::io::Result<()> {
        use std::io::Write;
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.write_all(b"{")?;
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    serde_json::to_writer(&mut *out, key)?;
                    out.write_all(b":")?;
                    if let Some(v) = map.get(key) {
                        canonical(v, out)?;
                    }
                }
                out.write_all(b"}")
            }
            Value::Array(items) => {
                out.write_all(b"[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    canonical(item, out)?;
                }
                out.write_all(b"]")
            }
            scalar => Ok(serde_json::to_writer(out, scalar)?),
        }
    }
    let mut out = Hashing(Sha256::new());
    // Writing into a hash does not fail; the depth is serde_json's
    // parsing limit, which every argument value passed.
    let _ = canonical(args, &mut out);
    out.0.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_ignores_key_order_and_sees_every_value() {
        let a = arguments_digest(&json!({"a": 1, "b": {"c": [true, null], "d": "x"}}));
        let b = arguments_digest(&json!({"b": {"d": "x", "c": [true, null]}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            arguments_digest(&json!({"a": 1, "b": {"c": [null, true], "d": "x"}}))
        );
        assert_ne!(arguments_digest(&json!("1")), arguments_digest(&json!(1)));
    }
}
