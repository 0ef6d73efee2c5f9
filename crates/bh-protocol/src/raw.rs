//! Order-preserving JSON objects whose values stay as raw text.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

/// A JSON object as an ordered list of `(key, raw value)` pairs.
///
/// Values keep their exact source text. Serialising an untouched `RawObject`
/// that was parsed from compact JSON (as Pi writes it) reproduces the input;
/// [`RawObject::set`] replaces a value in place (keeping the key's position,
/// like a JavaScript spread `{...entry, parentId}`) or appends a new key at the
/// end (like JavaScript property assignment).
#[derive(Debug, Clone, Default)]
pub struct RawObject {
    fields: Vec<(String, Box<RawValue>)>,
}

impl RawObject {
    pub fn new() -> Self {
        RawObject { fields: Vec::new() }
    }

    /// Parse one JSON object (e.g. one session line).
    pub fn parse(text: &str) -> Result<RawObject, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of `key` decoded as `T`, or `None` when absent or of another type.
    pub fn get_as<'a, T: Deserialize<'a>>(&'a self, key: &str) -> Option<T> {
        self.get(key)
            .and_then(|v| serde_json::from_str::<T>(v.get()).ok())
    }

    pub fn contains(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| k == key)
    }

    /// Replace the value of `key` in place, or append the key at the end.
    pub fn set_raw(&mut self, key: &str, value: Box<RawValue>) {
        if let Some(slot) = self.fields.iter_mut().rev().find(|(k, _)| k == key) {
            slot.1 = value;
        } else {
            self.fields.push((key.to_owned(), value));
        }
    }

    /// Serialise `value` and [`set_raw`](Self::set_raw) it.
    pub fn set<T: Serialize + ?Sized>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let raw = serde_json::value::to_raw_value(value)?;
        self.set_raw(key, raw);
        Ok(())
    }

    /// Remove every occurrence of `key`; returns whether one was present.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.fields.len();
        self.fields.retain(|(k, _)| k != key);
        before != self.fields.len()
    }

    /// Merge duplicate keys like `JSON.parse` (first position, last value);
    /// `None` when there are no duplicates.
    pub fn dedup_last_wins(&self) -> Option<RawObject> {
        let mut out: Vec<(String, Box<RawValue>)> = Vec::with_capacity(self.fields.len());
        let mut dup = false;
        for (k, v) in &self.fields {
            if let Some(slot) = out.iter_mut().find(|(ok, _)| ok == k) {
                slot.1 = v.clone();
                dup = true;
            } else {
                out.push((k.clone(), v.clone()));
            }
        }
        dup.then_some(RawObject { fields: out })
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(k, _)| k.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v.as_ref()))
    }

    /// Compact JSON text of the object.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// The object as a raw JSON value.
    pub fn to_raw_value(&self) -> Result<Box<RawValue>, serde_json::Error> {
        serde_json::value::to_raw_value(self)
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push((k, v));
                }
                Ok(RawObject { fields })
            }
        }
        deserializer.deserialize_map(V)
    }
}
