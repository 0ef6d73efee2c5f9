//! A cheap, lenient, borrowed scan of one session line.
//!
//! Only the fields needed to index a session are decoded; everything else
//! (message content, tool results, details) is skipped without allocating.
//! Each field accepts any JSON value: a value of an unexpected type reads as
//! `None` instead of failing the whole line, the way JavaScript code that does
//! `typeof x === "string"` checks would treat it.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A string field that tolerates other JSON types (they read as `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LStr<'a>(pub Option<Cow<'a, str>>);

/// A field that records whether it was present, `null`, or a string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Nullable<'a> {
    /// The key was not in the object.
    #[default]
    Absent,
    /// JSON `null`.
    Null,
    /// A string.
    Str(Cow<'a, str>),
    /// Any other JSON type.
    Other,
}

impl<'a> Nullable<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Nullable::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A number field that tolerates other JSON types (they read as `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LNum(pub Option<f64>);

struct AnyVisitor<T>(std::marker::PhantomData<T>);

macro_rules! drain_impls {
    () => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Self::Value::other())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Self::Value::other())
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Self::Value::other())
        }
    };
}

trait Other {
    fn other() -> Self;
}
impl Other for LStr<'_> {
    fn other() -> Self {
        LStr(None)
    }
}
impl Other for Nullable<'_> {
    fn other() -> Self {
        Nullable::Other
    }
}
impl Other for LNum {
    fn other() -> Self {
        LNum(None)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for AnyVisitor<LStr<'a>> {
    type Value = LStr<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(LStr(Some(Cow::Owned(v))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(LStr(None))
    }
    drain_impls!();
}

impl<'de: 'a, 'a> Visitor<'de> for AnyVisitor<Nullable<'a>> {
    type Value = Nullable<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Nullable::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Nullable::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Nullable::Str(Cow::Owned(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Nullable::Null)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Nullable::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Nullable::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Nullable::Other)
    }
    drain_impls!();
}

impl<'de> Visitor<'de> for AnyVisitor<LNum> {
    type Value = LNum;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(LNum(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(LNum(None))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(LNum(Some(v as f64)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(LNum(Some(v as f64)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(LNum(Some(v)))
    }
    drain_impls!();
}

impl<'de: 'a, 'a> Deserialize<'de> for LStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor::<LStr<'a>>(std::marker::PhantomData))
    }
}
impl<'de: 'a, 'a> Deserialize<'de> for Nullable<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor::<Nullable<'a>>(std::marker::PhantomData))
    }
}
impl<'de> Deserialize<'de> for LNum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor::<LNum>(std::marker::PhantomData))
    }
}

impl<'a> LStr<'a> {
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn into_owned(self) -> Option<String> {
        self.0.map(Cow::into_owned)
    }
}

/// Token and cost numbers of a `usage` object (assistant messages, `usage`
/// entries, 1.x summaries). Missing or non-numeric fields read as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageHead {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total_tokens: f64,
    pub cost_total: f64,
}

impl<'de> Deserialize<'de> for UsageHead {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<UsageHead>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut u = UsageHead::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "input" => u.input = map.next_value::<LNum>()?.0.unwrap_or(0.0),
                        "output" => u.output = map.next_value::<LNum>()?.0.unwrap_or(0.0),
                        "cacheRead" => u.cache_read = map.next_value::<LNum>()?.0.unwrap_or(0.0),
                        "cacheWrite" => u.cache_write = map.next_value::<LNum>()?.0.unwrap_or(0.0),
                        "totalTokens" => {
                            u.total_tokens = map.next_value::<LNum>()?.0.unwrap_or(0.0)
                        }
                        "cost" => {
                            u.cost_total = map.next_value::<CostTotal>()?.0.unwrap_or(0.0);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Some(u))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        // A usage value of the wrong type reads as all zeros.
        Ok(d.deserialize_any(V)?.unwrap_or_default())
    }
}

/// `cost.total` of a usage object.
struct CostTotal(Option<f64>);

impl<'de> Deserialize<'de> for CostTotal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CostTotal;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a cost object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CostTotal, A::Error> {
                let mut total = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "total" {
                        total = map.next_value::<LNum>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(CostTotal(total))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CostTotal, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(CostTotal(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<CostTotal, E> {
                Ok(CostTotal(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `message` object of a `message` entry, reduced to what indexing needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageHead<'a> {
    #[serde(borrow, default)]
    pub role: LStr<'a>,
    #[serde(borrow, default)]
    pub provider: LStr<'a>,
    #[serde(borrow, default)]
    pub model: LStr<'a>,
    #[serde(borrow, default)]
    pub response_model: LStr<'a>,
    #[serde(default)]
    pub usage: Option<UsageHead>,
}

/// A `message` field that tolerates non-objects (they read as `None`).
#[derive(Debug, Clone, Default)]
pub struct MaybeMessage<'a>(pub Option<MessageHead<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeMessage<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MaybeMessage<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                MessageHead::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|m| MaybeMessage(Some(m)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeMessage(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeMessage(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// One line of a session file, reduced to what indexing needs.
///
/// It is the union of the index fields of every entry type; a field that a
/// type does not have is simply absent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: LStr<'a>,
    #[serde(borrow, default)]
    pub id: LStr<'a>,
    #[serde(borrow, default)]
    pub parent_id: Nullable<'a>,
    #[serde(borrow, default)]
    pub timestamp: LStr<'a>,
    /// Header only.
    #[serde(default)]
    pub version: LNum,
    /// Header only.
    #[serde(borrow, default)]
    pub cwd: LStr<'a>,
    /// Header only.
    #[serde(borrow, default)]
    pub parent_session: LStr<'a>,
    /// `message` entries (`None` inside when `message` is not an object).
    #[serde(borrow, default)]
    pub message: MaybeMessage<'a>,
    /// `label` and `context_edit` entries.
    #[serde(borrow, default)]
    pub target_id: LStr<'a>,
    /// `label` entries (`null`/absent/empty clears).
    #[serde(borrow, default)]
    pub label: Nullable<'a>,
    /// `session_info` entries.
    #[serde(borrow, default)]
    pub name: Nullable<'a>,
    /// `compaction` entries.
    #[serde(borrow, default)]
    pub first_kept_entry_id: LStr<'a>,
    /// v1 `compaction` entries.
    #[serde(default)]
    pub first_kept_entry_index: LNum,
    /// `model_change` (and v1 header).
    #[serde(borrow, default)]
    pub provider: LStr<'a>,
    /// `model_change` (and v1 header).
    #[serde(borrow, default)]
    pub model_id: LStr<'a>,
    /// `usage` entries.
    #[serde(borrow, default)]
    pub model: LStr<'a>,
    /// `thinking_level_change`.
    #[serde(borrow, default)]
    pub thinking_level: LStr<'a>,
    /// `custom` and `custom_message`.
    #[serde(borrow, default)]
    pub custom_type: LStr<'a>,
    /// `usage` entries, 1.x `compaction`/`branch_summary`.
    #[serde(default)]
    pub usage: Option<UsageHead>,
}

impl<'a> EntryHead<'a> {
    /// Scan one line. Fails only when the line is not a JSON object.
    pub fn parse(line: &'a [u8]) -> Result<EntryHead<'a>, serde_json::Error> {
        serde_json::from_slice(line)
    }
}
