//! `hostpath`: a volume is the directory `<path>/<volume name>` on the agent's host.

use std::path::PathBuf;

use fedvol_common::decision::NewVolume;
use fedvol_common::size::ByteSize;

use super::{Created, DriverError, blocking, localdir};

/// Creates `<base>/<volume name>` (idempotent; refuses when the base's file system has less
/// free space than `v.capacity`). The source is the directory's path. For node-local storage
/// (`local: true`) the message names the host placement chose: the agent creates the directory
/// where it runs, so a node-local base must be the agent's own (or mounted on it).
///
/// Errors: see [`localdir::create`].
pub async fn provision(base: &str, local: bool, v: &NewVolume) -> Result<Created, DriverError> {
    provision_as(base, local, v, None).await
}

/// [`provision`], the directory created as `owner` (account, grant) when given: it belongs to
/// that account ([`localdir::create_as`]).
///
/// Errors: see [`localdir::create_as`].
pub async fn provision_as(
    base: &str,
    local: bool,
    v: &NewVolume,
    owner: Option<(crate::grant::Grant, String)>,
) -> Result<Created, DriverError> {
    let base = PathBuf::from(base);
    let (name, capacity) = (v.name.clone(), v.capacity.0);
    let made = blocking(move || match &owner {
        Some((grant, account)) => localdir::create_as(&base, &name, capacity, localdir::Owner { grant, account }),
        None => localdir::create(&base, &name, capacity),
    })
    .await?;
    let on_host = match (&v.host, local) {
        (Some(h), true) => format!(" (node-local, host {h})"),
        _ => String::new(),
    };
    let message = match made.free_before {
        Some(free) if !made.existed => format!(
            "created directory {}{on_host} for {} ({} were free)",
            made.path.display(),
            ByteSize(capacity),
            ByteSize(free)
        ),
        _ => format!(
            "directory {}{on_host} already existed (repeated request)",
            made.path.display()
        ),
    };
    Ok(Created {
        source: made.path.display().to_string(),
        message,
    })
}

/// Removes `<base>/<volume>` and its contents, as its owner through `grant` when it belongs to
/// another account ([`localdir::remove_as`]); succeeds when it is already gone.
///
/// Errors: `Refused` when the recorded `source` is not that directory or something other than
/// a directory sits there; `Failed` on I/O errors.
pub async fn delete(
    base: &str,
    volume: &str,
    source: Option<&str>,
    grant: Option<crate::grant::Grant>,
) -> Result<String, DriverError> {
    let base = PathBuf::from(base);
    let path = base.join(volume);
    localdir::check_source(source, &path.display().to_string())?;
    let name = volume.to_string();
    let removed = blocking(move || localdir::remove_as(&base, &name, grant.as_ref())).await?;
    Ok(if removed {
        format!("removed directory {}", path.display())
    } else {
        format!("directory {} was already gone", path.display())
    })
}
