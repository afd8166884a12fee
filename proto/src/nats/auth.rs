//! How to reach NATS and as whom: [`NatsAuth`] (the settings and their checks, plain values in
//! `fedvol_common::nats_auth`; the `nats:` block of configuration files is read by
//! `fedvol_formats::nats`), and the one piece of it that needs I/O, reading a password file at
//! connection ([`password`]).

pub use fedvol_common::nats_auth::{NatsAuth, is_inbox_prefix, redact_url};

/// The password of `auth`: the one given, else the first line of its password file (trailing
/// whitespace removed).
///
/// Errors: the password file cannot be read, or is empty.
pub fn password(auth: &NatsAuth) -> Result<Option<String>, std::io::Error> {
    if auth.password.is_some() {
        return Ok(auth.password.clone());
    }
    let Some(f) = &auth.password_file else { return Ok(None) };
    let text = std::fs::read_to_string(f)?;
    let first = text.lines().next().unwrap_or_default().trim_end().to_string();
    if first.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        ));
    }
    Ok(Some(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon's password from a file of its own (the systemd unit's credential): read from
    /// the file's first line; a user with neither password nor file, or with both, refused.
    #[test]
    fn the_password_comes_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        let a = NatsAuth {
            user: Some("agent-c".into()),
            password_file: Some(f.clone()),
            ..NatsAuth::local()
        };
        assert!(a.check().is_empty(), "{:?}", a.check());
        assert_eq!(password(&a).unwrap().as_deref(), Some("s3cret"));
        let both = NatsAuth {
            password: Some("x".into()),
            ..a.clone()
        };
        assert!(both.check().join(" ").contains("not both"));
        let neither = NatsAuth {
            password_file: None,
            ..a.clone()
        };
        assert!(neither.check().join(" ").contains("must be given together"));
        std::fs::write(&f, "").unwrap();
        assert!(password(&a).is_err(), "an empty file is no password");
    }
}
