//! `vgpu-scheduler certs` against the fake API server: the Secret is created and the
//! webhook's caBundle set, a rerun writes nothing, rotations keep the old CA
//! trusted while the new certificates verify, near-expiry certificates are renewed,
//! unreadable Secret content is a clear error, and the client certificate works.

mod fake_apiserver;

use fake_apiserver::FakeApiServer;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, crypto::CryptoProvider};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

const NS: &str = "vgpu-system";
const SECRET: &str = "vgpu-scheduler-tls";
const WEBHOOK: &str = "vgpu-scheduler";
const HOST: &str = "vgpu-scheduler.vgpu-system.svc";

fn webhook_config() -> Value {
    let hook = |name: &str| {
        json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "vgpu-scheduler", "namespace": NS,
                "path": "/mutate"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"]}]})
    };
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration", "metadata": {"name": WEBHOOK},
        "webhooks": [hook("vgpu.scheduler.io"), hook("gang.vgpu.scheduler.io")]})
}

fn certs(kubeconfig: &Path, extra: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-scheduler"))
        .arg("certs")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", NS])
        .args(extra)
        .env_remove("POD_NAMESPACE")
        .output()
        .expect("run vgpu-scheduler certs");
    eprintln!(
        "certs {extra:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ok(kubeconfig: &Path, extra: &[&str]) -> String {
    let out = certs(kubeconfig, extra);
    assert!(out.status.success(), "certs {extra:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

fn decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("standard base64")
}

fn secret(api: &FakeApiServer) -> Value {
    api.get("Secret", Some(NS), SECRET).expect("the Secret")
}

fn key(secret: &Value, k: &str) -> String {
    String::from_utf8(decode(
        secret["data"][k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k}")),
    ))
    .unwrap()
}

fn rv(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

fn webhook(api: &FakeApiServer) -> Value {
    api.get("MutatingWebhookConfiguration", None, WEBHOOK)
        .expect("the webhook configuration")
}

fn ca_bundles(config: &Value) -> Vec<String> {
    config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            String::from_utf8(decode(h["clientConfig"]["caBundle"].as_str().unwrap_or(""))).unwrap()
        })
        .collect()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(bundle_pem: &str) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(bundle_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    Arc::new(roots)
}

fn leaf(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// Whether `cert_pem` verifies as the server `host` against `bundle_pem`.
fn server_verifies(bundle_pem: &str, cert_pem: &str, host: &str) -> bool {
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(bundle_pem), provider())
        .build()
        .unwrap();
    verifier
        .verify_server_cert(
            &leaf(cert_pem),
            &[],
            &ServerName::try_from(host.to_string()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .is_ok()
}

fn client_verifies(bundle_pem: &str, cert_pem: &str) -> bool {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(bundle_pem), provider())
        .build()
        .unwrap();
    verifier
        .verify_client_cert(&leaf(cert_pem), &[], UnixTime::now())
        .is_ok()
}

fn count_certs(pem: &str) -> usize {
    pem.matches("-----BEGIN CERTIFICATE-----").count()
}

#[test]
fn creates_the_secret_patches_every_webhook_and_reruns_write_nothing() {
    let api = FakeApiServer::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.create(webhook_config());

    let out = ok(&kubeconfig, &[]);
    assert!(out.contains("created"), "{out}");
    let s = secret(&api);
    assert_eq!(s["type"], "kubernetes.io/tls");
    let ca = key(&s, "ca.crt");
    assert_eq!(count_certs(&ca), 1);
    let tls = key(&s, "tls.crt");
    assert!(key(&s, "tls.key").contains("PRIVATE KEY"));
    assert!(key(&s, "ca.key").contains("PRIVATE KEY"));
    for host in [
        "vgpu-scheduler",
        "vgpu-scheduler.vgpu-system",
        HOST,
        "vgpu-scheduler.vgpu-system.svc.cluster.local",
    ] {
        assert!(server_verifies(&ca, &tls, host), "{host}");
    }
    assert!(!server_verifies(&ca, &tls, "other.vgpu-system.svc"));
    let config = webhook(&api);
    assert_eq!(ca_bundles(&config), vec![ca.clone(), ca.clone()]);

    // Idempotent: nothing is written the second time.
    let before = api.resource_version();
    let out = ok(&kubeconfig, &[]);
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(api.resource_version(), before, "a rerun wrote something");
    assert_eq!(rv(&secret(&api)), rv(&s));
    assert_eq!(rv(&webhook(&api)), rv(&config));

    // A caBundle someone reset is put back, the Secret left alone.
    let mut reset = webhook(&api);
    reset["webhooks"][1]["clientConfig"]["caBundle"] = json!("");
    api.update(reset);
    let out = ok(&kubeconfig, &[]);
    assert!(out.contains("caBundle set on 1 webhook"), "{out}");
    assert_eq!(rv(&secret(&api)), rv(&s));
    assert_eq!(ca_bundles(&webhook(&api)), vec![ca.clone(), ca]);

    // Only the verbs the chart's certs RBAC grants, on the two objects it names
    // (a create cannot be limited to a name).
    let log = api.request_log();
    assert!(log.len() >= 8, "{log:?}");
    for (method, path, _) in log {
        let path = path.split('?').next().unwrap().to_string();
        let allowed = match method.as_str() {
            "GET" | "PUT" => [
                "/api/v1/namespaces/vgpu-system/secrets/vgpu-scheduler-tls",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vgpu-scheduler",
            ]
            .contains(&path.as_str())
                && !(method == "PUT" && path.contains("mutatingwebhook")),
            "POST" => path == "/api/v1/namespaces/vgpu-system/secrets",
            "PATCH" => path
                == "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vgpu-scheduler",
            _ => false,
        };
        assert!(allowed, "{method} {path} is not granted to the certs Job");
    }
}

#[test]
fn ca_rotation_keeps_the_old_ca_trusted_and_serves_a_new_certificate() {
    let api = FakeApiServer::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.create(webhook_config());
    ok(&kubeconfig, &[]);
    let old = secret(&api);
    let old_ca = key(&old, "ca.crt");
    let old_tls = key(&old, "tls.crt");

    let out = ok(&kubeconfig, &["--rotate-ca"]);
    assert!(out.contains("updated"), "{out}");
    let new = secret(&api);
    let bundle = key(&new, "ca.crt");
    assert_eq!(count_certs(&bundle), 2, "new CA plus the old one");
    assert!(
        bundle.ends_with(&old_ca),
        "the old CA is still in the bundle"
    );
    let new_tls = key(&new, "tls.crt");
    assert_ne!(new_tls, old_tls);
    // Pods still serving the old certificate and pods that reloaded the new one
    // both verify against what the API server now trusts.
    let trusted = &ca_bundles(&webhook(&api))[0];
    assert_eq!(trusted, &bundle);
    assert!(server_verifies(trusted, &new_tls, HOST));
    assert!(server_verifies(trusted, &old_tls, HOST));
    // The new certificate is not signed by the old CA.
    assert!(!server_verifies(&old_ca, &new_tls, HOST));

    // Serving-certificate rotation keeps the CA bundle as it is.
    ok(&kubeconfig, &["--rotate"]);
    let again = secret(&api);
    assert_eq!(key(&again, "ca.crt"), bundle);
    assert_ne!(key(&again, "tls.crt"), new_tls);
    assert!(server_verifies(&bundle, &key(&again, "tls.crt"), HOST));
    let before = api.resource_version();
    ok(&kubeconfig, &[]);
    assert_eq!(api.resource_version(), before);
}

#[test]
fn certificates_near_expiry_are_renewed_from_the_same_ca() {
    let api = FakeApiServer::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.create(webhook_config());
    ok(&kubeconfig, &["--cert-validity=1h"]);
    let first = secret(&api);
    // Within a 30-minute window: still good.
    let before = api.resource_version();
    ok(&kubeconfig, &["--renew-before=30m"]);
    assert_eq!(api.resource_version(), before);
    // Within a 2-hour window: renewed, same CA, webhook untouched.
    let webhook_rv = rv(&webhook(&api));
    let out = ok(&kubeconfig, &["--renew-before=2h"]);
    assert!(out.contains("renewal window"), "{out}");
    let second = secret(&api);
    assert_eq!(key(&second, "ca.crt"), key(&first, "ca.crt"));
    assert_ne!(key(&second, "tls.crt"), key(&first, "tls.crt"));
    assert_eq!(rv(&webhook(&api)), webhook_rv);
    // A CA near its end is replaced, the old one kept.
    ok(&kubeconfig, &["--ca-renew-before=36500d"]);
    assert_eq!(count_certs(&key(&secret(&api), "ca.crt")), 2);
}

#[test]
fn unreadable_secret_content_is_a_clear_error_and_rotate_ca_replaces_it() {
    let api = FakeApiServer::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.create(webhook_config());
    api.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NS},
        "data": {"ca.crt": "Z2FyYmFnZQ==", "tls.crt": "Z2FyYmFnZQ==", "tls.key": "Z2FyYmFnZQ=="}}));
    let before = api.resource_version();
    let out = certs(&kubeconfig, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Secret vgpu-system/vgpu-scheduler-tls"),
        "{err}"
    );
    assert!(err.contains("ca.crt"), "{err}");
    assert!(err.contains("--rotate-ca"), "{err}");
    assert_eq!(api.resource_version(), before, "nothing written on error");

    ok(&kubeconfig, &["--rotate-ca"]);
    let s = secret(&api);
    let ca = key(&s, "ca.crt");
    assert_eq!(count_certs(&ca), 1);
    assert!(server_verifies(&ca, &key(&s, "tls.crt"), HOST));
    assert_eq!(ca_bundles(&webhook(&api))[0], ca);
}

#[test]
fn missing_webhook_and_client_certificate() {
    let api = FakeApiServer::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let out = certs(&kubeconfig, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    // The pre-install run: Secret made, webhook not there yet.
    let out = ok(&kubeconfig, &["--allow-missing-webhook", "--client-cert"]);
    assert!(out.contains("not found"), "{out}");
    let s = secret(&api);
    let ca = key(&s, "ca.crt");
    assert!(client_verifies(&ca, &key(&s, "client.crt")));
    assert!(key(&s, "client.key").contains("PRIVATE KEY"));
    // The post-install run fills the caBundle, nothing else changes.
    api.create(webhook_config());
    let out = ok(&kubeconfig, &["--client-cert"]);
    assert!(
        out.contains("Secret vgpu-system/vgpu-scheduler-tls: unchanged"),
        "{out}"
    );
    assert_eq!(ca_bundles(&webhook(&api)), vec![ca.clone(), ca]);
    assert_eq!(rv(&secret(&api)), rv(&s));
}
