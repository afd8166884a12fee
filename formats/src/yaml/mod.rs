//! Positioned YAML loading and strict decoding, shared by every fedvol file format.

pub mod decode;
pub mod load;
pub mod node;

pub use decode::{Ctx, Diagnostic, Diagnostics, MapReader, join};
pub use fedvol_common::suggest::closest;
pub use load::{Limits, LoadError, load_documents};
pub use node::{Key, Node, ScalarStyle, Span, Value};
