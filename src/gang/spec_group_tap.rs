//! Decoding a pod's spec while it streams by and noting the native PodGroup it
//! names (`spec.schedulingGroup.podGroupName`), which the typed PodSpec of this
//! crate drops: the spec is built once, straight from the input, instead of
//! going through a JSON tree first.
//!
//! The tap stands between the typed spec's decoder and the input: every key is
//! handed on as it came; the value under `schedulingGroup` (a few bytes) is read
//! here and handed on as a tree, which the typed spec skips as a field it does
//! not know.

use super::scheduling_group::group_named_by;
use k8s_openapi::api::core::v1::PodSpec;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, Visitor};
use serde::{Deserialize, forward_to_deserialize_any};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// The key of the scheduling group in a pod's spec.
const GROUP_KEY: &str = "schedulingGroup";

/// A pod's typed spec and the PodGroup it names (blank names name none).
pub(super) struct SpecWithGroup {
    pub spec: PodSpec,
    pub group: Option<String>,
}

impl<'de> Deserialize<'de> for SpecWithGroup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut group = None;
        let spec = PodSpec::deserialize(Tap {
            inner: d,
            group: &mut group,
        })?;
        Ok(SpecWithGroup { spec, group })
    }
}

struct Tap<'g, D> {
    inner: D,
    group: &'g mut Option<String>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Tap<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(TapVisitor {
            inner: visitor,
            group: self.group,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            TapVisitor {
                inner: visitor,
                group: self.group,
            },
        )
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(TapVisitor {
            inner: visitor,
            group: self.group,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct enum identifier ignored_any
    }
}

/// The typed spec's visitor, given the spec's fields through [`TapMap`]; any
/// other shape of input goes to the default methods, which refuse it as the
/// typed spec's own visitor would.
struct TapVisitor<'g, V> {
    inner: V,
    group: &'g mut Option<String>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for TapVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(TapMap {
            inner: map,
            group: self.group,
            next_is_group: false,
        })
    }
}

struct TapMap<'g, A> {
    inner: A,
    group: &'g mut Option<String>,
    /// The key just handed on was `schedulingGroup`.
    next_is_group: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for TapMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(Key(key)) = self.inner.next_key::<Key<'de>>()? else {
            return Ok(None);
        };
        self.next_is_group = key == GROUP_KEY;
        match key {
            Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
            Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
        }
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        if !std::mem::take(&mut self.next_is_group) {
            return self.inner.next_value_seed(seed);
        }
        let value: Value = self.inner.next_value()?;
        *self.group = group_named_by(&value).map(str::to_owned);
        seed.deserialize(value).map_err(A::Error::custom)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map key as text, borrowed from the input where it can be.
pub(super) struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}
