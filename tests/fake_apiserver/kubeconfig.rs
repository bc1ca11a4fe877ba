//! The kubeconfig a client under test is pointed at.

use std::path::{Path, PathBuf};

/// Kubeconfig text for `server` with a bearer `token`, context `fake`,
/// namespace `default`.
pub fn render(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
users:
- name: fake
  user:
    token: {token}
preferences: {{}}
"
    )
}

/// Writes `dir/kubeconfig` and returns its path.
pub fn write(dir: &Path, server: &str, token: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, render(server, token)).expect("write kubeconfig");
    path
}
