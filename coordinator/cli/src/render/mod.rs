//! Rendering of decision documents for people (`-o table`) and machines (`-o json|yaml`).

pub mod cluster;
pub mod ids;
pub mod layout;
pub mod outcomes;
pub mod policy;
pub mod stored;
pub mod table;
pub mod what_if;
pub mod why_not;
pub mod words;
pub mod yaml;

/// Output formats of every `fedvol` command that prints a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Output {
    /// Human tables (the default), fitting the terminal (100 columns in a pipe).
    #[default]
    Table,
    /// Human tables with every column in full, however wide (`kubectl -o wide`), and every
    /// cluster of a decision of many clusters given its own row.
    Wide,
    /// The JSON document, pretty-printed.
    Json,
    /// The same document as YAML.
    Yaml,
}
