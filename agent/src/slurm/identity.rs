//! Who a workflow's jobs and volumes belong to on a cluster that runs jobs (`slurm.jobs`): the
//! local account its federation user maps to, and how each request's jobs are counted there.
//!
//! - **Mapping.** Without `userMap`, a user maps to the account of the same name. With it, only
//!   the users the file lists map, each to the account it names (a grid-mapfile admits only its
//!   listed identities; Open OnDemand maps with `user_map_match`/`user_map_cmd` and refuses the
//!   rest). The file: one `<federation user> <account>` per line, `#` starts a comment.
//! - **Refusals.** A user the map does not list, an account the password database does not
//!   know, an account below `minUid` (root, system accounts: jobs never run as them) or a name
//!   no account can have: the user is unmapped here, and the funnel's `identity.user` stage
//!   refuses the workflow on this cluster with code `unmapped_user` and the sentence made here.
//! - **Counting.** A job that asks for no memory is counted with `memPerCore` per core (what
//!   `sbatch --mem` then asks for), so what fedvol counts is what Slurm allots.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fedvol_common::funnel::{PlanRequest, RunAs};
use fedvol_common::model::JobKind;
use fedvol_common::size::ByteSize;

use super::config::JobsConfig;
use crate::grant::Grant;
use crate::state::core::JobRunner;

/// A local account jobs run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its home directory.
    pub home: PathBuf,
}

/// `userMap`, read: federation user → account.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserMap {
    /// The file, when one is configured.
    pub file: Option<PathBuf>,
    /// Its entries.
    pub entries: BTreeMap<String, String>,
}

/// True when `name` may be a local account's name: letters, digits, `_`, `.`, `-`, not
/// starting with `-` (never taken for an option of `sudo`), at most 64 bytes.
pub fn plausible_account(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl UserMap {
    /// Reads `file` (see the module's format).
    ///
    /// Errors: the file cannot be read, or a line is not `<user> <account>` or names a user
    /// twice: `file:line: ...`.
    pub fn read(file: &Path) -> Result<UserMap, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: cannot be read: {e}", file.display()))?;
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let at = format!("{}:{}", file.display(), i + 1);
            let words: Vec<&str> = line.split_whitespace().collect();
            let [user, account] = words[..] else {
                return Err(format!(
                    "{at}: expected `<federation user> <local account>`, found `{line}`"
                ));
            };
            if !plausible_account(account) {
                return Err(format!(
                    "{at}: `{account}` cannot be a local account's name (letters, digits, `_`, `.`, `-`)"
                ));
            }
            if entries.insert(user.to_string(), account.to_string()).is_some() {
                return Err(format!("{at}: user `{user}` is mapped twice"));
            }
        }
        Ok(UserMap {
            file: Some(file.to_path_buf()),
            entries,
        })
    }
}

/// The agent's [`JobRunner`] on a cluster that runs jobs as their users.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The cluster's name, for messages.
    pub cluster: String,
    /// The user map.
    pub map: UserMap,
    /// The lowest uid a job may run as.
    pub min_uid: u32,
    /// Memory per core counted for a job that asks for none, bytes.
    pub mem_per_core: ByteSize,
    /// How commands run as an account.
    pub grant: Grant,
}

impl Runner {
    /// The runner of `cfg`'s jobs on `cluster`, its user map read; commands keep
    /// `SLURM_CONF=slurm_conf` when given.
    ///
    /// Errors: the map cannot be read ([`UserMap::read`]).
    pub fn new(cluster: &str, cfg: &JobsConfig, slurm_conf: Option<&Path>) -> Result<Runner, String> {
        let map = match &cfg.user_map {
            Some(f) => UserMap::read(f)?,
            None => UserMap::default(),
        };
        Ok(Runner {
            cluster: cluster.to_string(),
            map,
            min_uid: cfg.min_uid,
            mem_per_core: cfg.mem_per_core,
            grant: Grant::sudo(&cfg.sudo, slurm_conf),
        })
    }

    /// The account `user`'s jobs run as, or why none (one sentence naming what to do).
    pub fn resolve(&self, user: &str) -> Result<Account, String> {
        let c = &self.cluster;
        let name = match (&self.map.file, self.map.entries.get(user)) {
            (_, Some(a)) => a.clone(),
            (Some(f), None) => {
                return Err(format!(
                    "user `{user}` is not in cluster {c}'s user map {}: its jobs would run as nobody's account, so the cluster does not take them",
                    f.display()
                ));
            }
            (None, None) => user.to_string(),
        };
        if !plausible_account(&name) {
            return Err(format!(
                "user `{user}` has no local account on cluster {c}: `{name}` cannot be an account's name; map the user to an account in the agent's `slurm.jobs.userMap`"
            ));
        }
        let found = nix::unistd::User::from_name(&name)
            .map_err(|e| format!("user `{user}`: the password database of cluster {c} cannot be read: {e}"))?;
        let Some(pw) = found else {
            let hint = match &self.map.file {
                Some(f) => format!(
                    "add the account (`useradd -m {name}`) or change the user's line in {}",
                    f.display()
                ),
                None => format!(
                    "add the account (`useradd -m {name}`), or map the user to an existing account in the agent's `slurm.jobs.userMap`"
                ),
            };
            return Err(format!(
                "user `{user}` maps to account `{name}`, which does not exist on cluster {c}: {hint}"
            ));
        };
        let uid = pw.uid.as_raw();
        if uid < self.min_uid {
            return Err(format!(
                "user `{user}` maps to account `{name}` (uid {uid}), below `slurm.jobs.minUid` {} of cluster {c}: jobs never run as root or a system account",
                self.min_uid
            ));
        }
        Ok(Account {
            name,
            uid,
            home: pw.dir,
        })
    }
}

impl JobRunner for Runner {
    fn run_as(&self, user: &str) -> RunAs {
        match self.resolve(user) {
            Ok(a) => RunAs::Account(a.name),
            Err(why) => RunAs::Unmapped(why),
        }
    }

    fn counted<'a>(&self, req: &'a PlanRequest) -> Cow<'a, PlanRequest> {
        let bare = |j: &fedvol_common::model::Job| j.kind == JobKind::Job && j.resources.memory.0 == 0;
        if self.mem_per_core.0 == 0 || !req.workflow.jobs.iter().any(bare) {
            return Cow::Borrowed(req);
        }
        let mut req = req.clone();
        for j in req.workflow.jobs.iter_mut().filter(|j| bare(j)) {
            j.resources.memory = ByteSize(self.mem_per_core.0.saturating_mul(u128::from(j.resources.cpu.max(1))));
        }
        Cow::Owned(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(map: Option<&str>) -> (Runner, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Runner {
            cluster: "c".into(),
            map: UserMap::default(),
            min_uid: 1000,
            mem_per_core: ByteSize(1 << 30),
            grant: Grant::sudo("sudo", None),
        };
        if let Some(text) = map {
            let f = dir.path().join("users.map");
            std::fs::write(&f, text).unwrap();
            r.map = UserMap::read(&f).unwrap();
        }
        (r, dir)
    }

    #[test]
    fn root_system_accounts_and_missing_ones_are_refused_with_what_to_do() {
        let (r, _d) = runner(None);
        let e = r.resolve("root").unwrap_err();
        assert!(e.contains("uid 0") && e.contains("never run as root"), "{e}");
        let e = r.resolve("no-such-user-here").unwrap_err();
        assert!(e.contains("useradd -m no-such-user-here"), "{e}");
        let e = r.resolve("-rf").unwrap_err();
        assert!(e.contains("cannot be an account's name"), "{e}");
        let (r, _d) = runner(Some("# the map\nalice root\n"));
        let e = r.resolve("bob").unwrap_err();
        assert!(e.contains("not in cluster c's user map"), "{e}");
        let e = r.resolve("alice").unwrap_err();
        assert!(e.contains("account `root` (uid 0)"), "{e}");
        assert!(matches!(JobRunner::run_as(&r, "bob"), RunAs::Unmapped(_)));
    }

    #[test]
    fn map_lines_are_checked_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m");
        for (text, want) in [
            ("alice\n", ":1: expected"),
            ("a x\na y\n", ":2: user `a` is mapped twice"),
            ("a -x\n", "cannot be a local account"),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = UserMap::read(&f).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_job_without_memory_is_counted_with_the_sites_default_per_core() {
        let (r, _d) = runner(None);
        let text = "version: v4\njobs:\n  a:\n    image: {uri: docker://a}\n    script: true\n    resource: {cpu: {cores: 3}}\n  b:\n    image: {uri: docker://a}\n    script: true\n    resource: {cpu: {cores: 3}, memory: {size: 1MiB}}\n";
        let wf = fedvol_formats::parse_workflow_str("wf.yaml", "wf", text).unwrap().value;
        let req = PlanRequest::new("r", wf, "u");
        let c = r.counted(&req);
        assert_eq!(c.workflow.jobs[0].resources.memory, ByteSize(3 << 30));
        assert_eq!(c.workflow.jobs[1].resources.memory, ByteSize(1 << 20));
    }
}
