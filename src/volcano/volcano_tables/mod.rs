//! Volcano's own table-driven scheduler tests (volcano-sh/volcano
//! `pkg/scheduler/actions/*/…_test.go`, `pkg/scheduler/plugins/*/…_test.go`),
//! translated case by case into sessions of this scheduler: one module per Go
//! file, each case under Volcano's name and with Volcano's expectation (PodGroup
//! phases, evictions, pipelined and bound pods). Each case runs with the plugins
//! it registers and the switches of its tier ([`support::tiers_conf`]). Each
//! module's documentation lists the cases it leaves out and why.
//!
//! Translated whole: `actions/enqueue/enqueue_test.go` ([`enqueue`]),
//! `actions/reclaim/reclaim_test.go` ([`reclaim`]),
//! `actions/preempt/preempt_test.go` `TestPreempt` ([`preempt`]) and
//! `TestTopologyAwarePreempt` ([`preempt_topology_aware`]),
//! `plugins/priority/priority_test.go` `TestPreempt` ([`priority`]),
//! `plugins/drf/hdrf_test.go` ([`drf`]),
//! `plugins/proportion/proportion_test.go` ([`proportion`], but for one metrics
//! test) and `plugins/capacity/capacity_test.go` (the tests that run sessions:
//! flat queues in [`capacity`], hierarchical ones and `ancestorReclaimLevel` in
//! [`capacity_hierarchy`]; its DRA tests are left out, see [`capacity`]); the
//! two scenarios proportion's and capacity's files share are in
//! [`inqueue_accounting`]. Of `actions/allocate/allocate_test.go`, every test
//! that runs a session on what this scheduler has ([`allocate`]: `TestAllocate`,
//! `TestFareShareAllocate`; [`allocate_topology`]:
//! `TestAllocateWithNetWorkTopologies`, `TestNodeLevelScoreWithNetWorkTopologies`,
//! `TestHyperNodeBinpackWithNetWorkTopologies`; the rest, sub-groups, volumes,
//! DRA claims and Volcano's internals, listed there).
//! `plugins/gang/gang_test.go` (`TestShouldSkipUnschedulableForReleasing`,
//! [`gang`]): the PodGroup status written while members are being deleted.
//! `actions/backfill/backfill_test.go` (`TestPickUpPendingTasks`, [`backfill`]):
//! the order backfill places best-effort pods in.
//! `actions/gangpreempt/gangpreempt_test.go` ([`gang_preempt`]) and
//! `actions/gangreclaim/gangreclaim_test.go` ([`gang_reclaim`]): their cases as
//! sessions; `actions/utils/simulate_test.go` ([`gang_eviction_plan`]: the plan
//! tried in one domain), and `actions/utils/bundle_test.go` as unit tests of
//! `actions::victim_bundles`. In part:
//! `plugins/predicates/predicates_test.go` ([`predicates`]: the tests that run
//! sessions).
//!
//! Beside them, [`queue_pod_count`]: a queue's `pods` amount, with Volcano's
//! expectations read from its source (no table of Volcano's turns on it).
//!
//! Left out:
//! - The `*_shard_test.go` files test Volcano's node sharding between scheduler
//!   instances, which this scheduler does not have.

mod allocate;
mod allocate_topology;
mod backfill;
mod capacity;
mod capacity_hierarchy;
mod drf;
mod enqueue;
mod gang;
mod gang_eviction_plan;
mod gang_eviction_support;
mod gang_preempt;
mod gang_reclaim;
mod inqueue_accounting;
mod predicates;
mod preempt;
mod preempt_topology_aware;
mod priority;
mod proportion;
mod queue_pod_count;
mod reclaim;
mod support;
