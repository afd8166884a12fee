//! The array form's machinery: [`Dense`] (a record with an array form besides its object
//! form), the writers of records, lists and maps in that form, [`Either`] (a record read in
//! either form) and the element readers of an array form.

use std::fmt;
use std::marker::PhantomData;

use indexmap::IndexMap;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// A record with a compact array form besides its object form.
pub(super) trait Dense: Sized + DeserializeOwned {
    /// What the record is, for error messages ("a stage record").
    const WHAT: &'static str;
    /// Writes the array form.
    fn write<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
    /// Reads the array form.
    fn read<'de, A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error>;
}

/// Serializes a record in its array form.
pub(super) struct Compact<'a, T>(pub &'a T);

impl<T: Dense> Serialize for Compact<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s)
    }
}

/// Serializes a slice of records in their array form.
pub(super) struct CompactList<'a, T>(pub &'a [T]);

impl<T: Dense> Serialize for CompactList<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&Compact(item))?;
        }
        seq.end()
    }
}

/// Serializes a name → record map with the records in their array form.
pub(super) struct CompactMap<'a, T>(pub &'a IndexMap<String, T>);

impl<T: Dense> Serialize for CompactMap<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, &Compact(v))?;
        }
        map.end()
    }
}

/// One record in either form.
pub(super) struct Either<T>(pub(super) T);

impl<'de, T: Dense> Deserialize<'de> for Either<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Dense> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "{} (an object or its compact array)", T::WHAT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
                T::read(seq)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_any(V(PhantomData)).map(Either)
    }
}

/// A name → record map with each record in either form, read straight into the map it is
/// (a map of [`Either`]s and then a second map of the records was two maps per answer, and at
/// 1,000 clusters a plan reads 2,000 such maps). A name given twice keeps its first place and
/// its last record, as `IndexMap`'s own reader does.
pub(super) struct EitherMap<T>(pub(super) IndexMap<String, T>);

impl<'de, T: Dense> Deserialize<'de> for EitherMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Dense> Visitor<'de> for V<T> {
            type Value = IndexMap<String, T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = IndexMap::with_capacity(map.size_hint().unwrap_or(0).min(PREALLOCATED_MAX));
                while let Some((k, v)) = map.next_entry::<String, Either<T>>()? {
                    out.insert(k, v.0);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(PhantomData)).map(EitherMap)
    }
}

/// A list of records each in either form, read straight into its vector (as [`EitherMap`]).
pub(super) struct EitherList<T>(pub(super) Vec<T>);

impl<'de, T: Dense> Deserialize<'de> for EitherList<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Dense> Visitor<'de> for V<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(PREALLOCATED_MAX));
                while let Some(e) = seq.next_element::<Either<T>>()? {
                    out.push(e.0);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(PhantomData)).map(EitherList)
    }
}

/// At most this many elements are reserved from a reader's size hint (a hint is the
/// sender's word, not a promise).
const PREALLOCATED_MAX: usize = 4096;

/// `deserialize_with` for a name → record map in either form, keeping the order.
pub(super) fn read_map<'de, D: Deserializer<'de>, T: Dense>(d: D) -> Result<IndexMap<String, T>, D::Error> {
    EitherMap::deserialize(d).map(|m| m.0)
}

/// The next element of an array form, required.
pub(super) fn need<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(
    seq: &mut A,
    i: usize,
    what: &str,
) -> Result<T, A::Error> {
    seq.next_element()?.ok_or_else(|| de::Error::invalid_length(i, &what))
}

/// The next element of an array form, absent or null as `None`.
pub(super) fn opt<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(seq: &mut A) -> Result<Option<T>, A::Error> {
    Ok(seq.next_element::<Option<T>>()?.flatten())
}

/// Rejects elements past the last one the array form has.
pub(super) fn end<'de, A: SeqAccess<'de>>(seq: &mut A, n: usize, what: &str) -> Result<(), A::Error> {
    match seq.next_element::<de::IgnoredAny>()? {
        None => Ok(()),
        Some(_) => Err(de::Error::invalid_length(n + 1, &what)),
    }
}
