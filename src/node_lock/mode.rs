//! `--node-lock`: where the one-pod-at-a-time handoff to HAMi's device plugin is
//! kept.
//!
//! HAMi's device plugin is told by the kubelet only which devices to hand out,
//! not for which pod; it finds the pod by the node lock, and with no lock by the
//! one pod on its node in bind phase `allocating`. Either way only one pod per
//! node may be between its bind and the device plugin's answer. HAMi keeps that
//! with an annotation on the Node, written at every bind and removed by the
//! device plugin: two of the seven writes a placed pod costs the API server,
//! and two changes of the whole Node sent to every one of its watchers.

/// Where the node's turn is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NodeLockMode {
    /// HAMi's `hami.io/mutex.lock` on the Node: every binder that speaks HAMi's
    /// protocol (HAMi's scheduler, other replicas) sees it.
    #[default]
    Node,
    /// No write: a node takes no second pod while one it was bound is
    /// `allocating`, as this process's binds and the pod watch show it; a lock
    /// another binder holds is still waited for. Only for clusters where this
    /// server is the one binder of GPU pods (one active replica, no HAMi
    /// scheduler beside it) and whose device plugin finds its pod without the
    /// lock (HAMi's NVIDIA device plugin does).
    Pods,
}
