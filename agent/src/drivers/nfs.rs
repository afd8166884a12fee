//! `nfs`: a volume is the directory `<export>/<volume name>`, created through the export's
//! mount point on the agent's host (`driver.mount`). Without a mount the agent cannot create
//! anything and says so.

use std::path::PathBuf;

use fedvol_common::decision::NewVolume;
use fedvol_common::size::ByteSize;

use super::{Created, DriverError, blocking, localdir};

/// The refusal when the export is not mounted on the agent.
fn not_mounted(target: &str) -> DriverError {
    DriverError::Refused(format!(
        "the NFS export {target} is not mounted on the agent's host, so the agent cannot create or \
         remove volume directories on it; mount the export there and set driver.mount to the mount point"
    ))
}

/// `server:/export` + `/name`.
fn export_path(target: &str, volume: &str) -> String {
    format!("{}/{volume}", target.trim_end_matches('/'))
}

/// Creates `<mount>/<volume name>` (as hostpath: idempotent, free space checked on the mounted
/// file system unless `space` is [`localdir::Space::Unchecked`]; as `owner`'s account when given, [`localdir::create_as`]). The source is the export path `server:/export/<volume name>` that jobs mount.
///
/// Errors: `Refused` when `mount` is `None` (the message says to set `driver.mount`), otherwise
/// as [`localdir::create`].
pub async fn provision(
    target: &str,
    mount: Option<&str>,
    v: &NewVolume,
    space: localdir::Space,
    owner: Option<(crate::grant::Grant, String)>,
) -> Result<Created, DriverError> {
    let mount = mount.ok_or_else(|| not_mounted(target))?;
    let base = PathBuf::from(mount);
    let (name, capacity) = (v.name.clone(), v.capacity.0);
    let made = blocking(move || match &owner {
        Some((grant, account)) => {
            localdir::create_as(&base, &name, capacity, space, localdir::Owner { grant, account })
        }
        None => localdir::create_with(&base, &name, capacity, space),
    })
    .await?;
    let source = export_path(target, &v.name);
    let message = if made.existed {
        format!("{source} already existed (repeated request)")
    } else {
        format!(
            "created {source} (directory {} on the mounted export) for {} ({})",
            made.path.display(),
            ByteSize(capacity),
            localdir::free_note(made.free_before)
        )
    };
    Ok(Created { source, message })
}

/// Removes `<mount>/<volume>`; succeeds when it is already gone.
///
/// Errors: `Refused` without a mount, or when the recorded `source` is not
/// `server:/export/<volume>`; `Failed` on I/O errors.
pub async fn delete(
    target: &str,
    mount: Option<&str>,
    volume: &str,
    source: Option<&str>,
    grant: Option<crate::grant::Grant>,
) -> Result<String, DriverError> {
    let mount = mount.ok_or_else(|| not_mounted(target))?;
    let exported = export_path(target, volume);
    localdir::check_source(source, &exported)?;
    let base = PathBuf::from(mount);
    let name = volume.to_string();
    let removed = blocking(move || localdir::remove_as(&base, &name, grant.as_ref())).await?;
    Ok(if removed {
        format!("removed {exported} (directory {mount}/{volume})")
    } else {
        format!("{exported} was already gone")
    })
}
