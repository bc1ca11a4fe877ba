//! Cluster sources: what the scheduler reads and writes. `--cluster-file` loads an
//! in-memory cluster; the live Kubernetes source implements the same [`api::ClusterApi`].

pub mod api;
pub mod file;
pub mod memory;
