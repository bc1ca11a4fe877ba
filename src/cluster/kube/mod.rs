//! The live Kubernetes source: watches feed the ledger, writes go through one
//! client, a Lease picks the replica that does cluster-wide housekeeping.

pub mod client;
pub mod housekeeping;
pub mod leader;
pub mod lease_follower;
pub mod native_group_watch;
pub mod node_metrics_poll;
pub mod policy_watch;
pub mod volcano_watch;
pub mod watch;

pub use client::KubeCluster;
