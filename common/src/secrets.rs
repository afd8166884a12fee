//! Driver secrets are references, never values (docs/design.md §7).
//!
//! A storage class (driver) parameter whose key [looks secret](looks_secret) must hold a
//! [`SecretRef`]: `file:/absolute/path` (the secret is the file's content) or `env:NAME` (the
//! secret is that environment variable's value). The reference travels everywhere a parameter
//! does (inventory, the agent's `inventory` endpoint, the external provisioner's request); only
//! the party that uses the secret resolves it, so the value itself never crosses NATS and never
//! lands in a decision, an event, a log line or an error. Resolving needs I/O and lives with the
//! agent (`fedvol_agent::drivers::secrets::resolve`).
//!
//! Two kinds of secret-looking keys hold no secret and are taken as they are: keys that *name*
//! a secret kept elsewhere (Kubernetes CSI `…-secret-name` / `…-secret-namespace`, whose value
//! is the name of a Kubernetes Secret) and keys that *identify* a key (`kmsKeyId`, `key-id`).

use std::fmt;

/// Words that make a parameter key look secret (matched case-insensitively anywhere in the key).
/// Widened (`passwd`, `auth`... passed as plain values before): it errs on the side
/// of asking for a reference.
pub const SECRET_WORDS: [&str; 12] = [
    "password", "passwd", "pwd", "pass", "secret", "token", "key", "cred", "auth", "private", "bearer", "sas",
];

/// Parameter keys (lowercased) known to hold no secret, whose values logs and the agent's
/// `inventory` endpoint may show; every other value is shown as `<redacted>` unless it is a
/// secret reference ([`shown_value`]).
pub const NON_SECRET_KEYS: [&str; 16] = [
    "type",
    "fstype",
    "csi.storage.k8s.io/fstype",
    "mode",
    "iops",
    "iopspergb",
    "throughput",
    "encrypted",
    "blockexpress",
    "allowautoiopspergbincrease",
    "clusterid",
    "pool",
    "imagefeatures",
    "fsname",
    "skuname",
    "protocol",
];

/// What logs and reports may show of parameter `key`'s `value` (never a value that
/// might be a secret): the value for a [known non-secret key](NON_SECRET_KEYS) or a secret
/// reference; `<redacted>` otherwise (the name of a Kubernetes Secret too: it errs on hiding).
pub fn shown_value<'a>(key: &str, value: &'a str) -> &'a str {
    let k = key.to_ascii_lowercase();
    if NON_SECRET_KEYS.contains(&k.as_str()) || SecretRef::parse(value).is_ok() {
        value
    } else {
        "<redacted>"
    }
}

/// Endings (of the key lowercased, with `-`, `_`, `.` and `/` removed) of keys that name or
/// identify a secret rather than hold one; their values may be written inline.
pub const NAMING_SUFFIXES: [&str; 4] = ["secretname", "secretnamespace", "keyid", "keyname"];

/// True when a parameter named `key` may hold a secret (`csi.storage.k8s.io/node-stage-secret-name`,
/// `apiKey`, `AUTH_TOKEN`...). Errs on the side of hiding: used to redact values in logs.
pub fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| k.contains(w))
}

/// True when `key` names or identifies a secret kept elsewhere (see [`NAMING_SUFFIXES`]):
/// `csi.storage.k8s.io/provisioner-secret-name`, `…-secret-namespace`, `kmsKeyId`.
pub fn names_a_secret(key: &str) -> bool {
    let squashed: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | '/'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    NAMING_SUFFIXES.iter().any(|s| squashed.ends_with(s))
}

/// True when the value of parameter `key` must be a [`SecretRef`]: the key
/// [looks secret](looks_secret) and does not [name one](names_a_secret).
pub fn must_be_reference(key: &str) -> bool {
    looks_secret(key) && !names_a_secret(key)
}

/// Where a secret is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// `file:/absolute/path`: the file's content (one trailing newline dropped).
    File(String),
    /// `env:NAME`: the value of environment variable `NAME` (letters, digits, `_`; not
    /// starting with a digit).
    Env(String),
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::File(p) => write!(f, "file:{p}"),
            SecretRef::Env(n) => write!(f, "env:{n}"),
        }
    }
}

/// True for an environment variable name as [`SecretRef::Env`] accepts it.
fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a text is not a secret reference. The messages never repeat the text (which, when it
/// is not a reference, may be the secret itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    /// `file:` without an absolute path.
    #[error("a `file:` secret reference needs an absolute path, e.g. file:/etc/fedvol/secrets/token")]
    FileNotAbsolute,
    /// `env:` without a variable name.
    #[error("an `env:` secret reference needs a variable name (letters, digits, `_`), e.g. env:NFS_TOKEN")]
    BadVariableName,
    /// Neither: an inline value.
    #[error("a secret must be given as a reference, `file:/path/to/secret` or `env:VARIABLE`, never inline")]
    Inline,
    /// A URL whose user-info carries a password (`scheme://user:password@host`), whatever the
    /// parameter's key.
    #[error(
        "the value holds a URL with a password in its user-info (scheme://user:password@host); keep the password out of the URL and give it by reference, `file:/path/to/secret` or `env:VARIABLE`"
    )]
    UrlPassword,
    /// A `Password=` / `Pwd=` pair inside the value (a connection string), whatever the
    /// parameter's key.
    #[error(
        "the value holds a `Password=`/`Pwd=` pair (a connection string with its password); give the password by reference, `file:/path/to/secret` or `env:VARIABLE`, in a parameter of its own"
    )]
    PasswordPair,
    /// A host-style address whose user-info carries a password, without a scheme
    /// (`user:password@host:/export`, as `mount` and `scp` write addresses), whatever the
    /// parameter's key.
    #[error(
        "the value holds an address with a password in its user-info (user:password@host); keep the password out of the address and give it by reference, `file:/path/to/secret` or `env:VARIABLE`"
    )]
    AddressPassword,
    /// An HTTP `Authorization` (or `Proxy-Authorization`) header with its credentials
    /// (`Authorization: Basic ...`, `Authorization: Bearer ...`), whatever the parameter's key.
    #[error(
        "the value holds an `Authorization` header with its credentials (`Authorization: Basic ...`, `Bearer ...`); give the credentials by reference, `file:/path/to/secret` or `env:VARIABLE`, in a parameter of its own"
    )]
    AuthorizationHeader,
}

/// Key names (lowercased) of a `key=value` pair that holds a password inside a connection
/// string: ADO.NET and ODBC (`Password=`, `Pwd=`) and libpq keyword/value strings
/// (`password=`); `passwd=` as `PASS_WORDS` spells it elsewhere.
const PASSWORD_PAIR_KEYS: [&str; 3] = ["password", "pwd", "passwd"];

/// Why `value` (of any parameter, whatever its key) holds a secret written inline, or `None`:
///
/// - a URL whose user-info has a password, `scheme://user:password@host` (RFC 3986 §3.2.1
///   deprecates the form precisely because the password is then shown wherever the URL is; OWASP
///   Secrets Management Cheat Sheet: no secrets in connection strings kept with configuration);
/// - a `Password=` / `Pwd=` pair (case-insensitive) between `;`, `&` or whitespace, as in
///   `Server=x;Password=hunter2` (ADO.NET connection string syntax) or `host=db password=x`
///   (libpq keyword/value form).
///
/// - an address without a scheme whose user-info has a password, `user:password@host:/export`
///   (the form `mount`, `scp` and NFS tools take);
/// - an HTTP `Authorization` or `Proxy-Authorization` header with credentials, `Authorization:
///   Basic dXNlcjpwdw==` or `authorization=Bearer ...` (RFC 9110 §11.6.2: the header carries
///   the user agent's credentials).
///
/// A password that is itself a secret reference (`file:`/`env:`) is not a secret.
pub fn embedded_secret(value: &str) -> Option<SecretRefError> {
    if url_with_password(value) {
        return Some(SecretRefError::UrlPassword);
    }
    if address_with_password(value) {
        return Some(SecretRefError::AddressPassword);
    }
    if authorization_header(value) {
        return Some(SecretRefError::AuthorizationHeader);
    }
    // Pairs are separated by `;` or `&` (and a URL query starts at `?`); inside one, keyword/value
    // pairs may follow each other separated by spaces, and spaces may surround `=`.
    for segment in value.split([';', '&', '?']) {
        for (at, _) in segment.match_indices('=') {
            let key = segment[..at]
                .trim_end()
                .rsplit(char::is_whitespace)
                .next()
                .unwrap_or("");
            let v = segment[at + 1..]
                .trim_start()
                .split(char::is_whitespace)
                .next()
                .unwrap_or("");
            let v = v.trim_matches(|c| c == '"' || c == '\'');
            if PASSWORD_PAIR_KEYS.contains(&key.to_ascii_lowercase().as_str())
                && !v.is_empty()
                && SecretRef::parse(v).is_err()
            {
                return Some(SecretRefError::PasswordPair);
            }
        }
    }
    None
}

/// True when some `scheme://` in `value` is followed by an authority whose user-info holds a
/// non-empty password (`user:password@`, `:password@`). An image digest after `@`
/// (`docker://nginx:1.25@sha256:...`) is not a host, so `nginx:1.25` is not user-info.
fn url_with_password(value: &str) -> bool {
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        if let Some((userinfo, host)) = authority.rsplit_once('@')
            && let Some((_user, password)) = userinfo.split_once(':')
            && !password.is_empty()
            && !is_digest(host)
        {
            return true;
        }
        rest = after;
    }
    false
}

/// True for an OCI content digest, `algorithm:hex` (`sha256:` and 32 or more hex digits).
fn is_digest(s: &str) -> bool {
    s.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty()
            && alg.chars().all(|c| c.is_ascii_alphanumeric())
            && hex.len() >= 32
            && hex.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// Characters that end a word around an address (`server=u:p@h:/x;`, `"u:p@h"`).
fn word_break(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ',' | ';' | '=' | '"' | '\'' | '(' | ')' | '<' | '>' | '[' | ']' | '{' | '}'
        )
}

/// True when some word of `value` without a scheme is `user:password@host...` (the password
/// non-empty, the host starting with a letter or digit): `admin:pw@nas1:/export`. A word with a
/// `/` before its `@` is a path or a URL (handled by [`url_with_password`]), not user-info.
fn address_with_password(value: &str) -> bool {
    for (at, _) in value.match_indices('@') {
        let before = &value[..at];
        let start = before
            .rfind(word_break)
            .map_or(0, |i| i + before[i..].chars().next().map_or(1, char::len_utf8));
        let userinfo = &before[start..];
        let host = &value[at + 1..];
        if userinfo.contains(['/', '?', '#', '@'])
            || !host.starts_with(|c: char| c.is_ascii_alphanumeric())
            || is_digest(host.split(word_break).next().unwrap_or(""))
        {
            continue;
        }
        if let Some((user, password)) = userinfo.split_once(':')
            && !password.is_empty()
            && !OPAQUE_SCHEMES.contains(&user.to_ascii_lowercase().as_str())
        {
            return true;
        }
    }
    false
}

/// URI schemes written `scheme:user@host` without `//` (RFC 6068 `mailto`, RFC 3261 `sip`,
/// RFC 6121 `xmpp`...): their `user@host` holds no password.
const OPAQUE_SCHEMES: [&str; 7] = ["mailto", "sip", "sips", "xmpp", "im", "pres", "tel"];

/// True when `value` holds an `Authorization:` or `Proxy-Authorization:` header (or `=` pair,
/// case-insensitive) with credentials that are not a secret reference: a scheme and its
/// credentials (`Basic dXNlcjpwdw==`, `Bearer eyJ...`), or one word of 16 characters or more (a
/// bare token). One short word (`authorization=none`) is a setting, not credentials.
fn authorization_header(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    // The header's value ends where the next pair or header starts.
    let words = |s: &str| -> Vec<String> {
        let end = s.find([';', '&', ',', '\n', '\r']).unwrap_or(s.len());
        s[..end]
            .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\''))
            .filter(|w| !w.is_empty())
            .take(2)
            .map(str::to_string)
            .collect()
    };
    for (at, name) in lower.match_indices("authorization") {
        // A whole word: `x-authorization-mode` is some other key; `proxy-authorization` counts.
        let prev = lower[..at].chars().next_back();
        if prev.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || (prev == Some('-') && !lower[..at].ends_with("proxy-"))
        {
            continue;
        }
        let rest = value[at + name.len()..].trim_start_matches(['"', '\'']).trim_start();
        let Some(rest) = rest.strip_prefix([':', '=']) else {
            continue;
        };
        let w = words(rest);
        let reference = |w: &String| SecretRef::parse(w).is_ok();
        let secret = match w.as_slice() {
            [first, second] => !reference(first) && !reference(second),
            [only] => !reference(only) && only.chars().count() >= 16,
            _ => false,
        };
        if secret {
            return true;
        }
    }
    false
}

/// A driver parameter whose key looks like a credential holds no reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter `{key}` looks like a credential: {why} (the value is not shown)")]
pub struct CredentialParameterError {
    /// The parameter's key.
    pub key: String,
    /// What is wrong with its value.
    pub why: SecretRefError,
}

impl SecretRef {
    /// Parses `file:/absolute/path` or `env:NAME`.
    ///
    /// Errors: [`SecretRefError`], saying what a reference looks like.
    pub fn parse(text: &str) -> Result<SecretRef, SecretRefError> {
        if let Some(p) = text.strip_prefix("file:") {
            if !p.starts_with('/') || p.contains('\0') {
                return Err(SecretRefError::FileNotAbsolute);
            }
            return Ok(SecretRef::File(p.to_string()));
        }
        if let Some(n) = text.strip_prefix("env:") {
            if !is_env_name(n) {
                return Err(SecretRefError::BadVariableName);
            }
            return Ok(SecretRef::Env(n.to_string()));
        }
        Err(SecretRefError::Inline)
    }
}

/// Checks one driver parameter: when its key [must hold a reference](must_be_reference), its
/// value must parse as a [`SecretRef`]; any other value must hold no
/// [secret written inside it](embedded_secret) (a URL with a password, a `Password=` pair).
///
/// Errors: [`CredentialParameterError`], naming the key (never the value) and how to write a
/// reference.
pub fn check_parameter(key: &str, value: &str) -> Result<(), CredentialParameterError> {
    if !must_be_reference(key) {
        return match embedded_secret(value) {
            Some(why) => Err(CredentialParameterError {
                key: key.to_string(),
                why,
            }),
            None => Ok(()),
        };
    }
    SecretRef::parse(value)
        .map(|_| ())
        .map_err(|why| CredentialParameterError {
            key: key.to_string(),
            why,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Secrets inside values, whatever the key (RFC 3986 §3.2.1 user-info; ADO.NET and libpq
    /// connection strings): refused, and the error never repeats them.
    #[test]
    fn secrets_inside_values_are_refused_whatever_the_key() {
        for (key, value) in [
            ("connectionString", "Server=x;Password=hunter2"),
            ("connectionString", "Server=x; PWD = hunter2 ;Database=d"),
            ("odbc", "DRIVER={x};UID=u;pwd=hunter2"),
            ("conninfo", "host=db user=u password=hunter2"),
            ("dsn", "postgres://u:hunter2@db/x"),
            ("endpoint", "see https://u:hunter2@host:8443/path?q=1"),
            ("query", "https://host/x?user=u&password=hunter2"),
            ("redis", "redis://:hunter2@cache:6379"),
            ("server", "u:hunter2@nas1:/export/data"),
            ("export", "admin:hunter2@10.0.0.5:/srv"),
            ("mounts", "a:/x, u:hunter2@nas1:/y"),
            ("source", "nfs://u:hunter2@nas1/export"),
            ("headers", "Authorization: Basic aHVudGVyMjpodW50ZXIy"),
            ("headers", "Content-Type: text/plain; authorization=Bearer hunter2xyz"),
            ("headers", "{\"Authorization\": \"Bearer hunter2\"}"),
            ("headers", "Proxy-Authorization: Digest username=u, response=hunter2"),
            ("header", "AUTHORIZATION:hunter2hunter2hunter2"),
        ] {
            let e = check_parameter(key, value).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&format!("`{key}`")), "{text}");
            assert!(!text.contains("hunter2"), "the value is never repeated: {text}");
            assert!(embedded_secret(value).is_some(), "{value}");
        }
        for value in [
            "postgres://u@db/x",
            "postgres://db:5432/x",
            "https://host/a:b@c",
            "Server=x;Database=d",
            "Password=",
            "Server=x;Password=env:DB_PASSWORD",
            "passwordless=yes",
            "mode=0750",
            "nas1:/export/data",
            "u@nas1:/export/data",
            "git@github.com:org/repo",
            "ops@example.com",
            "mailto:ops@example.com",
            "docker://nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef",
            "nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef",
            "/data/a:b@c",
            "authorization=none",
            "x-authorization-mode: strict mode",
            "Authorization: Bearer env:API_TOKEN",
            "Authorization: file:/run/secrets/auth-header",
            "rbac.authorization.k8s.io",
        ] {
            assert!(embedded_secret(value).is_none(), "{value}");
            assert!(check_parameter("connectionString", value).is_ok(), "{value}");
        }
    }

    #[test]
    fn references_parse_and_inline_values_are_refused_without_echo() {
        assert_eq!(
            SecretRef::parse("file:/etc/fedvol/t").unwrap(),
            SecretRef::File("/etc/fedvol/t".into())
        );
        assert_eq!(
            SecretRef::parse("env:NFS_TOKEN_2").unwrap(),
            SecretRef::Env("NFS_TOKEN_2".into())
        );
        assert_eq!(SecretRef::parse("env:A").unwrap().to_string(), "env:A");
        for bad in [
            "hunter2",
            "file:relative/x",
            "file:",
            "env:",
            "env:1X",
            "env:A-B",
            "FILE:/x",
        ] {
            assert!(SecretRef::parse(bad).is_err(), "{bad}");
        }
        // Keys the first list missed.
        for k in [
            "passwd",
            "dbPwd",
            "passphrase",
            "auth",
            "Authorization",
            "sasToken",
            "privateKey",
            "creds",
        ] {
            assert!(check_parameter(k, "hunter2").is_err(), "{k}");
        }
        assert_eq!(shown_value("mode", "0750"), "0750");
        assert_eq!(
            shown_value("region", "us-west-2"),
            "<redacted>",
            "unknown keys are redacted"
        );
        assert_eq!(
            shown_value("csi.storage.k8s.io/node-stage-secret-name", "rbd"),
            "<redacted>"
        );
        assert_eq!(shown_value("token", "file:/run/t"), "file:/run/t");
        let e = check_parameter("apiToken", "s3cr3t-value").unwrap_err().to_string();
        assert!(e.contains("`apiToken`") && !e.contains("s3cr3t"), "{e}");
        assert!(check_parameter("password", "file:/run/secrets/nfs").is_ok());
        assert!(check_parameter("type", "gp3").is_ok(), "not a secret key");
    }

    #[test]
    fn keys_that_name_a_secret_may_stay_inline() {
        for k in [
            "csi.storage.k8s.io/provisioner-secret-name",
            "csi.storage.k8s.io/node-stage-secret-namespace",
            "kmsKeyId",
            "key_id",
        ] {
            assert!(looks_secret(k), "{k}");
            assert!(!must_be_reference(k), "{k}");
            assert!(check_parameter(k, "csi-rbd-secret").is_ok(), "{k}");
        }
        for k in [
            "apiKey",
            "Password",
            "AUTH_TOKEN",
            "credentials",
            "secretAccessKey",
            "clientSecret",
        ] {
            assert!(must_be_reference(k), "{k}");
        }
    }
}
