//! Cluster sources: what the scheduler reads and writes. `--cluster-file` loads an
//! in-memory cluster; without it the live Kubernetes source is used. Both implement
//! [`api::ClusterApi`].

pub mod api;
pub mod file;
pub mod kube;
pub mod memory;
