//! JSON log lines with U+0085, U+2028 and U+2029 escaped.
//!
//! JSON allows these three characters raw inside strings, and the JSON formatter
//! writes them so, but many log pipelines and JavaScript-based viewers treat them as
//! line breaks: a pod name or annotation that carries one (clients choose those)
//! would split a log line in two, and the second half could pass for a line of its
//! own. They can only occur inside JSON strings, where `\uXXXX` means the same
//! character, so every line is rewritten on its way out.

use std::borrow::Cow;
use std::io::Write;
use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

/// The UTF-8 encodings of the characters escaped, and their JSON escapes.
const SEPARATORS: [(&[u8], &[u8]); 3] = [
    ("\u{85}".as_bytes(), br"\u0085"),
    ("\u{2028}".as_bytes(), br"\u2028"),
    ("\u{2029}".as_bytes(), br"\u2029"),
];

/// `line` with every U+0085, U+2028 and U+2029 replaced by its `\uXXXX` escape;
/// borrowed when there is none (the usual case).
pub fn escape_line_separators(line: &[u8]) -> Cow<'_, [u8]> {
    // Every escaped character starts with 0xC2 or 0xE2; most lines have neither.
    if !line.iter().any(|b| matches!(b, 0xC2 | 0xE2)) {
        return Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len() + 16);
    let mut rest = line;
    'scan: while let Some((&first, tail)) = rest.split_first() {
        for (raw, escaped) in SEPARATORS {
            if rest.starts_with(raw) {
                out.extend_from_slice(escaped);
                rest = &rest[raw.len()..];
                continue 'scan;
            }
        }
        out.push(first);
        rest = tail;
    }
    Cow::Owned(out)
}

/// A [`MakeWriter`] whose writers escape the line separators of what they write.
/// The fmt layer writes each event as one buffer, so no character is split
/// between two writes.
#[derive(Clone)]
pub struct EscapeLineSeparators<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapeLineSeparators<M> {
    type Writer = Escaping<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Escaping(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        Escaping(self.0.make_writer_for(meta))
    }
}

/// A writer of [`EscapeLineSeparators`].
pub struct Escaping<W>(W);

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&escape_line_separators(bytes))?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_writer::tests::Captured;

    #[test]
    fn a_json_log_line_keeps_no_raw_line_separator_and_means_the_same() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(EscapeLineSeparators(move || writer.clone()))
            .finish();
        let forged = "a\u{2028}b\u{2029}c\u{85}d é ∞";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(pod = forged, "filtered");
        });
        let text = String::from_utf8(out.0.lock().clone()).expect("UTF-8");
        for raw in ['\u{2028}', '\u{2029}', '\u{85}'] {
            assert!(!text.contains(raw), "{raw:?} left raw in {text}");
        }
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(line["fields"]["pod"], forged, "{line}");
    }

    #[test]
    fn lines_without_separators_are_passed_through_untouched() {
        assert!(matches!(
            escape_line_separators("plain é".as_bytes()),
            Cow::Borrowed(_)
        ));
    }
}
