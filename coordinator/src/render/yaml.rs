//! YAML output for `-o yaml`: JSON values re-emitted through yaml-rust2's emitter.

use yaml_rust2::YamlEmitter;
use yaml_rust2::yaml::{Hash, Yaml};

fn to_yaml(v: &serde_json::Value) -> Yaml {
    match v {
        serde_json::Value::Null => Yaml::Null,
        serde_json::Value::Bool(b) => Yaml::Boolean(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Yaml::Integer(i)
            } else if n.is_u64() || n.as_f64().is_none() {
                // Integers beyond i64 (u128 byte counts) are kept exact as their decimal text.
                Yaml::Real(n.to_string())
            } else {
                Yaml::Real(n.to_string())
            }
        }
        serde_json::Value::String(s) => Yaml::String(s.clone()),
        serde_json::Value::Array(a) => Yaml::Array(a.iter().map(to_yaml).collect()),
        serde_json::Value::Object(o) => {
            let mut h = Hash::new();
            for (k, v) in o {
                h.insert(Yaml::String(k.clone()), to_yaml(v));
            }
            Yaml::Hash(h)
        }
    }
}

/// Renders any serialisable value as a YAML document (`---` first line, newline at the end).
///
/// Errors: the value cannot be represented as JSON (never for fedvol's own types).
pub fn render<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let json = serde_json::to_value(value)?;
    let mut out = String::new();
    let mut em = YamlEmitter::new(&mut out);
    // Writing into a String cannot fail.
    let _ = em.dump(&to_yaml(&json));
    out.push('\n');
    Ok(out)
}
