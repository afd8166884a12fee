//! The fedvol inventory document itself (the one without a `kind`): `cluster`, `include`,
//! `provisioners`, `volumes`, `projects`, `zones`.

use super::common::is_subject_token;
use super::projects::{ProjectDef, decode_projects};
use super::provisioners::{ProvisionerDef, decode_provisioners};
use super::volumes::{VolumeDef, decode_volumes};
use super::zones::{ZoneDef, decode_zones};
use crate::yaml::{Ctx, Node, Span};

/// A decoded fedvol inventory document, with the positions reference checks need.
#[derive(Debug, Clone, Default)]
pub(crate) struct FedvolDoc {
    /// `cluster:` and its position.
    pub cluster: Option<(String, Span)>,
    /// `include:` paths as written, with positions.
    pub includes: Vec<(String, Span)>,
    /// Provisioners that decoded, in file order.
    pub provisioners: Vec<ProvisionerDef>,
    /// Every provisioner key, decoded or not.
    pub provisioner_keys: Vec<String>,
    /// Volumes that decoded, in file order.
    pub volumes: Vec<VolumeDef>,
    /// Projects.
    pub projects: Vec<ProjectDef>,
    /// Zones that decoded, in file order.
    pub zones: Vec<ZoneDef>,
    /// Every zone key, decoded or not.
    pub zone_keys: Vec<String>,
}

/// Top-level keys of a fedvol inventory document.
pub const TOP_LEVEL_KEYS: [&str; 6] = ["cluster", "include", "provisioners", "volumes", "projects", "zones"];

/// Decodes one fedvol inventory document. `cluster` is required and must be a NATS subject
/// token (letters, digits, `-`, `_`); every other section is optional.
pub(crate) fn decode_fedvol_doc(ctx: &mut Ctx, doc: &Node) -> FedvolDoc {
    let mut out = FedvolDoc::default();
    let Some(mut r) = ctx.map(doc, "") else {
        return out;
    };
    if let Some(n) = r.require(ctx, "cluster")
        && let Some(c) = ctx.nonempty_string(n, "cluster")
    {
        if is_subject_token(&c) {
            out.cluster = Some((c, n.span));
        } else {
            ctx.error(
                n.span,
                "cluster",
                format!(
                    "`{c}` is not a valid cluster name; use letters, digits, `-` and `_` (it is a NATS subject token)"
                ),
            );
        }
    }
    if let Some(n) = r.take("include") {
        for (i, item) in ctx.seq(n, "include").unwrap_or_default().iter().enumerate() {
            if let Some(p) = ctx.nonempty_string(item, &format!("include[{i}]")) {
                out.includes.push((p, item.span));
            }
        }
    }
    if let Some(n) = r.take("provisioners") {
        (out.provisioners, out.provisioner_keys) = decode_provisioners(ctx, n, "provisioners");
    }
    if let Some(n) = r.take("volumes") {
        out.volumes = decode_volumes(ctx, n, "volumes");
    }
    if let Some(n) = r.take("projects") {
        out.projects = decode_projects(ctx, n, "projects");
    }
    if let Some(n) = r.take("zones") {
        (out.zones, out.zone_keys) = decode_zones(ctx, n, "zones");
    }
    r.finish(ctx);
    out
}
