//! The placement-annotation guard as the API server applies the shipped admission
//! configuration (`manifests/install/` and the chart rendered by the real `helm`,
//! on a cluster with ValidatingAdmissionPolicies and on one without):
//! the webhook's rules, namespace and object selectors and matchConditions decide
//! whether `/mutate` (the real review code) is asked, and the shipped
//! ValidatingAdmissionPolicy is evaluated with its binding. CEL is evaluated by a
//! CEL interpreter, not pattern-matched. Whatever labels a tenant puts on a pod,
//! a forged `hami.io/vgpu-*` placement must be refused: by the policy where it
//! is shipped, whether or not the webhook answers, and then no placement write
//! waits for the webhook (HAMi's device plugin records its allocations while no
//! replica answers); by the webhook where the policy cannot be shipped. The
//! opt-out label keeps only its routing meaning.

// Only `template`, `available` and `chart_dir` are used here.
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

/// The chart's render for a cluster at `kube_version`, with `overrides`.
fn chart(what: &'static str, kube_version: &str, overrides: Value) -> Option<Shipped> {
    if !helm::available("placement guard of the chart") {
        return None;
    }
    let rendered = helm::template(
        &helm::chart_dir(),
        &helm::Release {
            name: "vgpu-scheduler",
            namespace: "vgpu-system",
            kube_version,
        },
        &overrides,
    );
    let docs = rendered.iter().flat_map(|(_, text)| parse(text)).collect();
    Some(shipped(what, docs))
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
    /// Refused because the webhook had to be asked, did not answer, and its
    /// `failurePolicy` is `Fail`.
    RefusedWebhookUnreachable,
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
/// false plays an outage: a write the webhook is asked about is then refused
/// under `failurePolicy: Fail` and let through unmutated under `Ignore`.
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
        if !webhook_is_asked(webhook, w) {
            continue;
        }
        if !webhook_up {
            if webhook["failurePolicy"] == "Ignore" {
                continue;
            }
            return Outcome::RefusedWebhookUnreachable;
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

/// The forged write `w` is refused whether the webhook answers or not: by the
/// policy where one is shipped, else by the webhook (and, while it is down, by
/// its `failurePolicy: Fail`).
fn refused(s: &Shipped, w: &Write, case: &str) {
    let what = s.what;
    if s.policies.is_empty() {
        match admit(s, w, true) {
            Outcome::RefusedByWebhook(message) => assert!(
                message.contains("hami.io/vgpu-node"),
                "{what}: {case}: {message}"
            ),
            other => panic!("{what}: {case}: the webhook let it through: {other:?}"),
        }
        assert_eq!(
            admit(s, w, false),
            Outcome::RefusedWebhookUnreachable,
            "{what}: {case}: with the webhook down"
        );
    } else {
        for up in [true, false] {
            assert_eq!(
                admit(s, w, up),
                Outcome::RefusedByPolicy,
                "{what}: {case} (webhook up: {up})"
            );
        }
    }
}

fn check_guard(s: &Shipped) {
    let what = s.what;
    let policy_guards = !s.policies.is_empty();
    assert!(!s.writers.scheduler.is_empty(), "{what}: --scheduler-users");
    assert!(
        !s.writers.device_plugin.is_empty(),
        "{what}: --device-plugin-users"
    );
    assert!(
        s.policies.len() <= 1,
        "{what}: one ValidatingAdmissionPolicy"
    );

    // Created with a forged placement, opted out of routing by its own label.
    let pod = tenant_pod(opted_out(), forged());
    refused(
        s,
        &write("CREATE", TENANT, pod.clone(), None),
        "opted-out create",
    );

    // The same, pinned to the node too.
    let mut pinned = pod;
    pinned["spec"]["nodeName"] = json!("gpu-a");
    refused(s, &write("CREATE", TENANT, pinned, None), "pinned create");

    // Labelled first, annotated afterwards.
    let labelled = tenant_pod(opted_out(), json!({}));
    let annotated = tenant_pod(opted_out(), forged());
    refused(
        s,
        &write("UPDATE", TENANT, annotated, Some(labelled.clone())),
        "annotated after opting out",
    );

    // Annotated by a tenant without opting out.
    refused(
        s,
        &write(
            "UPDATE",
            TENANT,
            tenant_pod(json!({}), forged()),
            Some(tenant_pod(json!({}), json!({}))),
        ),
        "annotated",
    );

    // In a namespace opted out as a whole, the policy still holds (the webhook
    // is never sent such a namespace's pods: without the policy, nothing there
    // guards them).
    if policy_guards {
        let mut in_opted_out_namespace =
            write("CREATE", TENANT, tenant_pod(json!({}), forged()), None);
        in_opted_out_namespace.namespace_labels =
            namespace("team-a", &[("vgpu.io/webhook", "ignore")]);
        assert_eq!(
            admit(s, &in_opted_out_namespace, true),
            Outcome::RefusedByPolicy,
            "{what}: opted-out namespace"
        );
    }

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
    // plugin the bind phase. Where the policy guards them, the webhook is not
    // asked, so no placement write waits for it or fails while it is down.
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
            webhook_asked: !policy_guards
        },
        "{what}: the scheduler places"
    );
    let mut allocated = placed.clone();
    allocated["metadata"]["annotations"]["hami.io/bind-phase"] = json!("success");
    allocated["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"] = json!(";");
    let records = |up: bool| {
        admit(
            s,
            &write(
                "UPDATE",
                device_plugin,
                allocated.clone(),
                Some(placed.clone()),
            ),
            up,
        )
    };
    assert_eq!(
        records(true),
        Outcome::Admitted {
            webhook_asked: !policy_guards
        },
        "{what}: the device plugin records the allocation"
    );
    assert_eq!(
        records(false),
        if policy_guards {
            Outcome::Admitted {
                webhook_asked: false,
            }
        } else {
            Outcome::RefusedWebhookUnreachable
        },
        "{what}: the device plugin records the allocation with the webhook down"
    );
    let mut moved = placed.clone();
    moved["metadata"]["annotations"]["hami.io/vgpu-node"] = json!("gpu-b");
    refused(
        s,
        &write("UPDATE", device_plugin, moved, Some(placed.clone())),
        "the device plugin never moves a pod",
    );
    // A Binding's annotations land on the pod: only the scheduler's may carry a
    // placement; a plain Binding (kube-scheduler's own binder) passes. The
    // webhook is never sent Bindings: without the policy, only RBAC (who may
    // create pods/binding) guards them.
    if policy_guards {
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
        }
    }
    for up in [true, false] {
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
    // Updates that leave the placement alone pass, whoever makes them, and are
    // never sent to the webhook.
    let mut relabelled = placed.clone();
    relabelled["metadata"]["labels"] = opted_out();
    for up in [true, false] {
        assert_eq!(
            admit(
                s,
                &write("UPDATE", TENANT, relabelled.clone(), Some(placed.clone())),
                up
            ),
            Outcome::Admitted {
                webhook_asked: false
            },
            "{what}: relabelling a placed pod (webhook up: {up})"
        );
    }
}

#[test]
fn the_install_manifests_guard_placements_whatever_labels_a_pod_carries() {
    let install = install();
    assert_eq!(install.policies.len(), 1, "the install ships the policy");
    check_guard(&install);
}

#[test]
fn the_chart_guards_placements_whatever_labels_a_pod_carries() {
    if let Some(chart) = chart("the chart", "v1.33.0", json!({})) {
        assert_eq!(chart.policies.len(), 1, "the chart renders the policy");
        check_guard(&chart);
    }
}

#[test]
fn before_kubernetes_1_30_the_charts_webhook_guards_placements_itself() {
    if let Some(chart) = chart("the chart on Kubernetes 1.29", "v1.29.4", json!({})) {
        assert!(chart.policies.is_empty(), "no policy API before 1.30");
        check_guard(&chart);
    }
}

#[test]
fn with_the_policy_turned_off_the_charts_webhook_guards_placements_itself() {
    let off = json!({"scheduler": {"placementPolicy": {"enabled": false}}});
    if let Some(chart) = chart("the chart without the policy", "v1.33.0", off) {
        assert!(chart.policies.is_empty(), "placementPolicy.enabled: false");
        check_guard(&chart);
    }
}
