//! Builders for the inventory and decision values tests hand to the agent's library.

use std::collections::BTreeMap;

use fedvol_common::decision::NewVolume;
use fedvol_common::model::{AccessMode, AccessModes, Driver, Provisioner, ReclaimPolicy, VolumeMode};
use fedvol_common::size::ByteSize;

/// A READY provisioner (storage class) named `name` with `driver`, open permissions, reclaim
/// policy Delete and no other settings.
pub fn provisioner(name: &str, driver: Driver) -> Provisioner {
    Provisioner::new(name, driver)
}

/// A `hostpath` driver on `path` (not node-local).
pub fn hostpath(path: &std::path::Path) -> Driver {
    Driver::Hostpath {
        path: path.display().to_string(),
        local: false,
        sub_path: None,
    }
}

/// An `external` driver for the out-of-tree provisioner `vendor_name` with `parameters`.
pub fn external(vendor_name: &str, parameters: &[(&str, &str)]) -> Driver {
    Driver::External {
        provisioner: vendor_name.to_string(),
        parameters: parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

/// A new ReadWriteOnce Filesystem volume `name` of storage class `class`, `capacity` bytes.
pub fn new_volume(name: &str, class: &str, capacity: u128) -> NewVolume {
    NewVolume {
        name: name.to_string(),
        provisioner: class.to_string(),
        capacity: ByteSize(capacity),
        access_modes: AccessModes::of(&[AccessMode::ReadWriteOnce]),
        volume_mode: VolumeMode::Filesystem,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        reclaim_policy: ReclaimPolicy::Delete,
        ephemeral: false,
        host: None,
        claim_ref: None,
    }
}

/// An absolute deadline `ms` milliseconds from now (ms since the epoch, as on the wire).
pub fn deadline_in(ms: u64) -> u64 {
    fedvol_proto::now_ms() + ms
}
