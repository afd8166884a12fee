//! YAML output for `-o yaml`: the JSON document re-emitted through yaml-rust2's emitter, with
//! its keys in the same order as `-o json` (`serde_json::Value` would sort them).

use indexmap::IndexMap;
use yaml_rust2::YamlEmitter;
use yaml_rust2::yaml::{Hash, Yaml};

/// A JSON value that keeps its object keys in document order.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Ordered {
    Null(()),
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    List(Vec<Ordered>),
    Map(IndexMap<String, Ordered>),
}

fn to_yaml(v: &Ordered) -> Yaml {
    match v {
        Ordered::Null(()) => Yaml::Null,
        Ordered::Bool(b) => Yaml::Boolean(*b),
        Ordered::Int(i) => Yaml::Integer(*i),
        // Integers beyond i64 (byte counts) are kept exact as their decimal text.
        Ordered::UInt(u) => Yaml::Real(u.to_string()),
        Ordered::Float(f) => {
            Yaml::Real(serde_json::Number::from_f64(*f).map_or_else(|| f.to_string(), |n| n.to_string()))
        }
        Ordered::Str(s) => Yaml::String(s.clone()),
        Ordered::List(a) => Yaml::Array(a.iter().map(to_yaml).collect()),
        Ordered::Map(o) => {
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
    let text = serde_json::to_string(value)?;
    let ordered: Ordered = serde_json::from_str(&text)?;
    let mut out = String::new();
    let mut em = YamlEmitter::new(&mut out);
    // Writing into a String cannot fail.
    let _ = em.dump(&to_yaml(&ordered));
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize)]
    struct Doc {
        zeta: u64,
        alpha: Vec<Inner>,
        big: u64,
        ratio: f64,
        none: Option<u8>,
    }
    #[derive(serde::Serialize)]
    struct Inner {
        name: &'static str,
        b: bool,
    }

    #[test]
    fn keys_come_in_the_order_json_gives_them() {
        let d = Doc {
            zeta: 1,
            alpha: vec![Inner { name: "x", b: true }],
            big: u64::MAX,
            ratio: 0.25,
            none: None,
        };
        let y = super::render(&d).unwrap();
        let json = serde_json::to_string_pretty(&d).unwrap();
        let order = |t: &str| -> Vec<usize> {
            ["zeta", "alpha", "name", "big", "ratio", "none"]
                .iter()
                .map(|k| t.find(k).unwrap())
                .collect()
        };
        let (yo, jo) = (order(&y), order(&json));
        assert!(yo.windows(2).all(|w| w[0] < w[1]), "{y}");
        assert!(jo.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert!(y.contains("18446744073709551615"), "{y}");
        assert!(y.contains("ratio: 0.25") && y.contains("none: ~"), "{y}");
    }
}
