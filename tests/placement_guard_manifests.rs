//! The placement-annotation guard as the API server applies the shipped admission
//! configuration (`manifests/install/` and the chart rendered by the real `helm`):
//! the webhook's rules, namespace and object selectors and matchConditions decide
//! whether `/mutate` (the real review code) is asked, and the shipped
//! ValidatingAdmissionPolicy is evaluated with its binding. CEL is evaluated by a
//! CEL interpreter, not pattern-matched. Whatever labels a tenant puts on a pod,
//! a forged `hami.io/vgpu-*` placement must be refused, by the webhook and by the
//! policy each on its own (the policy holds while the webhook is down); the
//! opt-out label keeps only its routing meaning.

// Only `template` and `available` are used here.
#[allow(dead_code)]
mod helm;

use cel::{Context, Program, Value as CelValue};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use vgpu_scheduler::device::device_config::NvidiaConfig;
use vgpu_scheduler::webhook::{AnnotationWriters, WebhookConfig, review};

const TENANT: &str = "system:serviceaccount:team-a:default";
const FORGED_DEVICES: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc,NVIDIA,81559,100:;";

/// The shipped admission objects and the users the Deployment's flags name.
struct Shipped {
    what: &'static str,
    webhooks: Vec<Value>,
    policies: Vec<Value>,
    bindings: Vec<Value>,
    writers: AnnotationWriters,
}

fn parse(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde_yaml_ng::Value::deserialize(d).expect("YAML"))
        .filter(|y| !y.is_null())
        .map(|y| serde_json::to_value(y).expect("JSON-compatible"))
        .collect()
}

fn shipped(what: &'static str, docs: Vec<Value>) -> Shipped {
    let of =
        |kind: &str| -> Vec<Value> { docs.iter().filter(|d| d["kind"] == kind).cloned().collect() };
    let args: Vec<String> = of("Deployment")
        .iter()
        .flat_map(|d| {
            d.pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|c| c["args"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let users = |flag: &str| -> Vec<String> {
        args.iter()
            .filter_map(|a| a.strip_prefix(&format!("--{flag}=")))
            .flat_map(|v| v.split(',').map(str::to_owned))
            .collect()
    };
    Shipped {
        what,
        webhooks: of("MutatingWebhookConfiguration")
            .iter()
            .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
            .collect(),
        policies: of("ValidatingAdmissionPolicy"),
        bindings: of("ValidatingAdmissionPolicyBinding"),
        writers: AnnotationWriters {
            scheduler: users("scheduler-users"),
            device_plugin: users("device-plugin-users"),
        },
    }
}

fn install() -> Shipped {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/install");
    let mut docs = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("manifests/install")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        docs.extend(parse(&std::fs::read_to_string(file).expect("read")));
    }
    shipped("manifests/install", docs)
}

fn chart() -> Option<Shipped> {
    if !helm::available("placement guard of the chart") {
        return None;
    }
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/vgpu-scheduler");
    let rendered = helm::template(
        &chart,
        &helm::Release {
            name: "vgpu-scheduler",
            namespace: "vgpu-system",
            kube_version: "v1.33.0",
        },
        &json!({}),
    );
    let docs = rendered.iter().flat_map(|(_, text)| parse(text)).collect();
    Some(shipped("the chart", docs))
}

/// One pod write as the API server sees it.
struct Write {
    operation: &'static str,
    /// `pods`, or `pods/binding` for a Binding of the pod.
    resource: &'static str,
    user: &'static str,
    namespace_labels: BTreeMap<String, String>,
    object: Value,
    old_object: Option<Value>,
}

/// What the API server made of the write.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Admitted; `routed` says whether the webhook was asked and set our scheduler.
    Admitted { webhook_asked: bool },
    /// Refused by the webhook, with its message.
    RefusedByWebhook(String),
    /// Refused by the ValidatingAdmissionPolicy.
    RefusedByPolicy,
}

fn cel(value: &Value) -> CelValue {
    cel::to_value(value).expect("JSON to CEL")
}

fn eval(expression: &str, ctx: &Context) -> CelValue {
    let program =
        Program::compile(expression).unwrap_or_else(|e| panic!("CEL {expression:?}: {e:?}"));
    program
        .execute(ctx)
        .unwrap_or_else(|e| panic!("CEL {expression:?}: {e:?}"))
}

fn truth(expression: &str, ctx: &Context) -> bool {
    match eval(expression, ctx) {
        CelValue::Bool(b) => b,
        other => panic!("CEL {expression:?} gave {other:?}, not a bool"),
    }
}

fn request_of(w: &Write) -> Value {
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": w.object["metadata"]["namespace"],
        "name": w.object["metadata"]["name"],
        "operation": w.operation,
        "userInfo": {"username": w.user},
    })
}

fn context_of(w: &Write) -> Context<'static, 'static> {
    let mut ctx = Context::default();
    ctx.add_variable_from_value("object", cel(&w.object));
    ctx.add_variable_from_value(
        "oldObject",
        cel(w.old_object.as_ref().unwrap_or(&Value::Null)),
    );
    ctx.add_variable_from_value("request", cel(&request_of(w)));
    ctx
}

/// A label selector (matchLabels, matchExpressions) against labels.
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let exact = selector["matchLabels"].as_object().into_iter().flatten();
    let exact_ok = exact
        .into_iter()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten();
    exact_ok
        && expressions.into_iter().all(|e| {
            let key = e["key"].as_str().expect("key");
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let value = labels.get(key).map(String::as_str);
            match e["operator"].as_str().expect("operator") {
                "In" => value.is_some_and(|v| values.contains(&v)),
                "NotIn" => value.is_none_or(|v| !values.contains(&v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("operator {other}"),
            }
        })
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Whether the API server sends the write to this webhook: rules, then the
/// namespace selector, the object selector (the new or the old object may
/// match), then every matchCondition.
fn webhook_is_asked(webhook: &Value, w: &Write) -> bool {
    let rules_match = webhook["rules"].as_array().into_iter().flatten().any(|r| {
        let has = |field: &str, v: &str| {
            r[field]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x == v || x == "*")
        };
        has("operations", w.operation) && has("resources", w.resource) && has("apiGroups", "")
    });
    let empty = json!({});
    let namespace_selector = webhook.get("namespaceSelector").unwrap_or(&empty);
    let object_selector = webhook.get("objectSelector").unwrap_or(&empty);
    let object_match = selects(object_selector, &labels_of(&w.object))
        || w.old_object
            .as_ref()
            .is_some_and(|o| selects(object_selector, &labels_of(o)));
    if !(rules_match && selects(namespace_selector, &w.namespace_labels) && object_match) {
        return false;
    }
    let ctx = context_of(w);
    webhook["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|c| truth(c["expression"].as_str().expect("expression"), &ctx))
}

/// Whether a bound ValidatingAdmissionPolicy refuses the write.
fn policy_refuses(s: &Shipped, w: &Write) -> bool {
    s.policies.iter().any(|policy| {
        let name = &policy["metadata"]["name"];
        let bound = s.bindings.iter().any(|b| {
            &b["spec"]["policyName"] == name
                && b["spec"]["validationActions"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!("Deny")))
                && b["spec"].get("matchResources").is_none()
        });
        let matched = policy["spec"]["matchConstraints"]["resourceRules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| {
                r["operations"]
                    .as_array()
                    .is_some_and(|o| o.contains(&json!(w.operation)))
                    && r["resources"]
                        .as_array()
                        .is_some_and(|o| o.contains(&json!(w.resource)))
            });
        if !(bound && matched) {
            return false;
        }
        let mut variables: HashMap<String, CelValue> = HashMap::new();
        for variable in policy["spec"]["variables"].as_array().into_iter().flatten() {
            let mut ctx = context_of(w);
            ctx.add_variable_from_value("variables", variables.clone());
            let value = eval(variable["expression"].as_str().expect("expression"), &ctx);
            variables.insert(variable["name"].as_str().expect("name").to_owned(), value);
        }
        let mut ctx = context_of(w);
        ctx.add_variable_from_value("variables", variables);
        policy["spec"]["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| !truth(v["expression"].as_str().expect("expression"), &ctx))
    })
}

/// The API server's admission of one pod write: mutating webhooks (the real
/// review code behind `/mutate`), then the validating policies. `webhook_up`
/// false plays an outage under `failurePolicy: Ignore`, where only the policy
/// stands.
fn admit(s: &Shipped, w: &Write, webhook_up: bool) -> Outcome {
    let config = WebhookConfig {
        scheduler_name: "vgpu-scheduler".into(),
        force_overwrite_default_scheduler: true,
        nvidia: NvidiaConfig::default(),
        gang_gates: true,
        allow_privileged_vgpu: false,
        annotation_writers: s.writers.clone(),
    };
    let mut asked = false;
    for webhook in &s.webhooks {
        if !webhook_up || !webhook_is_asked(webhook, w) {
            continue;
        }
        asked = true;
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": w.object["metadata"]["namespace"],
                "name": w.object["metadata"]["name"],
                "operation": w.operation,
                "userInfo": {"username": w.user},
                "object": w.object,
                "oldObject": w.old_object,
            }
        });
        let answer = review(&serde_json::to_vec(&body).expect("body"), &config);
        if !answer.response.allowed {
            return Outcome::RefusedByWebhook(answer.response.message().to_owned());
        }
    }
    if policy_refuses(s, w) {
        return Outcome::RefusedByPolicy;
    }
    Outcome::Admitted {
        webhook_asked: asked,
    }
}

fn namespace(name: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), name.to_owned())]);
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    labels
}

/// A tenant's vGPU pod, labelled `labels`, with `annotations`.
fn tenant_pod(labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "forger", "namespace": "team-a", "labels": labels, "annotations": annotations},
        "spec": {
            "schedulerName": "vgpu-scheduler",
            "containers": [{"name": "cuda", "image": "cuda",
                "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "81559"}}}]
        }
    })
}

fn forged() -> Value {
    json!({
        "hami.io/vgpu-node": "gpu-a",
        "hami.io/vgpu-devices-allocated": FORGED_DEVICES,
        "hami.io/vgpu-devices-to-allocate": FORGED_DEVICES,
        "hami.io/bind-phase": "allocating"
    })
}

fn opted_out() -> Value {
    json!({"vgpu.io/webhook": "ignore"})
}

fn write(operation: &'static str, user: &'static str, object: Value, old: Option<Value>) -> Write {
    Write {
        operation,
        resource: "pods",
        user,
        namespace_labels: namespace("team-a", &[]),
        object,
        old_object: old,
    }
}

/// A Binding of the tenant's pod to `gpu-a` carrying `annotations`, as
/// `user` creates it.
fn binding(user: &'static str, annotations: Value) -> Write {
    Write {
        operation: "CREATE",
        resource: "pods/binding",
        user,
        namespace_labels: namespace("team-a", &[]),
        object: json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "forger", "namespace": "team-a", "annotations": annotations},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-a"}
        }),
        old_object: None,
    }
}

fn refused_both_ways(s: &Shipped, w: &Write, case: &str) {
    let what = s.what;
    match admit(s, w, true) {
        Outcome::RefusedByWebhook(message) => assert!(
            message.contains("hami.io/vgpu-node"),
            "{what}: {case}: {message}"
        ),
        other => panic!("{what}: {case}: the webhook let it through: {other:?}"),
    }
    assert_eq!(
        admit(s, w, false),
        Outcome::RefusedByPolicy,
        "{what}: {case}: with the webhook down"
    );
}

fn check_guard(s: &Shipped) {
    let what = s.what;
    assert!(!s.writers.scheduler.is_empty(), "{what}: --scheduler-users");
    assert!(
        !s.writers.device_plugin.is_empty(),
        "{what}: --device-plugin-users"
    );

    // Created with a forged placement, opted out of the webhook by its own label.
    let pod = tenant_pod(opted_out(), forged());
    refused_both_ways(
        s,
        &write("CREATE", TENANT, pod.clone(), None),
        "opted-out create",
    );
    assert_eq!(s.policies.len(), 1, "{what}: one ValidatingAdmissionPolicy");

    // The same, pinned to the node too.
    let mut pinned = pod;
    pinned["spec"]["nodeName"] = json!("gpu-a");
    refused_both_ways(s, &write("CREATE", TENANT, pinned, None), "pinned create");

    // Labelled first, annotated afterwards.
    let labelled = tenant_pod(opted_out(), json!({}));
    let annotated = tenant_pod(opted_out(), forged());
    refused_both_ways(
        s,
        &write("UPDATE", TENANT, annotated, Some(labelled.clone())),
        "annotated after opting out",
    );

    // In a namespace opted out as a whole, the policy still holds.
    let mut in_opted_out_namespace = write("CREATE", TENANT, tenant_pod(json!({}), forged()), None);
    in_opted_out_namespace.namespace_labels = namespace("team-a", &[("vgpu.io/webhook", "ignore")]);
    assert_eq!(
        admit(s, &in_opted_out_namespace, true),
        Outcome::RefusedByPolicy,
        "{what}: opted-out namespace"
    );

    // The opt-out label still keeps a pod away from routing.
    assert_eq!(
        admit(s, &write("CREATE", TENANT, labelled.clone(), None), true),
        Outcome::Admitted {
            webhook_asked: false
        },
        "{what}: opted-out pod without placement"
    );
    assert_eq!(
        admit(
            s,
            &write("CREATE", TENANT, tenant_pod(json!({}), json!({})), None),
            true
        ),
        Outcome::Admitted {
            webhook_asked: true
        },
        "{what}: ordinary vGPU pod is routed"
    );

    // The real writers keep writing: the scheduler its placement, the device
    // plugin the bind phase.
    let scheduler = s.writers.scheduler[0].clone().leak();
    let device_plugin = s.writers.device_plugin[0].clone().leak();
    let placed = tenant_pod(json!({}), forged());
    assert_eq!(
        admit(
            s,
            &write(
                "UPDATE",
                scheduler,
                placed.clone(),
                Some(tenant_pod(json!({}), json!({})))
            ),
            true
        ),
        Outcome::Admitted {
            webhook_asked: true
        },
        "{what}: the scheduler places"
    );
    let mut allocated = placed.clone();
    allocated["metadata"]["annotations"]["hami.io/bind-phase"] = json!("success");
    allocated["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = json!(";");
    for up in [true, false] {
        assert_eq!(
            admit(
                s,
                &write(
                    "UPDATE",
                    device_plugin,
                    allocated.clone(),
                    Some(placed.clone())
                ),
                up
            ),
            Outcome::Admitted { webhook_asked: up },
            "{what}: the device plugin records the allocation (webhook up: {up})"
        );
    }
    let mut moved = placed.clone();
    moved["metadata"]["annotations"]["hami.io/vgpu-node"] = json!("gpu-b");
    assert_eq!(
        admit(
            s,
            &write("UPDATE", device_plugin, moved, Some(placed.clone())),
            false
        ),
        Outcome::RefusedByPolicy,
        "{what}: the device plugin never moves a pod"
    );
    // A Binding's annotations land on the pod: only the scheduler's may carry a
    // placement; a plain Binding (kube-scheduler's own binder) passes.
    for up in [true, false] {
        assert_eq!(
            admit(s, &binding(TENANT, forged()), up),
            Outcome::RefusedByPolicy,
            "{what}: a tenant's Binding with a placement (webhook up: {up})"
        );
        assert_eq!(
            admit(s, &binding(device_plugin, forged()), up),
            Outcome::RefusedByPolicy,
            "{what}: the device plugin never binds (webhook up: {up})"
        );
        assert_eq!(
            admit(s, &binding(scheduler, forged()), up),
            Outcome::Admitted {
                webhook_asked: false
            },
            "{what}: the scheduler's Binding with its placement (webhook up: {up})"
        );
        assert_eq!(
            admit(s, &binding(TENANT, json!({})), up),
            Outcome::Admitted {
                webhook_asked: false
            },
            "{what}: a Binding without a placement (webhook up: {up})"
        );
    }
    // Updates that leave the placement alone pass, whoever makes them.
    let mut relabelled = placed.clone();
    relabelled["metadata"]["labels"] = opted_out();
    assert_eq!(
        admit(s, &write("UPDATE", TENANT, relabelled, Some(placed)), true),
        Outcome::Admitted {
            webhook_asked: false
        },
        "{what}: relabelling a placed pod"
    );
}

#[test]
fn the_install_manifests_guard_placements_whatever_labels_a_pod_carries() {
    check_guard(&install());
}

#[test]
fn the_chart_guards_placements_whatever_labels_a_pod_carries() {
    if let Some(chart) = chart() {
        check_guard(&chart);
    }
}
