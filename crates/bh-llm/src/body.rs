//! Request bodies written straight to bytes: the top-level parameters are a
//! small JSON map, the `messages` array is serialised one message at a time
//! as the wire converts it, so no JSON tree of the whole conversation (nor a
//! copy of the history) exists while a request is built.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// Calls its argument once per converted message, in order.
pub(crate) type EachMessage<'a> = &'a dyn Fn(&mut dyn FnMut(Value));

/// `params` serialised as JSON with its `messages` entry replaced by the
/// messages `each` produces. The bytes equal `serde_json::to_vec` of the same
/// map holding those messages as an array (same key order, compact).
///
/// `capacity` pre-sizes the buffer (e.g. a little more than the previous
/// request's body): one allocation instead of a chain of doublings, each of
/// which would leave a freed block behind in the allocator.
pub(crate) fn write(
    params: &Map<String, Value>,
    each: EachMessage<'_>,
    capacity: usize,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut out, &Body { params, each })?;
    Ok(out)
}

struct Body<'a> {
    params: &'a Map<String, Value>,
    each: EachMessage<'a>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.params.len()))?;
        for (k, v) in self.params {
            if k == "messages" {
                map.serialize_entry(k, &Messages(self.each))?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

struct Messages<'a>(EachMessage<'a>);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        let mut failed: Option<S::Error> = None;
        (self.0)(&mut |m| {
            if failed.is_none()
                && let Err(e) = seq.serialize_element(&m)
            {
                failed = Some(e);
            }
        });
        match failed {
            Some(e) => Err(e),
            None => seq.end(),
        }
    }
}
