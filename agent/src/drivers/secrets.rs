//! Keeping secrets out of logs, and resolving secret references (docs/design.md §7: driver secrets are
//! references and never appear in decisions, logs or errors).
//!
//! The inventory parser already refuses an inline value for a parameter whose key looks like a
//! credential ([`fedvol_common::secrets`]), so parameters hold `file:`/`env:` references. The
//! agent passes them to external provisioners **unresolved**: the secret is read only by the
//! provisioner that needs it ([`resolve`]), on its own host, so its value never crosses NATS
//! and never reaches the agent, the coordinator, a decision or an event.

use std::collections::BTreeMap;
use std::fmt;

pub use fedvol_common::secrets::{SECRET_WORDS, SecretRef, looks_secret, must_be_reference, shown_value};

/// The largest secret file [`resolve`] reads, bytes (64 KiB).
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// Why a secret reference could not be resolved. Each names the reference (path or variable
/// name) and never the value.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The file is missing or unreadable.
    #[error("cannot read secret {reference}: {source}")]
    Unreadable {
        /// The reference.
        reference: SecretRef,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_SECRET_FILE_BYTES`].
    #[error("secret {0} is larger than {MAX_SECRET_FILE_BYTES} bytes")]
    TooLarge(SecretRef),
    /// The file is not UTF-8 text.
    #[error("secret {0} is not UTF-8 text")]
    NotText(SecretRef),
    /// The variable is not set (or not UTF-8).
    #[error("secret {0} is not set (or not UTF-8)")]
    NotSet(SecretRef),
    /// The secret is empty.
    #[error("secret {0} is empty")]
    Empty(SecretRef),
}

/// Reads the secret `r` points to: the file's content without one trailing newline (`\n` or
/// `\r\n`), or the environment variable's value. For the party that uses the secret (an
/// out-of-tree provisioner), never for logging.
///
/// Errors: [`ResolveError`] — missing, unreadable, empty, larger than
/// [`MAX_SECRET_FILE_BYTES`], not UTF-8 — naming the reference, never the value.
pub fn resolve(r: &SecretRef) -> Result<String, ResolveError> {
    use std::io::Read;
    let unreadable = |source| ResolveError::Unreadable {
        reference: r.clone(),
        source,
    };
    let value = match r {
        SecretRef::File(path) => {
            let f = std::fs::File::open(path).map_err(unreadable)?;
            let mut bytes = Vec::new();
            f.take(MAX_SECRET_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(unreadable)?;
            if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
                return Err(ResolveError::TooLarge(r.clone()));
            }
            let mut text = String::from_utf8(bytes).map_err(|_| ResolveError::NotText(r.clone()))?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            text
        }
        SecretRef::Env(name) => std::env::var(name).map_err(|_| ResolveError::NotSet(r.clone()))?,
    };
    if value.is_empty() {
        return Err(ResolveError::Empty(r.clone()));
    }
    Ok(value)
}

/// Parameters for logging: `Debug` and `Display` print every key, and the value only as
/// [`shown_value`] allows (known non-secret keys, keys naming a secret kept elsewhere, secret
/// references); `<redacted>` otherwise.
pub struct Redacted<'a>(pub &'a BTreeMap<String, String>);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match shown_value(k, v) {
                "<redacted>" => write!(f, "{k:?}: <redacted>")?,
                shown => write!(f, "{k:?}: {shown:?}")?,
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
    fn resolve_reads_files_and_env_and_never_echoes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "t0k3n-value\n").unwrap();
        let r = SecretRef::File(f.display().to_string());
        assert_eq!(resolve(&r).unwrap(), "t0k3n-value");
        std::fs::write(&f, "").unwrap();
        let e = resolve(&r).unwrap_err().to_string();
        assert!(e.contains("is empty") && e.contains("file:/"), "{e}");
        std::fs::write(&f, vec![b'x'; MAX_SECRET_FILE_BYTES as usize + 1]).unwrap();
        assert!(resolve(&r).unwrap_err().to_string().contains("larger than"));
        let missing = SecretRef::File(dir.path().join("nope").display().to_string());
        assert!(
            resolve(&missing)
                .unwrap_err()
                .to_string()
                .contains("cannot read secret file:")
        );
        let e = resolve(&SecretRef::Env("FEDVOL_TEST_SURELY_UNSET_VARIABLE".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("env:FEDVOL_TEST_SURELY_UNSET_VARIABLE is not set"), "{e}");
        // PATH is always set in a test process.
        assert!(!resolve(&SecretRef::Env("PATH".into())).unwrap().is_empty());
    }

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
        let refs: BTreeMap<String, String> = [("token".to_string(), "env:NFS_TOKEN".to_string())].into();
        assert_eq!(Redacted(&refs).to_string(), "{\"token\": \"env:NFS_TOKEN\"}");
    }
}
