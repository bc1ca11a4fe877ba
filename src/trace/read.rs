//! Reading a whole trace file: every line, ordered by time, refusing any line that is
//! not a trace line (naming it), except a last line cut short, which a server
//! stopped in the middle of a write leaves behind and which is only warned
//! about.

use super::line::{LineError, TraceLine, is_trace_line};
use super::line_cap::OMITTED_ANNOTATIONS;

/// A trace as read.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Its lines, by time (file order among lines of one instant).
    pub lines: Vec<TraceLine>,
    /// What was skipped, for the user.
    pub warnings: Vec<String>,
}

/// Whether `text` is a trace rather than a workload of arrivals: its first
/// non-empty line is a trace line.
pub fn looks_like_trace(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .is_some_and(is_trace_line)
}

/// Reads a trace; errors name the line (counted from 1).
pub fn parse_trace(text: &str) -> Result<Trace, String> {
    let numbered: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let last = numbered.last().map(|(n, _)| *n);
    let mut trace = Trace::default();
    let omitted_field = format!("\"{OMITTED_ANNOTATIONS}\":");
    let mut capped = 0usize;
    for (number, text) in numbered {
        match TraceLine::from_json(text) {
            Ok(line) => {
                capped += usize::from(text.contains(&omitted_field));
                trace.lines.push(line);
            }
            Err(LineError::Syntax {
                cut_short: true, ..
            }) if Some(number) == last => trace.warnings.push(format!(
                "trace line {number} is cut short (the recording server stopped while writing it); it is left out"
            )),
            Err(e) => return Err(format!("trace line {number}: {e}")),
        }
    }
    if trace.lines.is_empty() {
        return Err("the trace holds no events".into());
    }
    if capped > 0 {
        trace.warnings.push(format!(
            "{capped} recorded object(s) lost annotations to the trace's line cap (named in their lines' {OMITTED_ANNOTATIONS})"
        ));
    }
    // Lines are written about in the order seen, but a file continued by
    // another process (or from an older server) may hold a bind before its
    // pod: order by time, keeping file order among lines of one instant.
    trace.lines.sort_by_key(|l| l.at);
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"{"at":"2025-06-15T15:06:40.000Z","pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml","uid":"u-1"},"spec":{"containers":[{"name":"main"}]}}}"#;
    const BOUND: &str =
        r#"{"at":"2025-06-15T15:06:41.000Z","bound":"ml/p","node":"n1","uid":"u-1"}"#;

    #[test]
    fn lines_are_read_in_order_and_blank_lines_skipped() {
        let trace = parse_trace(&format!("{POD}\n\n{BOUND}\n")).unwrap();
        assert_eq!(trace.lines.len(), 2);
        assert!(trace.warnings.is_empty());
        assert!(looks_like_trace(&format!("\n  \n{POD}\n")));
    }

    #[test]
    fn a_last_line_cut_short_is_left_out_with_a_warning() {
        let text = format!("{POD}\n{}", &BOUND[..30]);
        let trace = parse_trace(&text).unwrap();
        assert_eq!(trace.lines.len(), 1);
        assert_eq!(trace.warnings.len(), 1);
        assert!(trace.warnings[0].contains("line 2"), "{:?}", trace.warnings);
    }

    #[test]
    fn garbage_in_the_middle_is_refused_naming_its_line() {
        let text = format!("{POD}\n{}\n{BOUND}\n", &BOUND[..30]);
        let e = parse_trace(&text).unwrap_err();
        assert!(e.starts_with("trace line 2: not JSON"), "{e}");
        let e = parse_trace(&format!("{POD}\n\n{BOUND}\nnot json at all\n")).unwrap_err();
        assert!(e.starts_with("trace line 4: not JSON"), "{e}");
    }

    #[test]
    fn an_unknown_kind_is_refused_naming_its_line() {
        let text = format!(
            "{POD}\n{}\n",
            r#"{"at":"2025-06-15T15:06:41Z","moved":"ml/p"}"#
        );
        let e = parse_trace(&text).unwrap_err();
        assert!(e.contains("trace line 2: unknown kind of event"), "{e}");
        assert!(e.contains("pod, bound, gone, podGroup"), "{e}");
    }

    #[test]
    fn lines_are_ordered_by_time_keeping_file_order_within_an_instant() {
        let gone = r#"{"at":"2025-06-15T15:06:41.000Z","gone":"ml/p","uid":"u-1"}"#;
        let trace = parse_trace(&format!("{BOUND}\n{POD}\n{gone}\n")).unwrap();
        let kinds: Vec<&str> = trace
            .lines
            .iter()
            .map(|l| match &l.event {
                crate::trace::TraceEvent::Pod(_) => "pod",
                crate::trace::TraceEvent::Bound { .. } => "bound",
                crate::trace::TraceEvent::Gone { .. } => "gone",
                crate::trace::TraceEvent::PodGroup(_) => "podGroup",
            })
            .collect();
        assert_eq!(kinds, ["pod", "bound", "gone"]);
    }

    #[test]
    fn lines_that_lost_annotations_to_the_cap_are_warned_about() {
        let capped = POD.replacen(
            r#"{"at""#,
            r#"{"omittedAnnotations":["example.com/state"],"at""#,
            1,
        );
        let trace = parse_trace(&format!("{capped}\n{BOUND}\n")).unwrap();
        assert_eq!(trace.lines.len(), 2);
        assert_eq!(trace.warnings.len(), 1, "{:?}", trace.warnings);
        assert!(trace.warnings[0].starts_with("1 recorded object(s) lost annotations"));
    }

    #[test]
    fn an_empty_trace_is_refused() {
        assert!(parse_trace("\n\n").is_err());
    }
}
