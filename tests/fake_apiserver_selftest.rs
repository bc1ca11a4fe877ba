//! Checks that the fake kube-apiserver in `tests/fake_apiserver/` answers like
//! the real one: over reqwest, and once over a raw TCP socket to see the wire
//! format of a watch.

mod fake_apiserver;

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

struct Api {
    server: FakeApiServer,
    http: reqwest::Client,
}

impl Api {
    async fn start() -> Self {
        let server = FakeApiServer::start().await;
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", server.token()).parse().unwrap(),
        );
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        Api { server, http }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.expect("request");
        let code = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = resp.text().await.unwrap();
        if ct.starts_with("application/json") {
            (code, serde_json::from_str(&text).expect("JSON body"))
        } else {
            (code, Value::String(text))
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(self.url(path))).await
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.put(self.url(path)).json(body)).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(self.http.delete(self.url(path))).await
    }

    async fn patch(&self, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
        self.send(
            self.http
                .patch(self.url(path))
                .header("content-type", content_type)
                .body(body.to_string()),
        )
        .await
    }

    async fn watch(&self, path_and_query: &str) -> Watch {
        let resp = self
            .http
            .get(self.url(path_and_query))
            .send()
            .await
            .expect("watch");
        assert_eq!(resp.status(), 200, "watch {path_and_query}");
        assert_eq!(resp.headers()["content-type"], "application/json");
        Watch {
            resp,
            buf: Vec::new(),
        }
    }
}

fn pod(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    })
}

fn rv_of(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .unwrap()
}

/// A watch response read line by line.
struct Watch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event; None when the stream ended or nothing came in `wait`.
    async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(serde_json::from_slice(&line).expect("event line is JSON"));
            }
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    async fn next(&mut self) -> Value {
        self.next_within(Duration::from_secs(5))
            .await
            .expect("a watch event")
    }

    /// The next non-BOOKMARK event.
    async fn next_change(&mut self) -> Value {
        loop {
            let ev = self.next().await;
            if ev["type"] != "BOOKMARK" {
                return ev;
            }
        }
    }

    /// Whether the server closed the stream within `wait`.
    async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(Ok(None)) | Ok(Err(_)) => return true,
                Err(_) => return false,
            }
        }
    }
}

#[tokio::test]
async fn discovery_auth_unknown_paths_and_methods() {
    let api = Api::start().await;
    let anonymous = reqwest::Client::new();
    let v: Value = anonymous
        .get(api.url("/version"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["major"], "1");
    let resp = anonymous.get(api.url("/api/v1/pods")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["reason"], "Unauthorized");
    assert_eq!(body["kind"], "Status");

    let (code, body) = api.get("/api").await;
    assert_eq!((code, body["versions"][0].as_str()), (200, Some("v1")));
    let (_, body) = api.get("/apis").await;
    let groups: Vec<&str> = body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(groups.contains(&"coordination.k8s.io") && groups.contains(&"events.k8s.io"));
    let (_, body) = api.get("/api/v1").await;
    assert!(
        body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods/binding")
    );

    let (code, body) = api.get("/api/v1/widgets").await;
    assert_eq!(code, 404);
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["code"], 404);
    let (code, body) = api.put("/api/v1/namespaces/default/pods", &json!({})).await;
    assert_eq!(code, 405);
    assert_eq!(body["reason"], "MethodNotAllowed");
    let (code, _) = api.get("/api/v1/namespaces/default/pods/x/logs").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn create_get_update_delete_answer_like_the_apiserver() {
    let api = Api::start().await;
    let (code, created) = api
        .post(
            "/api/v1/namespaces/default/pods",
            &pod("default", "p1", json!({"app": "a"})),
        )
        .await;
    assert_eq!(code, 201);
    assert_eq!(created["kind"], "Pod");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert_eq!(created["spec"]["schedulerName"], "default-scheduler");
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(
        created["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "1",
        "requests default to limits"
    );
    let rv1 = rv_of(&created);

    let (code, body) = api
        .post(
            "/api/v1/namespaces/default/pods",
            &pod("default", "p1", json!({})),
        )
        .await;
    assert_eq!(code, 409);
    assert_eq!(body["reason"], "AlreadyExists");
    assert_eq!(body["message"], "pods \"p1\" already exists");

    let (code, body) = api.get("/api/v1/namespaces/default/pods/x").await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"pods \"x\" not found","reason":"NotFound",
            "details":{"name":"x","kind":"pods"},"code":404})
    );

    // PUT with a stale resourceVersion.
    let mut stale = created.clone();
    stale["metadata"]["labels"]["app"] = json!("b");
    stale["metadata"]["resourceVersion"] = json!((rv1 - 1).to_string());
    let (code, body) = api.put("/api/v1/namespaces/default/pods/p1", &stale).await;
    assert_eq!(code, 409);
    assert_eq!(body["reason"], "Conflict");
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pods \"p1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    stale["metadata"]["resourceVersion"] = json!(rv1.to_string());
    let (code, updated) = api.put("/api/v1/namespaces/default/pods/p1", &stale).await;
    assert_eq!(code, 200);
    assert!(rv_of(&updated) > rv1);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    // A no-op update keeps the resourceVersion.
    let (code, same) = api
        .put("/api/v1/namespaces/default/pods/p1", &updated)
        .await;
    assert_eq!((code, rv_of(&same)), (200, rv_of(&updated)));

    let (code, body) = api.delete("/api/v1/namespaces/default/pods/p1").await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "Pod", "pods return the deleted object");
    assert!(api.server.get("Pod", Some("default"), "p1").is_none());

    // Leases: AlreadyExists and a Status on delete.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "vgpu-scheduler"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let (code, l) = api.post(path, &lease).await;
    assert_eq!(
        (code, l["metadata"]["namespace"].as_str()),
        (201, Some("kube-system"))
    );
    let (code, body) = api.post(path, &lease).await;
    assert_eq!(code, 409);
    assert_eq!(
        body["message"],
        "leases.coordination.k8s.io \"vgpu-scheduler\" already exists"
    );
    assert_eq!(body["details"]["group"], "coordination.k8s.io");
    let (code, body) = api.delete(&format!("{path}/vgpu-scheduler")).await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Success");
    assert_eq!(body["details"]["uid"], l["metadata"]["uid"]);

    // generateName, a bad name, a namespace mismatch.
    let mut gen_pod = pod("default", "", json!({}));
    gen_pod["metadata"] = json!({"generateName": "job-"});
    let (code, body) = api.post("/api/v1/namespaces/default/pods", &gen_pod).await;
    assert_eq!(code, 201);
    assert!(
        body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("job-")
    );
    let (code, body) = api
        .post(
            "/api/v1/namespaces/default/pods",
            &pod("default", "Bad_Name", json!({})),
        )
        .await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    let (code, _) = api
        .post(
            "/api/v1/namespaces/other/pods",
            &pod("default", "p2", json!({})),
        )
        .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn list_then_watch_resumes_from_resource_version_with_bookmarks() {
    let api = Api::start().await;
    api.server.set_bookmark_interval(Duration::from_millis(100));
    for i in 0..3 {
        api.server
            .create(pod("default", &format!("p{i}"), json!({})));
    }
    let (code, list) = api.get("/api/v1/pods?limit=500&resourceVersion=0").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
    assert!(
        list["items"][0].get("kind").is_none(),
        "the real server leaves kind off list items"
    );
    let list_rv = list["metadata"]["resourceVersion"].as_str().unwrap();

    let mut w = api
        .watch(&format!(
            "/api/v1/pods?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion={list_rv}"
        ))
        .await;
    api.server.create(pod("default", "p3", json!({})));
    let ev = w.next_change().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Pod");
    assert_eq!(ev["object"]["metadata"]["name"], "p3");
    let added_rv = rv_of(&ev["object"]);
    api.server.set_pod_phase("default", "p3", "Running");
    let ev = w.next_change().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["status"]["phase"], "Running");
    let (code, _) = api.delete("/api/v1/namespaces/default/pods/p0").await;
    assert_eq!(code, 200);
    let ev = w.next_change().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["metadata"]["name"], "p0");
    let deleted_rv = rv_of(&ev["object"]);
    // A bookmark carries only type meta and a resourceVersion at least as new.
    let bm = loop {
        let ev = w.next().await;
        if ev["type"] == "BOOKMARK" {
            break ev;
        }
    };
    assert_eq!(bm["object"]["kind"], "Pod");
    assert!(rv_of(&bm["object"]) >= deleted_rv);
    assert!(bm["object"].get("spec").is_none());
    drop(w);

    // Resume after the ADDED: only the later changes come again.
    let mut w = api
        .watch(&format!("/api/v1/pods?watch=1&resourceVersion={added_rv}"))
        .await;
    assert_eq!(w.next().await["type"], "MODIFIED");
    assert_eq!(w.next().await["type"], "DELETED");
    assert!(w.next_within(Duration::from_millis(300)).await.is_none());

    // Without a resourceVersion the watch starts with the current state.
    let mut w = api
        .watch("/api/v1/namespaces/default/pods?watch=true")
        .await;
    let mut names = Vec::new();
    for _ in 0..3 {
        let ev = w.next().await;
        assert_eq!(ev["type"], "ADDED");
        names.push(
            ev["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(names, ["p1", "p2", "p3"]);
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_annotated_bookmark() {
    let api = Api::start().await;
    api.server.create(pod("default", "a", json!({})));
    api.server.create(pod("default", "b", json!({})));
    let mut w = api
        .watch("/api/v1/pods?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0")
        .await;
    assert_eq!(w.next().await["type"], "ADDED");
    assert_eq!(w.next().await["type"], "ADDED");
    let bm = w.next().await;
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(
        bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv_of(&bm["object"]), api.server.resource_version());

    let (code, body) = api
        .get("/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true")
        .await;
    assert_eq!(code, 422);
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    assert_eq!(body["details"]["kind"], "ListOptions");
    assert!(body["details"].get("name").is_none());
    let (code, _) = api.get("/api/v1/pods?sendInitialEvents=true").await;
    assert_eq!(code, 422);
}

#[tokio::test]
async fn watch_from_an_expired_resource_version_gets_410_error_event() {
    let api = Api::start().await;
    api.server.set_history_limit(5);
    let first = api.server.create(pod("default", "p", json!({})));
    for i in 0..10 {
        api.server
            .update(pod("default", "p", json!({"i": i.to_string()})));
    }
    let mut w = api
        .watch(&format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={}",
            rv_of(&first)
        ))
        .await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(
        ev["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: ")
    );
    assert!(w.ends_within(Duration::from_secs(2)).await);

    // A recent rv still works; after a compaction it does not.
    let current = api.server.resource_version();
    let mut w = api
        .watch(&format!(
            "/api/v1/pods?watch=true&resourceVersion={current}"
        ))
        .await;
    api.server.set_pod_phase("default", "p", "Running");
    assert_eq!(w.next().await["type"], "MODIFIED");
    api.server.compact();
    let mut w = api
        .watch(&format!(
            "/api/v1/pods?watch=true&resourceVersion={current}"
        ))
        .await;
    assert_eq!(w.next().await["object"]["code"], 410);

    let (code, body) = api
        .get(&format!(
            "/api/v1/pods?resourceVersion={current}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!((code, body["reason"].as_str()), (410, Some("Expired")));
}

#[tokio::test]
async fn label_and_field_selectors_on_list_and_watch() {
    let api = Api::start().await;
    api.server
        .create(pod("default", "a", json!({"app": "web", "tier": "front"})));
    api.server.create(pod("default", "b", json!({"app": "db"})));
    api.server.create(pod("other", "c", json!({"app": "web"})));
    let mut bound = pod("default", "d", json!({}));
    bound["spec"]["nodeName"] = json!("n1");
    api.server.create(bound);

    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (selector, want) in [
        ("app%3Dweb", vec!["a", "c"]),
        ("app%3D%3Dweb", vec!["a", "c"]),
        ("app!%3Dweb", vec!["b", "d"]),
        ("app%20in%20(web,db)", vec!["a", "b", "c"]),
        ("app%20notin%20(web)", vec!["b", "d"]),
        ("tier", vec!["a"]),
        ("!app", vec!["d"]),
        ("app%3Dweb,tier%3Dfront", vec!["a"]),
    ] {
        let (code, list) = api
            .get(&format!("/api/v1/pods?labelSelector={selector}"))
            .await;
        assert_eq!(code, 200, "{selector}");
        assert_eq!(names(&list), want, "{selector}");
    }
    let (_, list) = api
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
        .await;
    assert_eq!(names(&list), ["d"]);
    let (_, list) = api.get("/api/v1/pods?fieldSelector=spec.nodeName%3D").await;
    assert_eq!(names(&list), ["a", "b", "c"]);
    let (_, list) = api
        .get("/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Db")
        .await;
    assert_eq!(names(&list), ["b"]);
    let (_, list) = api
        .get("/api/v1/pods?fieldSelector=metadata.namespace%3Dother")
        .await;
    assert_eq!(names(&list), ["c"]);
    let (code, body) = api.get("/api/v1/pods?fieldSelector=spec.foo%3Dx").await;
    assert_eq!(code, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported: spec.foo")
    );
    let (code, _) = api.get("/api/v1/pods?labelSelector=app%20in%20(").await;
    assert_eq!(code, 400);

    // An object that stops matching leaves the watch as DELETED, and comes back
    // as ADDED.
    let current = api.server.resource_version();
    let mut w = api
        .watch(&format!(
            "/api/v1/namespaces/default/pods?watch=true&labelSelector=app%3Dweb&resourceVersion={current}"
        ))
        .await;
    let (code, _) = api
        .patch(
            "/api/v1/namespaces/default/pods/a",
            MERGE,
            &json!({"metadata": {"labels": {"app": "api"}}}),
        )
        .await;
    assert_eq!(code, 200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(
        ev["object"]["metadata"]["labels"]["app"], "web",
        "previous content"
    );
    assert_eq!(rv_of(&ev["object"]), api.server.resource_version());
    api.server.set_pod_phase("default", "b", "Running"); // never matched
    let (code, _) = api
        .patch(
            "/api/v1/namespaces/default/pods/a",
            MERGE,
            &json!({"metadata": {"labels": {"app": "web"}}}),
        )
        .await;
    assert_eq!(code, 200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "a");
}

#[tokio::test]
async fn patches_merge_json_strategic_and_their_failures() {
    let api = Api::start().await;
    let mut node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "annotations": {"keep": "1", "drop": "2"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    node = api.server.create(node);
    let rv = rv_of(&node);
    let path = "/api/v1/nodes/n1";

    // Merge patch carrying a stale resourceVersion: 409.
    let (code, body) = api
        .patch(
            path,
            MERGE,
            &json!({"metadata": {"resourceVersion": (rv - 1).to_string(),
                "annotations": {"hami.io/node-lock": "x"}}}),
        )
        .await;
    assert_eq!(code, 409);
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // With the current one it applies; null deletes a key.
    let (code, patched) = api
        .patch(
            path,
            MERGE,
            &json!({"metadata": {"resourceVersion": rv.to_string(),
                "annotations": {"hami.io/node-lock": "x", "drop": null}}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        patched["metadata"]["annotations"],
        json!({"keep": "1", "hami.io/node-lock": "x"})
    );

    // JSON patch: a failing test op is 422 with the generic message.
    let (code, body) = api
        .patch(
            path,
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/metadata/annotations/hami.io~1node-lock", "value": "y"},
                {"op": "remove", "path": "/metadata/annotations/hami.io~1node-lock"}
            ]),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"the server rejected our request due to an error in our request",
            "reason":"Invalid","details":{},"code":422})
    );
    let (code, patched) = api
        .patch(
            path,
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/metadata/annotations/hami.io~1node-lock", "value": "x"},
                {"op": "remove", "path": "/metadata/annotations/hami.io~1node-lock"}
            ]),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(patched["metadata"]["annotations"], json!({"keep": "1"}));
    let (code, _) = api.patch(path, JSON_PATCH, &json!({"op": "add"})).await;
    assert_eq!(code, 400);

    // Strategic merge: lists with a merge key merge by it.
    let (code, patched) = api
        .patch(
            "/api/v1/nodes/n1/status",
            STRATEGIC,
            &json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(patched["status"]["conditions"].as_array().unwrap().len(), 2);

    // Status changes through the main resource are ignored (status subresource).
    let (code, patched) = api
        .patch(path, MERGE, &json!({"status": {"conditions": []}}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(patched["status"]["conditions"].as_array().unwrap().len(), 2);

    let (code, body) = api.patch(path, "application/json", &json!({})).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let (code, _) = api
        .patch(
            path,
            "application/apply-patch+yaml",
            &json!({"metadata": {}}),
        )
        .await;
    assert_eq!(code, 422, "apply needs a fieldManager");
    let (code, _) = api
        .patch("/api/v1/nodes/missing", MERGE, &json!({"metadata": {}}))
        .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn pod_updates_follow_the_real_rules() {
    let api = Api::start().await;
    let mut gated = pod("default", "g", json!({}));
    gated["spec"]["schedulingGates"] = json!([{"name": "vgpu.io/gang"}, {"name": "other"}]);
    api.server.create(gated);
    let path = "/api/v1/namespaces/default/pods/g";
    let (code, body) = api
        .patch(path, MERGE, &json!({"spec": {"nodeName": "n1"}}))
        .await;
    assert_eq!(code, 422);
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "Pod \"g\" is invalid: spec: Forbidden: pod updates may not change fields"
        )
    );
    let (code, body) = api
        .patch(
            path,
            JSON_PATCH,
            &json!([{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "new"}}]),
        )
        .await;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("only deletion is allowed")
    );
    let (code, patched) = api
        .patch(
            path,
            STRATEGIC,
            &json!({"spec": {"schedulingGates": [{"name": "vgpu.io/gang", "$patch": "delete"}]}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        patched["spec"]["schedulingGates"],
        json!([{"name": "other"}])
    );
    let (code, patched) = api
        .patch(
            path,
            JSON_PATCH,
            &json!([{"op": "remove", "path": "/spec/schedulingGates"}]),
        )
        .await;
    assert_eq!(code, 200);
    assert!(patched["spec"].get("schedulingGates").is_none());

    // Status goes through pods/status.
    let (code, patched) = api
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(
        (code, patched["status"]["phase"].as_str()),
        (200, Some("Running"))
    );
    let (code, patched) = api
        .patch(path, MERGE, &json!({"status": {"phase": "Failed"}}))
        .await;
    assert_eq!(
        (code, patched["status"]["phase"].as_str()),
        (200, Some("Running"))
    );
}

#[tokio::test]
async fn a_pods_scheduling_group_cannot_be_changed_set_or_removed() {
    let api = Api::start().await;
    api.server.set_workload_apis(true);
    let mut member = pod("default", "m", json!({}));
    member["spec"]["schedulingGates"] = json!([{"name": "vgpu.io/gang"}]);
    member["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
    api.server.create(member);
    api.server.create(pod("default", "loner", json!({})));
    let immutable = |code: u16, body: &Value| {
        assert_eq!(code, 422, "{body}");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "spec.schedulingGroup"
        );
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .ends_with("field is immutable"),
            "{body}"
        );
    };
    let path = "/api/v1/namespaces/default/pods/m";
    let (code, body) = api
        .patch(
            path,
            MERGE,
            &json!({"spec": {"schedulingGroup": {"podGroupName": "other"}}}),
        )
        .await;
    immutable(code, &body);
    let (code, body) = api
        .patch(
            path,
            JSON_PATCH,
            &json!([{"op": "remove", "path": "/spec/schedulingGroup"}]),
        )
        .await;
    immutable(code, &body);
    let (code, body) = api
        .patch(
            "/api/v1/namespaces/default/pods/loner",
            STRATEGIC,
            &json!({"spec": {"schedulingGroup": {"podGroupName": "train"}}}),
        )
        .await;
    immutable(code, &body);
    // The same group written again is no change; lifting the gate still works.
    let (code, patched) = api
        .patch(
            path,
            MERGE,
            &json!({"spec": {"schedulingGroup": {"podGroupName": "train"}, "schedulingGates": null}}),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["schedulingGroup"]["podGroupName"], "train");
}

#[tokio::test]
async fn a_gated_pod_may_only_have_its_node_selection_narrowed_and_only_while_gated() {
    let api = Api::start().await;
    let mut gated = pod("default", "g", json!({}));
    gated["spec"]["schedulingGates"] = json!([{"name": "vgpu.io/gang"}]);
    gated["spec"]["nodeSelector"] = json!({"zone": "a"});
    gated["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}]}}});
    api.server.create(gated);
    let path = "/api/v1/namespaces/default/pods/g";
    let terms = |t: Value| {
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": t}}}}})
    };
    let pool = json!({"key": "pool", "operator": "In", "values": ["x"]});
    let pin = json!({"key": "metadata.name", "operator": "In", "values": ["n1"]});
    // Widening: a requirement dropped, a term added, a selector value changed.
    for (widening, words) in [
        (
            terms(json!([{"matchFields": [pin]}])),
            "only additions are allowed",
        ),
        (
            terms(json!([{"matchExpressions": [pool]}, {"matchFields": [pin]}])),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ),
        (
            json!({"spec": {"nodeSelector": {"zone": "b"}}}),
            "only additions to spec.nodeSelector are allowed",
        ),
    ] {
        let (code, body) = api.patch(path, MERGE, &widening).await;
        assert_eq!(code, 422, "{widening}: {body}");
        assert!(body["message"].as_str().unwrap().contains(words), "{body}");
    }
    // Pod affinity is not node selection: never changed.
    let (code, _) = api
        .patch(
            path,
            MERGE,
            &json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}}}),
        )
        .await;
    assert_eq!(code, 422);
    // Narrowing in the update that lifts the last gate: judged on the gated pod.
    let mut narrowing = terms(json!([{"matchExpressions": [pool], "matchFields": [pin]}]));
    narrowing["spec"]["schedulingGates"] = Value::Null;
    narrowing["spec"]["nodeSelector"] = json!({"zone": "a", "rack": "r1"});
    let (code, patched) = api.patch(path, MERGE, &narrowing).await;
    assert_eq!(code, 200, "{patched}");
    assert!(patched["spec"].get("schedulingGates").is_none());
    assert_eq!(
        patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["n1"])
    );
    // No gate left: no change at all, not even a narrowing one.
    let mut more = json!({"spec": {"nodeSelector": {"zone": "a", "rack": "r1", "row": "2"}}});
    let (code, _) = api.patch(path, MERGE, &more).await;
    assert_eq!(code, 422);
    more = terms(json!([{"matchExpressions": [pool.clone(), pool], "matchFields": [pin]}]));
    let (code, _) = api.patch(path, MERGE, &more).await;
    assert_eq!(code, 422);
    // A gated pod with no required terms may have any set.
    let mut free = pod("default", "f", json!({}));
    free["spec"]["schedulingGates"] = json!([{"name": "vgpu.io/gang"}]);
    api.server.create(free);
    let (code, body) = api
        .patch(
            "/api/v1/namespaces/default/pods/f",
            MERGE,
            &terms(json!([{"matchFields": [pin]}])),
        )
        .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn binding_checks_uid_and_existing_assignment() {
    let api = Api::start().await;
    let p = api.server.create(pod("default", "p", json!({})));
    let uid = p["metadata"]["uid"].as_str().unwrap().to_string();
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let binding = |uid: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "namespace": "default", "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    };
    let mut w = api
        .watch(&format!(
            "/api/v1/pods?watch=true&resourceVersion={}",
            api.server.resource_version()
        ))
        .await;

    let (code, body) = api.post(path, &binding("wrong-uid", "n1")).await;
    assert_eq!(code, 409);
    assert_eq!(body["reason"], "Conflict");
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "Operation cannot be fulfilled on pods \"p\": StorageError: invalid object"
        )
    );
    assert!(msg.ends_with(&format!(
        "Precondition failed: UID in precondition: wrong-uid, UID in object meta: {uid}"
    )));

    let (code, body) = api.post(path, &binding(&uid, "n1")).await;
    assert_eq!(code, 201);
    assert_eq!(
        body,
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})
    );
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["spec"]["nodeName"], "n1");
    assert_eq!(
        ev["object"]["status"]["conditions"][0]["type"],
        "PodScheduled"
    );

    let (code, body) = api.post(path, &binding(&uid, "n2")).await;
    assert_eq!(code, 409);
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
    );
    let (code, _) = api
        .post(
            "/api/v1/namespaces/default/pods/nope/binding",
            &json!({"metadata": {"name": "nope"}, "target": {"kind": "Node", "name": "n1"}}),
        )
        .await;
    assert_eq!(code, 404);
    let (code, _) = api
        .post(
            path,
            &json!({"metadata": {"name": "p"}, "target": {"kind": "Node"}}),
        )
        .await;
    assert_eq!(code, 422);
    let (code, _) = api.get(path).await;
    assert_eq!(code, 405);
}

/// `setPodNodeAndMetadata`: the pod takes the Binding's annotations, and its
/// labels (plus the Node's zone and region, added by the `PodTopologyLabels`
/// admission plugin) only with the `PodTopologyLabelsAdmission` gate.
#[tokio::test]
async fn binding_carries_its_annotations_and_with_the_gate_its_labels_onto_the_pod() {
    let api = Api::start().await;
    api.server
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "n1", "labels": {"topology.kubernetes.io/zone": "z1", "rack": "r1"}}}));
    let binding = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": "default",
                "annotations": {"a": "1"}, "labels": {"l": "2", "app": "new"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
    };
    for (gate, name) in [(true, "on"), (false, "off")] {
        api.server.set_pod_topology_labels(gate);
        api.server
            .create(pod("default", name, json!({"app": "old"})));
        let path = format!("/api/v1/namespaces/default/pods/{name}/binding");
        let (code, body) = api.post(&path, &binding(name)).await;
        assert_eq!(code, 201, "{body}");
        let p = api.server.get("Pod", Some("default"), name).unwrap();
        assert_eq!(p["metadata"]["annotations"], json!({"a": "1"}), "{p}");
        let labels = if gate {
            json!({"app": "new", "l": "2", "topology.kubernetes.io/zone": "z1"})
        } else {
            json!({"app": "old"})
        };
        assert_eq!(p["metadata"]["labels"], labels, "gate {gate}: {p}");
    }
}

/// Every event sent to a watcher is counted with its bytes, per resource and
/// per watcher: two watchers of a change are sent it twice.
#[tokio::test]
async fn watch_traffic_counts_each_event_sent_to_each_watcher() {
    let api = Api::start().await;
    let from = api.server.resource_version();
    let path = format!("/api/v1/pods?watch=true&resourceVersion={from}");
    let (mut w1, mut w2) = (api.watch(&path).await, api.watch(&path).await);
    let _nodes = api
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={from}"))
        .await;
    api.server.clear_request_log();
    api.server.create(pod("default", "p", json!({})));
    let (e1, e2) = (w1.next().await, w2.next().await);
    assert_eq!(
        (e1["type"].as_str(), e2["type"].as_str()),
        (Some("ADDED"), Some("ADDED"))
    );
    let line = e1.to_string().len() as u64 + 1;
    let traffic = api.server.watch_traffic();
    assert_eq!(traffic.of("pods").events, 2, "{traffic:?}");
    assert_eq!(traffic.of("pods").bytes, 2 * line, "{traffic:?}");
    assert_eq!(traffic.of("nodes").events, 0, "{traffic:?}");
    assert_eq!(traffic.total(), traffic.of("pods"));
    api.server.clear_request_log();
    assert_eq!(api.server.watch_traffic().total().events, 0);
}

#[tokio::test]
async fn drop_watches_closes_open_streams() {
    let api = Api::start().await;
    let mut w1 = api.watch("/api/v1/pods?watch=true").await;
    let mut w2 = api
        .watch("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true")
        .await;
    assert!(api.server.wait_for_watches(2, Duration::from_secs(2)).await);
    api.server.drop_watches();
    assert!(w1.ends_within(Duration::from_secs(2)).await);
    assert!(w2.ends_within(Duration::from_secs(2)).await);
    assert_eq!(api.server.watch_count(), 0);
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let api = Api::start().await;
    let mut w = api.watch("/api/v1/nodes?watch=true&timeoutSeconds=1").await;
    let started = std::time::Instant::now();
    assert!(w.ends_within(Duration::from_secs(3)).await);
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn injected_conflicts_errors_latency_and_request_log() {
    let api = Api::start().await;
    let p = api.server.create(pod("default", "p", json!({})));
    api.server.inject_conflicts("/binding", 1);
    let body = json!({"metadata": {"name": "p", "uid": p["metadata"]["uid"]},
        "target": {"kind": "Node", "name": "n1"}});
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let (code, resp) = api.post(path, &body).await;
    assert_eq!((code, resp["reason"].as_str()), (409, Some("Conflict")));
    let (code, _) = api.post(path, &body).await;
    assert_eq!(code, 201);

    api.server.inject_errors("GET /api/v1/nodes", 503, 2);
    for _ in 0..2 {
        let resp = api.http.get(api.url("/api/v1/nodes")).send().await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["retry-after"], "1");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["reason"], "ServiceUnavailable");
    }
    let (code, _) = api.get("/api/v1/nodes").await;
    assert_eq!(code, 200);

    api.server.set_latency(Duration::from_millis(200));
    let started = std::time::Instant::now();
    api.get("/api/v1/nodes").await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    api.server.set_latency(Duration::ZERO);

    let log = api.server.request_log();
    assert!(log.contains(&("POST".into(), path.into(), 409)));
    assert!(log.contains(&("POST".into(), path.into(), 201)));
    assert_eq!(
        log.iter()
            .filter(|(m, p, s)| m == "GET" && p == "/api/v1/nodes" && *s == 503)
            .count(),
        2
    );
    assert_eq!(api.server.requests_matching("POST", "/binding"), 2);
}

#[tokio::test]
async fn pagination_with_continue_reads_a_consistent_snapshot() {
    let api = Api::start().await;
    for i in 0..7 {
        api.server
            .create(pod("default", &format!("p{i}"), json!({})));
    }
    let (code, page1) = api.get("/api/v1/namespaces/default/pods?limit=3").await;
    assert_eq!(code, 200);
    assert_eq!(page1["items"].as_array().unwrap().len(), 3);
    assert_eq!(page1["metadata"]["remainingItemCount"], 4);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_string();
    // Changes after the first page do not show up in later pages.
    api.server.create(pod("default", "p9", json!({})));
    api.server.delete("Pod", Some("default"), "p5");
    let (code, page2) = api
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=3&continue={token}"
        ))
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        page2["metadata"]["resourceVersion"],
        page1["metadata"]["resourceVersion"]
    );
    let names: Vec<&str> = page2["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p3", "p4", "p5"]);
    let token2 = page2["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, page3) = api
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=3&continue={token2}"
        ))
        .await;
    assert_eq!(page3["items"].as_array().unwrap().len(), 1);
    assert!(page3["metadata"].get("continue").is_none());

    let (code, _) = api
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=3&continue={token}&resourceVersion=5"
        ))
        .await;
    assert_eq!(code, 400);
    let (code, _) = api.get("/api/v1/pods?limit=3&continue=garbage!").await;
    assert_eq!(code, 400);

    // After a compaction the token has expired; the Status offers a new one.
    api.server.compact();
    let (code, body) = api
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=3&continue={token}"
        ))
        .await;
    assert_eq!(code, 410);
    assert_eq!(body["reason"], "Expired");
    let fresh = body["metadata"]["continue"].as_str().unwrap();
    let (code, page) = api
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=10&continue={fresh}"
        ))
        .await;
    assert_eq!(code, 200);
    let names: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p3", "p4", "p6", "p9"]);
}

#[tokio::test]
async fn list_resource_version_semantics() {
    let api = Api::start().await;
    let a = api.server.create(pod("default", "a", json!({})));
    api.server.create(pod("default", "b", json!({})));
    let (code, list) = api
        .get(&format!(
            "/api/v1/pods?resourceVersion={}&resourceVersionMatch=Exact",
            rv_of(&a)
        ))
        .await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["metadata"]["resourceVersion"], rv_of(&a).to_string());
    let (code, _) = api.get("/api/v1/pods?resourceVersionMatch=Exact").await;
    assert_eq!(code, 422);

    // A future resourceVersion waits for it: the write comes only once the read
    // is waiting.
    let want = api.server.resource_version() + 1;
    let server_writes = async {
        assert!(
            api.server
                .wait_until(Duration::from_secs(5), |s| s.rv_waiters() == 1)
                .await,
            "the read never waited for resourceVersion {want}"
        );
        api.server.create(pod("default", "c", json!({})));
    };
    let future_path = format!("/api/v1/pods?resourceVersion={want}");
    let ((code, list), ()) = tokio::join!(api.get(&future_path), server_writes);
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn events_in_both_api_versions() {
    let api = Api::start().await;
    let (code, ev) = api
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "p.1"},
                "eventTime": "2025-01-01T00:00:00.000000Z",
                "reportingController": "vgpu-scheduler", "reportingInstance": "vgpu-scheduler-0",
                "action": "Binding", "reason": "Scheduled", "type": "Normal",
                "note": "placed on n1",
                "regarding": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u"}}),
        )
        .await;
    assert_eq!(code, 201, "{ev}");
    let (code, _) = api
        .post(
            "/api/v1/namespaces/default/events",
            &json!({"metadata": {"name": "p.2"}, "reason": "FailedScheduling",
                "message": "0/3 nodes are available", "type": "Warning",
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}}),
        )
        .await;
    assert_eq!(code, 201);
    let (_, core) = api
        .get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp")
        .await;
    let items = core["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["message"], "placed on n1");
    assert_eq!(items[0]["involvedObject"]["name"], "p");
    let (_, new) = api.get("/apis/events.k8s.io/v1/events").await;
    assert_eq!(new["items"][1]["note"], "0/3 nodes are available");
    let evs = api.server.events_for("default", "p");
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(evs[1]["reason"], "FailedScheduling");

    let (code, body) = api
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &json!({"metadata": {"name": "bad"}, "reason": "X", "type": "Normal",
                "regarding": {"kind": "Pod", "namespace": "default", "name": "p"}}),
        )
        .await;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("eventTime: Required value")
    );
}

#[tokio::test]
async fn graceful_deletion_finalizers_and_termination_controls() {
    let api = Api::start().await;
    api.server.set_graceful_pod_deletion(true);
    let mut p = pod("default", "p", json!({}));
    p["spec"]["nodeName"] = json!("n1");
    api.server.create(p);
    let (code, body) = api.delete("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(code, 200);
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(api.server.get("pods", Some("default"), "p").is_some());
    api.server.finish_deletion("default", "p");
    assert!(api.server.get("pods", Some("default"), "p").is_none());
    // Unbound pods go at once even in graceful mode.
    api.server.create(pod("default", "q", json!({})));
    api.delete("/api/v1/namespaces/default/pods/q").await;
    assert!(api.server.get("pods", Some("default"), "q").is_none());

    // Finalizers hold an object until the last one is removed.
    let mut f = pod("default", "f", json!({}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.server.create(f);
    let (code, _) = api.delete("/api/v1/namespaces/default/pods/f").await;
    assert_eq!(code, 200);
    assert!(api.server.get("pods", Some("default"), "f").is_some());
    let (code, _) = api
        .patch(
            "/api/v1/namespaces/default/pods/f",
            MERGE,
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(code, 200);
    assert!(api.server.get("pods", Some("default"), "f").is_none());

    // Delete preconditions.
    api.server.create(pod("default", "r", json!({})));
    let (code, body) = api
        .send(
            api.http
                .delete(api.url("/api/v1/namespaces/default/pods/r"))
                .json(&json!({"preconditions": {"uid": "other"}})),
        )
        .await;
    assert_eq!((code, body["reason"].as_str()), (409, Some("Conflict")));

    // begin_termination is visible to watchers.
    let mut w = api
        .watch(&format!(
            "/api/v1/pods?watch=true&resourceVersion={}",
            api.server.resource_version()
        ))
        .await;
    api.server.begin_termination("default", "r");
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert!(ev["object"]["metadata"]["deletionTimestamp"].is_string());
    api.server.finish_deletion("default", "r");
    assert_eq!(w.next().await["type"], "DELETED");
}

#[tokio::test]
async fn control_api_and_kubeconfig() {
    let api = Api::start().await;
    let node = api.server.create(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"gpu": "on"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}}));
    assert_eq!(node["status"]["allocatable"]["nvidia.com/gpu"], "8");
    assert!(node["metadata"].get("namespace").is_none());
    let quota = api
        .server
        .create(json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}));
    assert_eq!(quota["metadata"]["namespace"], "team-a");
    let (_, list) = api.get("/api/v1/resourcequotas").await;
    assert_eq!(list["items"][0]["metadata"]["name"], "q");
    assert_eq!(api.server.list("Node").len(), 1);
    assert_eq!(api.server.list("namespaces").len(), 4);

    let mut changed = node.clone();
    changed["metadata"]["labels"]["gpu"] = json!("off");
    changed["metadata"].as_object_mut().unwrap().remove("uid");
    api.server.update(changed);
    let stored = api.server.get("Node", None, "gpu-1").unwrap();
    assert_eq!(stored["metadata"]["labels"]["gpu"], "off");
    assert_eq!(stored["metadata"]["uid"], node["metadata"]["uid"]);
    assert!(rv_of(&stored) > rv_of(&node));
    assert!(api.server.delete("Node", None, "gpu-1").is_some());
    assert!(
        api.server
            .try_create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "x"}, "spec": {}}))
            .is_ok()
    );
    let refused = api
        .server
        .try_create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}))
        .unwrap_err();
    assert_eq!(refused["reason"], "AlreadyExists");

    let dir = tempfile::tempdir().unwrap();
    let path = api.server.write_kubeconfig(dir.path());
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(&format!("server: {}", api.server.url())));
    assert!(text.contains(&format!("token: {}", api.server.token())));
    assert!(text.contains("current-context: fake"));
    assert!(text.contains("namespace: default"));

    api.server.shutdown().await;
}

/// The watch wire format as a client sees it on the socket.
#[tokio::test]
async fn raw_http_watch_is_chunked_json_lines() {
    let api = Api::start().await;
    api.server.create(pod("default", "raw", json!({})));
    let addr = api.server.url().trim_start_matches("http://").to_string();
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!(
        "GET /api/v1/namespaces/default/pods?&watch=true&timeoutSeconds=1&allowWatchBookmarks=true&resourceVersion=0 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\n\r\n",
        api.server.token()
    );
    sock.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    // The server closes the watch after timeoutSeconds; read until the final
    // chunk arrives.
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if raw.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "watch ended");
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok"), "{head}");
    assert!(head.contains("content-type: application/json"));
    assert!(head.contains("transfer-encoding: chunked"));
    assert!(head.contains("cache-control: no-cache, private"));
    // De-chunk.
    let mut rest = body;
    let mut payload = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        payload.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    let first: Value = serde_json::from_str(payload.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "raw");
    assert!(payload.ends_with('\n'));
}

const VOLCANO: &str = "/apis/scheduling.volcano.sh/v1beta1";

fn discovered<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
}

#[tokio::test]
async fn volcano_crds_are_discovered_like_installed_crds() {
    let api = Api::start().await;
    let (code, groups) = api.get("/apis").await;
    assert_eq!(code, 200);
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"scheduling.volcano.sh"), "{names:?}");
    assert!(names.contains(&"admissionregistration.k8s.io"), "{names:?}");
    let (code, group) = api.get("/apis/scheduling.volcano.sh").await;
    assert_eq!(code, 200);
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "scheduling.volcano.sh/v1beta1"
    );
    let (code, list) = api.get(VOLCANO).await;
    assert_eq!(code, 200);
    let pg = discovered(&list, "podgroups").expect("podgroups");
    assert_eq!(pg["namespaced"], true);
    assert_eq!(pg["kind"], "PodGroup");
    assert_eq!(pg["shortNames"], json!(["pg", "podgroup-v1beta1"]));
    // Volcano's PodGroup CRD has no status subresource; its Queue CRD has one.
    assert!(discovered(&list, "podgroups/status").is_none());
    let q = discovered(&list, "queues").expect("queues");
    assert_eq!(q["namespaced"], false);
    assert_eq!(q["kind"], "Queue");
    assert_eq!(q["shortNames"], json!(["q", "queue-v1beta1"]));
    assert!(
        q["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );
    let qs = discovered(&list, "queues/status").expect("queues/status");
    assert_eq!(qs["verbs"], json!(["get", "patch", "update"]));
    let (_, core) = api.get("/api/v1").await;
    assert_eq!(discovered(&core, "secrets").unwrap()["namespaced"], true);
    let (_, adm) = api.get("/apis/admissionregistration.k8s.io/v1").await;
    let mwc = discovered(&adm, "mutatingwebhookconfigurations").unwrap();
    assert_eq!(mwc["namespaced"], false);
    assert_eq!(mwc["kind"], "MutatingWebhookConfiguration");
}

#[tokio::test]
async fn podgroups_keep_status_in_the_main_resource_and_refuse_strategic_merge() {
    let api = Api::start().await;
    let path = format!("{VOLCANO}/namespaces/default/podgroups");
    let mut watch = api
        .watch(&format!("{path}?watch=true&resourceVersion=1"))
        .await;
    let pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "job-a"},
        "spec": {"minMember": 2, "queue": "default", "anything": {"goes": true}},
        "status": {"phase": "Pending"}});
    let (code, created) = api.post(&path, &pg).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(
        created["spec"]["anything"]["goes"], true,
        "any field is kept"
    );
    assert_eq!(
        created["status"]["phase"], "Pending",
        "without a status subresource the create keeps status"
    );
    let ev = watch.next_change().await;
    assert_eq!(
        (ev["type"].as_str(), ev["object"]["kind"].as_str()),
        (Some("ADDED"), Some("PodGroup"))
    );
    let one = format!("{path}/job-a");
    let (code, got) = api.get(&one).await;
    assert_eq!((code, &got), (200, &created));

    // Status is written through the main resource, like Volcano's scheduler does.
    let (code, body) = api
        .patch(
            &format!("{one}/status"),
            MERGE,
            &json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!((code, body["reason"].as_str()), (404, Some("NotFound")));
    let (code, patched) = api
        .patch(&one, MERGE, &json!({"status": {"phase": "Inqueue"}}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(patched["status"]["phase"], "Inqueue");
    assert_eq!(
        patched["metadata"]["generation"], 2,
        "status is part of the object here"
    );
    assert_eq!(watch.next_change().await["type"], "MODIFIED");
    let (code, patched) = api
        .patch(
            &one,
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/spec/minMember", "value": 3}]),
        )
        .await;
    assert_eq!(
        (code, patched["spec"]["minMember"].as_i64()),
        (200, Some(3))
    );
    assert_eq!(watch.next_change().await["type"], "MODIFIED");
    let (code, body) = api
        .patch(&one, STRATEGIC, &json!({"spec": {"minMember": 4}}))
        .await;
    assert_eq!(code, 415);
    assert_eq!(body["reason"], "UnsupportedMediaType");
    assert!(
        !body["message"]
            .as_str()
            .unwrap()
            .contains("strategic-merge-patch"),
        "{body}"
    );
    let (code, list) = api.get(&format!("{VOLCANO}/podgroups")).await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("PodGroupList")));
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let (code, body) = api.delete(&one).await;
    assert_eq!((code, body["kind"].as_str()), (200, Some("Status")));
    assert_eq!(watch.next_change().await["type"], "DELETED");
    assert!(
        api.server
            .get("PodGroup", Some("default"), "job-a")
            .is_none()
    );
    // The control API knows them by short name too.
    api.server
        .create(json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup", "metadata": {"name": "seeded", "namespace": "default"},
        "spec": {"minMember": 1}}));
    assert!(api.server.get("pg", Some("default"), "seeded").is_some());
}

#[tokio::test]
async fn queues_have_a_status_subresource_that_keeps_spec() {
    let api = Api::start().await;
    let path = format!("{VOLCANO}/queues");
    let mut watch = api
        .watch(&format!("{path}?watch=true&resourceVersion=1"))
        .await;
    let q = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "research", "namespace": "ignored"},
        "spec": {"weight": 2, "capability": {"nvidia.com/gpu": "8"}},
        "status": {"state": "Open"}});
    let (code, created) = api.post(&path, &q).await;
    assert_eq!(code, 201, "{created}");
    assert!(
        created["metadata"].get("namespace").is_none(),
        "cluster-scoped"
    );
    assert!(created.get("status").is_none(), "create drops status");
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(watch.next_change().await["type"], "ADDED");
    let one = format!("{path}/research");

    // A /status write changes only status: not spec, not labels.
    let mut body = created.clone();
    body["status"] = json!({"state": "Open", "allocated": {"nvidia.com/gpu": "2"}});
    body["spec"]["weight"] = json!(9);
    body["metadata"]["labels"] = json!({"team": "x"});
    let (code, st) = api.put(&format!("{one}/status"), &body).await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["status"]["allocated"]["nvidia.com/gpu"], "2");
    assert_eq!(st["spec"]["weight"], 2, "status keeps spec");
    assert!(
        st["metadata"].get("labels").is_none(),
        "status keeps metadata"
    );
    assert_eq!(st["metadata"]["generation"], 1);
    assert_eq!(watch.next_change().await["type"], "MODIFIED");
    let (code, st) = api
        .patch(
            &format!("{one}/status"),
            MERGE,
            &json!({"status": {"state": "Closed"}}),
        )
        .await;
    assert_eq!(
        (code, st["status"]["state"].as_str()),
        (200, Some("Closed"))
    );

    // A main-resource write keeps the stored status and bumps the generation on spec changes.
    let (code, m) = api
        .patch(
            &one,
            MERGE,
            &json!({"spec": {"weight": 3}, "status": {"state": "Open"}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(m["spec"]["weight"], 3);
    assert_eq!(m["status"]["state"], "Closed");
    assert_eq!(m["metadata"]["generation"], 2);
    let (code, m2) = api
        .patch(&one, MERGE, &json!({"metadata": {"labels": {"a": "b"}}}))
        .await;
    assert_eq!(code, 200);
    assert_eq!(m2["metadata"]["generation"], 2, "metadata is not spec");
    let (code, got) = api.get(&one).await;
    assert_eq!((code, &got), (200, &m2));
    let (code, _) = api
        .patch(&one, STRATEGIC, &json!({"spec": {"weight": 4}}))
        .await;
    assert_eq!(code, 415);
    let (code, _) = api.delete(&one).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn secrets_decode_default_and_validate_like_the_apiserver() {
    let api = Api::start().await;
    let path = "/api/v1/namespaces/vgpu/secrets";
    let mut watch = api
        .watch(&format!("{path}?watch=true&resourceVersion=1"))
        .await;
    let (code, s) = api
        .post(
            path,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "certs"},
                "data": {"a": "aGk="}, "stringData": {"b": "hello"}}),
        )
        .await;
    assert_eq!(code, 201, "{s}");
    assert_eq!(s["type"], "Opaque");
    assert_eq!(s["data"], json!({"a": "aGk=", "b": "aGVsbG8="}));
    assert!(s.get("stringData").is_none());
    assert_eq!(watch.next_change().await["type"], "ADDED");
    let (code, got) = api.get(&format!("{path}/certs")).await;
    assert_eq!((code, &got), (200, &s));

    let (code, body) = api
        .post(
            path,
            &json!({"metadata": {"name": "bad"}, "data": {"a": "not base64!"}}),
        )
        .await;
    assert_eq!(code, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("illegal base64 data at input byte"),
        "{body}"
    );
    let (code, body) = api
        .post(
            path,
            &json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                "data": {"tls.crt": "eA=="}}),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(body["details"]["causes"][0]["field"], "data[tls.key]");
    let (code, body) = api
        .post(
            path,
            &json!({"metadata": {"name": "keys"}, "data": {"a/b": "eA=="}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");

    // type is immutable; data is not.
    let (code, body) = api
        .patch(
            &format!("{path}/certs"),
            MERGE,
            &json!({"type": "kubernetes.io/tls"}),
        )
        .await;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("field is immutable")
    );
    let (code, s2) = api
        .patch(
            &format!("{path}/certs"),
            MERGE,
            &json!({"stringData": {"a": "new"}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(s2["data"]["a"], "bmV3");
    assert!(rv_of(&s2) > rv_of(&s));
    assert_eq!(watch.next_change().await["type"], "MODIFIED");
    // A no-op patch leaves the resourceVersion alone.
    let (code, s3) = api
        .patch(
            &format!("{path}/certs"),
            MERGE,
            &json!({"data": {"a": "bmV3"}}),
        )
        .await;
    assert_eq!((code, rv_of(&s3)), (200, rv_of(&s2)));
    let (code, list) = api.get("/api/v1/secrets?fieldSelector=type%3DOpaque").await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let (code, body) = api.delete(&format!("{path}/certs")).await;
    assert_eq!((code, body["status"].as_str()), (200, Some("Success")));
}

fn webhook_config(ca: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "vgpu-scheduler"},
    "webhooks": [
        {"name": "vgpu.scheduler.example.io", "sideEffects": "None",
         "admissionReviewVersions": ["v1"],
         "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/mutate"},
                          "caBundle": ca},
         "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["pods"]}]},
        {"name": "gang.scheduler.example.io", "sideEffects": "None",
         "admissionReviewVersions": ["v1"],
         "clientConfig": {"url": "https://127.0.0.1:9443/mutate"}}
    ]})
}

#[tokio::test]
async fn mutating_webhook_configurations_default_validate_and_track_generation() {
    let api = Api::start().await;
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let mut watch = api
        .watch(&format!("{path}?watch=true&resourceVersion=1"))
        .await;
    let (code, c) = api.post(path, &webhook_config("")).await;
    assert_eq!(code, 201, "{c}");
    assert_eq!(c["metadata"]["generation"], 1);
    let h = &c["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["matchPolicy"], "Equivalent");
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["reinvocationPolicy"], "Never");
    assert_eq!(h["namespaceSelector"], json!({}));
    assert_eq!(h["objectSelector"], json!({}));
    assert_eq!(h["rules"][0]["scope"], "*");
    assert_eq!(h["clientConfig"]["service"]["port"], 443);
    assert_eq!(watch.next_change().await["type"], "ADDED");

    let one = format!("{path}/vgpu-scheduler");
    let (code, p) = api
        .patch(
            &one,
            JSON_PATCH,
            &json!([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2E="},
                    {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Y2E="}]),
        )
        .await;
    assert_eq!(code, 200, "{p}");
    assert_eq!(p["webhooks"][1]["clientConfig"]["caBundle"], "Y2E=");
    assert_eq!(p["metadata"]["generation"], 2);
    assert_eq!(watch.next_change().await["type"], "MODIFIED");
    // The same bytes again: nothing changes.
    let (code, same) = api
        .patch(
            &one,
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2E="}]),
        )
        .await;
    assert_eq!((code, rv_of(&same)), (200, rv_of(&p)));
    let (code, got) = api.get(&one).await;
    assert_eq!((code, &got), (200, &p));

    let (code, body) = api
        .patch(
            &one,
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "%%%"}]),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    let mut bad = webhook_config("");
    bad["metadata"]["name"] = json!("bad");
    bad["webhooks"][0]
        .as_object_mut()
        .unwrap()
        .remove("sideEffects");
    bad["webhooks"][1]["name"] = json!("short.name");
    let (code, body) = api.post(path, &bad).await;
    assert_eq!(code, 422, "{body}");
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["webhooks[0].sideEffects", "webhooks[1].name"]);
    let (code, body) = api.post(path, &webhook_config("")).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    let (code, body) = api.delete(&one).await;
    assert_eq!((code, body["status"].as_str()), (200, Some("Success")));
    assert_eq!(watch.next_change().await["type"], "DELETED");
}

const PRIORITY_CLASSES: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";

fn priority_class(name: &str, value: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value})
}

#[tokio::test]
async fn priority_classes_are_served_with_the_system_classes_and_one_global_default() {
    let api = Api::start().await;
    let (code, list) = api.get("/apis/scheduling.k8s.io/v1").await;
    assert_eq!(code, 200);
    let pc = discovered(&list, "priorityclasses").expect("priorityclasses");
    assert_eq!(pc["kind"], "PriorityClass");
    assert_eq!(pc["namespaced"], false);
    assert_eq!(pc["shortNames"], json!(["pc"]));

    // The server creates the system classes at startup.
    let (code, list) = api.get(PRIORITY_CLASSES).await;
    assert_eq!(code, 200);
    let builtin: Vec<(&str, i64)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap(),
                c["value"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        builtin,
        [
            ("system-cluster-critical", 2_000_000_000),
            ("system-node-critical", 2_000_001_000)
        ]
    );
    let (code, node_critical) = api
        .get(&format!("{PRIORITY_CLASSES}/system-node-critical"))
        .await;
    assert_eq!(code, 200);
    assert_eq!(node_critical["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(
        node_critical["description"],
        "Used for system critical pods that must not be moved from their current node."
    );
    let (code, body) = api
        .delete(&format!("{PRIORITY_CLASSES}/system-node-critical"))
        .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"
    );
    assert_eq!(
        body["details"],
        json!({"name": "system-node-critical", "group": "scheduling.k8s.io", "kind": "priorityclasses"})
    );

    // Create: defaults, generation 1; value and preemptionPolicy immutable.
    let (code, high) = api
        .post(PRIORITY_CLASSES, &priority_class("high", 1_000_000_000))
        .await;
    assert_eq!(code, 201, "{high}");
    assert_eq!(high["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(high["metadata"]["generation"], 1);
    let (code, body) = api
        .patch(
            &format!("{PRIORITY_CLASSES}/high"),
            MERGE,
            &json!({"value": 5, "preemptionPolicy": "Never"}),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PriorityClass.scheduling.k8s.io \"high\" is invalid: [value: Forbidden: may not be changed in an update., preemptionPolicy: Invalid value: \"Never\": field is immutable]"
    );
    let (code, described) = api
        .patch(
            &format!("{PRIORITY_CLASSES}/high"),
            MERGE,
            &json!({"description": "batch"}),
        )
        .await;
    assert_eq!((code, &described["description"]), (200, &json!("batch")));
    assert_eq!(described["metadata"]["generation"], 1);

    // Validation.
    let (code, body) = api
        .post(PRIORITY_CLASSES, &priority_class("too-high", 1_000_000_001))
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PriorityClass.scheduling.k8s.io \"too-high\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
    );
    let (code, body) = api
        .post(PRIORITY_CLASSES, &priority_class("system-mine", 5))
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"][0],
        json!({"reason": "FieldValueForbidden", "field": "metadata.name",
            "message": "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"})
    );
    let (code, body) = api
        .post(
            PRIORITY_CLASSES,
            &json!({"metadata": {"name": "words"}, "value": "high"}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    let mut never = priority_class("bad-policy", 1);
    never["preemptionPolicy"] = json!("Sometimes");
    let (code, body) = api.post(PRIORITY_CLASSES, &never).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""
    );
    // An absent value is the Go zero value, as on the real server.
    let (code, zero) = api
        .post(PRIORITY_CLASSES, &json!({"metadata": {"name": "zero"}}))
        .await;
    assert_eq!((code, &zero["value"]), (201, &json!(0)));

    // At most one globalDefault: a second one is refused by admission (403).
    let mut first = priority_class("first", 10);
    first["globalDefault"] = json!(true);
    let (code, body) = api.post(PRIORITY_CLASSES, &first).await;
    assert_eq!(code, 201, "{body}");
    let mut second = priority_class("second", 20);
    second["globalDefault"] = json!(true);
    let (code, body) = api.post(PRIORITY_CLASSES, &second).await;
    assert_eq!(code, 403);
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass first is already marked as default. Only one default can exist"
    );
    let (code, _) = api
        .patch(
            &format!("{PRIORITY_CLASSES}/high"),
            MERGE,
            &json!({"globalDefault": true}),
        )
        .await;
    assert_eq!(code, 403);
    // The default class itself may be updated.
    let (code, _) = api
        .patch(
            &format!("{PRIORITY_CLASSES}/first"),
            MERGE,
            &json!({"description": "the default"}),
        )
        .await;
    assert_eq!(code, 200);
    assert!(api.server.try_create(second.clone()).is_err());
    let (code, _) = api.delete(&format!("{PRIORITY_CLASSES}/high")).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn pods_get_their_priority_from_the_priority_class() {
    let api = Api::start().await;
    let pods = "/api/v1/namespaces/default/pods";
    let mut never = priority_class("batch-low", 100);
    never["preemptionPolicy"] = json!("Never");
    api.server.create(never);
    api.server.create(priority_class("batch-high", 1000));

    let (code, plain) = api.post(pods, &pod("default", "plain", json!({}))).await;
    assert_eq!(code, 201);
    assert_eq!(plain["spec"]["priority"], 0);
    assert_eq!(plain["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    assert!(plain["spec"].get("priorityClassName").is_none());

    let mut low = pod("default", "low", json!({}));
    low["spec"]["priorityClassName"] = json!("batch-low");
    let (code, low) = api.post(pods, &low).await;
    assert_eq!(code, 201);
    assert_eq!(low["spec"]["priority"], 100);
    assert_eq!(low["spec"]["preemptionPolicy"], "Never");

    let mut critical = pod("default", "critical", json!({}));
    critical["spec"]["priorityClassName"] = json!("system-node-critical");
    let (code, critical) = api.post(pods, &critical).await;
    assert_eq!(
        (code, &critical["spec"]["priority"]),
        (201, &json!(2_000_001_000))
    );

    let mut missing = pod("default", "missing", json!({}));
    missing["spec"]["priorityClassName"] = json!("nope");
    let (code, body) = api.post(pods, &missing).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "pods \"missing\" is forbidden: no PriorityClass with name nope was found"
    );
    let mut lying = pod("default", "lying", json!({}));
    lying["spec"]["priorityClassName"] = json!("batch-high");
    lying["spec"]["priority"] = json!(7);
    let (code, body) = api.post(pods, &lying).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "pods \"lying\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
    );

    // A global default class names itself in pods without a class.
    let mut default = priority_class("everyone", 50);
    default["globalDefault"] = json!(true);
    api.server.create(default);
    let mut generated = pod("default", "", json!({}));
    generated["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    generated["metadata"]["generateName"] = json!("worker-");
    let (code, worker) = api.post(pods, &generated).await;
    assert_eq!(code, 201);
    assert_eq!(worker["spec"]["priorityClassName"], "everyone");
    assert_eq!(worker["spec"]["priority"], 50);

    // Updates that leave the priority out keep it.
    let mut update = low.clone();
    update["spec"].as_object_mut().unwrap().remove("priority");
    update["spec"]["activeDeadlineSeconds"] = json!(60);
    let (code, updated) = api.put(&format!("{pods}/low"), &update).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["priority"], 100);
}

const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

fn running_pod(name: &str, labels: Value) -> Value {
    let mut p = pod("default", name, labels);
    p["spec"]["nodeName"] = json!("n1");
    p["status"] = json!({"phase": "Running"});
    p
}

fn budget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn pdb_status(api: &Api, name: &str) -> Value {
    api.server
        .get("PodDisruptionBudget", Some("default"), name)
        .expect("budget")["status"]
        .clone()
}

/// (currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed)
fn pdb_counts(api: &Api, name: &str) -> (i64, i64, i64, i64) {
    let s = pdb_status(api, name);
    let n = |f: &str| s[f].as_i64().unwrap();
    (
        n("currentHealthy"),
        n("desiredHealthy"),
        n("expectedPods"),
        n("disruptionsAllowed"),
    )
}

#[tokio::test]
async fn pod_disruption_budgets_get_their_status_from_the_disruption_controller() {
    let api = Api::start().await;
    let (code, list) = api.get("/apis/policy/v1").await;
    assert_eq!(code, 200);
    let pdb = discovered(&list, "poddisruptionbudgets").expect("poddisruptionbudgets");
    assert_eq!(pdb["shortNames"], json!(["pdb"]));
    assert_eq!(pdb["namespaced"], true);
    assert!(discovered(&list, "poddisruptionbudgets/status").is_some());

    for name in ["web-0", "web-1"] {
        api.server.create(running_pod(name, json!({"app": "web"})));
    }
    api.server
        .create(pod("default", "web-2", json!({"app": "web"}))); // Pending
    api.server.create(running_pod("db-0", json!({"app": "db"})));
    let mut watch = api
        .watch(&format!(
            "{PDBS}?watch=true&resourceVersion={}",
            api.server.resource_version()
        ))
        .await;
    let (code, created) = api
        .post(
            PDBS,
            &json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1,
                "selector": {"matchLabels": {"app": "web"}}},
                "status": {"disruptionsAllowed": 9}}),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    // The create answers the zero status; the controller fills it in after.
    assert_eq!(
        created["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
    );
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(watch.next_change().await["type"], "ADDED");
    let synced = watch.next_change().await;
    assert_eq!(synced["type"], "MODIFIED");
    let status = &synced["object"]["status"];
    assert_eq!(
        (
            &status["currentHealthy"],
            &status["desiredHealthy"],
            &status["expectedPods"],
            &status["disruptionsAllowed"],
            &status["observedGeneration"]
        ),
        (&json!(2), &json!(1), &json!(3), &json!(1), &json!(1))
    );
    let cond = &status["conditions"][0];
    assert_eq!(
        (
            &cond["type"],
            &cond["status"],
            &cond["reason"],
            &cond["message"]
        ),
        (
            &json!("DisruptionAllowed"),
            &json!("True"),
            &json!("SufficientPods"),
            &json!("")
        )
    );
    assert!(cond["lastTransitionTime"].is_string());
    assert!(status.get("disruptedPods").is_none());

    // Pods: a Ready condition decides over the phase; terminating pods and
    // pods that left do not count.
    let mut unready = api.server.get("Pod", Some("default"), "web-1").unwrap();
    unready["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    api.server.update(unready);
    assert_eq!(pdb_counts(&api, "web"), (1, 1, 3, 0));
    let cond = &pdb_status(&api, "web")["conditions"][0];
    assert_eq!(
        (&cond["status"], &cond["reason"]),
        (&json!("False"), &json!("InsufficientPods"))
    );
    api.server.set_pod_phase("default", "web-2", "Running");
    assert_eq!(pdb_counts(&api, "web"), (2, 1, 3, 1));
    api.server.begin_termination("default", "web-0");
    assert_eq!(pdb_counts(&api, "web"), (1, 1, 3, 0));
    api.server.finish_deletion("default", "web-0");
    assert_eq!(pdb_counts(&api, "web"), (1, 1, 2, 0));

    // A spec change moves the generation, and observedGeneration follows.
    let (code, changed) = api
        .patch(
            &format!("{PDBS}/web"),
            MERGE,
            &json!({"spec": {"minAvailable": 0}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(changed["metadata"]["generation"], 2);
    assert_eq!(pdb_status(&api, "web")["observedGeneration"], 2);
    assert_eq!(pdb_counts(&api, "web"), (1, 0, 2, 1));

    // Percentages: expectedPods is the number of selected pods here.
    for i in 0..4 {
        api.server
            .create(running_pod(&format!("batch-{i}"), json!({"app": "batch"})));
    }
    api.server.create(budget(
        "half-up",
        json!({"maxUnavailable": "30%", "selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["batch"]}]}}),
    ));
    // 30% of 4 rounds up to 2 unavailable.
    assert_eq!(pdb_counts(&api, "half-up"), (4, 2, 4, 2));
    api.server.create(budget(
        "most",
        json!({"minAvailable": "60%", "selector": {"matchLabels": {"app": "batch"}}}),
    ));
    assert_eq!(pdb_counts(&api, "most"), (4, 3, 4, 1));
    // No selector selects nothing; an empty one selects the whole namespace.
    api.server
        .create(budget("none", json!({"minAvailable": 1})));
    assert_eq!(pdb_counts(&api, "none"), (0, 1, 0, 0));
    api.server
        .create(budget("all", json!({"maxUnavailable": 1, "selector": {}})));
    assert_eq!(pdb_counts(&api, "all"), (6, 6, 7, 0));

    // The controller owns status: a write through /status is recomputed at once.
    let (code, _) = api
        .patch(
            &format!("{PDBS}/most/status"),
            MERGE,
            &json!({"status": {"disruptionsAllowed": 3}}),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(pdb_counts(&api, "most").3, 1);
    let (code, body) = api
        .patch(
            &format!("{PDBS}/most/status"),
            MERGE,
            &json!({"status": {"disruptionsAllowed": -1}}),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PodDisruptionBudget.policy \"most\" is invalid: status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0"
    );

    // Stopped, the controller leaves written status alone; restarted, it resyncs.
    api.server.set_disruption_controller(false);
    let (code, _) = api
        .patch(
            &format!("{PDBS}/most/status"),
            MERGE,
            &json!({"status": {"disruptionsAllowed": 3}}),
        )
        .await;
    assert_eq!(code, 200);
    api.server.set_pod_phase("default", "batch-0", "Failed");
    assert_eq!(pdb_counts(&api, "most"), (4, 3, 4, 3));
    api.server.set_disruption_controller(true);
    assert_eq!(pdb_counts(&api, "most"), (3, 3, 4, 0));

    // A pinned budget keeps the value the test gave it.
    api.server.pin_disruptions_allowed("default", "half-up", 0);
    assert_eq!(pdb_counts(&api, "half-up"), (3, 2, 4, 0));
    api.server.set_pod_phase("default", "batch-0", "Running");
    assert_eq!(pdb_counts(&api, "half-up").3, 0);
    api.server.unpin_disruptions_allowed("default", "half-up");
    assert_eq!(pdb_counts(&api, "half-up"), (4, 2, 4, 2));
}

#[tokio::test]
async fn pod_disruption_budgets_are_validated_like_the_apiserver() {
    let api = Api::start().await;
    let sel = json!({"matchLabels": {"app": "web"}});
    let (code, body) = api
        .post(
            PDBS,
            &budget(
                "both",
                json!({"minAvailable": 1, "maxUnavailable": 1, "selector": sel}),
            ),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(body["details"]["causes"][0]["field"], "spec");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("PodDisruptionBudget.policy \"both\" is invalid: spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0x")
            && message.ends_with("}: minAvailable and maxUnavailable cannot be both set"),
        "{message}"
    );
    let (code, body) = api
        .post(
            PDBS,
            &budget("negative", json!({"minAvailable": -1, "selector": sel})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PodDisruptionBudget.policy \"negative\" is invalid: spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"
    );
    let (code, body) = api
        .post(
            PDBS,
            &budget("over", json!({"maxUnavailable": "150%", "selector": sel})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
    );
    let (code, body) = api
        .post(
            PDBS,
            &budget("words", json!({"minAvailable": "half", "selector": sel})),
        )
        .await;
    assert_eq!(code, 422);
    assert!(
        body["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .contains("a valid percent string must be a numeric string followed by an ending '%'")
    );
    let (code, body) = api
        .post(
            PDBS,
            &budget(
                "op",
                json!({"minAvailable": 1, "selector": {"matchExpressions": [
                {"key": "app", "operator": "Near", "values": ["web"]},
                {"key": "tier", "operator": "In"}]}}),
            ),
        )
        .await;
    assert_eq!(code, 422);
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.selector.matchExpressions[0].operator",
            "spec.selector.matchExpressions[1].values"
        ]
    );
    let (code, _) = api
        .post(
            PDBS,
            &budget("bool", json!({"minAvailable": true, "selector": sel})),
        )
        .await;
    assert_eq!(code, 400);
    let (code, body) = api
        .post(
            PDBS,
            &budget(
                "policy",
                json!({"minAvailable": 1, "selector": sel,
                "unhealthyPodEvictionPolicy": "Sometimes"}),
            ),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
    );
    // Neither field is fine in policy/v1.
    let (code, created) = api
        .post(PDBS, &budget("bare", json!({"selector": sel})))
        .await;
    assert_eq!(code, 201);
    // A PUT must carry the resourceVersion.
    let mut put = created.clone();
    put["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, body) = api.put(&format!("{PDBS}/bare"), &put).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "poddisruptionbudgets.policy \"bare\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    let current = api.server.get("pdb", Some("default"), "bare").unwrap();
    let (code, _) = api.put(&format!("{PDBS}/bare"), &current).await;
    assert_eq!(code, 200);
    let (code, body) = api.delete(&format!("{PDBS}/bare")).await;
    assert_eq!((code, body["status"].as_str()), (200, Some("Success")));
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}})
}

async fn evict(api: &Api, pod: &str) -> (u16, Value) {
    api.post(
        &format!("/api/v1/namespaces/default/pods/{pod}/eviction"),
        &eviction(pod),
    )
    .await
}

/// The web pods and a `web` budget (minAvailable 1) the controller has synced.
fn web_with_budget(api: &Api, pods: &[&str]) {
    for name in pods {
        api.server.create(running_pod(name, json!({"app": "web"})));
    }
    api.server.create(budget(
        "web",
        json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
    ));
}

#[tokio::test]
async fn eviction_spends_the_disruption_budget_then_answers_429() {
    let api = Api::start().await;
    web_with_budget(&api, &["web-0", "web-1", "web-2"]);
    assert_eq!(pdb_counts(&api, "web"), (3, 1, 3, 2));

    // Granted: the budget is spent and records the pod, the pod gets the
    // DisruptionTarget condition and is deleted. The controller is stopped
    // here to see the eviction's own status write.
    api.server.set_graceful_pod_deletion(true);
    api.server.set_disruption_controller(false);
    let (code, body) = evict(&api, "web-0").await;
    assert_eq!(code, 201);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    let status = pdb_status(&api, "web");
    assert_eq!(status["disruptionsAllowed"], 1);
    assert!(status["disruptedPods"]["web-0"].is_string(), "{status}");
    let web0 = api.server.get("Pod", Some("default"), "web-0").unwrap();
    assert!(web0["metadata"]["deletionTimestamp"].is_string());
    let target = web0["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(
        (&target["status"], &target["reason"], &target["message"]),
        (
            &json!("True"),
            &json!("EvictionByEvictionAPI"),
            &json!("Eviction API: evicting")
        )
    );
    // The last disruption flips the condition.
    let (code, _) = evict(&api, "web-1").await;
    assert_eq!(code, 201);
    let status = pdb_status(&api, "web");
    assert_eq!(status["disruptionsAllowed"], 0);
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
    // The controller sees the terminating pods and forgets their entries.
    api.server.set_disruption_controller(true);
    assert_eq!(pdb_counts(&api, "web"), (1, 1, 3, 0));
    assert!(pdb_status(&api, "web").get("disruptedPods").is_none());

    // Nothing left to spend: 429 with the real Status and no Retry-After.
    let resp = api
        .http
        .post(api.url("/api/v1/namespaces/default/pods/web-2/eviction"))
        .json(&eviction("web-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().get("retry-after").is_none());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]},
            "code": 429
        })
    );
    let web2 = api.server.get("Pod", Some("default"), "web-2").unwrap();
    assert!(web2["metadata"].get("deletionTimestamp").is_none());

    // A pinned budget decides on its own: 1 lets exactly one eviction through.
    api.server
        .create(running_pod("web-3", json!({"app": "web"})));
    api.server.pin_disruptions_allowed("default", "web", 1);
    assert_eq!(evict(&api, "web-3").await.0, 201);
    assert_eq!(evict(&api, "web-2").await.0, 429);
    api.server.unpin_disruptions_allowed("default", "web");

    // A spec change the controller has not observed yet: 429, retry in 10 s.
    api.server.pin_disruptions_allowed("default", "web", 5);
    api.patch(
        &format!("{PDBS}/web"),
        MERGE,
        &json!({"spec": {"minAvailable": 0}}),
    )
    .await;
    let resp = api
        .http
        .post(api.url("/api/v1/namespaces/default/pods/web-2/eviction"))
        .json(&eviction("web-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "10");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["details"],
        json!({"causes": [{"reason": "DisruptionBudget",
            "message": "The disruption budget web is still being processed by the server."}],
            "retryAfterSeconds": 10})
    );

    // What the tests can see.
    let log = api.server.evictions();
    let codes: Vec<(&str, u16)> = log.iter().map(|e| (e.pod.as_str(), e.code)).collect();
    assert_eq!(
        codes,
        [
            ("web-0", 201),
            ("web-1", 201),
            ("web-2", 429),
            ("web-3", 201),
            ("web-2", 429),
            ("web-2", 429)
        ]
    );
    assert_eq!(
        api.server.evicted_pods(),
        ["default/web-0", "default/web-1", "default/web-3"]
    );
    assert_eq!(api.server.requests_matching("POST", "/eviction"), 6);
}

#[tokio::test]
async fn eviction_refuses_pods_under_two_budgets_and_lets_unhealthy_pods_go() {
    let api = Api::start().await;
    web_with_budget(&api, &["web-0", "web-1", "web-2"]);
    api.server.create(budget(
        "web-too",
        json!({"maxUnavailable": 1, "selector": {"matchExpressions": [
            {"key": "app", "operator": "Exists"}]}}),
    ));
    let (code, body) = evict(&api, "web-0").await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "code": 500})
    );
    assert!(api.server.get("Pod", Some("default"), "web-0").is_some());
    api.server.delete("pdb", Some("default"), "web-too");

    // Pending pods are evicted without asking the budget.
    api.server.pin_disruptions_allowed("default", "web", 0);
    api.server
        .create(pod("default", "web-new", json!({"app": "web"})));
    assert_eq!(evict(&api, "web-new").await.0, 201);
    assert!(api.server.get("Pod", Some("default"), "web-new").is_none());

    // A Running pod that is not Ready goes without spending the budget while
    // the budget is met (IfHealthyBudget)...
    let not_ready = |name: &str| {
        let mut p = api.server.get("Pod", Some("default"), name).unwrap();
        p["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
        api.server.update(p);
    };
    api.server.unpin_disruptions_allowed("default", "web");
    not_ready("web-2");
    assert_eq!(pdb_counts(&api, "web"), (2, 1, 3, 1));
    api.server.pin_disruptions_allowed("default", "web", 0);
    assert_eq!(evict(&api, "web-2").await.0, 201);
    assert_eq!(pdb_status(&api, "web")["disruptionsAllowed"], 0);
    // ...but not when the budget is not met: then it needs a disruption too.
    api.server.unpin_disruptions_allowed("default", "web");
    not_ready("web-1");
    assert_eq!(pdb_counts(&api, "web"), (1, 1, 2, 0));
    let mut strict = api.server.get("pdb", Some("default"), "web").unwrap();
    strict["spec"]["minAvailable"] = json!(2);
    api.server.update(strict);
    assert_eq!(pdb_counts(&api, "web"), (1, 2, 2, 0));
    assert_eq!(evict(&api, "web-1").await.0, 429);
    // AlwaysAllow lets unhealthy pods go whatever the budget says.
    let mut always = api.server.get("pdb", Some("default"), "web").unwrap();
    always["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
    api.server.update(always);
    assert_eq!(evict(&api, "web-1").await.0, 201);
    // A healthy pod is still guarded.
    assert_eq!(evict(&api, "web-0").await.0, 429);
    assert_eq!(
        api.server.evicted_pods(),
        ["default/web-new", "default/web-2", "default/web-1"]
    );
}

#[tokio::test]
async fn eviction_dry_runs_and_request_errors() {
    let api = Api::start().await;
    web_with_budget(&api, &["web-0", "web-1"]);
    let path = "/api/v1/namespaces/default/pods/web-0/eviction";
    let (code, body) = api
        .post(&format!("{path}?dryRun=All"), &eviction("web-0"))
        .await;
    assert_eq!((code, &body["status"]), (201, &json!("Success")));
    let mut in_body = eviction("web-0");
    in_body["deleteOptions"] = json!({"dryRun": ["All"]});
    assert_eq!(api.post(path, &in_body).await.0, 201);
    assert!(api.server.get("Pod", Some("default"), "web-0").is_some());
    assert_eq!(pdb_counts(&api, "web"), (2, 1, 2, 1));
    assert!(pdb_status(&api, "web").get("disruptedPods").is_none());
    let (code, body) = api
        .post(&format!("{path}?dryRun=Some"), &eviction("web-0"))
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
    );
    let mut other = eviction("web-0");
    other["deleteOptions"] = json!({"dryRun": ["Other"]});
    let (code, body) = api.post(&format!("{path}?dryRun=All"), &other).await;
    assert_eq!(code, 500);
    assert_eq!(
        body["message"],
        "Non-matching dry-run options in request and content: [All] and [Other]"
    );
    let (code, body) = api.post(path, &eviction("web-1")).await;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "name in URL does not match name in Eviction object"
    );
    let (code, body) = evict(&api, "ghost").await;
    assert_eq!(
        (code, &body["message"]),
        (404, &json!("pods \"ghost\" not found"))
    );
    let mut stale = eviction("web-0");
    stale["deleteOptions"] = json!({"preconditions": {"uid": "not-the-uid"}});
    let (code, body) = api.post(path, &stale).await;
    assert_eq!(code, 409);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Operation cannot be fulfilled on Pod \"web-0\": the UID in the precondition (not-the-uid) does not match the UID in record"),
        "{body}"
    );
    let dry: Vec<(u16, bool)> = api
        .server
        .evictions()
        .iter()
        .map(|e| (e.code, e.dry_run))
        .collect();
    assert_eq!(
        dry,
        [
            (201, true),
            (201, true),
            (422, false),
            (500, false),
            (400, false),
            (404, false),
            (409, false)
        ]
    );
    assert!(api.server.evicted_pods().is_empty());
    api.server.clear_request_log();
    assert!(api.server.evictions().is_empty());
}

#[tokio::test]
async fn node_metrics_are_listed_and_got_like_metrics_server_serves_them() {
    use fake_apiserver::MetricsApi;
    let api = Api::start().await;
    let groups = |body: &Value| -> Vec<String> {
        body["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    // No metrics-server: no group, and 404 as for any unknown path.
    let (_, body) = api.get("/apis").await;
    assert!(!groups(&body).contains(&"metrics.k8s.io".to_string()));
    let (code, body) = api.get("/apis/metrics.k8s.io/v1beta1/nodes").await;
    assert_eq!(code, 404);
    assert_eq!(
        body["message"],
        "the server could not find the requested resource"
    );

    api.server.set_metrics_api(MetricsApi::Served);
    api.server.create(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"pool": "a"}}}));
    api.server.create(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n2", "labels": {"pool": "b"}}}));
    let at = chrono::DateTime::parse_from_rfc3339("2025-06-01T10:00:03Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    api.server
        .set_node_usage("n1", "3250000000n", "83886080Ki", at);
    api.server.set_node_usage("n2", "500m", "1Gi", at);
    // Usage for a node that does not exist is not listed.
    api.server.set_node_usage("gone", "1", "1Gi", at);

    let (_, body) = api.get("/apis").await;
    assert!(groups(&body).contains(&"metrics.k8s.io".to_string()));
    let (code, body) = api.get("/apis/metrics.k8s.io/v1beta1").await;
    assert_eq!(code, 200);
    assert_eq!(body["resources"][0]["name"], "nodes");
    assert_eq!(body["resources"][0]["verbs"], json!(["get", "list"]));

    let (code, list) = api.get("/apis/metrics.k8s.io/v1beta1/nodes").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "NodeMetricsList");
    assert_eq!(list["apiVersion"], "metrics.k8s.io/v1beta1");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{list}");
    assert_eq!(items[0]["metadata"]["name"], "n1");
    assert_eq!(items[0]["metadata"]["labels"]["pool"], "a");
    assert_eq!(items[0]["timestamp"], "2025-06-01T10:00:03Z");
    assert_eq!(items[0]["window"], "20.05s");
    assert_eq!(
        items[0]["usage"],
        json!({"cpu": "3250000000n", "memory": "83886080Ki"})
    );
    assert!(items[0].get("kind").is_none(), "list items carry no kind");
    let (_, list) = api
        .get("/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=pool%3Db")
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["metadata"]["name"], "n2");

    let (code, one) = api.get("/apis/metrics.k8s.io/v1beta1/nodes/n2").await;
    assert_eq!(code, 200);
    assert_eq!(
        (one["kind"].as_str(), one["usage"]["cpu"].as_str()),
        (Some("NodeMetrics"), Some("500m"))
    );
    let (code, body) = api.get("/apis/metrics.k8s.io/v1beta1/nodes/gone").await;
    assert_eq!(code, 404);
    assert_eq!(
        body["message"],
        "nodemetrics.metrics.k8s.io \"gone\" not found"
    );
    assert_eq!(body["reason"], "NotFound");

    // metrics-server cannot be watched, nor written.
    let (code, body) = api
        .get("/apis/metrics.k8s.io/v1beta1/nodes?watch=true")
        .await;
    assert_eq!(code, 405);
    assert_eq!(
        body["message"],
        "watch is not supported on resources of kind \"nodes.metrics.k8s.io\""
    );
    let (code, _) = api
        .post("/apis/metrics.k8s.io/v1beta1/nodes", &json!({}))
        .await;
    assert_eq!(code, 405);

    // Registered but down: the aggregator's plain-text 503.
    api.server.set_metrics_api(MetricsApi::Unavailable);
    let (code, body) = api.get("/apis/metrics.k8s.io/v1beta1/nodes").await;
    assert_eq!((code, body), (503, json!("service unavailable\n")));
    let (_, body) = api.get("/apis").await;
    assert!(groups(&body).contains(&"metrics.k8s.io".to_string()));
}

#[test]
fn requests_are_counted_as_the_api_server_counts_them() {
    let calls = fake_apiserver::ApiCalls::of([
        ("GET", "/api/v1/namespaces/ns/pods/p"),
        ("GET", "/api/v1/pods?resourceVersion=0"),
        ("GET", "/api/v1/pods?watch=true&resourceVersion=7"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p"),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding"),
        ("PATCH", "/api/v1/nodes/gpu-a"),
        ("POST", "/api/v1/namespaces/ns/events"),
        ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events"),
        ("GET", "/version"),
    ]);
    assert_eq!(calls.count("get", "pods"), 1);
    assert_eq!(calls.count("list", "pods"), 1);
    assert_eq!(calls.count("watch", "pods"), 1);
    assert_eq!(calls.count("create", "pods/binding"), 1);
    assert_eq!(calls.count("patch", "nodes"), 1);
    assert_eq!(calls.count("create", "events"), 2);
    assert_eq!(calls.writes(), 5);
    assert_eq!(calls.reads(), 2);
}

#[tokio::test]
async fn namespaces_always_carry_their_name_label() {
    let api = Api::start().await;
    let (code, created) = api
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"team": "a",
                    "kubernetes.io/metadata.name": "something-else"}}}),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"team": "a", "kubernetes.io/metadata.name": "team-a"})
    );
    let mut changed = created.clone();
    changed["metadata"]["labels"] = json!({"team": "b"});
    let (code, updated) = api.put("/api/v1/namespaces/team-a", &changed).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(
        updated["metadata"]["labels"],
        json!({"team": "b", "kubernetes.io/metadata.name": "team-a"})
    );
}
