//! Storage drivers: create and delete the storage asset behind a volume (the Kubernetes volume provisioning design's
//! provisioner and deleter roles), one module per [`Driver`] kind:
//!
//! - [`hostpath`]: the directory `<path>/<volume>` on the agent's host, created and removed for
//!   real, free space checked;
//! - [`nfs`]: the same under the export's mount point on the agent (`driver.mount`), refused
//!   when the export is not mounted there;
//! - [`efs`]: no local action, the source is an EFS access point path;
//! - [`external`]: an out-of-tree `vendor/name` provisioner asked over NATS with retries.
//!
//! [`localdir`] holds the directory mechanics `hostpath` and `nfs` share; [`dirsync`] makes a
//! new directory's entry durable, one base `fsync` shared by the creations finishing together.
//!
//! [`Drivers`] picks the module from the provisioner's driver and logs every outcome with the
//! request id (never a parameter value whose key looks secret, see [`secrets`]).

pub mod dirsync;
pub mod efs;
pub mod external;
pub mod hostpath;
pub mod localdir;
pub mod names;
pub mod nfs;
pub mod retry;
pub mod secrets;

use std::path::Path;

use fedvol_common::decision::NewVolume;
use fedvol_common::model::{Driver, Provisioner};
use fedvol_proto::Subjects;
use fedvol_proto::provisioner::ProvisionerOp;

pub use retry::RetryPolicy;

/// Why a driver could not create or delete an asset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The provisioner refused (bad parameters, unsatisfiable request): retrying will not help.
    #[error("provisioner refused: {0}")]
    Refused(String),
    /// The asset could not be created or deleted now (I/O error, no answer): may be retried.
    #[error("{0}")]
    Failed(String),
}

/// What a successful provisioning created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Where the asset is: a directory path, an EFS access-point path, an external source id.
    pub source: String,
    /// A human line for the volume's `ProvisioningSucceeded` event.
    pub message: String,
}

/// Runs a driver call until the request's deadline (`deadline_ms`, ms since the epoch; 0 = no
/// deadline): a hostpath or NFS call stuck on a hung mount no longer holds a commit or a
/// completion forever. The call's thread may still finish later; the answer is a
/// failure that says so.
async fn within_deadline<T>(
    deadline_ms: u64,
    what: &str,
    call: impl std::future::Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    if deadline_ms == 0 {
        return call.await;
    }
    let left = std::time::Duration::from_millis(deadline_ms.saturating_sub(fedvol_proto::now_ms()));
    tokio::time::timeout(left, call).await.unwrap_or_else(|_| {
        Err(DriverError::Failed(format!(
            "{what} did not finish before the request's deadline ({} ms): a hung mount or storage backend?",
            left.as_millis()
        )))
    })
}

/// The deadline [`within_deadline`] puts on a call of `driver`: the request's, except for an
/// external provisioner, whose calls stop at that deadline by themselves and say how many
/// attempts were made (0 = no outer bound).
fn local_bound(driver: &Driver, deadline_ms: u64) -> u64 {
    match driver {
        Driver::External { .. } => 0,
        _ => deadline_ms,
    }
}

/// The refusal for a driver type fedvol plans with but cannot create or delete volumes on
/// (`k8s_pvc`, `azure_files`, `oci_fss`, `oci_lustre`, `filestore`; see docs/formats.md, "Drivers").
fn not_acted_on(driver: &Driver) -> DriverError {
    DriverError::Refused(format!(
        "driver type `{}` is accepted for planning (selection, reachability, binding of existing volumes), \
         but fedvol cannot create or delete volumes on it yet: bind an existing volume, or use an \
         nfs, hostpath, efs or external provisioner",
        driver.kind()
    ))
}

/// `driver` with its `subPath` folded into the base path (hostpath `path`, nfs `target` and
/// `mount`); the subdirectory is created below an existing base, so that a missing mount is
/// still reported as missing. EFS keeps its `subPath` (the access point path carries it).
fn fold_sub_path(driver: Driver) -> Driver {
    let below = |base: &str, sub: &str| format!("{}/{sub}", base.trim_end_matches('/'));
    let make = |base: &str, sub: &str| {
        if Path::new(base).is_dir() {
            let _ = std::fs::create_dir_all(Path::new(base).join(sub));
        }
    };
    match driver {
        Driver::Hostpath {
            path,
            local,
            sub_path: Some(sub),
        } => {
            make(&path, &sub);
            Driver::Hostpath {
                path: below(&path, &sub),
                local,
                sub_path: None,
            }
        }
        Driver::Nfs {
            target,
            mount,
            version,
            options,
            sub_path: Some(sub),
        } => {
            if let Some(m) = &mount {
                make(m, &sub);
            }
            Driver::Nfs {
                target: below(&target, &sub),
                mount: mount.map(|m| below(&m, &sub)),
                version,
                options,
                sub_path: None,
            }
        }
        other => other,
    }
}

/// Runs a blocking file-system job on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, DriverError> + Send + 'static,
) -> Result<T, DriverError> {
    tokio::task::spawn_blocking(job)
        .await
        .unwrap_or_else(|e| Err(DriverError::Failed(format!("file-system task did not finish: {e}"))))
}

/// The storage drivers of one cluster's agent.
///
/// Built from the agent's NATS connection (needed only by `external` provisioners), its cluster
/// name (part of the provisioner subjects), the subject prefix and the retry policy for external
/// provisioners. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Drivers {
    nats: Option<async_nats::Client>,
    cluster: String,
    subjects: Subjects,
    retry: RetryPolicy,
    storage_root: Option<std::path::PathBuf>,
    /// How a volume directory is made as its workflow's account (a cluster that runs jobs as
    /// their users); `None`: directories are the agent's.
    grant: Option<crate::grant::Grant>,
}

impl Drivers {
    /// Drivers for `cluster`. `nats` may be `None` when no external provisioner is used (they
    /// then fail with a message saying the agent has no NATS connection).
    pub fn new(nats: Option<async_nats::Client>, cluster: &str, subjects: Subjects, retry: RetryPolicy) -> Self {
        Drivers {
            nats,
            cluster: cluster.to_string(),
            subjects,
            retry,
            storage_root: None,
            grant: None,
        }
    }

    /// A sandbox for development and demos (`fedvol dev`): every local path of a hostpath or nfs
    /// driver is re-rooted under `root` (created on demand), an NFS export that is not mounted on
    /// the agent is simulated by the directory `<root>/nfs/<server_export>`, and the free-space
    /// check is skipped (a sandbox volume is an empty directory that reserves no disk). Never for
    /// production: the volumes then live on the agent's own disk.
    pub fn with_storage_root(mut self, root: std::path::PathBuf) -> Self {
        self.storage_root = Some(root);
        self
    }

    /// The same, making and removing hostpath and nfs volume directories as the account they
    /// belong to through `grant` ([`Drivers::provision_as`]).
    pub fn with_grant(mut self, grant: crate::grant::Grant) -> Self {
        self.grant = Some(grant);
        self
    }

    /// The driver as this agent runs it: re-rooted under the storage root when there is one,
    /// and with its `subPath` folded into the base (Fuzzball `subPath`: a provisioner's volumes
    /// live in that subdirectory of the export or base path, so that provisioners sharing one
    /// file system don't collide).
    fn effective(&self, p: &Provisioner) -> Provisioner {
        let mut q = p.clone();
        if let Some(root) = &self.storage_root {
            let under = |path: &str| root.join(path.trim_start_matches('/'));
            q.driver = match &p.driver {
                Driver::Hostpath { path, local, sub_path } => {
                    let base = under(path);
                    let _ = std::fs::create_dir_all(&base);
                    Driver::Hostpath {
                        path: base.display().to_string(),
                        local: *local,
                        sub_path: sub_path.clone(),
                    }
                }
                Driver::Nfs {
                    target,
                    mount,
                    version,
                    options,
                    sub_path,
                } => {
                    let m = match mount {
                        Some(m) => under(m),
                        None => root.join("nfs").join(fedvol_proto::subject_token(target)),
                    };
                    let _ = std::fs::create_dir_all(&m);
                    Driver::Nfs {
                        target: target.clone(),
                        mount: Some(m.display().to_string()),
                        version: *version,
                        options: options.clone(),
                        sub_path: sub_path.clone(),
                    }
                }
                other => other.clone(),
            };
        }
        q.driver = fold_sub_path(q.driver);
        q
    }

    /// The retry policy used for external provisioners.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// Creates the asset for the new volume `v` through `p`'s driver (the Kubernetes volume provisioning design: dynamic
    /// provisioning). `request_id` is the idempotency key passed to external provisioners and
    /// logged; `deadline_ms` (ms since the epoch, 0 = none) bounds external retries. Repeating a
    /// call for the same volume name succeeds without creating a second asset.
    ///
    /// Errors: [`DriverError::Refused`] when retrying cannot help (unsafe volume name, too little
    /// free space, NFS export not mounted on the agent, a provisioner's `ok: false`);
    /// [`DriverError::Failed`] otherwise (I/O errors, an external provisioner that did not answer
    /// within the attempts or the deadline).
    pub async fn provision(
        &self,
        p: &Provisioner,
        v: &NewVolume,
        request_id: &str,
        deadline_ms: u64,
    ) -> Result<Created, DriverError> {
        self.provision_as(p, v, request_id, deadline_ms, None).await
    }

    /// [`Drivers::provision`], a hostpath or nfs directory made as account `owner` (through
    /// the grant, [`localdir::create_as`]) when given and the drivers have a grant: the volume
    /// belongs to that account. Other drivers ignore `owner` (an external provisioner sets
    /// ownership itself).
    ///
    /// Errors: as [`Drivers::provision`].
    pub async fn provision_as(
        &self,
        p: &Provisioner,
        v: &NewVolume,
        request_id: &str,
        deadline_ms: u64,
        owner: Option<&str>,
    ) -> Result<Created, DriverError> {
        let owner = match (&self.grant, owner) {
            (Some(g), Some(a)) => Some((g.clone(), a.to_string())),
            _ => None,
        };
        let p = &self.effective(p);
        // A sandbox's volume is an empty directory reserving no disk: its size is kept (logged
        // and said), only the free-space check is skipped.
        let space = if self.storage_root.is_some() {
            localdir::Space::Unchecked
        } else {
            localdir::Space::Checked
        };
        tracing::info!(
            request_id,
            provisioner = %p.name,
            driver = p.driver.kind(),
            volume = %v.name,
            capacity = %v.capacity,
            "provisioning"
        );
        let out = within_deadline(local_bound(&p.driver, deadline_ms), "provisioning", async {
            match &p.driver {
                Driver::Hostpath { path, local, .. } => {
                    hostpath::provision(path, *local, v, space, owner.clone()).await
                }
                Driver::Nfs { target, mount, .. } => {
                    nfs::provision(target, mount.as_deref(), v, space, owner.clone()).await
                }
                Driver::Efs {
                    file_system_id,
                    sub_path,
                    ..
                } => efs::provision(file_system_id, sub_path.as_deref(), v),
                Driver::External {
                    provisioner,
                    parameters,
                } => {
                    let (client, provision_subject, delete_subject) = self.external(provisioner)?;
                    let ep = self.endpoint(&client, provisioner, &provision_subject, &delete_subject);
                    external::provision(&ep, parameters, v, request_id, deadline_ms).await
                }
                other => Err(not_acted_on(other)),
            }
        })
        .await;
        match &out {
            Ok(c) => {
                tracing::info!(request_id, provisioner = %p.name, volume = %v.name, source = %c.source, "{}", c.message)
            }
            Err(e) => {
                tracing::warn!(request_id, provisioner = %p.name, volume = %v.name, error = %e, "provisioning failed")
            }
        }
        out
    }

    /// Deletes the asset of `volume` (provisioned by `p`, at the recorded `source` when known)
    /// and returns a human line for the volume's `Deleted` event (the Kubernetes volume provisioning design: reclaim policy
    /// Delete). Deleting an asset that is already gone succeeds. For hostpath and nfs a recorded
    /// `source` that is not the directory this driver would remove is refused rather than
    /// deleted. EFS data is kept (no local action; the message says so). External provisioners
    /// are asked by volume name (the wire's `DeleteMsg` carries no source).
    ///
    /// Errors: as [`Drivers::provision`]; the caller records `VolumeFailedDelete`.
    pub async fn delete(
        &self,
        p: &Provisioner,
        volume: &str,
        source: Option<&str>,
        request_id: &str,
        deadline_ms: u64,
    ) -> Result<String, DriverError> {
        let p = &self.effective(p);
        tracing::info!(request_id, provisioner = %p.name, driver = p.driver.kind(), volume, source, "deleting");
        let out = within_deadline(local_bound(&p.driver, deadline_ms), "deleting", async {
            match &p.driver {
                Driver::Hostpath { path, .. } => hostpath::delete(path, volume, source, self.grant.clone()).await,
                Driver::Nfs { target, mount, .. } => {
                    nfs::delete(target, mount.as_deref(), volume, source, self.grant.clone()).await
                }
                Driver::Efs {
                    file_system_id,
                    sub_path,
                    ..
                } => efs::delete(file_system_id, sub_path.as_deref(), volume),
                Driver::External { provisioner, .. } => {
                    let (client, provision_subject, delete_subject) = self.external(provisioner)?;
                    let ep = self.endpoint(&client, provisioner, &provision_subject, &delete_subject);
                    external::delete(&ep, &p.name, volume, request_id, deadline_ms).await
                }
                other => Err(not_acted_on(other)),
            }
        })
        .await;
        match &out {
            Ok(m) => tracing::info!(request_id, provisioner = %p.name, volume, "{m}"),
            Err(e) => tracing::warn!(request_id, provisioner = %p.name, volume, error = %e, "deletion failed"),
        }
        out
    }

    /// Free bytes in `p`'s backing store as the agent sees it (statvfs `f_bavail * f_frsize`):
    /// the hostpath base directory or the mounted NFS export. `None` for EFS, external
    /// provisioners, an unmounted NFS export or a path that cannot be examined. Blocking (one
    /// statvfs call).
    pub fn free_bytes(&self, p: &Provisioner) -> Option<u128> {
        let p = &self.effective(p);
        match &p.driver {
            Driver::Hostpath { path, .. } => localdir::free_bytes(Path::new(path)),
            Driver::Nfs { mount: Some(m), .. } => localdir::free_bytes(Path::new(m)),
            _ => None,
        }
    }

    /// The connection and the provision/delete subjects of external provisioner `name`.
    fn external(&self, name: &str) -> Result<(async_nats::Client, String, String), DriverError> {
        let client = self.nats.clone().ok_or_else(|| {
            DriverError::Failed(format!(
                "external provisioner {name} is reached over NATS, and this agent has no NATS connection"
            ))
        })?;
        Ok((
            client,
            self.subjects.provisioner(&self.cluster, name, ProvisionerOp::Provision),
            self.subjects.provisioner(&self.cluster, name, ProvisionerOp::Delete),
        ))
    }

    fn endpoint<'a>(
        &self,
        client: &'a async_nats::Client,
        provisioner: &'a str,
        provision_subject: &'a str,
        delete_subject: &'a str,
    ) -> external::Endpoint<'a> {
        external::Endpoint {
            client,
            provisioner,
            provision_subject,
            delete_subject,
            policy: self.retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::model::{AccessMode, AccessModes, ReclaimPolicy};
    use fedvol_common::size::ByteSize;

    /// A driver call that never returns (a hung mount) fails at the request's
    /// deadline instead of holding the commit forever.
    #[tokio::test]
    async fn a_driver_call_that_hangs_fails_at_the_deadline() {
        let started = std::time::Instant::now();
        let hung = std::future::pending::<Result<(), DriverError>>();
        let r = within_deadline(fedvol_proto::now_ms() + 300, "provisioning", hung).await;
        let Err(DriverError::Failed(m)) = r else {
            panic!("{r:?}")
        };
        assert!(m.contains("did not finish before the request's deadline"), "{m}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let quick = within_deadline(fedvol_proto::now_ms() + 300, "deleting", async { Ok(7) }).await;
        assert_eq!(quick.unwrap(), 7);
    }

    fn prov(driver: Driver) -> Provisioner {
        Provisioner::new("class-a", driver)
    }

    fn vol(name: &str) -> NewVolume {
        NewVolume {
            name: name.into(),
            provisioner: "class-a".into(),
            capacity: ByteSize(1 << 20),
            access_modes: AccessModes::of(&[AccessMode::ReadWriteOnce]),
            volume_mode: Default::default(),
            labels: Default::default(),
            annotations: Default::default(),
            reclaim_policy: ReclaimPolicy::Delete,
            ephemeral: false,
            host: None,
            claim_ref: None,
        }
    }

    fn drivers() -> Drivers {
        Drivers::new(None, "c1", Subjects::default(), RetryPolicy::default())
    }

    #[tokio::test]
    async fn nfs_on_a_mount_creates_under_it_and_names_the_export() {
        let t = tempfile::tempdir().unwrap();
        let p = prov(Driver::Nfs {
            target: "nfs-fast:/export/nvme/".into(),
            mount: Some(t.path().display().to_string()),
            version: None,
            options: None,
            sub_path: None,
        });
        let d = drivers();
        let c = d.provision(&p, &vol("pvc-1"), "r1", 0).await.unwrap();
        assert_eq!(c.source, "nfs-fast:/export/nvme/pvc-1");
        assert!(t.path().join("pvc-1").is_dir());
        assert!(d.free_bytes(&p).is_some_and(|f| f > 0));
        let e = d
            .delete(&p, "pvc-1", Some("other:/x/pvc-1"), "r1", 0)
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Refused(_)), "{e:?}");
        assert!(t.path().join("pvc-1").is_dir());
        d.delete(&p, "pvc-1", Some(&c.source), "r1", 0).await.unwrap();
        assert!(!t.path().join("pvc-1").exists());
    }

    #[tokio::test]
    async fn efs_has_no_local_action_and_unsafe_names_are_refused_everywhere() {
        let d = drivers();
        let efs = prov(Driver::Efs {
            file_system_id: "fs-12345678".into(),
            region: None,
            subnet_ids: Vec::new(),
            sub_path: None,
        });
        let c = d.provision(&efs, &vol("pvc-2"), "r", 0).await.unwrap();
        assert_eq!(c.source, "fs-12345678:/pvc-2");
        assert!(c.message.contains("created on first mount"), "{}", c.message);
        assert!(d.delete(&efs, "pvc-2", None, "r", 0).await.unwrap().contains("kept"));
        assert_eq!(d.free_bytes(&efs), None);
        let t = tempfile::tempdir().unwrap();
        let hp = prov(Driver::Hostpath {
            path: t.path().display().to_string(),
            local: false,
            sub_path: None,
        });
        for p in [&efs, &hp] {
            for bad in ["..", "../x", "a/b"] {
                assert!(matches!(
                    d.provision(p, &vol(bad), "r", 0).await,
                    Err(DriverError::Refused(_))
                ));
                assert!(matches!(
                    d.delete(p, bad, None, "r", 0).await,
                    Err(DriverError::Refused(_))
                ));
            }
        }
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }

    /// The sandbox of `fedvol dev` (a storage root) skips the free-space check, and still says
    /// the volume's requested size: a 1 EB volume is created there "for 1EB", never "for 0B".
    #[tokio::test]
    async fn a_sandboxed_volume_keeps_its_size_in_what_is_said() {
        let root = tempfile::tempdir().unwrap();
        let d = drivers().with_storage_root(root.path().to_path_buf());
        let mut v = vol("pvc-9");
        v.capacity = ByteSize(10u128.pow(18));
        for p in [
            prov(Driver::Hostpath {
                path: "/scratch/fast".into(),
                local: false,
                sub_path: None,
            }),
            prov(Driver::Nfs {
                target: "nas1:/export".into(),
                mount: None,
                version: None,
                options: None,
                sub_path: None,
            }),
        ] {
            let c = d.provision(&p, &v, "r", 0).await.unwrap();
            assert!(c.message.contains(" for 1EB (free space not checked"), "{}", c.message);
            assert!(!c.message.contains("0B"), "{}", c.message);
        }
        assert!(root.path().join("scratch/fast/pvc-9").is_dir());
        // Outside a sandbox the check stays: 1 EB does not fit.
        let t = tempfile::tempdir().unwrap();
        let hp = prov(Driver::Hostpath {
            path: t.path().display().to_string(),
            local: false,
            sub_path: None,
        });
        let e = drivers().provision(&hp, &v, "r", 0).await.unwrap_err();
        assert!(
            matches!(&e, DriverError::Refused(m) if m.contains("not enough free space")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn external_without_nats_fails_clearly() {
        let p = prov(Driver::External {
            provisioner: "example.com/dirs".into(),
            parameters: Default::default(),
        });
        let e = drivers().provision(&p, &vol("pvc-3"), "r", 0).await.unwrap_err();
        assert!(
            matches!(&e, DriverError::Failed(m) if m.contains("no NATS connection")),
            "{e:?}"
        );
        assert_eq!(drivers().free_bytes(&p), None);
    }

    /// Fuzzball `subPath`: a provisioner's volumes live in that subdirectory of its base
    /// (Fuzzball's provisioner definition reference, "Driver"), created on first use.
    #[tokio::test]
    async fn sub_path_confines_volumes_to_a_subdirectory() {
        let d = drivers();
        let t = tempfile::tempdir().unwrap();
        let hp = prov(Driver::Hostpath {
            path: t.path().display().to_string(),
            local: false,
            sub_path: Some("team-a/vols".into()),
        });
        let c = d.provision(&hp, &vol("pvc-4"), "r", 0).await.unwrap();
        let dir = t.path().join("team-a/vols/pvc-4");
        assert!(dir.is_dir());
        assert_eq!(c.source, dir.display().to_string());
        d.delete(&hp, "pvc-4", Some(&c.source), "r", 0).await.unwrap();
        assert!(!dir.exists() && t.path().join("team-a/vols").is_dir());

        let efs = prov(Driver::Efs {
            file_system_id: "fs-12345678".into(),
            region: Some("us-west-2".into()),
            subnet_ids: Vec::new(),
            sub_path: Some("wf".into()),
        });
        assert_eq!(
            d.provision(&efs, &vol("pvc-5"), "r", 0).await.unwrap().source,
            "fs-12345678:/wf/pvc-5"
        );

        // A missing base is still reported as missing, not silently created.
        let gone = prov(Driver::Hostpath {
            path: t.path().join("absent").display().to_string(),
            local: false,
            sub_path: Some("x".into()),
        });
        let e = d.provision(&gone, &vol("pvc-6"), "r", 0).await.unwrap_err();
        assert!(
            matches!(&e, DriverError::Failed(m) if m.contains("cannot be used")),
            "{e:?}"
        );
    }

    /// Driver types fedvol plans with but cannot create volumes on are refused at commit,
    /// naming the type (docs/formats.md, "Drivers").
    #[tokio::test]
    async fn drivers_fedvol_does_not_act_on_are_refused_with_the_type() {
        let p = prov(Driver::AzureFiles {
            account_name: Some("acct".into()),
            share_name: Some("share".into()),
            region: None,
            sub_path: None,
        });
        let e = drivers().provision(&p, &vol("pvc-7"), "r", 0).await.unwrap_err();
        assert!(
            matches!(&e, DriverError::Refused(m) if m.contains("`azure_files`") && m.contains("cannot create")),
            "{e:?}"
        );
        assert!(matches!(
            drivers().delete(&p, "pvc-7", None, "r", 0).await,
            Err(DriverError::Refused(_))
        ));
    }
}
