//! The resource types the fake serves: their REST names, kinds, scope and the
//! behaviour that differs between them on the real server.

/// Where objects of a resource live. Two API resources can share one storage
/// (core `events` and `events.k8s.io` `events`, like on the real server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Storage {
    Namespaces,
    Nodes,
    Pods,
    ResourceQuotas,
    Events,
    Leases,
    Secrets,
    MutatingWebhookConfigurations,
    PriorityClasses,
    PodDisruptionBudgets,
    PodGroups,
    Queues,
    HyperNodes,
    /// Kubernetes' own PodGroups (`scheduling.k8s.io`, feature gate
    /// GenericWorkload).
    NativePodGroups,
    /// Workloads (`scheduling.k8s.io`, feature gate GenericWorkload).
    Workloads,
}

/// One REST resource (group/version/plural).
#[derive(Debug)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub storage: Storage,
    /// Whether a `status` subresource exists (then writes to the main resource
    /// keep the stored status, as on the real server).
    pub status_subresource: bool,
    /// Whether DELETE answers with the deleted object (true for pods and
    /// namespaces) or with a `Status` (everything else).
    pub returns_deleted_object: bool,
    /// Field selector labels the real server accepts for this resource.
    pub field_labels: &'static [&'static str],
    pub short_names: &'static [&'static str],
    /// PUT of a missing object creates it (only events on the real server).
    pub create_on_update: bool,
    /// Served from a CustomResourceDefinition: no strategic merge patch (415),
    /// `metadata.generation`, status dropped on create and `/status` writes
    /// that change nothing but status, deletecollection on any scope.
    pub custom: bool,
}

impl Resource {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified resource used in messages: `pods`,
    /// `leases.coordination.k8s.io`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The group-qualified kind used in `Invalid` messages: `Pod`,
    /// `Lease.coordination.k8s.io`.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The subresources the discovery document lists.
    pub fn subresources(&self) -> &'static [&'static str] {
        match self.storage {
            Storage::Pods => &["binding", "eviction", "status"],
            _ if self.status_subresource => &["status"],
            _ => &[],
        }
    }

    /// Whether the server keeps `metadata.generation` (custom resources,
    /// webhook configurations, PriorityClasses and PodDisruptionBudgets; not
    /// the core types served here).
    pub fn tracks_generation(&self) -> bool {
        self.custom
            || matches!(
                self.storage,
                Storage::MutatingWebhookConfigurations
                    | Storage::PriorityClasses
                    | Storage::PodDisruptionBudgets
            )
    }

    /// Whether a PUT must carry `metadata.resourceVersion` (the strategy's
    /// `AllowUnconditionalUpdate` is false: PodDisruptionBudgets).
    pub fn requires_resource_version_on_update(&self) -> bool {
        self.storage == Storage::PodDisruptionBudgets
    }
}

const META: &[&str] = &["metadata.name", "metadata.namespace"];

/// Cluster-scoped resources without field labels of their own.
const CLUSTER_META: &[&str] = &["metadata.name"];

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

const EVENT_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    // events.k8s.io spellings, mapped onto the core ones.
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reportingController",
];

/// Every resource the fake serves.
pub static RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        storage: Storage::Namespaces,
        status_subresource: true,
        returns_deleted_object: true,
        field_labels: &["metadata.name", "status.phase"],
        short_names: &["ns"],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        storage: Storage::Nodes,
        status_subresource: true,
        returns_deleted_object: false,
        field_labels: &["metadata.name", "spec.unschedulable"],
        short_names: &["no"],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        storage: Storage::Pods,
        status_subresource: true,
        returns_deleted_object: true,
        field_labels: POD_FIELDS,
        short_names: &["po"],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "resourcequotas",
        singular: "resourcequota",
        kind: "ResourceQuota",
        namespaced: true,
        storage: Storage::ResourceQuotas,
        status_subresource: true,
        returns_deleted_object: false,
        field_labels: META,
        short_names: &["quota"],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        storage: Storage::Events,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: EVENT_FIELDS,
        short_names: &["ev"],
        create_on_update: true,
        custom: false,
    },
    Resource {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        storage: Storage::Events,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: EVENT_FIELDS,
        short_names: &["ev"],
        create_on_update: true,
        custom: false,
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        storage: Storage::Leases,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: META,
        short_names: &[],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        storage: Storage::Secrets,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: &["metadata.name", "metadata.namespace", "type"],
        short_names: &[],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "mutatingwebhookconfigurations",
        singular: "mutatingwebhookconfiguration",
        kind: "MutatingWebhookConfiguration",
        namespaced: false,
        storage: Storage::MutatingWebhookConfigurations,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: CLUSTER_META,
        short_names: &[],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "scheduling.k8s.io",
        version: "v1",
        plural: "priorityclasses",
        singular: "priorityclass",
        kind: "PriorityClass",
        namespaced: false,
        storage: Storage::PriorityClasses,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: CLUSTER_META,
        short_names: &["pc"],
        create_on_update: false,
        custom: false,
    },
    Resource {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        storage: Storage::PodDisruptionBudgets,
        status_subresource: true,
        returns_deleted_object: false,
        field_labels: META,
        short_names: &["pdb"],
        create_on_update: false,
        custom: false,
    },
    // Volcano's CRDs as its charts install them: PodGroup has NO status
    // subresource (`subresources: {}`; Volcano's scheduler writes PodGroup status
    // with a plain update), Queue has one.
    Resource {
        group: "scheduling.volcano.sh",
        version: "v1beta1",
        plural: "podgroups",
        singular: "podgroup",
        kind: "PodGroup",
        namespaced: true,
        storage: Storage::PodGroups,
        status_subresource: false,
        returns_deleted_object: false,
        field_labels: META,
        short_names: &["pg", "podgroup-v1beta1"],
        create_on_update: false,
        custom: true,
    },
    Resource {
        group: "scheduling.volcano.sh",
        version: "v1beta1",
        plural: "queues",
        singular: "queue",
        kind: "Queue",
        namespaced: false,
        storage: Storage::Queues,
        status_subresource: true,
        returns_deleted_object: false,
        field_labels: CLUSTER_META,
        short_names: &["q", "queue-v1beta1"],
        create_on_update: false,
        custom: true,
    },
    // Volcano's network topology: cluster-scoped, with a status subresource.
    Resource {
        group: "topology.volcano.sh",
        version: "v1alpha1",
        plural: "hypernodes",
        singular: "hypernode",
        kind: "HyperNode",
        namespaced: false,
        storage: Storage::HyperNodes,
        status_subresource: true,
        returns_deleted_object: false,
        field_labels: CLUSTER_META,
        short_names: &["hn"],
        create_on_update: false,
        custom: true,
    },
    // Kubernetes' workload APIs: built in, served only with the GenericWorkload
    // feature gate on and in one version (see `Config::workload_version`):
    // `v1alpha2` in 1.36, `v1beta1` in 1.37.
    native_podgroups("v1alpha2"),
    workloads("v1alpha2"),
    native_podgroups("v1beta1"),
    workloads("v1beta1"),
];

/// `scheduling.k8s.io` PodGroups in `version`: their status (conditions
/// written by kube-scheduler) is a subresource.
const fn native_podgroups(version: &'static str) -> Resource {
    workload_api_kind(
        version,
        "podgroups",
        "PodGroup",
        Storage::NativePodGroups,
        true,
    )
}

/// `scheduling.k8s.io` Workloads in `version`: no status subresource.
const fn workloads(version: &'static str) -> Resource {
    workload_api_kind(version, "workloads", "Workload", Storage::Workloads, false)
}

const fn workload_api_kind(
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    storage: Storage,
    status_subresource: bool,
) -> Resource {
    Resource {
        group: "scheduling.k8s.io",
        version,
        plural,
        singular: match storage {
            Storage::NativePodGroups => "podgroup",
            _ => "workload",
        },
        kind,
        namespaced: true,
        storage,
        status_subresource,
        returns_deleted_object: false,
        field_labels: META,
        short_names: &[],
        create_on_update: false,
        custom: false,
    }
}

/// Whether a resource is served only with the GenericWorkload feature gate.
pub fn workload_api(r: &Resource) -> bool {
    matches!(r.storage, Storage::NativePodGroups | Storage::Workloads)
}

/// Whether the server serves `r`, given the version its workload APIs are
/// served in (`None`: the GenericWorkload gate is off).
pub fn is_served(r: &Resource, workload_version: Option<&str>) -> bool {
    !workload_api(r) || workload_version == Some(r.version)
}

/// The resource served at `group/version/plural`.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource for a control-API name: a kind (`Pod`), plural (`pods`),
/// singular (`pod`) or short name, optionally prefixed by a group
/// (`events.k8s.io/Event`). Plain `Event` means core v1 events.
pub fn by_name(name: &str) -> Option<&'static Resource> {
    let (group, name) = match name.rsplit_once('/') {
        Some((g, n)) => (Some(g.split('/').next().unwrap_or(g)), n),
        None => (None, name),
    };
    RESOURCES.iter().find(|r| {
        group.is_none_or(|g| g == r.group || (g == "v1" && r.group.is_empty()))
            && (r.kind == name
                || r.plural == name
                || r.singular == name
                || r.short_names.contains(&name))
    })
}

/// The resource an object belongs to, from its `apiVersion` and `kind`.
pub fn for_object(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// The canonical resource of a storage (core events for [`Storage::Events`]).
pub fn canonical(storage: Storage) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.storage == storage)
        .expect("every storage has a resource")
}
