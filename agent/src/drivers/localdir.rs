//! Volume directories under a local base directory: the shared mechanics of the `hostpath`
//! driver and of the `nfs` driver on a mounted export. Blocking calls; the drivers run them on
//! tokio's blocking pool.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use fedvol_common::size::ByteSize;

use super::DriverError;
use super::names::check_volume_name;

/// What [`create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeDir {
    /// `<base>/<name>`.
    pub path: PathBuf,
    /// True when the directory was already there (a repeated request), false when created now.
    pub existed: bool,
    /// Free bytes in the base's file system before creating (None when it already existed, or
    /// when the check was skipped: [`Space::Unchecked`]).
    pub free_before: Option<u128>,
}

/// Whether [`create`] checks that the base's file system has room for the volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// Refuse a volume larger than the free space (every real volume).
    Checked,
    /// Skip the check (the sandbox of `fedvol dev`: an empty directory that reserves no disk).
    Unchecked,
}

/// Bytes available to unprivileged users in the file system holding `path` (statvfs
/// `f_bavail * f_frsize`); `None` when `path` cannot be examined.
pub fn free_bytes(path: &Path) -> Option<u128> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    Some(u128::from(s.blocks_available()) * u128::from(s.fragment_size()))
}

fn base_dir(base: &Path) -> Result<(), DriverError> {
    match std::fs::metadata(base) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(DriverError::Failed(format!(
            "base directory {} is not a directory",
            base.display()
        ))),
        Err(e) => Err(DriverError::Failed(format!(
            "base directory {} cannot be used: {e}",
            base.display()
        ))),
    }
}

/// Is `path` an existing real directory (not a symlink)? `Ok(false)` when absent; `Refused` when
/// something else (a file, a symlink) sits there.
fn existing_dir(path: &Path) -> Result<bool, DriverError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => Err(DriverError::Refused(format!(
            "{} exists and is not a directory (a file or a symbolic link); leaving it alone",
            path.display()
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(DriverError::Failed(format!("cannot examine {}: {e}", path.display()))),
    }
}

/// Creates `<base>/<name>` for a volume of `capacity` bytes. Idempotent: when the directory
/// already exists (a retry of the same request) it is reported with `existed: true` and the
/// free-space check is skipped, so a repeated request never fails for space it already holds.
///
/// Errors: `Refused` for an unsafe name, too little free space (`f_bavail * f_frsize <
/// capacity`) or a non-directory in the way; `Failed` when the base directory is missing or
/// an I/O call fails.
pub fn create(base: &Path, name: &str, capacity: u128) -> Result<MadeDir, DriverError> {
    create_with(base, name, capacity, Space::Checked)
}

/// [`create`], with the free-space check as `space` says (unchecked: `free_before` is `None`).
///
/// Errors: as [`create`], less "too little free space" when unchecked.
pub fn create_with(base: &Path, name: &str, capacity: u128, space: Space) -> Result<MadeDir, DriverError> {
    check_volume_name(name)?;
    base_dir(base)?;
    let path = base.join(name);
    if existing_dir(&path)? {
        return Ok(MadeDir {
            path,
            existed: true,
            free_before: None,
        });
    }
    let free = room_for(base, capacity, space)?;
    match std::fs::create_dir(&path) {
        Ok(()) => {}
        // Lost a race with a concurrent identical request: same outcome as a repeat.
        Err(e) if e.kind() == ErrorKind::AlreadyExists && existing_dir(&path)? => {
            return Ok(MadeDir {
                path,
                existed: true,
                free_before: None,
            });
        }
        Err(e) => return Err(DriverError::Failed(format!("cannot create {}: {e}", path.display()))),
    }
    // Make the new entry durable before the caller records it (best effort: some file systems
    // do not support syncing a directory); creations finishing together share the sync.
    super::dirsync::sync_entry(base);
    Ok(MadeDir {
        path,
        existed: false,
        free_before: free,
    })
}

/// What a creation message says of the free space: `<free> were free`, or that it was not
/// checked (`free_before` `None` for a new directory: [`Space::Unchecked`]).
pub fn free_note(free_before: Option<u128>) -> String {
    match free_before {
        Some(free) => format!("{} were free", ByteSize(free)),
        None => "free space not checked: a sandbox of fedvol dev".to_string(),
    }
}

/// The account a volume directory is created as, and how: on a cluster that runs jobs as
/// their users, a volume belongs to its workflow's user.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// The grant that runs `mkdir` and `rm` as the account.
    pub grant: &'a crate::grant::Grant,
    /// The account.
    pub account: &'a str,
}

/// The uid of account `name`.
fn uid_of(name: &str) -> Result<u32, DriverError> {
    match nix::unistd::User::from_name(name) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => Err(DriverError::Refused(format!("no local account `{name}`"))),
        Err(e) => Err(DriverError::Failed(format!("cannot look up account `{name}`: {e}"))),
    }
}

/// The owner uid of `path` (not followed).
fn owner_uid(path: &Path) -> Result<u32, DriverError> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .map(|m| m.uid())
        .map_err(|e| DriverError::Failed(format!("cannot examine {}: {e}", path.display())))
}

/// How long `mkdir` or `rm` through the grant may take.
const GRANT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// [`create_with`], the directory made by `owner`'s account (`mkdir -m 0700`, through the grant),
/// so that it belongs to that account alone: its jobs read and write it, no other user's
/// can. The base must let the accounts create entries (the documented `1730` with group
/// `fedvol-users`, or `1733`: sticky, so nobody removes another's). A directory already there
/// must belong to the account (a repeated request); one of another owner is refused, never
/// used.
///
/// Errors: as [`create`]; `Refused` for a directory of another owner; `Failed` when `mkdir`
/// fails (its words).
pub fn create_as(
    base: &Path,
    name: &str,
    capacity: u128,
    space: Space,
    owner: Owner<'_>,
) -> Result<MadeDir, DriverError> {
    check_volume_name(name)?;
    base_dir(base)?;
    let path = base.join(name);
    let uid = uid_of(owner.account)?;
    let check_owner = |path: &Path| -> Result<(), DriverError> {
        let found = owner_uid(path)?;
        if found != uid {
            return Err(DriverError::Refused(format!(
                "{} exists and belongs to uid {found}, not to account `{}` (uid {uid}): not using it",
                path.display(),
                owner.account
            )));
        }
        Ok(())
    };
    if existing_dir(&path)? {
        check_owner(&path)?;
        return Ok(MadeDir {
            path,
            existed: true,
            free_before: None,
        });
    }
    let free = room_for(base, capacity, space)?;
    let args = ["-m".to_string(), "0700".into(), "--".into(), path.display().to_string()];
    if let Err(e) = crate::grant::run_blocking(owner.grant, owner.account, Path::new("mkdir"), &args, GRANT_TIMEOUT) {
        // Lost a race with a concurrent identical request: same outcome as a repeat.
        if existing_dir(&path)? && check_owner(&path).is_ok() {
            return Ok(MadeDir {
                path,
                existed: true,
                free_before: None,
            });
        }
        return Err(DriverError::Failed(format!(
            "cannot create {} as `{}`: {e}",
            path.display(),
            owner.account
        )));
    }
    if !existing_dir(&path)? {
        return Err(DriverError::Failed(format!(
            "{} was not created as `{}`",
            path.display(),
            owner.account
        )));
    }
    check_owner(&path)?;
    super::dirsync::sync_entry(base);
    Ok(MadeDir {
        path,
        existed: false,
        free_before: free,
    })
}

/// [`remove`], for a directory that may belong to another account (a volume created as its
/// workflow's user): removed as its owner through `grant` (`rm -rf --one-file-system`), since
/// the agent may not remove what that account wrote; one of the agent's own is removed
/// directly.
///
/// Errors: as [`remove`]; `Failed` when the owner has no account name or `rm` fails.
pub fn remove_as(base: &Path, name: &str, grant: Option<&crate::grant::Grant>) -> Result<bool, DriverError> {
    check_volume_name(name)?;
    base_dir(base)?;
    let path = base.join(name);
    if !existing_dir(&path)? {
        return Ok(false);
    }
    let uid = owner_uid(&path)?;
    let Some(grant) = grant.filter(|_| uid != nix::unistd::geteuid().as_raw()) else {
        return remove(base, name);
    };
    let account = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => {
            return Err(DriverError::Failed(format!(
                "{} belongs to uid {uid}, which has no account name: remove it by hand",
                path.display()
            )));
        }
    };
    let args = [
        "-rf".to_string(),
        "--one-file-system".into(),
        "--".into(),
        path.display().to_string(),
    ];
    crate::grant::run_blocking(grant, &account, Path::new("rm"), &args, GRANT_TIMEOUT)
        .map_err(|e| DriverError::Failed(format!("cannot remove {} as `{account}`: {e}", path.display())))?;
    if existing_dir(&path)? {
        return Err(DriverError::Failed(format!(
            "{} is still there after `rm -rf` as `{account}`",
            path.display()
        )));
    }
    Ok(true)
}

/// Removes `<base>/<name>` and everything below it (symbolic links inside are removed, never
/// followed). Idempotent: `Ok(false)` when it was already absent, `Ok(true)` when removed.
///
/// Errors: `Refused` for an unsafe name or a non-directory at that path; `Failed` when the base
/// directory is missing or removal fails.
pub fn remove(base: &Path, name: &str) -> Result<bool, DriverError> {
    check_volume_name(name)?;
    base_dir(base)?;
    let path = base.join(name);
    if !existing_dir(&path)? {
        return Ok(false);
    }
    match std::fs::remove_dir_all(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(DriverError::Failed(format!("cannot remove {}: {e}", path.display()))),
    }
}

/// Checks that a recorded `source` (from provisioning) names `expected`, so a delete never
/// removes a directory other than the one this driver would create for the volume (e.g. after
/// the provisioner's base directory changed in the inventory).
///
/// Errors: `Refused` naming both when they differ.
pub fn check_source(source: Option<&str>, expected: &str) -> Result<(), DriverError> {
    match source {
        Some(s) if Path::new(s) != Path::new(expected) => Err(DriverError::Refused(format!(
            "the volume was provisioned at {s}, but this provisioner would delete {expected}; \
             not deleting (was the provisioner's directory changed?)"
        ))),
        _ => Ok(()),
    }
}

/// The free bytes of `base` before a directory of `capacity` bytes is made there: `None` when
/// `space` is [`Space::Unchecked`].
///
/// Errors: the free space cannot be read (`Failed`); less than `capacity` is free (`Refused`,
/// naming both).
fn room_for(base: &Path, capacity: u128, space: Space) -> Result<Option<u128>, DriverError> {
    match space {
        Space::Checked => {
            let free = free_bytes(base)
                .ok_or_else(|| DriverError::Failed(format!("cannot read the free space of {}", base.display())))?;
            if free < capacity {
                return Err(DriverError::Refused(format!(
                    "not enough free space in {}: {} requested, {} free",
                    base.display(),
                    ByteSize(capacity),
                    ByteSize(free)
                )));
            }
            Ok(Some(free))
        }
        Space::Unchecked => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_is_idempotent_and_remove_too() {
        let t = tempfile::tempdir().unwrap();
        let a = create(t.path(), "pvc-1", 1024).unwrap();
        assert!(!a.existed && a.path.is_dir() && a.free_before.is_some());
        let b = create(t.path(), "pvc-1", 1024).unwrap();
        assert!(b.existed);
        std::fs::write(a.path.join("data"), b"x").unwrap();
        assert_eq!(remove(t.path(), "pvc-1"), Ok(true));
        assert!(!a.path.exists());
        assert_eq!(remove(t.path(), "pvc-1"), Ok(false));
    }

    #[test]
    fn refuses_more_than_is_free_and_things_in_the_way() {
        let t = tempfile::tempdir().unwrap();
        let free = free_bytes(t.path()).unwrap();
        let e = create(t.path(), "big", free + (1 << 40)).unwrap_err();
        assert!(
            matches!(&e, DriverError::Refused(m) if m.contains("not enough free space")),
            "{e:?}"
        );
        assert!(!t.path().join("big").exists());
        std::fs::write(t.path().join("file"), b"x").unwrap();
        assert!(matches!(create(t.path(), "file", 1), Err(DriverError::Refused(_))));
        assert!(matches!(remove(t.path(), "file"), Err(DriverError::Refused(_))));
        assert!(t.path().join("file").exists());
    }

    #[test]
    fn symlinks_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        assert!(matches!(remove(t.path(), "link"), Err(DriverError::Refused(_))));
        assert!(outside.path().exists());
    }

    #[test]
    fn missing_base_fails_and_mismatched_source_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("gone");
        assert!(matches!(create(&gone, "v", 1), Err(DriverError::Failed(m)) if m.contains("base directory")));
        assert!(check_source(Some("/a/v/"), "/a/v").is_ok());
        assert!(check_source(None, "/a/v").is_ok());
        assert!(matches!(
            check_source(Some("/b/v"), "/a/v"),
            Err(DriverError::Refused(_))
        ));
    }
}
