//! `efs`: an AWS EFS file system. The agent takes no local action: a volume is the access point
//! path `<fileSystemId>:/<volume name>`, which the EFS mount helper creates on first mount.

use fedvol_common::decision::NewVolume;

use super::names::check_volume_name;
use super::{Created, DriverError};

/// The source `<fileSystemId>:/<volume name>`; nothing is created now.
///
/// Errors: `Refused` for a name that is not one safe path component.
pub fn provision(file_system_id: &str, v: &NewVolume) -> Result<Created, DriverError> {
    check_volume_name(&v.name)?;
    let source = format!("{file_system_id}:/{}", v.name);
    let message = format!("no local action: EFS access point path {source} is created on first mount");
    Ok(Created { source, message })
}

/// Nothing to do locally; the message says the data under the path is kept (as the EFS CSI
/// driver does by default) and where to remove it.
///
/// Errors: `Refused` for an unsafe name.
pub fn delete(file_system_id: &str, volume: &str) -> Result<String, DriverError> {
    check_volume_name(volume)?;
    Ok(format!(
        "no local action: data under EFS path {file_system_id}:/{volume} is kept; remove it through \
         the file system if it is no longer needed"
    ))
}
