//! The candidate node names of an extender call, kept in one buffer.
//!
//! kube-scheduler sends every feasible node's name on each `/filter` (5,000 names,
//! about 80 KiB, on a large cluster). Decoded as `Vec<String>` that is one heap
//! allocation per name and as many frees afterwards, a third of the decode time;
//! here the names are appended to one string as they are read.

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Node names in request order.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeNames {
    /// Every name, back to back.
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
}

impl NodeNames {
    /// An empty list with room for `names` names.
    pub fn with_capacity(names: usize) -> Self {
        Self {
            text: String::new(),
            ends: Vec::with_capacity(names),
        }
    }

    /// Appends a name.
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there are no names.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The names in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        (0..self.ends.len()).map(|i| self.get(i))
    }

    /// The `i`-th name (`i < len()`).
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    /// Whether `name` is one of the names.
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }

    /// The names as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }
}

impl fmt::Debug for NodeNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<S> for NodeNames {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut names = Self::with_capacity(iter.size_hint().0);
        for name in iter {
            names.push(name.as_ref());
        }
        names
    }
}

impl From<Vec<String>> for NodeNames {
    fn from(names: Vec<String>) -> Self {
        names.iter().collect()
    }
}

impl From<&[String]> for NodeNames {
    fn from(names: &[String]) -> Self {
        names.iter().collect()
    }
}

impl Serialize for NodeNames {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for NodeNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ListVisitor)
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = NodeNames;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of node names")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeNames, A::Error> {
        let mut names = NodeNames::with_capacity(seq.size_hint().unwrap_or(0).min(65_536));
        while seq.next_element_seed(AppendName(&mut names))?.is_some() {}
        Ok(names)
    }
}

/// Reads one name straight into the list's buffer.
struct AppendName<'a>(&'a mut NodeNames);

impl<'de> DeserializeSeed<'de> for AppendName<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for AppendName<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a node name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<(), E> {
        self.0.push(name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_names_in_order_with_escapes() {
        let names: NodeNames =
            serde_json::from_str(r#"["gpu-a", "", "gpu-\u0062", "gpu-a"]"#).expect("decode");
        assert_eq!(names.len(), 4);
        assert_eq!(
            names.iter().collect::<Vec<_>>(),
            ["gpu-a", "", "gpu-b", "gpu-a"]
        );
        assert!(names.contains("gpu-b"));
        assert!(!names.contains("gpu"));
        assert_eq!(
            serde_json::to_string(&names).expect("encode"),
            r#"["gpu-a","","gpu-b","gpu-a"]"#
        );
    }

    #[test]
    fn rejects_what_is_not_a_list_of_strings() {
        for bad in [r#"["a", 1]"#, r#""a""#, r#"{"a": 1}"#, r#"["a""#] {
            let err = serde_json::from_str::<NodeNames>(bad).expect_err(bad);
            assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn empty_and_collected_lists() {
        let empty: NodeNames = serde_json::from_str("[]").expect("decode");
        assert!(empty.is_empty());
        assert_eq!(empty.iter().count(), 0);
        let collected: NodeNames = ["x", "yy"].into_iter().collect();
        assert_eq!(collected.to_vec(), vec!["x".to_string(), "yy".to_string()]);
        assert_eq!(format!("{collected:?}"), r#"["x", "yy"]"#);
    }
}
