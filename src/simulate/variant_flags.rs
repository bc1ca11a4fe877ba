//! A variant's FLAGS: split as a shell would (so a value can hold spaces in
//! quotes), and refused when a flag would do nothing in a replay. A replay
//! serves no HTTP, talks to no API server, elects no leader and records no
//! trace; a variant given such a flag would look different from another while
//! replaying exactly the same, and the report would compare two equal things
//! under two names.

/// `serve` flags a replay does not use, with what they are about.
const INERT: [(&str, &str); 33] = [
    ("--http-bind", "the server's listener"),
    ("--metrics-bind-address", "the metrics listener"),
    ("--legacy-metrics", "the metrics listener"),
    ("--cert-file", "the server's TLS"),
    ("--key-file", "the server's TLS"),
    ("--client-ca-file", "the server's TLS"),
    ("--self-signed-dir", "the server's TLS"),
    ("--self-signed-name", "the server's TLS"),
    ("--kubeconfig", "the API server connection"),
    ("--kube-qps", "the API server connection"),
    ("--kube-burst", "the API server connection"),
    ("--kube-timeout", "the API server connection"),
    ("--node-label-selector", "watching a live cluster"),
    ("--resync-period", "watching a live cluster"),
    ("--simulate-device-plugin", "watching a live cluster"),
    ("--node-metrics-interval", "watching a live cluster"),
    ("--leader-elect", "leader election"),
    ("--leader-elect-resource-name", "leader election"),
    ("--leader-elect-resource-namespace", "leader election"),
    ("--planner-follows-lease", "leader election"),
    ("--record-trace", "recording a trace"),
    ("--record-trace-verbatim", "recording a trace"),
    ("--max-request-body", "the server's request limits"),
    ("--max-admission-body", "the server's request limits"),
    (
        "--max-request-bodies-in-flight",
        "the server's request limits",
    ),
    (
        "--max-admission-bodies-in-flight",
        "the server's request limits",
    ),
    ("--max-connections", "the server's request limits"),
    (
        "--max-streams-per-connection",
        "the server's request limits",
    ),
    ("--request-timeout", "the server's request limits"),
    ("--worker-threads", "the server's threads"),
    ("--log-format", "logging"),
    ("--debug", "logging"),
    (
        "--cluster-file",
        "the cluster (every variant replays simulate's --cluster-file)",
    ),
];

/// Splits FLAGS into words as a POSIX shell would; refuses unbalanced quotes
/// and flags a replay does not use, naming the variant.
pub fn split(name: &str, flags: &str) -> Result<Vec<String>, String> {
    let words = shlex::split(flags).ok_or_else(|| {
        format!("--variant {name}: FLAGS {flags:?} has an unclosed quote or a trailing backslash")
    })?;
    for word in &words {
        let flag = word.split_once('=').map_or(word.as_str(), |(f, _)| f);
        let flag = flag.replace('_', "-");
        if let Some((_, about)) = INERT.iter().find(|(inert, _)| *inert == flag) {
            return Err(format!(
                "--variant {name}: {flag} does nothing in a replay (it is about {about}); leave it out"
            ));
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_value_stays_one_word() {
        let words = split("a", "--scheduler-config 'my conf.yaml' --gang-strict").unwrap();
        assert_eq!(
            words,
            ["--scheduler-config", "my conf.yaml", "--gang-strict"]
        );
    }

    #[test]
    fn an_unclosed_quote_is_refused() {
        let e = split("a", "--scheduler-config 'my conf.yaml").unwrap_err();
        assert!(
            e.contains("--variant a") && e.contains("unclosed quote"),
            "{e}"
        );
    }

    #[test]
    fn flags_that_do_nothing_in_a_replay_are_refused_by_name() {
        for (flags, flag) in [
            ("--http-bind=0.0.0.0:1", "--http-bind"),
            (
                "--node-scheduler-policy=spread --record-trace /tmp/t",
                "--record-trace",
            ),
            ("--kubeconfig k", "--kubeconfig"),
            ("--leader-elect", "--leader-elect"),
            ("--leader_elect=true", "--leader-elect"),
        ] {
            let e = split("b", flags).unwrap_err();
            assert!(
                e.contains(&format!("--variant b: {flag} does nothing in a replay")),
                "{flags}: {e}"
            );
        }
        assert!(split("b", "--node-scheduler-policy=spread --gang-strict").is_ok());
    }
}
