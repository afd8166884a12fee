//! Step 1 (docs/design.md §2, Fuzzball "Annotations and Selection" "Fuzzball resolves volumes differently depending on what the
//! workflow specifies"): which resolution mode a workflow volume gets.
//!
//! - `use: <provisioner>` (anything but `ephemeral`/`persistent`) → [`Resolution::Named`];
//! - `name:` without `use:` → [`Resolution::ByName`];
//! - otherwise (`size` and/or `annotations`, `use: ephemeral`, `use: persistent`, or nothing)
//!   → [`Resolution::Automatic`];
//! - a Kubernetes claim → [`Resolution::Claim`].
//!
//! With `use: ephemeral` a `name:` is ignored: v1 Fuzzfiles copy the volume key into `name:` and
//! carry `reference: volume://user/ephemeral`, which means an ephemeral volume.

use crate::decision::Mode;
use crate::funnel::trace::Trace;
use crate::funnel::trace::run_filter;
use crate::model::{Claim, ClaimClass, FuzzballVolume, VolumeSource};

use super::stages;

/// The `use:` value that asks for automatic selection of an ephemeral volume.
pub const USE_EPHEMERAL: &str = "ephemeral";
/// The `use:` value that asks for automatic selection of a persistent volume.
pub const USE_PERSISTENT: &str = "persistent";

/// How one workflow volume is resolved (docs/design.md §2 step 1), borrowing from its request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolution<'a> {
    /// `use: <provisioner>`: that provisioner, no selection (step 2).
    Named {
        /// The provisioner's name as written.
        provisioner: &'a str,
        /// The whole Fuzzball volume.
        fuzzball: &'a FuzzballVolume,
    },
    /// `name:` without `use:`: an existing persistent volume looked up by name (step 3).
    ByName {
        /// The volume's name.
        name: &'a str,
        /// The whole Fuzzball volume.
        fuzzball: &'a FuzzballVolume,
    },
    /// Fuzzball "Annotations and Selection" selection by status, annotations and permission (step 4).
    Automatic {
        /// `use: persistent` (operation `create`); otherwise an ephemeral volume.
        persistent: bool,
        /// The whole Fuzzball volume.
        fuzzball: &'a FuzzballVolume,
    },
    /// A Kubernetes claim: steps 5–6 by Kubernetes' rules.
    Claim(&'a Claim),
}

impl<'a> Resolution<'a> {
    /// Classifies a volume request (total: every request gets exactly one resolution).
    pub fn of(source: &'a VolumeSource) -> Self {
        match source {
            VolumeSource::Claim(c) => Resolution::Claim(c),
            VolumeSource::Fuzzball(fb) => match (fb.use_.as_deref(), fb.name.as_deref()) {
                (Some(USE_EPHEMERAL), _) => Resolution::Automatic {
                    persistent: false,
                    fuzzball: fb,
                },
                (Some(USE_PERSISTENT), _) => Resolution::Automatic {
                    persistent: true,
                    fuzzball: fb,
                },
                (Some(p), _) => Resolution::Named {
                    provisioner: p,
                    fuzzball: fb,
                },
                (None, Some(n)) => Resolution::ByName { name: n, fuzzball: fb },
                (None, None) => Resolution::Automatic {
                    persistent: false,
                    fuzzball: fb,
                },
            },
        }
    }

    /// The mode reported in the decision document.
    pub fn mode(&self) -> Mode {
        match self {
            Resolution::Named { .. } => Mode::Named,
            Resolution::ByName { .. } => Mode::ByName,
            Resolution::Automatic { .. } => Mode::Automatic,
            Resolution::Claim(_) => Mode::Claim,
        }
    }

    /// One line for the trace, e.g. `named: use my-nfs, name project-data` or
    /// `automatic: ephemeral, annotations tier=fast`.
    pub fn describe(&self) -> String {
        match self {
            Resolution::Named { provisioner, fuzzball } => match &fuzzball.name {
                Some(n) => format!("named: use {provisioner}, name {n}"),
                None => format!("named: use {provisioner}, ephemeral"),
            },
            Resolution::ByName { name, fuzzball } => {
                format!("by_name: name {name}{}", annotations_suffix(fuzzball))
            }
            Resolution::Automatic { persistent, fuzzball } => {
                let what = match (persistent, &fuzzball.name) {
                    (true, Some(n)) => format!("persistent {n}"),
                    (true, None) => "persistent".to_string(),
                    (false, _) => "ephemeral".to_string(),
                };
                format!("automatic: {what}{}", annotations_suffix(fuzzball))
            }
            Resolution::Claim(c) => {
                let class = match &c.class {
                    ClaimClass::Unset => "class unset".to_string(),
                    ClaimClass::Empty => "class \"\"".to_string(),
                    ClaimClass::Named(n) => format!("class {n}"),
                };
                format!("claim: {}/{}, {class}", c.namespace, c.name)
            }
        }
    }
}

fn annotations_suffix(fb: &FuzzballVolume) -> String {
    if fb.annotations.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = fb.annotations.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(", annotations {}", pairs.join(","))
}

/// Records stage `volume.mode`: one candidate (the resolution as understood, see
/// [`Resolution::describe`]) that always passes; it marks where the volume's stages begin. The
/// mode itself is reported in the decision's `mode`.
pub(crate) fn record(trace: &mut Trace, key: &str, resolution: &Resolution<'_>) {
    run_filter(
        trace,
        stages::MODE,
        key,
        vec![resolution.describe()],
        Clone::clone,
        |_, _| {},
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(use_: Option<&str>, name: Option<&str>) -> VolumeSource {
        VolumeSource::Fuzzball(FuzzballVolume {
            use_: use_.map(str::to_string),
            name: name.map(str::to_string),
            ..Default::default()
        })
    }

    #[test]
    fn modes_follow_use_and_name() {
        assert_eq!(
            Resolution::of(&fb(Some("my-nfs"), Some("project-data"))).mode(),
            Mode::Named
        );
        assert_eq!(Resolution::of(&fb(Some("my-nfs"), None)).mode(), Mode::Named);
        assert_eq!(Resolution::of(&fb(None, Some("my-dataset"))).mode(), Mode::ByName);
        assert_eq!(Resolution::of(&fb(None, None)).mode(), Mode::Automatic);
        assert_eq!(Resolution::of(&fb(Some("ephemeral"), None)).mode(), Mode::Automatic);
        assert!(matches!(
            Resolution::of(&fb(Some("persistent"), Some("x"))),
            Resolution::Automatic { persistent: true, .. }
        ));
        // v1 files copy the key into `name:` next to `reference: volume://user/ephemeral`.
        assert!(matches!(
            Resolution::of(&fb(Some("ephemeral"), Some("lammps-data-volume"))),
            Resolution::Automatic { persistent: false, .. }
        ));
    }

    #[test]
    fn mode_stage_records_one_passing_candidate() {
        let src = fb(Some("persistent"), Some("my-archive"));
        let mut trace = Trace::default();
        record(&mut trace, "results", &Resolution::of(&src));
        assert_eq!(trace[0].stage, "volume.mode");
        assert_eq!((trace[0].considered, trace[0].passed), (1, 1));
    }
}
