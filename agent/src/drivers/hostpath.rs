//! `hostpath`: a volume is the directory `<path>/<volume name>` on the agent's host.

use std::path::PathBuf;

use fedvol_common::decision::NewVolume;
use fedvol_common::size::ByteSize;

use super::localdir::Space;
use super::{Created, DriverError, blocking, localdir};

/// Creates `<base>/<volume name>` (idempotent; with [`Space::Checked`], refuses when the
/// base's file system has less free space than `v.capacity`). The source is the directory's
/// path. For node-local storage (`local: true`) the message names the host placement chose:
/// the agent creates the directory where it runs, so a node-local base must be the agent's own
/// (or mounted on it). The message gives the volume's size either way. With `owner` (account,
/// grant) the directory is created as that account and belongs to it
/// ([`localdir::create_as`]).
///
/// Errors: see [`localdir::create`] and [`localdir::create_as`].
pub async fn provision(
    base: &str,
    local: bool,
    v: &NewVolume,
    space: Space,
    owner: Option<(crate::grant::Grant, String)>,
) -> Result<Created, DriverError> {
    let base = PathBuf::from(base);
    let (name, capacity) = (v.name.clone(), v.capacity.0);
    let made = blocking(move || match &owner {
        Some((grant, account)) => {
            localdir::create_as(&base, &name, capacity, space, localdir::Owner { grant, account })
        }
        None => localdir::create_with(&base, &name, capacity, space),
    })
    .await?;
    let on_host = match (&v.host, local) {
        (Some(h), true) => format!(" (node-local, host {h})"),
        _ => String::new(),
    };
    let message = if made.existed {
        format!(
            "directory {}{on_host} already existed (repeated request)",
            made.path.display()
        )
    } else {
        format!(
            "created directory {}{on_host} for {} ({})",
            made.path.display(),
            ByteSize(capacity),
            localdir::free_note(made.free_before)
        )
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
