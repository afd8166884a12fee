//! fedvol-example-provisioner: a small, real out-of-tree provisioner (the Kubernetes volume provisioning design) for fedvol's
//! `external` driver. It answers `<prefix>.provisioner.<cluster>.<name as token>.provision` and
//! `.delete` by creating and removing the directory `<root>/<volume name>`.
//!
//! Protocol (JSON, see `fedvol_proto::provisioner`): a `ProvisionMsg` or `DeleteMsg` comes in with a
//! reply subject; the answer is a `ProvisionerReply` (`ok`, `source` = the directory's path,
//! `error`). Requests are idempotent by volume name: creating an existing directory or deleting
//! a missing one succeeds. The storage class parameters accepted are `mode` (octal permissions
//! such as `"0750"`) and `token`, a secret *reference* (`file:/path` or `env:NAME`) that this
//! provisioner resolves itself, on its own host: the agent passes the reference, never the
//! secret. With `--expect-token REF` every provisioning must carry a `token` whose secret
//! equals the one `REF` points to (as a storage backend would check a credential); a missing,
//! unresolvable or wrong token is refused without ever repeating a secret. Any other parameter
//! is refused with `ok: false` naming it.
//!
//! NATS settings come from the same flags and variables as every fedvol binary's
//! ([`NatsArgs`]: `--nats`/`FEDVOL_NATS_URL`, `--nats-user` with `FEDVOL_NATS_PASSWORD`,
//! `--nats-creds`, `--nats-nkey`, TLS, inbox prefix), never from the URL.
//!
//! For tests: `--fail-first N` drops the first N requests unanswered (the agent then retries),
//! `--delay-ms D` answers each request D ms after carrying it out (a slow provisioner).
//!
//! Usage: `fedvol-example-provisioner --nats nats://127.0.0.1:4222 --cluster cluster-a
//! --name example.com/dirs --root /srv/volumes`

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use fedvol_agent::drivers::secrets::{self, SecretRef};
use fedvol_agent::drivers::{DriverError, localdir};
use fedvol_common::model::VolumeMode;
use fedvol_proto::nats::{NatsArgs, redact_url};
use fedvol_proto::provisioner::{Delete, DeleteMsg, Provision, ProvisionMsg, ProvisionerOp, ProvisionerReply};
use fedvol_proto::{Endpoint, Subjects};
use futures::StreamExt;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "fedvol-example-provisioner",
    version,
    about = "Example out-of-tree provisioner for fedvol: volumes are directories under --root"
)]
struct Args {
    /// The cluster whose agent sends the requests.
    #[arg(long)]
    cluster: String,
    /// The provisioner's `vendor/name`, as in the inventory's `driver.provisioner`.
    #[arg(long)]
    name: String,
    /// Directory holding the volume directories (must exist).
    #[arg(long)]
    root: PathBuf,
    /// Subject prefix.
    #[arg(long, default_value = fedvol_proto::DEFAULT_PREFIX)]
    prefix: String,
    /// Drop the first N requests without answering (to exercise the agent's retries).
    #[arg(long, default_value_t = 0)]
    fail_first: u64,
    /// Answer each request this many ms after carrying it out (a slow provisioner).
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// A secret reference (`file:/path` or `env:NAME`): provisioning requires a `token`
    /// parameter whose secret equals this one.
    #[arg(long)]
    expect_token: Option<String>,
    /// NATS connection (URL, auth, TLS, inbox prefix).
    #[command(flatten)]
    nats: NatsArgs,
}

/// Parameters this provisioner understands.
const ACCEPTED: [&str; 2] = ["mode", "token"];

fn refuse(error: String) -> ProvisionerReply {
    ProvisionerReply::refused(error)
}

fn success(source: Option<String>) -> ProvisionerReply {
    ProvisionerReply::done(source)
}

fn driver_error(e: DriverError) -> String {
    match e {
        DriverError::Refused(m) | DriverError::Failed(m) => m,
    }
}

/// `mode` as permission bits: 3 or 4 octal digits ("750", "0750", "2770").
fn parse_mode(text: &str) -> Option<u32> {
    if !(3..=4).contains(&text.len()) || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(text, 8).ok()
}

/// Checks the storage class parameters; returns the directory mode to apply, if any.
fn check_parameters(parameters: &BTreeMap<String, String>) -> Result<Option<u32>, String> {
    let unknown: Vec<&str> = parameters
        .keys()
        .map(String::as_str)
        .filter(|k| !ACCEPTED.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown parameter(s): {} (this provisioner accepts only: {})",
            unknown.join(", "),
            ACCEPTED.join(", ")
        ));
    }
    match parameters.get("mode") {
        None => Ok(None),
        Some(m) => parse_mode(m)
            .map(Some)
            .ok_or_else(|| format!("parameter mode must be octal permissions such as \"0750\", got {m:?}")),
    }
}

/// Checks the `token` parameter against the expected secret: the parameter must be a secret
/// reference, resolvable here, whose secret equals `expected`. Errors never contain a secret.
fn check_token(parameters: &BTreeMap<String, String>, expected: Option<&str>) -> Result<(), String> {
    let given = match parameters.get("token") {
        None if expected.is_some() => return Err("parameter token is required by this provisioner".into()),
        None => return Ok(()),
        Some(t) => t,
    };
    let r = SecretRef::parse(given).map_err(|e| format!("parameter token: {e}"))?;
    let secret = secrets::resolve(&r).map_err(|e| format!("parameter token: {e}"))?;
    match expected {
        Some(want) if secret != want => Err(format!("parameter token: the secret in {r} is not the expected token")),
        _ => Ok(()),
    }
}

fn provision(root: &Path, expected_token: Option<&str>, body: &[u8]) -> ProvisionerReply {
    let msg: ProvisionMsg = match Provision::decode_request(body, "provisioner") {
        Ok(m) => m,
        Err(e) => return refuse(format!("not a provision request: {e}")),
    };
    let mode = match check_parameters(&msg.parameters) {
        Ok(m) => m,
        Err(e) => return refuse(e),
    };
    if let Err(e) = check_token(&msg.parameters, expected_token) {
        return refuse(e);
    }
    if msg.volume.volume_mode == VolumeMode::Block {
        return refuse("only Filesystem volumes can be provisioned (volume mode Block asked)".into());
    }
    let made = match localdir::create(root, &msg.volume.name, msg.volume.capacity.0) {
        Ok(m) => m,
        Err(e) => return refuse(driver_error(e)),
    };
    if let (false, Some(mode)) = (made.existed, mode)
        && let Err(e) = std::fs::set_permissions(&made.path, std::fs::Permissions::from_mode(mode))
    {
        // Do not leave a directory with the wrong permissions behind.
        let _ = localdir::remove(root, &msg.volume.name);
        return refuse(format!("cannot set mode {mode:o} on {}: {e}", made.path.display()));
    }
    tracing::info!(
        request_id = %msg.request_id,
        volume = %msg.volume.name,
        path = %made.path.display(),
        existed = made.existed,
        "provisioned"
    );
    success(Some(made.path.display().to_string()))
}

fn delete(root: &Path, body: &[u8]) -> ProvisionerReply {
    let msg: DeleteMsg = match Delete::decode_request(body, "provisioner") {
        Ok(m) => m,
        Err(e) => return refuse(format!("not a delete request: {e}")),
    };
    match localdir::remove(root, &msg.volume) {
        Ok(removed) => {
            tracing::info!(request_id = %msg.request_id, volume = %msg.volume, removed, "deleted");
            success(None)
        }
        Err(e) => refuse(driver_error(e)),
    }
}

async fn run(args: Args) -> Result<(), String> {
    if !args.root.is_dir() {
        return Err(format!("--root {} is not an existing directory", args.root.display()));
    }
    let subjects = Subjects::new(&args.prefix);
    let provision_subject = subjects.provisioner(&args.cluster, &args.name, ProvisionerOp::Provision);
    let delete_subject = subjects.provisioner(&args.cluster, &args.name, ProvisionerOp::Delete);
    let expected_token = match &args.expect_token {
        None => None,
        Some(text) => {
            let r = SecretRef::parse(text).map_err(|e| format!("--expect-token: {e}"))?;
            Some(secrets::resolve(&r).map_err(|e| format!("--expect-token: {e}"))?)
        }
    };
    let auth = args.nats.auth();
    let problems = auth.check();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let client = fedvol_proto::nats::connect("fedvol-example-provisioner", &auth)
        .await
        .map_err(|e| e.to_string())?;
    let subscribe = |s: String| {
        let client = client.clone();
        async move {
            client
                .subscribe(s.clone())
                .await
                .map_err(|e| format!("cannot subscribe to {s}: {e}"))
        }
    };
    let mut messages = futures::stream::select(
        subscribe(provision_subject.clone()).await?,
        subscribe(delete_subject.clone()).await?,
    );
    client
        .flush()
        .await
        .map_err(|e| format!("cannot reach {}: {e}", redact_url(&auth.url)))?;
    tracing::info!(
        provision = %provision_subject,
        delete = %delete_subject,
        root = %args.root.display(),
        fail_first = args.fail_first,
        "listening"
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut seen: u64 = 0;
    loop {
        let msg = tokio::select! {
            m = messages.next() => match m {
                Some(m) => m,
                None => return Err("the NATS connection closed".into()),
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        };
        seen += 1;
        if seen <= args.fail_first {
            tracing::warn!(subject = %msg.subject, request = seen, of = args.fail_first, "dropping request unanswered (--fail-first)");
            continue;
        }
        let reply = if msg.subject.as_str() == provision_subject {
            provision(&args.root, expected_token.as_deref(), &msg.payload)
        } else {
            delete(&args.root, &msg.payload)
        };
        if let Some(e) = &reply.error {
            tracing::warn!(subject = %msg.subject, error = %e, "refused");
        }
        if args.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
        }
        let Some(to) = msg.reply else { continue };
        // With NATS gone the client buffers, then waits: bounded, so that SIGTERM is still
        // heard at the next turn of the loop.
        match tokio::time::timeout(
            Duration::from_secs(5),
            client.publish(to, Provision::encode_reply(&reply)),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot send the answer"),
            Err(_) => tracing::warn!("cannot send the answer: NATS did not take it within 5 s"),
        }
    }
    tracing::info!("stopping");
    // Stopping never waits for a NATS that is gone.
    let _ = tokio::time::timeout(Duration::from_secs(1), client.flush()).await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("fedvol-example-provisioner: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn only_an_octal_mode_is_accepted() {
        assert_eq!(check_parameters(&params(&[])), Ok(None));
        assert_eq!(check_parameters(&params(&[("mode", "0750")])), Ok(Some(0o750)));
        assert_eq!(check_parameters(&params(&[("mode", "2770")])), Ok(Some(0o2770)));
        for bad in ["0759", "75", "07500", "rwx", "", "-750"] {
            assert!(check_parameters(&params(&[("mode", bad)])).is_err(), "{bad}");
        }
        let e = check_parameters(&params(&[("mode", "0750"), ("zfs", "on"), ("apiKey", "hidden")])).unwrap_err();
        assert!(e.contains("apiKey, zfs") && !e.contains("hidden"), "{e}");
    }

    #[test]
    fn the_token_is_a_reference_resolved_here_and_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "right-secret\n").unwrap();
        let by_file = format!("file:{}", f.display());
        assert_eq!(
            check_token(&params(&[("token", &by_file)]), Some("right-secret")),
            Ok(())
        );
        assert_eq!(check_token(&params(&[]), None), Ok(()));
        let e = check_token(&params(&[]), Some("right-secret")).unwrap_err();
        assert!(e.contains("required"), "{e}");
        for (given, want) in [(by_file.as_str(), "other-secret"), ("right-secret", "right-secret")] {
            let e = check_token(&params(&[("token", given)]), Some(want)).unwrap_err();
            assert!(!e.contains("right-secret") && !e.contains("other-secret"), "{e}");
        }
        let e = check_token(&params(&[("token", "env:FEDVOL_TEST_SURELY_UNSET_TOKEN")]), None).unwrap_err();
        assert!(e.contains("is not set"), "{e}");
    }
}
