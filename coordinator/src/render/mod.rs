//! Rendering of decision documents for people (`-o table`) and machines (`-o json|yaml`).

pub mod table;
pub mod why_not;
pub mod words;
pub mod yaml;

/// Output formats of every `fedvol` command that prints a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Output {
    /// Human tables (the default).
    #[default]
    Table,
    /// The JSON document, pretty-printed.
    Json,
    /// The same document as YAML.
    Yaml,
}
