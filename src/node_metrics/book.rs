//! Every node's last measured usage, and, for a node without one, why: the API is
//! not served, the list did not include the node, its object was unreadable. The
//! reason travels with the node to every plugin and to `/debug/state`, so a node
//! that is not judged by its usage says so.
//!
//! Each successful list from metrics.k8s.io makes a new book (the list is the
//! truth about which nodes have metrics), swapped in whole. A failed list keeps the previous
//! samples, which then age until they are too old to use, except when the API is
//! not there at all (metrics-server uninstalled, or this scheduler not allowed to
//! read it): then nothing is left.

use super::sample::NodeMetricsSample;
use chrono::{DateTime, Utc};
use rustc_hash::FxHashMap;

/// Where the samples come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum MetricsSource {
    /// Nothing collects node usage (no configured plugin needs it).
    #[default]
    NotCollected,
    /// The `NodeMetrics` objects of the cluster file.
    ClusterFile,
    /// Lists of `metrics.k8s.io/v1beta1` nodes.
    Api {
        /// When the last list succeeded; `None` before the first.
        listed_at: Option<DateTime<Utc>>,
        /// Why the last list failed, when it did.
        problem: Option<String>,
    },
}

/// A node's entry: its sample, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricsEntry<'a> {
    /// The last sample.
    Sample(&'a NodeMetricsSample),
    /// No usable sample, and why.
    Missing(&'a str),
}

/// The samples of every node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMetricsBook {
    /// By node name: the sample, or what was wrong with the node's object. Looked
    /// up for every candidate node of every `/filter`.
    entries: FxHashMap<String, Result<NodeMetricsSample, String>>,
    source: MetricsSource,
}

impl NodeMetricsBook {
    /// An empty book whose samples will come from `source`.
    pub fn new(source: MetricsSource) -> Self {
        Self {
            entries: FxHashMap::default(),
            source,
        }
    }

    /// The book of a successful list at `at`: its samples are all there are.
    pub fn listed(
        entries: impl IntoIterator<Item = (String, Result<NodeMetricsSample, String>)>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            entries: entries.into_iter().collect(),
            source: MetricsSource::Api {
                listed_at: Some(at),
                problem: None,
            },
        }
    }

    /// Where the samples come from, and how the last list went.
    pub fn source(&self) -> &MetricsSource {
        &self.source
    }

    /// Sets a node's entry (a cluster file's objects, one by one).
    pub fn insert(&mut self, node: String, sample: Result<NodeMetricsSample, String>) {
        self.entries.insert(node, sample);
    }

    /// A failed list. `gone`: the API is not there for us (not served, or not
    /// allowed), so the samples held are dropped; otherwise they are kept and age.
    pub fn list_failed(&mut self, problem: String, gone: bool) {
        if gone {
            self.entries.clear();
        }
        let listed_at = match &self.source {
            MetricsSource::Api { listed_at, .. } => *listed_at,
            _ => None,
        };
        self.source = MetricsSource::Api {
            listed_at,
            problem: Some(problem),
        };
    }

    /// Stops collecting: no sample is kept.
    pub fn stop(&mut self) {
        *self = Self::default();
    }

    /// A node's entry.
    pub fn lookup(&self, node: &str) -> MetricsEntry<'_> {
        match self.entries.get(node) {
            Some(Ok(sample)) => MetricsEntry::Sample(sample),
            Some(Err(unreadable)) => MetricsEntry::Missing(unreadable),
            None => MetricsEntry::Missing(self.missing_reason()),
        }
    }

    /// Why a node absent from the book has no sample.
    fn missing_reason(&self) -> &str {
        match &self.source {
            MetricsSource::NotCollected => "node usage is not collected",
            MetricsSource::ClusterFile => "the cluster file has no NodeMetrics for this node",
            MetricsSource::Api {
                problem: Some(problem),
                ..
            } => problem,
            MetricsSource::Api {
                listed_at: None, ..
            } => "no metrics listed yet",
            MetricsSource::Api { .. } => "no metrics for this node in the last metrics.k8s.io list",
        }
    }

    /// Number of nodes with an entry (readable or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no node has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(cpu_milli: i64) -> NodeMetricsSample {
        NodeMetricsSample {
            cpu_milli,
            memory_milli: 0,
            timestamp: DateTime::UNIX_EPOCH,
            window: None,
        }
    }

    #[test]
    fn a_list_replaces_the_samples_and_a_node_left_out_says_so() {
        let book = NodeMetricsBook::new(MetricsSource::Api {
            listed_at: None,
            problem: None,
        });
        assert_eq!(
            book.lookup("a"),
            MetricsEntry::Missing("no metrics listed yet")
        );
        let book = NodeMetricsBook::listed(
            [
                ("a".into(), Ok(sample(1))),
                ("b".into(), Err("usage.cpu: bad".into())),
            ],
            DateTime::UNIX_EPOCH,
        );
        assert_eq!(book.lookup("a"), MetricsEntry::Sample(&sample(1)));
        assert_eq!(book.lookup("b"), MetricsEntry::Missing("usage.cpu: bad"));
        let book = NodeMetricsBook::listed([("b".into(), Ok(sample(2)))], DateTime::UNIX_EPOCH);
        assert_eq!(
            book.lookup("a"),
            MetricsEntry::Missing("no metrics for this node in the last metrics.k8s.io list")
        );
    }

    #[test]
    fn a_failed_list_keeps_the_samples_unless_the_api_is_gone() {
        let mut book = NodeMetricsBook::listed([("a".into(), Ok(sample(1)))], DateTime::UNIX_EPOCH);
        book.list_failed("timed out".into(), false);
        assert_eq!(book.lookup("a"), MetricsEntry::Sample(&sample(1)));
        book.list_failed("metrics.k8s.io is not served".into(), true);
        assert_eq!(
            book.lookup("a"),
            MetricsEntry::Missing("metrics.k8s.io is not served")
        );
        assert!(matches!(
            book.source(),
            MetricsSource::Api {
                listed_at: Some(_),
                problem: Some(_)
            }
        ));
    }
}
