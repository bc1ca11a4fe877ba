//! Choosing a node and its GPUs for one pod: the one path `/filter` and the
//! planner's sessions share. Candidates come from a [`NodeSource`] (the ledger for
//! `/filter`, a session's snapshot for the planner); plugins add predicates and
//! node scores through a [`NodeJudge`]; the GPU fit decides last.
//!
//! With no plugin that filters or scores nodes (Volcano's default configuration),
//! candidates are ranked by the pod's node policy alone and fitted best-first, so
//! the usual filter costs one pass over the candidates and one fit.

mod choose;
mod judge;
pub mod namespace_labels;
pub mod node_predicates;
pub mod node_preferences;
pub mod node_traits;
pub mod pod_affinity;
pub mod preferred_pod_affinity;
mod rank_memo;
mod rejection;
pub mod resource_fit;
mod source;
mod subset;

pub use choose::{Choice, best_node, choose_node, evaluate_all};
pub use judge::{NoJudge, NodeFacts, NodeJudge, TaskFacts};
pub use rank_memo::RankMemo;
pub use rejection::{NodeRejection, NodeRejections, in_words};
pub use source::{NodeSource, RankFacts};
pub use subset::NodeSubset;
