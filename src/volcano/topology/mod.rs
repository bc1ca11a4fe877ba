//! Volcano's network topology: HyperNodes (`topology.volcano.sh`) group nodes by
//! how close they are on the network (tier 1: an NVLink domain or a leaf switch;
//! higher tiers: spines, pods, the data centre), and a PodGroup's
//! `spec.networkTopology` says how far apart its members may be.

pub mod constraint;
pub mod crd;
pub mod hyper_node;
pub mod tree;

pub use constraint::{HighestTier, TopologyConstraint, TopologyMode};
pub use hyper_node::{HyperNode, HyperNodeError};
pub use tree::{NetworkTopology, ResolvedHyperNode, Span};
