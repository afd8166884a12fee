//! Keeping secrets out of logs: storage class parameters may carry credentials (DESIGN §6:
//! driver secrets never appear in decisions, logs or errors).

use std::collections::BTreeMap;
use std::fmt;

/// Words that make a parameter key look secret (matched case-insensitively anywhere in the key).
pub const SECRET_WORDS: [&str; 5] = ["password", "secret", "token", "key", "credential"];

/// True when a parameter named `key` may hold a secret (`csi.storage.k8s.io/node-stage-secret-name`,
/// `apiKey`, `AUTH_TOKEN`...). Errs on the side of hiding.
pub fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| k.contains(w))
}

/// Parameters for logging: `Debug` and `Display` print every key, and the value only when the
/// key does not [look secret](looks_secret) (`<redacted>` otherwise).
pub struct Redacted<'a>(pub &'a BTreeMap<String, String>);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if looks_secret(k) {
                write!(f, "{k:?}: <redacted>")?;
            } else {
                write!(f, "{k:?}: {v:?}")?;
            }
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_never_print() {
        let p: BTreeMap<String, String> = [
            ("type", "gp3"),
            ("csi.storage.k8s.io/provisioner-secret-name", "s3cr3t-a"),
            ("apiKey", "s3cr3t-b"),
            ("Password", "s3cr3t-c"),
            ("authToken", "s3cr3t-d"),
            ("credentials", "s3cr3t-e"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let shown = format!("{} {:?}", Redacted(&p), Redacted(&p));
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("\"type\": \"gp3\""), "{shown}");
        assert!(shown.contains("\"apiKey\": <redacted>"), "{shown}");
    }
}
