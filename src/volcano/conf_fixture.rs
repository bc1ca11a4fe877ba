//! The `volcano-scheduler.conf` most tests run: Volcano's usual first tier
//! (priority, gang) and a second tier of node plugins. Written once here so that
//! a test states only what it changes (its actions, its second tier); the
//! integration tests include this same file.

/// `actions` with a first tier of priority and gang, then a tier of `second`:
/// each plugin with its arguments (name, YAML value).
pub fn priority_gang_then(actions: &str, second: &[(&str, &[(&str, &str)])]) -> String {
    let mut text = format!(
        "actions: \"{actions}\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n"
    );
    for (plugin, arguments) in second {
        text.push_str(&format!("  - name: {plugin}\n"));
        if !arguments.is_empty() {
            text.push_str("    arguments:\n");
            for (key, value) in *arguments {
                text.push_str(&format!("      {key}: {value}\n"));
            }
        }
    }
    text
}
