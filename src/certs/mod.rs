//! `vgpu-scheduler certs`: the webhook's certificates without extra images.
//!
//! Keeps in one Secret (type `kubernetes.io/tls`):
//! - `ca.key`: the current CA's key;
//! - `ca.crt`: the CAs to trust, current first, then older ones kept until they
//!   expire (the overlap during a CA rotation);
//! - `tls.crt`/`tls.key`: the serving certificate for the Service's DNS names;
//! - `client.crt`/`client.key` (with `--client-cert`): kube-scheduler's client
//!   certificate for the extender verbs (`serve --client-ca-file` takes `ca.crt`);
//!
//! and sets `caBundle` of every webhook of the MutatingWebhookConfiguration to
//! `ca.crt`. API verbs: Secret get, create, update; MutatingWebhookConfiguration
//! get, patch. A run that finds everything valid writes nothing. Certificates are
//! renewed when they expire within `--renew-before`, the CA within
//! `--ca-renew-before`; a new CA is added to the bundle before anything it signed
//! is served, so webhook calls keep verifying while pods pick up the new files
//! (the server reloads them). Unreadable Secret content is an error that names the
//! key; `--rotate-ca` (or deleting the Secret) starts afresh.

pub mod pki;

use crate::config::CertsArgs;
use anyhow::{Context, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pki::{CertInfo, Leaf, Pair};
use std::collections::BTreeMap;

/// Secret keys.
pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CLIENT_CRT: &str = "client.crt";
pub const CLIENT_KEY: &str = "client.key";

/// What the certificates must be.
#[derive(Clone, Debug)]
pub struct Settings {
    pub ca_common_name: String,
    pub serving_names: Vec<String>,
    pub client_common_name: Option<String>,
    pub ca_validity: std::time::Duration,
    pub ca_renew_before: std::time::Duration,
    pub cert_validity: std::time::Duration,
    pub client_cert_validity: std::time::Duration,
    pub renew_before: std::time::Duration,
    pub rotate: bool,
    pub rotate_ca: bool,
}

/// The serving certificate's names for Service `svc` in namespace `ns`.
pub fn service_names(svc: &str, ns: &str) -> Vec<String> {
    vec![
        svc.to_string(),
        format!("{svc}.{ns}"),
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.cluster.local"),
    ]
}

impl Settings {
    pub fn from_args(args: &CertsArgs) -> Self {
        let mut names = service_names(&args.service_name, &args.namespace);
        for n in &args.extra_names {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        Settings {
            ca_common_name: format!("{}-ca", args.service_name),
            serving_names: names,
            client_common_name: args.client_cert.then(|| args.client_cert_name.clone()),
            ca_validity: args.ca_validity,
            ca_renew_before: args.ca_renew_before,
            cert_validity: args.cert_validity,
            client_cert_validity: args.client_cert_validity,
            renew_before: args.renew_before,
            rotate: args.rotate,
            rotate_ca: args.rotate_ca,
        }
    }
}

/// The Secret's content as text, by key.
pub type Material = BTreeMap<String, String>;

/// The decision of one run: the content the Secret must have and why it changed.
#[derive(Debug)]
pub struct Plan {
    pub material: Material,
    /// Human-readable reasons for a change; empty when nothing changes.
    pub reasons: Vec<String>,
}

fn text<'a>(m: &'a Material, key: &str) -> anyhow::Result<&'a str> {
    m.get(key)
        .map(String::as_str)
        .with_context(|| format!("key {key} is missing"))
}

/// The existing CA material: current CA (with key) and the whole bundle.
struct Existing {
    ca: Pair,
    bundle: Vec<CertInfo>,
}

fn read_ca(m: &Material) -> anyhow::Result<Existing> {
    let bundle = pki::parse_bundle(text(m, CA_CRT)?).with_context(|| format!("key {CA_CRT}"))?;
    let key = text(m, CA_KEY)?;
    let current = &bundle[0];
    if !current.is_ca {
        bail!("key {CA_CRT}: the first certificate is not a CA");
    }
    if !pki::key_matches(current, key) {
        bail!("key {CA_KEY} is not the key of the first certificate in {CA_CRT}");
    }
    Ok(Existing {
        ca: Pair {
            cert_pem: current.pem.clone(),
            key_pem: key.to_string(),
        },
        bundle,
    })
}

/// Whether the leaf in `m[crt]`/`m[key]` is still good: readable, signed by `ca`,
/// its key, the wanted names / common name, not expiring within `renew_before`.
fn leaf_ok(
    m: &Material,
    crt: &str,
    key: &str,
    ca: &CertInfo,
    leaf: &Leaf,
    renew_before: std::time::Duration,
) -> anyhow::Result<Option<String>> {
    let info = pki::parse_one(text(m, crt)?).with_context(|| format!("key {crt}"))?;
    let key_pem = text(m, key)?;
    if !pki::key_matches(&info, key_pem) {
        bail!("key {key} is not the key of {crt}");
    }
    if !pki::signed_by(&info, ca) {
        return Ok(Some(format!("{crt} is not signed by the current CA")));
    }
    if pki::expires_within(info.not_after, renew_before) {
        return Ok(Some(format!("{crt} expires within the renewal window")));
    }
    match leaf {
        Leaf::Serving(names) => {
            let mut have = info.names.clone();
            let mut want = names.clone();
            have.sort();
            want.sort();
            if have != want {
                return Ok(Some(format!("{crt} names {have:?}, wanted {want:?}")));
            }
        }
        Leaf::Client(cn) => {
            if &info.common_name != cn {
                return Ok(Some(format!(
                    "{crt} is for {:?}, wanted {cn:?}",
                    info.common_name
                )));
            }
        }
    }
    Ok(None)
}

/// Decides the Secret's content from what it holds now (None: no Secret).
pub fn plan(existing: Option<&Material>, s: &Settings) -> anyhow::Result<Plan> {
    let mut reasons = Vec::new();
    let parsed = match existing {
        None => {
            reasons.push("no Secret yet".to_string());
            None
        }
        Some(m) => match read_ca(m) {
            Ok(e) => Some(e),
            Err(e) if s.rotate_ca => {
                reasons.push(format!("unreadable CA replaced: {e:#}"));
                None
            }
            Err(e) => {
                return Err(e.context(
                    "the Secret does not hold a usable CA; delete it or run with --rotate-ca to replace its content",
                ));
            }
        },
    };
    // The CA to sign with and the bundle to trust.
    let (ca, bundle, new_ca) = match parsed {
        Some(e)
            if !s.rotate_ca && !pki::expires_within(e.bundle[0].not_after, s.ca_renew_before) =>
        {
            (e.ca, e.bundle, false)
        }
        other => {
            if other.is_some() {
                reasons.push(if s.rotate_ca {
                    "CA rotation requested".to_string()
                } else {
                    "the CA expires within its renewal window".to_string()
                });
            }
            let ca = pki::new_ca(&s.ca_common_name, s.ca_validity)?;
            let mut bundle = vec![pki::parse_one(&ca.cert_pem)?];
            // The old CAs stay trusted until they expire.
            if let Some(e) = other {
                bundle.extend(e.bundle);
            }
            (ca, bundle, true)
        }
    };
    let bundle: Vec<CertInfo> = bundle
        .into_iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || !pki::expires_within(c.not_after, std::time::Duration::ZERO))
        .map(|(_, c)| c)
        .collect();
    let ca_info = bundle[0].clone();
    let bundle_pem: String = bundle.iter().map(|c| c.pem.as_str()).collect();

    let mut material = Material::new();
    material.insert(CA_CRT.into(), bundle_pem);
    material.insert(CA_KEY.into(), ca.key_pem.clone());

    let mut leaves = vec![(TLS_CRT, TLS_KEY, Leaf::Serving(s.serving_names.clone()))];
    if let Some(cn) = &s.client_common_name {
        leaves.push((CLIENT_CRT, CLIENT_KEY, Leaf::Client(cn.clone())));
    }
    for (crt, key, leaf) in leaves {
        let why = match existing {
            _ if new_ca => Some(format!("{crt} issued by the new CA")),
            _ if s.rotate => Some(format!("{crt} rotation requested")),
            None => Some(format!("{crt} issued")),
            Some(m) if !m.contains_key(crt) => Some(format!("{crt} issued")),
            Some(m) => leaf_ok(m, crt, key, &ca_info, &leaf, s.renew_before).with_context(
                || "the Secret holds an unusable certificate; delete it or run with --rotate to replace it",
            )?,
        };
        match why {
            None => {
                let m = existing.expect("checked above");
                material.insert(crt.into(), m[crt].clone());
                material.insert(key.into(), m[key].clone());
            }
            Some(why) => {
                reasons.push(why);
                let validity = match leaf {
                    Leaf::Serving(_) => s.cert_validity,
                    Leaf::Client(_) => s.client_cert_validity,
                };
                let pair = pki::issue(&ca, &leaf, validity)?;
                material.insert(crt.into(), pair.cert_pem);
                material.insert(key.into(), pair.key_pem);
            }
        }
    }
    // A client pair no longer asked for is kept (kube-scheduler may still use it).
    if s.client_common_name.is_none()
        && let Some(m) = existing
        && !new_ca
    {
        for k in [CLIENT_CRT, CLIENT_KEY] {
            if let Some(v) = m.get(k) {
                material.insert(k.into(), v.clone());
            }
        }
    }
    if existing.is_some_and(|m| m[CA_CRT.to_string().as_str()] != material[CA_CRT])
        && !new_ca
        && reasons.is_empty()
    {
        reasons.push("expired CAs dropped from ca.crt".into());
    }
    if existing == Some(&material) {
        reasons.clear();
    }
    Ok(Plan { material, reasons })
}

fn material_of(secret: &Secret) -> anyhow::Result<Material> {
    let mut m = Material::new();
    for (k, v) in secret.data.iter().flatten() {
        let text = String::from_utf8(v.0.clone())
            .with_context(|| format!("key {k} of the Secret is not text"))?;
        m.insert(k.clone(), text);
    }
    Ok(m)
}

fn secret_data(m: &Material) -> BTreeMap<String, ByteString> {
    m.iter()
        .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// Runs `certs`: brings the Secret and the webhook's caBundle up to date.
pub async fn run(args: CertsArgs) -> anyhow::Result<()> {
    crate::server::install_crypto_provider();
    let client = crate::run::kube_client(
        args.kubeconfig.as_deref(),
        "no in-cluster config and no usable kubeconfig",
    )
    .await?;
    let settings = Settings::from_args(&args);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
    let what = format!("Secret {}/{}", args.namespace, args.secret_name);
    let current = secrets
        .get_opt(&args.secret_name)
        .await
        .with_context(|| format!("read {what}"))?;
    let existing = current
        .as_ref()
        .map(material_of)
        .transpose()
        .with_context(|| what.clone())?;
    let plan = plan(existing.as_ref(), &settings).with_context(|| what.clone())?;
    match current {
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(args.secret_name.clone()),
                    namespace: Some(args.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_string(),
                        "vgpu-scheduler-certs".to_string(),
                    )])),
                    ..ObjectMeta::default()
                },
                type_: Some("kubernetes.io/tls".into()),
                data: Some(secret_data(&plan.material)),
                ..Secret::default()
            };
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .with_context(|| format!("create {what}"))?;
            println!("{what}: created ({})", plan.reasons.join("; "));
        }
        Some(mut secret) if !plan.reasons.is_empty() => {
            // The read resourceVersion makes a concurrent writer's update a conflict.
            secret.data = Some(secret_data(&plan.material));
            secrets
                .replace(&args.secret_name, &PostParams::default(), &secret)
                .await
                .with_context(|| format!("update {what}"))?;
            println!("{what}: updated ({})", plan.reasons.join("; "));
        }
        Some(_) => println!("{what}: unchanged"),
    }
    if args.webhook_name.is_empty() {
        return Ok(());
    }
    let bundle = plan.material[CA_CRT].as_bytes().to_vec();
    patch_webhook(client, &args, bundle).await
}

async fn patch_webhook(
    client: kube::Client,
    args: &CertsArgs,
    bundle: Vec<u8>,
) -> anyhow::Result<()> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let what = format!("MutatingWebhookConfiguration {}", args.webhook_name);
    let Some(mut config) = api
        .get_opt(&args.webhook_name)
        .await
        .with_context(|| format!("read {what}"))?
    else {
        if args.allow_missing_webhook {
            println!("{what}: not found, caBundle left for a later run");
            return Ok(());
        }
        bail!("{what} not found (pass --allow-missing-webhook when it is created later)");
    };
    let mut changed = 0;
    for hook in config.webhooks.iter_mut().flatten() {
        let want = Some(ByteString(bundle.clone()));
        if hook.client_config.ca_bundle != want {
            hook.client_config.ca_bundle = want;
            changed += 1;
        }
    }
    if changed == 0 {
        println!("{what}: caBundle unchanged");
        return Ok(());
    }
    // A merge patch of the whole list, with the read resourceVersion as precondition:
    // a concurrent change to the webhooks is a conflict, not overwritten.
    let body = serde_json::json!({
        "metadata": {"resourceVersion": config.metadata.resource_version},
        "webhooks": config.webhooks,
    });
    api.patch(
        &args.webhook_name,
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await
    .with_context(|| format!("patch {what}"))?;
    println!("{what}: caBundle set on {changed} webhook(s)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> Settings {
        Settings {
            ca_common_name: "t-ca".into(),
            serving_names: service_names("svc", "ns"),
            client_common_name: None,
            ca_validity: Duration::from_secs(3650 * 86400),
            ca_renew_before: Duration::from_secs(365 * 86400),
            cert_validity: Duration::from_secs(365 * 86400),
            client_cert_validity: Duration::from_secs(3650 * 86400),
            renew_before: Duration::from_secs(30 * 86400),
            rotate: false,
            rotate_ca: false,
        }
    }

    #[test]
    fn fresh_then_idempotent_then_rotations() {
        let s = settings();
        let first = plan(None, &s).unwrap();
        assert!(!first.reasons.is_empty());
        let ca = pki::parse_one(&first.material[CA_CRT]).unwrap();
        let tls = pki::parse_one(&first.material[TLS_CRT]).unwrap();
        assert!(ca.is_ca && !tls.is_ca);
        assert!(pki::signed_by(&tls, &ca));
        assert!(pki::key_matches(&tls, &first.material[TLS_KEY]));
        assert_eq!(tls.names.len(), 4);

        let again = plan(Some(&first.material), &s).unwrap();
        assert!(again.reasons.is_empty(), "{:?}", again.reasons);
        assert_eq!(again.material, first.material);

        let rotated = plan(
            Some(&first.material),
            &Settings {
                rotate: true,
                ..s.clone()
            },
        )
        .unwrap();
        assert_eq!(rotated.material[CA_CRT], first.material[CA_CRT]);
        assert_ne!(rotated.material[TLS_CRT], first.material[TLS_CRT]);

        let new_ca = plan(
            Some(&first.material),
            &Settings {
                rotate_ca: true,
                ..s.clone()
            },
        )
        .unwrap();
        let bundle = pki::parse_bundle(&new_ca.material[CA_CRT]).unwrap();
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle[1].der, ca.der, "the old CA stays trusted");
        let tls2 = pki::parse_one(&new_ca.material[TLS_CRT]).unwrap();
        assert!(pki::signed_by(&tls2, &bundle[0]));

        // A renamed Service gets a new serving certificate from the same CA.
        let renamed = Settings {
            serving_names: service_names("other", "ns"),
            ..s.clone()
        };
        let p = plan(Some(&first.material), &renamed).unwrap();
        assert_eq!(p.material[CA_CRT], first.material[CA_CRT]);
        assert!(pki::parse_one(&p.material[TLS_CRT]).unwrap().names[0] == "other");
    }

    #[test]
    fn garbage_is_an_error_unless_the_ca_is_rotated() {
        let s = settings();
        let mut m = plan(None, &s).unwrap().material;
        m.insert(CA_CRT.into(), "garbage".into());
        let err = plan(Some(&m), &s).unwrap_err();
        assert!(format!("{err:#}").contains("ca.crt"), "{err:#}");
        let p = plan(
            Some(&m),
            &Settings {
                rotate_ca: true,
                ..s
            },
        )
        .unwrap();
        assert_eq!(pki::parse_bundle(&p.material[CA_CRT]).unwrap().len(), 1);
    }

    #[test]
    fn client_certificate_is_issued_on_request() {
        let s = Settings {
            client_common_name: Some("kube-scheduler".into()),
            ..settings()
        };
        let p = plan(None, &s).unwrap();
        let client = pki::parse_one(&p.material[CLIENT_CRT]).unwrap();
        assert_eq!(client.common_name, "kube-scheduler");
        let again = plan(Some(&p.material), &s).unwrap();
        assert!(again.reasons.is_empty());
    }
}
