//! How field values are written into text log lines.
//!
//! Log fields carry what clients send: pod names and annotations from a `/filter`
//! body, messages that quote them. Written as they are, a value holding a newline
//! starts a line of its own, and anyone who can reach `/filter` could write a
//! line that reads like one of ours (`ERROR ... node lock lost`). So every value
//! is escaped: control characters (newlines, carriage returns, terminal escape
//! sequences) and Unicode line separators are written as escapes, and a field
//! value that holds a space, a quote or `=` is quoted, so it cannot pose as
//! another `key=value` pair either. The JSON format escapes by itself.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

/// The field formatter of the text log (`fmt().fmt_fields(EscapedFields)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapedFields;

impl<'writer> MakeVisitor<Writer<'writer>> for EscapedFields {
    type Visitor = EscapedVisitor<'writer>;

    fn make_visitor(&self, target: Writer<'writer>) -> Self::Visitor {
        EscapedVisitor {
            writer: target,
            separate: false,
            result: Ok(()),
        }
    }
}

/// Writes one event's or span's fields, escaped.
pub struct EscapedVisitor<'writer> {
    writer: Writer<'writer>,
    /// Whether a field was written already (fields are separated by a space).
    separate: bool,
    result: fmt::Result,
}

impl EscapedVisitor<'_> {
    fn write(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        // `log` crate metadata carried as fields; the formatter shows it elsewhere.
        if name.starts_with("log.") {
            return;
        }
        self.result = self.write_field(name, value);
        self.separate = true;
    }

    fn write_field(&mut self, name: &str, value: &str) -> fmt::Result {
        if self.separate {
            self.writer.write_char(' ')?;
        }
        if name == "message" {
            return write_escaped(&mut self.writer, value);
        }
        write!(self.writer, "{}=", name.trim_start_matches("r#"))?;
        if needs_quotes(value) {
            self.writer.write_char('"')?;
            write_escaped(&mut self.writer, value)?;
            self.writer.write_char('"')
        } else {
            write_escaped(&mut self.writer, value)
        }
    }
}

impl Visit for EscapedVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.write(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        self.write(field, &text);
    }
}

impl VisitOutput<fmt::Result> for EscapedVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for EscapedVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// Whether a value must be quoted to stay one `key=value` pair.
fn needs_quotes(value: &str) -> bool {
    value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=' || must_escape(c))
}

/// Characters that would end a line, rewrite the terminal, or hide text.
fn must_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
}

/// Writes `value` with line breaks, control characters and (inside quotes) the
/// quote and the backslash escaped.
pub fn write_escaped(out: &mut impl fmt::Write, value: &str) -> fmt::Result {
    for c in value.chars() {
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            c if must_escape(c) => write!(out, "\\u{{{:x}}}", u32::from(c))?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_writer::tests::Captured;

    fn logged(f: impl FnOnce()) -> String {
        let out = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(out.clone())
            .fmt_fields(EscapedFields)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        out.text()
    }

    #[test]
    fn a_value_with_a_newline_stays_on_its_line() {
        let forged = "team-a/x\n2026-01-01T00:00:00Z ERROR vgpu_scheduler: node lock lost";
        let text = logged(|| {
            let span = tracing::info_span!("filter", pod = %forged);
            let _entered = span.enter();
            tracing::info!(pod = %forged, reason = forged, "reserved GPUs for {forged}");
        });
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            !text.contains("\nERROR") && !text.contains("\n2026"),
            "{text}"
        );
        assert!(
            text.contains(r#"pod="team-a/x\n2026-01-01T00:00:00Z ERROR"#),
            "{text}"
        );
    }

    #[test]
    fn values_cannot_pose_as_other_fields_or_rewrite_the_terminal() {
        let text = logged(|| {
            tracing::warn!(name = "a level=ERROR", code = "\u{1b}[2K\r", "ok");
        });
        assert!(text.contains(r#"name="a level=ERROR""#), "{text}");
        assert!(text.contains(r#"code="\u{1b}[2K\r""#), "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text}");
        let plain = logged(|| tracing::info!(node = "gpu-a", count = 3, "fine"));
        assert!(plain.contains("fine node=gpu-a count=3"), "{plain}");
    }
}
