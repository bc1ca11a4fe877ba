//! A job's task topology as its PodGroup states it (Volcano's task-topology
//! annotations): which roles of the job should share nodes, which should keep
//! apart, and which roles go first.
//!
//! ```yaml
//! volcano.sh/task-topology-affinity: "ps,worker;chief,ps"   # groups by `;`, roles by `,`
//! volcano.sh/task-topology-anti-affinity: "ps"              # one role alone: its tasks keep apart
//! volcano.sh/task-topology-task-order: "ps,worker"          # earlier roles first
//! ```
//!
//! A role is a task's `volcano.sh/task-spec` (annotation, else label), what
//! Volcano's job controller writes on the pods of each task of a Job; the
//! controller also copies the Job's annotations onto the PodGroup it creates, so
//! users of a Volcano Job write these on the Job, users of a plain PodGroup on the
//! PodGroup. Volcano's scheduler reads them from the PodGroup only.
//!
//! As in Volcano, every role named must be the role of some task of the job and a
//! role may appear only once in a group (and once in the order); otherwise the
//! whole topology is refused and the job is scheduled without it. Empty entries
//! (`ps,,chief,`) name nothing. Unlike Volcano, spaces around names are ignored
//! (`ps, worker`), where Volcano would refuse the topology for a role named
//! `" worker"`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// Roles whose tasks should share nodes.
pub const AFFINITY_ANNOTATION: &str = "volcano.sh/task-topology-affinity";
/// Roles whose tasks should keep apart.
pub const ANTI_AFFINITY_ANNOTATION: &str = "volcano.sh/task-topology-anti-affinity";
/// Roles placed first, in this order.
pub const TASK_ORDER_ANNOTATION: &str = "volcano.sh/task-topology-task-order";

/// The three annotations as written on a PodGroup that has at least one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyAnnotations {
    /// `volcano.sh/task-topology-affinity`.
    pub affinity: Option<String>,
    /// `volcano.sh/task-topology-anti-affinity`.
    pub anti_affinity: Option<String>,
    /// `volcano.sh/task-topology-task-order`.
    pub task_order: Option<String>,
}

impl TopologyAnnotations {
    /// The topology annotations among a PodGroup's; `None` when it has none (an
    /// annotation present but empty still counts, as in Volcano).
    pub fn of(annotations: &BTreeMap<String, String>) -> Option<Self> {
        let found = Self {
            affinity: annotations.get(AFFINITY_ANNOTATION).cloned(),
            anti_affinity: annotations.get(ANTI_AFFINITY_ANNOTATION).cloned(),
            task_order: annotations.get(TASK_ORDER_ANNOTATION).cloned(),
        };
        (found != Self::default()).then_some(found)
    }
}

/// One group of an affinity or anti-affinity annotation (the text between two
/// `;`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleGroup {
    /// The roles named, in the order written (empty entries left out).
    pub roles: Vec<String>,
    /// The group was written as a single entry (`ps`): the relation binds the
    /// tasks of that role to each other. A group of several entries relates
    /// different roles only. Volcano counts entries as written, so `ps,` (two
    /// entries, one of them empty) relates `ps` to no one; this keeps that.
    pub within_role: bool,
}

/// A job's task topology, read and checked against the roles of its tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskTopology {
    /// Groups of roles whose tasks should share nodes.
    pub affinity: Vec<RoleGroup>,
    /// Groups of roles whose tasks should keep apart.
    pub anti_affinity: Vec<RoleGroup>,
    /// Roles in the order they are placed (earlier first).
    pub task_order: Vec<String>,
}

/// Why a job's topology annotations are refused (the job is then scheduled
/// without topology).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A role no task of the job has.
    #[error(
        "{annotation}: no task of the job has the role {role:?} (roles come from the pods' volcano.sh/task-spec)"
    )]
    UnknownRole {
        /// The annotation that names it.
        annotation: &'static str,
        /// The role as written.
        role: String,
    },
    /// A role named twice in one group.
    #[error("{annotation}: the role {role:?} is named twice in {group:?}")]
    RepeatedRole {
        /// The annotation that names it.
        annotation: &'static str,
        /// The role.
        role: String,
        /// The group as written.
        group: String,
    },
}

impl TaskTopology {
    /// Reads the annotations, checking every role named against `roles`, the roles
    /// of the job's tasks.
    pub fn read(
        annotations: &TopologyAnnotations,
        roles: &BTreeSet<&str>,
    ) -> Result<Self, TopologyError> {
        let groups = |annotation: &'static str, text: &Option<String>| match text {
            None => Ok(Vec::new()),
            Some(text) => text
                .split(';')
                .map(|group| read_group(annotation, group, roles))
                .collect::<Result<Vec<_>, _>>(),
        };
        let task_order = match &annotations.task_order {
            None => Vec::new(),
            Some(text) => read_group(TASK_ORDER_ANNOTATION, text, roles)?.roles,
        };
        Ok(Self {
            affinity: groups(AFFINITY_ANNOTATION, &annotations.affinity)?,
            anti_affinity: groups(ANTI_AFFINITY_ANNOTATION, &annotations.anti_affinity)?,
            task_order,
        })
    }
}

/// One `,`-separated group, each role known and named once.
fn read_group(
    annotation: &'static str,
    group: &str,
    roles: &BTreeSet<&str>,
) -> Result<RoleGroup, TopologyError> {
    let entries: Vec<&str> = group.split(',').map(str::trim).collect();
    let mut named: Vec<String> = Vec::new();
    for role in entries.iter().copied().filter(|r| !r.is_empty()) {
        if !roles.contains(role) {
            return Err(TopologyError::UnknownRole {
                annotation,
                role: role.to_owned(),
            });
        }
        if named.iter().any(|r| r == role) {
            return Err(TopologyError::RepeatedRole {
                annotation,
                role: role.to_owned(),
                group: group.to_owned(),
            });
        }
        named.push(role.to_owned());
    }
    Ok(RoleGroup {
        roles: named,
        within_role: entries.len() == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(affinity: &str, anti: &str, order: &str) -> TopologyAnnotations {
        TopologyAnnotations {
            affinity: Some(affinity.into()),
            anti_affinity: Some(anti.into()),
            task_order: Some(order.into()),
        }
    }

    fn group(roles: &[&str], within_role: bool) -> RoleGroup {
        RoleGroup {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            within_role,
        }
    }

    fn names(roles: &[&str]) -> Vec<String> {
        roles.iter().map(|r| r.to_string()).collect()
    }

    const TENSORFLOW: [&str; 4] = ["ps", "worker", "chief", "evaluator"];

    /// Volcano's own table (`Test_readTopologyFromPgAnnotations`).
    #[test]
    fn volcanos_annotation_table() {
        let roles = BTreeSet::from(TENSORFLOW);
        let read = TaskTopology::read(
            &annotations(
                "ps,worker;ps,chief",
                "ps;worker,chief",
                "ps,worker,chief,evaluator",
            ),
            &roles,
        );
        assert_eq!(
            read,
            Ok(TaskTopology {
                affinity: vec![
                    group(&["ps", "worker"], false),
                    group(&["ps", "chief"], false)
                ],
                anti_affinity: vec![group(&["ps"], true), group(&["worker", "chief"], false)],
                task_order: names(&TENSORFLOW),
            })
        );

        // Roles with `-` in their names.
        let dashed = BTreeSet::from(["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"]);
        let read = TaskTopology::read(
            &annotations(
                "ps-some,worker-another-some;ps-some,chief-kk",
                "ps-some;worker-another-some,chief-kk",
                "ps-some,worker-another-some,chief-kk,evaluator-tt",
            ),
            &dashed,
        )
        .expect("valid");
        assert_eq!(
            read.affinity[1],
            group(&["ps-some", "chief-kk"], false),
            "{read:?}"
        );
        assert_eq!(read.anti_affinity[0], group(&["ps-some"], true));

        // No annotation at all: no topology.
        assert_eq!(TopologyAnnotations::of(&BTreeMap::new()), None);

        // Garbage.
        assert_eq!(
            TaskTopology::read(
                &annotations(
                    "$%GF$^trtqwrg^",
                    "ps;worker,chief;#@FGEW^vfa897bgs;;",
                    "ps,worker,chief,evaluator,,,"
                ),
                &roles
            ),
            Err(TopologyError::UnknownRole {
                annotation: AFFINITY_ANNOTATION,
                role: "$%GF$^trtqwrg^".into()
            })
        );

        // A role no task has (the job has no chief).
        let ps_worker = BTreeSet::from(["ps", "worker"]);
        assert_eq!(
            TaskTopology::read(
                &annotations("ps,worker", "ps", "ps,worker,chief"),
                &ps_worker
            ),
            Err(TopologyError::UnknownRole {
                annotation: TASK_ORDER_ANNOTATION,
                role: "chief".into()
            })
        );

        // A role twice in one group.
        assert_eq!(
            TaskTopology::read(&annotations("ps,worker", "ps,ps", "ps,worker"), &ps_worker),
            Err(TopologyError::RepeatedRole {
                annotation: ANTI_AFFINITY_ANNOTATION,
                role: "ps".into(),
                group: "ps,ps".into()
            })
        );

        // Redundant punctuation names nothing, but counts as written.
        let read = TaskTopology::read(
            &annotations(
                "ps,worker;ps,,chief,;",
                "ps;worker,chief;;;",
                "ps,worker,chief,evaluator,,,",
            ),
            &roles,
        )
        .expect("valid");
        assert_eq!(
            read.affinity,
            vec![
                group(&["ps", "worker"], false),
                group(&["ps", "chief"], false),
                group(&[], true)
            ]
        );
        assert_eq!(read.anti_affinity.len(), 5);
        assert_eq!(read.task_order, names(&TENSORFLOW));
    }

    #[test]
    fn a_role_twice_in_different_groups_is_fine() {
        let roles = BTreeSet::from(["ps", "worker", "chief"]);
        let read = TaskTopology::read(
            &TopologyAnnotations {
                affinity: Some("ps,worker;chief,ps".into()),
                ..Default::default()
            },
            &roles,
        );
        assert!(read.is_ok(), "{read:?}");
    }

    #[test]
    fn spaces_around_names_are_ignored() {
        let roles = BTreeSet::from(["ps", "worker"]);
        let read = TaskTopology::read(
            &TopologyAnnotations {
                affinity: Some(" ps , worker ".into()),
                ..Default::default()
            },
            &roles,
        )
        .expect("valid");
        assert_eq!(read.affinity, vec![group(&["ps", "worker"], false)]);
    }

    #[test]
    fn an_empty_annotation_is_present_and_names_nothing() {
        let only_order = BTreeMap::from([(TASK_ORDER_ANNOTATION.to_string(), String::new())]);
        let found = TopologyAnnotations::of(&only_order).expect("present");
        let read = TaskTopology::read(&found, &BTreeSet::new()).expect("valid");
        assert_eq!(read, TaskTopology::default());
    }

    #[test]
    fn errors_name_the_annotation_and_the_role() {
        let e = TopologyError::UnknownRole {
            annotation: AFFINITY_ANNOTATION,
            role: "chief".into(),
        };
        assert_eq!(
            e.to_string(),
            "volcano.sh/task-topology-affinity: no task of the job has the role \"chief\" (roles come from the pods' volcano.sh/task-spec)"
        );
    }
}
