//! Pod rules of the real server: create defaults (incl. requests copied from
//! limits and the QoS class), which spec fields an update may change, graceful
//! deletion, the `binding` subresource and pod conditions (the `eviction`
//! subresource is in `eviction.rs`).

use super::objects;
use super::resources::{self, Resource, Storage};
use super::status::{self, ApiError, Cause};
use super::store::Store;
use serde_json::{Map, Value, json};

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) || map[key].is_null() {
        map.insert(key.to_string(), value);
    }
}

fn default_container(c: &mut Value) {
    let Some(c) = c.as_object_mut() else {
        return;
    };
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let tag_latest = {
        let last = image.rsplit('/').next().unwrap_or("");
        !last.contains(':') && !last.contains('@') || last.ends_with(":latest")
    };
    set_default(
        c,
        "imagePullPolicy",
        json!(if tag_latest { "Always" } else { "IfNotPresent" }),
    );
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    // Requests default to limits for every resource with a limit only.
    let resources = c
        .get_mut("resources")
        .and_then(Value::as_object_mut)
        .expect("resources defaulted");
    if let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() {
        let requests = resources.entry("requests").or_insert_with(|| json!({}));
        if let Some(req) = requests.as_object_mut() {
            for (k, v) in limits {
                req.entry(k).or_insert(v);
            }
        }
    }
}

fn container_lists(spec: &Value) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .filter_map(|f| spec.get(f).and_then(Value::as_array))
        .flatten()
}

/// `BestEffort`, `Burstable` or `Guaranteed` from cpu/memory requests and limits.
fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for c in container_lists(spec) {
        let res = c.get("resources");
        let get = |kind: &str, r: &str| {
            res.and_then(|x| x.get(kind))
                .and_then(|x| x.get(r))
                .map(|v| v.to_string())
        };
        for r in ["cpu", "memory"] {
            let (req, lim) = (get("requests", r), get("limits", r));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            if lim.is_none() || req != lim {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Create-time checks and defaults. `from_http`: the real create path (status is
/// reset); otherwise a test seeding state (status kept).
pub fn prepare_create(pod: &mut Value, from_http: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    let containers_ok = pod["spec"]
        .get("containers")
        .and_then(Value::as_array)
        .is_some_and(|cs| !cs.is_empty());
    if from_http && !containers_ok {
        causes.push(Cause::required("spec.containers"));
    }
    if from_http && let Some(cs) = pod["spec"].get("containers").and_then(Value::as_array) {
        for (i, c) in cs.iter().enumerate() {
            if c.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                causes.push(Cause::required(&format!("spec.containers[{i}].name")));
            }
            if c.get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                causes.push(Cause::required(&format!("spec.containers[{i}].image")));
            }
        }
    }
    if let Some(gates) = pod["spec"].get("schedulingGates").and_then(Value::as_array)
        && !gates.is_empty()
        && pod["spec"]
            .get("nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
    {
        causes.push(Cause::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    let spec = pod["spec"].as_object_mut().expect("spec is an object");
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container);
        }
    }
    // DefaultTolerationSeconds admission.
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(ts) = tolerations.as_array_mut() {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            if !ts
                .iter()
                .any(|t| t.get("key").and_then(Value::as_str) == Some(key))
            {
                ts.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
    let qos = qos_class(&pod["spec"]);
    if from_http || !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    } else {
        let status = pod["status"].as_object_mut().expect("status is an object");
        set_default(status, "phase", json!("Pending"));
        set_default(status, "qosClass", json!(qos));
    }
    causes
}

const SPEC_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn gate_names(spec: &Value) -> Vec<String> {
    spec.get("schedulingGates")
        .and_then(Value::as_array)
        .map(|gs| {
            gs.iter()
                .filter_map(|g| g.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Update rules for the main pod resource (not `status`).
pub fn validate_update(old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = objects::name(old);
    let res = resources::canonical(Storage::Pods);
    let old_spec = old.get("spec").cloned().unwrap_or(json!({}));
    let mut new_spec = new.get("spec").cloned().unwrap_or(json!({}));
    // `spec.schedulingGroup` ties a pod to its PodGroup for good (KEP-4671): the
    // real validation refuses any change, gated or not, including setting it
    // on a pod created without it.
    let old_group = old_spec.get("schedulingGroup").unwrap_or(&Value::Null);
    let new_group = new_spec.get("schedulingGroup").unwrap_or(&Value::Null);
    if old_group != new_group {
        return Err(ApiError::invalid_object(
            res,
            name,
            vec![Cause::invalid(
                "spec.schedulingGroup",
                new_group,
                "field is immutable",
            )],
        ));
    }
    let old_gates = gate_names(&old_spec);
    let new_gates = gate_names(&new_spec);
    if let Some(added) = new_gates.iter().find(|g| !old_gates.contains(g)) {
        return Err(ApiError::invalid_object(
            res,
            name,
            vec![Cause::forbidden(
                "spec.schedulingGates",
                &format!("only deletion is allowed, but found new scheduling gate '{added}'"),
            )],
        ));
    }
    if !old_gates.is_empty() {
        let causes = super::gated_node_selection::narrowing_causes(&old_spec, &new_spec);
        if !causes.is_empty() {
            return Err(ApiError::invalid_object(res, name, causes));
        }
    }
    // Fields an update may change: copy them back from the old spec and compare.
    let Some(ns) = new_spec.as_object_mut() else {
        return Err(ApiError::invalid_object(
            res,
            name,
            vec![Cause::forbidden("spec", SPEC_FORBIDDEN)],
        ));
    };
    let allowed = vec![
        "schedulingGates",
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
    ];
    if !old_gates.is_empty() {
        // Gated pods may get their node selection narrowed (1.30+).
        super::gated_node_selection::restore_node_selection(&old_spec, ns);
    }
    for f in allowed {
        match old_spec.get(f) {
            Some(v) => {
                ns.insert(f.to_string(), v.clone());
            }
            None => {
                ns.remove(f);
            }
        }
    }
    for list in ["containers", "initContainers"] {
        if let (Some(old_cs), Some(new_cs)) = (
            old_spec.get(list).and_then(Value::as_array),
            ns.get_mut(list).and_then(Value::as_array_mut),
        ) && old_cs.len() == new_cs.len()
        {
            for (o, n) in old_cs.iter().zip(new_cs.iter_mut()) {
                if let (Some(img), Some(nm)) = (o.get("image"), n.as_object_mut()) {
                    nm.insert("image".into(), img.clone());
                }
            }
        }
    }
    if new_spec != old_spec {
        return Err(ApiError::invalid_object(
            res,
            name,
            vec![Cause::forbidden("spec", SPEC_FORBIDDEN)],
        ));
    }
    Ok(())
}

/// The grace period a pod DELETE gets (`CheckGracefulDelete`): 0 deletes now.
pub fn grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    if pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        period = 0;
    }
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Failed" | "Succeeded")
    ) {
        period = 0;
    }
    if period < 0 { 1 } else { period }
}

/// The Node labels the `PodTopologyLabels` admission plugin copies onto a
/// Binding (its default set).
const TOPOLOGY_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// POST `pods/{name}/binding`. The pod takes the Binding's annotations in the
/// same write as its node (`setPodNodeAndMetadata`); with `topology_labels`
/// (the `PodTopologyLabelsAdmission` gate, on by default since 1.35) it also
/// takes the Binding's labels, to which admission first added the target
/// Node's zone and region.
pub fn bind(
    store: &mut Store,
    ns: &str,
    name: &str,
    body: &Value,
    topology_labels: bool,
) -> Result<Value, ApiError> {
    let res = resources::canonical(Storage::Pods);
    let body_name = objects::name(body);
    if body_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let body_ns = objects::namespace(body);
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let target = body.get("target").cloned().unwrap_or(json!({}));
    let target_kind = objects::field_string(&target, "kind");
    let target_name = objects::field_string(&target, "name");
    let mut causes = Vec::new();
    if !target_kind.is_empty() && target_kind != "Node" {
        causes.push(Cause::not_supported(
            "target.kind",
            &target_kind,
            &["Node", "<empty>"],
        ));
    }
    if target_name.is_empty() {
        causes.push(Cause::required("target.name"));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("Binding", "", "Binding", name, causes));
    }
    let Some(pod) = store.get(Storage::Pods, ns, name).cloned() else {
        return Err(ApiError::not_found(res, name));
    };
    let want_uid = objects::uid(body);
    if !want_uid.is_empty() && want_uid != objects::uid(&pod) {
        return Err(ApiError::precondition(
            res,
            ns,
            name,
            &format!(
                "UID in precondition: {want_uid}, UID in object meta: {}",
                objects::uid(&pod)
            ),
        ));
    }
    let want_rv = objects::resource_version(body);
    if !want_rv.is_empty() && want_rv != objects::resource_version(&pod) {
        return Err(ApiError::precondition(
            res,
            ns,
            name,
            &format!(
                "ResourceVersion in precondition: {want_rv}, ResourceVersion in object meta: {}",
                objects::resource_version(&pod)
            ),
        ));
    }
    let binding_conflict =
        |detail: String| ApiError::conflict_on("pods/binding", "", "pods/binding", name, &detail);
    if objects::meta(&pod).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
    {
        return Err(binding_conflict(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        )));
    }
    let current = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !current.is_empty() {
        return Err(binding_conflict(format!(
            "pod {name} is already assigned to node {current:?}"
        )));
    }
    if !gate_names(pod.get("spec").unwrap_or(&Value::Null)).is_empty() {
        return Err(binding_conflict(format!(
            "pod {name} has non-empty .spec.schedulingGates"
        )));
    }
    let mut pod = pod;
    pod["spec"]["nodeName"] = json!(target_name);
    if let Some(ann) = objects::meta(body)
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    {
        let meta = objects::meta_mut(&mut pod);
        let dest = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(dest) = dest.as_object_mut() {
            for (k, v) in ann {
                dest.insert(k.clone(), v.clone());
            }
        }
    }
    if topology_labels {
        let mut labels = objects::meta(body)
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if target_kind == "Node"
            && let Some(node) = store.get(Storage::Nodes, "", &target_name)
            && let Some(node_labels) = objects::meta(node)
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object)
        {
            for key in TOPOLOGY_LABELS {
                if let Some(value) = node_labels.get(key) {
                    labels.insert(key.to_string(), value.clone());
                }
            }
        }
        if !labels.is_empty() {
            let meta = objects::meta_mut(&mut pod);
            let dest = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(dest) = dest.as_object_mut() {
                dest.extend(labels);
            }
        }
    }
    set_condition(&mut pod, "PodScheduled", "True", None);
    store.replace(Storage::Pods, pod);
    Ok(status::success(201, None))
}

/// Sets condition `ty` to `value` (`UpdatePodCondition`: the transition time
/// moves only when the status does), with an optional (reason, message).
pub fn set_condition(pod: &mut Value, ty: &str, value: &str, why: Option<(&str, &str)>) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let conds = pod["status"]
        .as_object_mut()
        .expect("status is an object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    let Some(conds) = conds.as_array_mut() else {
        return;
    };
    let now = objects::now_time();
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
    {
        Some(c) => {
            if c.get("status").and_then(Value::as_str) != Some(value) {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(value);
            if let Some((reason, message)) = why {
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
        }
        None => {
            let mut c = json!({
                "type": ty,
                "status": value,
                "lastProbeTime": null,
                "lastTransitionTime": now
            });
            if let Some((reason, message)) = why {
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
            conds.push(c);
        }
    }
}

/// Drops the pod fields of a feature the server has off, as the real server
/// does on create: `spec.schedulingGroup` needs the GenericWorkload gate.
pub fn drop_disabled_fields(res: &Resource, pod: &mut Value, workload_apis: bool) {
    if res.storage != Storage::Pods || workload_apis {
        return;
    }
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("schedulingGroup");
    }
}
