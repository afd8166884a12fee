//! The users-to-groups directory (docs/design.md §7: "groups come from the coordinator's directory").
//!
//! A strict YAML file:
//!
//! ```yaml
//! users:
//!   alice: [physics, ml]
//!   bob: [chem]
//! ```
//!
//! With a directory, a user's groups come only from it (an unknown user has none, so only
//! provisioners open to `all` serve them: Fuzzball "Annotations and Selection"'s default-deny). Without one, the
//! coordinator trusts the groups clients claim (dev mode) and says so once at start-up.

use std::collections::BTreeMap;
use std::path::Path;

use fedvol_formats::files::read_text;
use fedvol_formats::yaml::{Ctx, Diagnostics, Limits, load_documents};

/// Users and their groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    users: BTreeMap<String, Vec<String>>,
}

impl Directory {
    /// Reads a directory file.
    ///
    /// Errors: every problem (unknown keys with a hint, a user whose groups are not a list of
    /// strings, duplicate users), with line and column.
    pub fn load(path: &Path) -> Result<Directory, Diagnostics> {
        let text = read_text(path)?;
        Directory::parse(&path.display().to_string(), &text)
    }

    /// Parses directory text; `label` names the file in errors.
    ///
    /// Errors: as [`Directory::load`].
    pub fn parse(label: &str, text: &str) -> Result<Directory, Diagnostics> {
        let docs = load_documents(text, Limits::default()).map_err(|e| {
            let mut c = Ctx::new(label);
            c.error(e.span, "", format!("invalid YAML: {}", e.message));
            Diagnostics(c.into_diagnostics())
        })?;
        let mut ctx = Ctx::new(label);
        let mut dir = Directory::default();
        let Some(doc) = docs.first() else {
            ctx.error(Default::default(), "", "the directory is empty; expected `users:`");
            return Err(Diagnostics(ctx.into_diagnostics()));
        };
        let Some(mut r) = ctx.map(doc, "") else {
            return Err(Diagnostics(ctx.into_diagnostics()));
        };
        if let Some(n) = r.require(&mut ctx, "users")
            && let Some(mut users) = ctx.map(n, "users")
        {
            for (k, v) in users.rest() {
                let field = format!("users.{}", k.name);
                if let Some(groups) = ctx.string_list(v, &field) {
                    dir.users.insert(k.name.clone(), groups);
                }
            }
            users.finish(&mut ctx);
        }
        r.finish(&mut ctx);
        ctx.finish(dir)
    }

    /// The groups of `user` (empty for a user the directory does not list).
    pub fn groups(&self, user: &str) -> Vec<String> {
        self.users.get(user).cloned().unwrap_or_default()
    }

    /// How many users the directory lists.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when it lists nobody.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_map_to_groups_and_strangers_get_none() {
        let d = Directory::parse("d.yaml", "users:\n  alice: [physics, ml]\n  bob: [chem]\n  carol: []\n").unwrap();
        assert_eq!(d.groups("alice"), ["physics", "ml"]);
        assert_eq!(d.groups("bob"), ["chem"]);
        assert!(d.groups("carol").is_empty());
        assert!(d.groups("mallory").is_empty());
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn strict_about_shape_and_keys() {
        let e = Directory::parse("d.yaml", "user:\n  alice: [x]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `users`"), "{e}");
        assert!(e.contains("missing required field `users`"), "{e}");
        let e = Directory::parse("d.yaml", "users:\n  alice: physics\n  alice: [x]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("users.alice") && e.contains("expected a list"), "{e}");
        assert!(e.contains("duplicate key"), "{e}");
        assert!(Directory::parse("d.yaml", "").is_err());
    }
}
