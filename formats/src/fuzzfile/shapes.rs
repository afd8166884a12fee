//! Small shared readers for Fuzzfile values: names with positions, absolute paths, `KEY=value`
//! environment lists, Go durations, ports, URIs, file transfers and policies.
//!
//! Most of these values do not affect placement; they are checked for shape (and, where the
//! schema fixes it, for value) so that a typo is reported, and then dropped.

use crate::yaml::{Ctx, MapReader, Node, Span};

/// A name written in the file (a volume, job or service), with where it stands, so that a
/// dangling reference can be reported at the exact place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NameRef {
    /// The name as written.
    pub name: String,
    /// Where it is written.
    pub span: Span,
}

/// Largest value of a Fuzzfile `int` (int64).
pub(super) const I64_MAX: i128 = i64::MAX as i128;
/// Largest value of a Fuzzfile `int32`.
pub(super) const I32_MAX: i128 = i32::MAX as i128;

/// Takes the kebab-case `key` or its camelCase JSON `alias` (schema §0: `by-core`/`byCore`,
/// `decryption-secret`/`decryptionSecret`, `procs-per-node`/`procsPerNode`,
/// `expose-tcp`/`exposeTcp`, `expose-udp`/`exposeUdp`). Giving both is an error.
pub(super) fn take_aliased<'n>(
    ctx: &mut Ctx,
    r: &mut MapReader<'n>,
    key: &'static str,
    alias: &'static str,
) -> Option<&'n Node> {
    let a = r.take(key);
    let b = r.take(alias);
    if let (Some(_), Some(dup)) = (a, b) {
        ctx.error(
            dup.span,
            &r.path(alias),
            format!("`{alias}` is another spelling of `{key}`, which is also set; keep only `{key}`"),
        );
    }
    a.or(b)
}

/// Reads a non-empty string together with its position.
pub(super) fn name_ref(ctx: &mut Ctx, node: &Node, field: &str) -> Option<NameRef> {
    ctx.nonempty_string(node, field)
        .map(|name| NameRef { name, span: node.span })
}

/// Reads a list of non-empty names (job names, network names...) with their positions. Items
/// that are not strings are reported and left out.
pub(super) fn name_list(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<NameRef> {
    let Some(items) = ctx.seq(node, field) else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| name_ref(ctx, item, &format!("{field}[{i}]")))
        .collect()
}

/// Reads an absolute path (`/data`). Errors: not a string, or not starting with `/`.
pub(super) fn abs_path(ctx: &mut Ctx, node: &Node, field: &str) -> Option<String> {
    let s = ctx.nonempty_string(node, field)?;
    if !s.starts_with('/') {
        ctx.error(
            node.span,
            field,
            format!("expected an absolute path (starting with `/`), found `{s}`"),
        );
        return None;
    }
    Some(s)
}

/// Reads an `env` list: every entry a string of the form `NAME=value` (the value may be empty),
/// `NAME` a shell variable name (letters, digits and `_`, not starting with a digit), as the
/// job's environment is exported by a shell script when its cluster runs it. Returns the valid
/// entries.
pub(super) fn env_list(ctx: &mut Ctx, node: &Node, field: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(items) = ctx.seq(node, field) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(s) = ctx.string(item, &f) else {
            continue;
        };
        match s.split_once('=') {
            Some((name, value)) if is_env_name(name) => out.push((name.to_string(), value.to_string())),
            Some((name, _)) if !name.trim().is_empty() => ctx.error(
                item.span,
                &f,
                format!(
                    "`{name}` is no environment variable name (letters, digits and `_`, not starting with a digit)"
                ),
            ),
            _ => ctx.error(
                item.span,
                &f,
                format!("expected an environment entry `NAME=value`, found `{s}`"),
            ),
        }
    }
    out
}

/// True for a POSIX shell variable name.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses a Go duration (`10m0s`, `1h`, `1.5h`, `300ms`, `0`) into nanoseconds. Units: `ns`,
/// `us` (`µs`), `ms`, `s`, `m`, `h`; several may follow each other. Negative durations and
/// values past 2^128 ns are refused.
pub(super) fn parse_duration(text: &str) -> Result<u128, String> {
    let expected = "expected a Go duration such as 90s, 15m, 1h30m or 10m0s";
    let s = text.trim();
    if s.starts_with('-') {
        return Err(format!("`{text}` is negative; {expected}"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(format!("empty duration; {expected}"));
    }
    let too_large = || format!("`{text}` is too large; {expected}");
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_end);
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(format!("`{text}` is not a duration; {expected}"));
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("`{text}` has a number without a unit; {expected}")),
            other => return Err(format!("unknown unit `{other}` in `{text}`; {expected}")),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| too_large())?
        };
        let mut amount = whole.checked_mul(scale).ok_or_else(too_large)?;
        if !frac_part.is_empty() {
            // Only the digits that can matter at nanosecond resolution are kept.
            let digits = &frac_part[..frac_part.len().min(20)];
            let frac: u128 = digits.parse().map_err(|_| too_large())?;
            let den = 10u128.pow(digits.len() as u32);
            amount = amount
                .checked_add(frac.checked_mul(scale).ok_or_else(too_large)? / den)
                .ok_or_else(too_large)?;
        }
        total = total.checked_add(amount).ok_or_else(too_large)?;
        rest = next;
    }
    Ok(total)
}

/// Reads a Go duration (see [`parse_duration`]); returns nanoseconds.
pub(super) fn duration(ctx: &mut Ctx, node: &Node, field: &str) -> Option<u128> {
    let s = ctx.string(node, field)?;
    match parse_duration(&s) {
        Ok(ns) => Some(ns),
        Err(msg) => {
            ctx.error(node.span, field, msg);
            None
        }
    }
}

/// Reads a TCP/UDP port number, 1 to 65535.
pub(super) fn port(ctx: &mut Ctx, node: &Node, field: &str) -> Option<u16> {
    ctx.int(node, field, 1, 65_535).map(|p| p as u16)
}

/// Reads a list of port numbers.
pub(super) fn port_list(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(items) = ctx.seq(node, field) else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        port(ctx, item, &format!("{field}[{i}]"));
    }
}

/// Reads a whole number that the JSON schema carries as a string (`cache-ttl`): a plain
/// integer or a quoted string of digits, `min..=max`.
fn int_or_digits(ctx: &mut Ctx, node: &Node, field: &str, min: i128, max: i128) {
    if let Some(s) = node.as_scalar()
        && let Ok(v) = s.trim().parse::<i128>()
        && (min..=max).contains(&v)
    {
        return;
    }
    ctx.int(node, field, min, max);
}

/// Reads a URI object (schema §6 URI, also used for `image`): `uri` (required), `secret`
/// (`secret://<scope>/<name>`), `secrets` (map), `decryption-secret`, `cache`
/// (`once`|`changed`|`never`), `cache-ttl` (seconds). Returns the `uri` text.
pub(super) fn uri(ctx: &mut Ctx, node: &Node, field: &str) -> Option<String> {
    let mut r = ctx.map_shaped(
        node,
        field,
        "`{uri: docker://alpine:3.20}` (optionally with `secret: secret://<scope>/<name>`)",
    )?;
    let uri = r.require(ctx, "uri").and_then(|n| {
        let f = r.path("uri");
        let text = ctx.nonempty_string(n, &f)?;
        // Credentials go in `secret:`, by reference; one written into the URI is refused
        // without repeating it.
        if fedvol_common::secrets::embedded_secret(&text).is_some() {
            ctx.error_hint(
                n.span,
                &f,
                "the URI holds credentials (a password in its user-info, `scheme://user:password@host`, or a `password=` pair; the value is not shown); expected a URI without them",
                "name the credentials in `secret: secret://<scope>/<name>` beside the URI",
            );
            return None;
        }
        Some(text)
    });
    if let Some(n) = r.take("secret") {
        secret_ref(ctx, n, &r.path("secret"));
    }
    if let Some(n) = r.take("secrets") {
        ctx.string_map(n, &r.path("secrets"));
    }
    if let Some(n) = take_aliased(ctx, &mut r, "decryption-secret", "decryptionSecret") {
        secret_ref(ctx, n, &r.path("decryption-secret"));
    }
    if let Some(n) = r.take("cache") {
        ctx.one_of(n, &r.path("cache"), &["once", "changed", "never"]);
    }
    if let Some(n) = r.take("cache-ttl") {
        int_or_digits(ctx, n, &r.path("cache-ttl"), 0, I64_MAX);
    }
    r.finish(ctx);
    uri
}

/// Reads a secret reference `secret://<scope>/<name>`.
fn secret_ref(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(s) = ctx.nonempty_string(node, field) else {
        return;
    };
    let ok = s
        .strip_prefix("secret://")
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(scope, name)| !scope.is_empty() && !name.is_empty());
    if !ok {
        ctx.error(
            node.span,
            field,
            // Not repeated: a value that is not a reference may be the secret itself.
            "not a secret reference (the value is not shown); expected `secret://<scope>/<name>`",
        );
    }
}

/// Reads an `ingress`/`egress` list of file transfers: each `{source: URI, destination: URI,
/// policy: Policy}`, source and destination required.
pub(super) fn transfers(ctx: &mut Ctx, node: &Node, field: &str) {
    let Some(items) = ctx.seq(node, field) else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let Some(mut r) = ctx.map(item, &f) else {
            continue;
        };
        if let Some(n) = r.require(ctx, "source") {
            uri(ctx, n, &r.path("source"));
        }
        if let Some(n) = r.require(ctx, "destination") {
            uri(ctx, n, &r.path("destination"));
        }
        if let Some(n) = r.take("policy") {
            policy(ctx, n, &r.path("policy"));
        }
        r.finish(ctx);
    }
}

/// Reads a Policy: `timeout.execute` (Go duration), `retry.attempts` (int32, deprecated:
/// accepted and ignored), `restart` (`on-node-fault` | `never`). Returns `timeout.execute` in
/// milliseconds (nanoseconds rounded up, saturating at `u64::MAX`) when it is given and valid.
pub(super) fn policy(ctx: &mut Ctx, node: &Node, field: &str) -> Option<u64> {
    let mut r = ctx.map(node, field)?;
    let mut timeout_ms = None;
    if let Some(n) = r.take("timeout")
        && let Some(mut t) = ctx.map(n, &r.path("timeout"))
    {
        if let Some(e) = t.take("execute") {
            timeout_ms = duration(ctx, e, &t.path("execute"))
                .map(|ns| u64::try_from(ns.div_ceil(1_000_000)).unwrap_or(u64::MAX));
        }
        t.finish(ctx);
    }
    if let Some(n) = r.take("retry")
        && let Some(mut t) = ctx.map(n, &r.path("retry"))
    {
        if let Some(a) = t.take("attempts") {
            ctx.int(a, &t.path("attempts"), 0, I32_MAX);
        }
        t.finish(ctx);
    }
    if let Some(n) = r.take("restart") {
        ctx.one_of(n, &r.path("restart"), &["on-node-fault", "never"]);
    }
    r.finish(ctx);
    timeout_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("10m0s"), Ok(600_000_000_000));
        assert_eq!(parse_duration("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_duration("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration(".5s"), Ok(500_000_000));
        assert!(parse_duration("10").unwrap_err().contains("without a unit"));
        assert!(parse_duration("10min").unwrap_err().contains("unknown unit `min`"));
        assert!(parse_duration("-5m").unwrap_err().contains("negative"));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("1..2s").is_err());
        assert!(
            parse_duration(&("9".repeat(60) + "h"))
                .unwrap_err()
                .contains("too large")
        );
    }
}
