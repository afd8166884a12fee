//! The `nats:` block of the agent's and the coordinator's configuration files ([`parse_nats`]),
//! read into [`NatsAuth`] (`fedvol_common::nats_auth`).

use std::path::{Path, PathBuf};

use fedvol_common::nats_auth::NatsAuth;

use crate::yaml::{Ctx, Node, join};

/// Reads a `nats:` block (`url`, `user`, `password`, `passwordFile`, `nkeyFile`, `credsFile`, `tlsCa`,
/// `tlsCert`, `tlsKey`, `inboxPrefix`; unknown keys are errors with a hint) at field path `field`. Relative
/// file paths are taken relative to `base` (the configuration file's directory). Missing keys
/// keep [`NatsAuth::local`]'s values.
///
/// Problems are recorded in `ctx`; the returned value is then partial and must not be used.
pub fn parse_nats(ctx: &mut Ctx, node: &Node, field: &str, base: &Path) -> NatsAuth {
    let mut out = NatsAuth::local();
    let rel = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { base.join(p) }
    };
    let Some(mut m) = ctx.map(node, field) else {
        return out;
    };
    if let Some(n) = m.take("url") {
        out.url = ctx.nonempty_string(n, &join(field, "url")).unwrap_or_default();
    }
    if let Some(n) = m.take("user") {
        out.user = ctx.string(n, &join(field, "user"));
    }
    if let Some(n) = m.take("password") {
        out.password = ctx.string(n, &join(field, "password"));
    }
    if let Some(n) = m.take("inboxPrefix") {
        out.inbox_prefix = ctx.nonempty_string(n, &join(field, "inboxPrefix"));
    }
    for (key, slot) in [
        ("passwordFile", &mut out.password_file),
        ("nkeyFile", &mut out.nkey_file),
        ("credsFile", &mut out.creds_file),
        ("tlsCa", &mut out.tls_ca),
        ("tlsCert", &mut out.tls_cert),
        ("tlsKey", &mut out.tls_key),
    ] {
        if let Some(n) = m.take(key) {
            *slot = ctx.nonempty_string(n, &join(field, key)).map(rel);
        }
    }
    m.finish(ctx);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Diagnostics, Limits, load_documents};

    fn parse(text: &str) -> Result<NatsAuth, Diagnostics> {
        let docs = load_documents(text, Limits::default()).unwrap();
        let mut ctx = Ctx::new("c.yaml");
        let auth = parse_nats(&mut ctx, &docs[0], "nats", Path::new("/etc/fedvol"));
        ctx.finish(auth)
    }

    #[test]
    fn the_block_reads_alone_with_paths_relative_to_the_base() {
        let a = parse("url: nats://n:4222\nuser: u\npassword: p\ntlsCa: ca.pem\ninboxPrefix: _INBOX_u\n").unwrap();
        assert_eq!(a.url, "nats://n:4222");
        assert_eq!(a.inbox_prefix.as_deref(), Some("_INBOX_u"));
        assert_eq!(a.tls_ca, Some(PathBuf::from("/etc/fedvol/ca.pem")));
        assert!(a.check().is_empty());
        let d = parse("{}").unwrap();
        assert_eq!(d, NatsAuth::local());
    }

    #[test]
    fn unknown_keys_and_half_pairs_are_reported() {
        let e = parse("url: nats://n\ncredFile: x\n").unwrap_err();
        assert!(e.to_string().contains("nats.credFile"), "{e}");
        assert!(e.to_string().contains("did you mean `credsFile`"), "{e}");
        let a = parse("user: u\ntlsCert: c.pem\ninboxPrefix: \"_INBOX.*\"\n").unwrap();
        let problems = a.check();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[2].contains("inbox prefix `_INBOX.*`"), "{problems:?}");
    }
}
