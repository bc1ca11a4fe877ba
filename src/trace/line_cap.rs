//! Every trace line fits a cap. Whoever can send `/filter` a pod decides how
//! large it is, and the trace would otherwise grow by as much as they send; a
//! pod's bulk is almost always its annotations (other tools' state, applied
//! configurations), which placement does not need. So a line over the cap loses
//! its largest annotations until it fits, and says which it lost
//! (`omittedAnnotations`); one that does not fit even without any annotation is
//! not written at all.

use super::line::TraceLine;
use serde_json::{Map, Value};

/// The field of a line naming the annotations left out to fit the cap.
pub const OMITTED_ANNOTATIONS: &str = "omittedAnnotations";

/// Names listed in [`OMITTED_ANNOTATIONS`] at most (the rest are counted).
const NAMES_LISTED: usize = 32;

/// Longest annotation name listed (the longest a Kubernetes name may be).
const NAME_LISTED_BYTES: usize = 253;

/// `line` as text ending in a newline, at most `cap` bytes; `None` when even
/// without its annotations it would be longer.
pub fn encode_capped(line: &TraceLine, cap: usize) -> Option<String> {
    let mut value = line.to_value().ok()?;
    let whole = with_newline(&value)?;
    if whole.len() <= cap {
        return Some(whole);
    }
    let annotations = annotations_mut(&mut value)?;
    let mut over = whole.len() - cap;
    let mut by_size: Vec<(usize, String)> = annotations
        .iter()
        .map(|(k, v)| (entry_bytes(k, v), k.clone()))
        .collect();
    // Largest first; ties by name, so the same pod loses the same annotations.
    by_size.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut omitted = Vec::new();
    for (bytes, name) in by_size {
        annotations.remove(&name);
        omitted.push(name);
        over = over.saturating_sub(bytes);
        if over == 0 {
            break;
        }
    }
    if let Some(text) = marked(&mut value, &omitted).filter(|t| t.len() <= cap) {
        return Some(text);
    }
    // The names listed, or escaping the estimate missed, still do not fit.
    let annotations = annotations_mut(&mut value)?;
    omitted.extend(annotations.keys().cloned());
    annotations.clear();
    marked(&mut value, &omitted).filter(|t| t.len() <= cap)
}

/// The annotations of the pod or PodGroup a line holds.
fn annotations_mut(line: &mut Value) -> Option<&mut Map<String, Value>> {
    let object = match line.get("pod") {
        Some(_) => line.get_mut("pod"),
        None => line.get_mut("podGroup"),
    }?;
    object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
}

/// What one annotation adds to a line: its name and value, quoted and escaped,
/// with the colon and comma around them.
fn entry_bytes(name: &str, value: &Value) -> usize {
    let quoted = |v: &Value| serde_json::to_string(v).map_or(0, |t| t.len());
    quoted(&Value::String(name.to_string())) + quoted(value) + 2
}

/// The line with the omitted annotations named, as text with its newline.
fn marked(line: &mut Value, omitted: &[String]) -> Option<String> {
    let mut names: Vec<Value> = omitted
        .iter()
        .take(NAMES_LISTED)
        .map(|n| Value::String(cut(n, NAME_LISTED_BYTES).to_string()))
        .collect();
    if omitted.len() > NAMES_LISTED {
        names.push(Value::String(format!(
            "and {} more",
            omitted.len() - NAMES_LISTED
        )));
    }
    line.as_object_mut()?
        .insert(OMITTED_ANNOTATIONS.to_string(), Value::Array(names));
    with_newline(line)
}

fn with_newline(value: &Value) -> Option<String> {
    let mut text = serde_json::to_string(value).ok()?;
    text.push('\n');
    Some(text)
}

/// The longest start of `text` of at most `bytes` bytes that ends between characters.
fn cut(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::line::TraceEvent;
    use chrono::DateTime;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn line(annotations: Value, args: Vec<String>) -> TraceLine {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "u-1",
                         "annotations": annotations},
            "spec": {"containers": [{"name": "main", "args": args}]}
        }))
        .unwrap();
        TraceLine {
            at: DateTime::from_timestamp(1_750_000_000, 0).unwrap(),
            event: TraceEvent::Pod(Box::new(pod)),
        }
    }

    fn read(text: &str) -> Value {
        assert!(text.ends_with('\n'));
        serde_json::from_str(text.trim_end()).unwrap()
    }

    #[test]
    fn a_line_within_the_cap_is_written_whole() {
        let l = line(json!({"a": "x".repeat(100)}), vec![]);
        let text = encode_capped(&l, 4096).unwrap();
        assert_eq!(text, format!("{}\n", l.to_json().unwrap()));
    }

    #[test]
    fn the_largest_annotations_go_until_the_line_fits_and_are_named() {
        let l = line(
            json!({"big": "x".repeat(1 << 20), "bigger": "\"".repeat(1 << 20),
                   "nvidia.com/use-gputype": "H100"}),
            vec![],
        );
        let text = encode_capped(&l, 64 * 1024).unwrap();
        assert!(text.len() <= 64 * 1024, "{}", text.len());
        let value = read(&text);
        assert_eq!(
            value["pod"]["metadata"]["annotations"],
            json!({"nvidia.com/use-gputype": "H100"})
        );
        assert_eq!(value[OMITTED_ANNOTATIONS], json!(["bigger", "big"]));
        // What is left still reads as a trace line.
        assert!(TraceLine::from_json(text.trim_end()).is_ok());
    }

    #[test]
    fn many_huge_names_are_listed_cut_and_counted() {
        let annotations: Map<String, Value> = (0..40)
            .map(|i| (format!("{i:02}{}", "n".repeat(5000)), json!("v")))
            .collect();
        let text = encode_capped(&line(Value::Object(annotations), vec![]), 16 * 1024).unwrap();
        assert!(text.len() <= 16 * 1024);
        let value = read(&text);
        let names = value[OMITTED_ANNOTATIONS].as_array().unwrap();
        assert_eq!(names.len(), NAMES_LISTED + 1);
        assert!(
            names[..NAMES_LISTED]
                .iter()
                .all(|n| n.as_str().unwrap().len() == NAME_LISTED_BYTES)
        );
        assert_eq!(names[NAMES_LISTED], "and 8 more");
    }

    #[test]
    fn a_line_too_long_without_annotations_is_not_written() {
        let l = line(json!({"a": "b"}), vec!["x".repeat(100_000)]);
        assert_eq!(encode_capped(&l, 64 * 1024), None);
    }
}
