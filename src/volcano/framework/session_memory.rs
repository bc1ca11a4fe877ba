//! What one session leaves for the next over the same cluster, so that opening
//! and closing a session cost what changed rather than what waits: the
//! figures each plugin derived from the jobs when it opened (drf's shares,
//! proportion's pod counts), each job's verdict with the notes they were
//! built from, and which of each job's tasks carry inter-pod affinity terms.
//! All are kept per job with the jobs they were derived from (see
//! [`super::kept_per_job`]): only the jobs the planner built again, or the
//! session changed or noted otherwise, are looked at again. It also keeps
//! which jobs the actions may have something to do for (see
//! [`super::unsettled_jobs`]).

use super::job::GangKey;
use super::kept_per_job::KeptPerJob;
use super::outcome::GangVerdict;
use super::pod_affinity_view::JobTermHolders;
use super::session::JobNote;
use super::tiers::KeptByPlugin;
use super::unsettled_jobs::UnsettledJobs;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a session keeps for the next one. Empty, a session derives everything.
#[derive(Debug, Default)]
pub struct SessionMemory {
    /// Each plugin's figures as its session opened.
    pub(crate) plugins: KeptByPlugin,
    /// Each job's verdict as the last session closed (a verdict is a function
    /// of the job and its note alone).
    pub(crate) verdicts: KeptPerJob<Arc<GangVerdict>>,
    /// The notes the verdicts were built from: a job whose note differs from
    /// the last session's has its verdict built again.
    pub(crate) notes: BTreeMap<GangKey, JobNote>,
    /// Each job's tasks whose pods carry inter-pod affinity terms, as the last
    /// session opened.
    pub(crate) term_holders: KeptPerJob<JobTermHolders>,
    /// The jobs not settled as the last session opened, to find this
    /// session's from what changed since.
    pub(crate) unsettled: UnsettledJobs,
    /// The jobs among them with such tasks (few: the session looks them over
    /// at every node choice), kept with every change of the above.
    pub(crate) holding_terms: BTreeMap<GangKey, JobTermHolders>,
    /// Left by a session (not the empty memory of a first or one-off session,
    /// which finds the term holders only if a predicate asks).
    pub(crate) from_session: bool,
}

impl SessionMemory {
    /// The plugins' kept figures as text, by plugin (to compare figures kept
    /// with figures derived anew).
    pub fn plugin_figures(&self) -> String {
        format!("{:?}", self.plugins)
    }

    /// Takes the plugins' kept figures (to hand them to [`super::Tiers::reuse`]).
    pub fn take_plugins(&mut self) -> KeptByPlugin {
        std::mem::take(&mut self.plugins)
    }

    /// Keeps the plugins' figures (from [`super::Tiers::keep`]).
    pub fn keep_plugins(&mut self, plugins: KeptByPlugin) {
        self.plugins = plugins;
    }
}
