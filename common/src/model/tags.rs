//! Capability tags and constraints (Cloud Assembly's provisioning funnel): `key[:value]` tags on zones and hosts, and
//! `[!]key[:value][:hard|:soft]` constraints on jobs (hard by default).

use std::fmt;

/// Why a tag or a constraint could not be read (the text, and what was expected).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// Not `key` or `key:value` (an empty key).
    #[error("`{0}` is not a tag; expected key or key:value")]
    NotATag(String),
    /// Not `[!]key[:value][:hard|:soft]`.
    #[error("`{0}` is not a constraint; expected [!]key[:value][:hard|:soft]")]
    NotAConstraint(String),
}

/// A capability tag: `key` or `key:value`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Tag {
    /// Tag key.
    pub key: String,
    /// Optional value.
    pub value: Option<String>,
}

impl Tag {
    /// Parses `key` or `key:value` (the value may itself contain `:`).
    ///
    /// Errors: [`TagError::NotATag`] on an empty key.
    pub fn parse(s: &str) -> Result<Tag, TagError> {
        let s = s.trim();
        let (k, v) = match s.split_once(':') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (s, None),
        };
        if k.is_empty() {
            return Err(TagError::NotATag(s.to_string()));
        }
        Ok(Tag {
            key: k.to_string(),
            value: v,
        })
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}:{}", self.key, v),
            None => write!(f, "{}", self.key),
        }
    }
}

/// Whether a constraint must hold (hard) or only counts toward preference (soft).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// Must hold; a host failing it is filtered out (the default).
    #[default]
    Hard,
    /// Preferred; zones are ranked by how many soft constraints they meet.
    Soft,
}

/// A placement constraint on tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Constraint {
    /// `!` prefix: the tag must be absent.
    pub negated: bool,
    /// Tag key.
    pub key: String,
    /// Value to match; `None` matches any value of the key.
    pub value: Option<String>,
    /// Hard or soft.
    pub strength: Strength,
}

impl Constraint {
    /// Parses `[!]key[:value][:hard|:soft]`. A final `:hard`/`:soft` segment is the strength;
    /// everything between the first `:` and it is the value.
    ///
    /// Errors: [`TagError::NotAConstraint`] on an empty key.
    pub fn parse(s: &str) -> Result<Constraint, TagError> {
        let t = s.trim();
        let (negated, body) = match t.strip_prefix('!') {
            Some(b) => (true, b),
            None => (false, t),
        };
        let (body, strength) = if let Some(b) = body.strip_suffix(":soft") {
            (b, Strength::Soft)
        } else if let Some(b) = body.strip_suffix(":hard") {
            (b, Strength::Hard)
        } else {
            (body, Strength::Hard)
        };
        let tag = Tag::parse(body).map_err(|_| TagError::NotAConstraint(s.to_string()))?;
        Ok(Constraint {
            negated,
            key: tag.key,
            value: tag.value,
            strength,
        })
    }

    /// True when `tag` is one the constraint looks for: its key, with its value when it names
    /// one.
    pub fn matches(&self, tag: &Tag) -> bool {
        tag.key == self.key && (self.value.is_none() || tag.value == self.value)
    }

    /// True when the constraint holds for the set of `tags` (zone tags ∪ host tags).
    pub fn holds<'a>(&self, tags: impl IntoIterator<Item = &'a Tag>) -> bool {
        let present = tags.into_iter().any(|t| self.matches(t));
        present != self.negated
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated {
            write!(f, "!")?;
        }
        write!(f, "{}", self.key)?;
        if let Some(v) = &self.value {
            write!(f, ":{v}")?;
        }
        if self.strength == Strength::Soft {
            write!(f, ":soft")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        let c = Constraint::parse("!gpu:a100:soft").unwrap();
        assert!(c.negated);
        assert_eq!(c.key, "gpu");
        assert_eq!(c.value.as_deref(), Some("a100"));
        assert_eq!(c.strength, Strength::Soft);
        let c = Constraint::parse("region").unwrap();
        assert_eq!((c.negated, c.value, c.strength), (false, None, Strength::Hard));
        assert!(Constraint::parse(":soft").is_err());
        assert!(Constraint::parse("").is_err());
    }

    #[test]
    fn holds_on_union() {
        let tags = [Tag::parse("gpu:a100").unwrap(), Tag::parse("ssd").unwrap()];
        assert!(Constraint::parse("gpu").unwrap().holds(&tags));
        assert!(Constraint::parse("gpu:a100").unwrap().holds(&tags));
        assert!(!Constraint::parse("gpu:h100").unwrap().holds(&tags));
        assert!(!Constraint::parse("!ssd").unwrap().holds(&tags));
        assert!(Constraint::parse("!maintenance").unwrap().holds(&tags));
    }
}
