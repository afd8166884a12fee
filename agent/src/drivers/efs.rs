//! `efs`: an AWS EFS file system. The agent takes no local action: a volume is the access point
//! path `<filesystemId>:/[<subPath>/]<volume name>`, which the EFS mount helper creates on first
//! mount.

use fedvol_common::decision::NewVolume;

use super::names::check_volume_name;
use super::{Created, DriverError};

/// The source `<filesystemId>:/[<subPath>/]<volume name>`; nothing is created now.
///
/// Errors: `Refused` for a name that is not one safe path component.
pub fn provision(file_system_id: &str, sub_path: Option<&str>, v: &NewVolume) -> Result<Created, DriverError> {
    check_volume_name(&v.name)?;
    let source = format!("{file_system_id}:/{}", below(sub_path, &v.name));
    let message = format!("no local action: EFS access point path {source} is created on first mount");
    Ok(Created { source, message })
}

/// Nothing to do locally; the message says the data under the path is kept (as the EFS CSI
/// driver does by default) and where to remove it.
///
/// Errors: `Refused` for an unsafe name.
pub fn delete(file_system_id: &str, sub_path: Option<&str>, volume: &str) -> Result<String, DriverError> {
    check_volume_name(volume)?;
    Ok(format!(
        "no local action: data under EFS path {file_system_id}:/{} is kept; remove it through \
         the file system if it is no longer needed",
        below(sub_path, volume)
    ))
}

/// `<subPath>/<name>`, or `<name>` without a subPath.
fn below(sub_path: Option<&str>, name: &str) -> String {
    match sub_path {
        Some(s) => format!("{s}/{name}"),
        None => name.to_string(),
    }
}
