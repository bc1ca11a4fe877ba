//! Text kube-scheduler runs through Go's `Sprintf`.
//!
//! kube-scheduler writes the reasons of `FailedNodes` and
//! `FailedAndUnresolvableNodes`, and the `Error` of a `/filter` or `/bind` answer,
//! into the pod's `FailedScheduling` event with the message as the *format*
//! string (`EventRecorder.Eventf(..., msg)`). A `%` there is read as a verb:
//! "above the 80% threshold" shows in `kubectl describe pod` as
//! "above the 80%!t(MISSING)hreshold". Our own words never carry a `%`, but a
//! reason may echo user data (a queue or gang name read from a pod annotation),
//! so every such field is made safe where it is serialized: a `%` becomes the
//! fullwidth sign `％`, which Go prints as it is and a reader still recognises.

use serde::Serializer;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What a `%` becomes: Go's `fmt` only treats the ASCII sign as a verb.
pub const PERCENT_STAND_IN: char = '％';

/// The text with every `%` replaced by [`PERCENT_STAND_IN`], borrowed when there
/// is none (the usual case: no copy on the hot path).
pub fn without_format_verbs(text: &str) -> Cow<'_, str> {
    if text.contains('%') {
        Cow::Owned(text.replace('%', &PERCENT_STAND_IN.to_string()))
    } else {
        Cow::Borrowed(text)
    }
}

/// `serialize_with` for a message kube-scheduler formats.
pub fn serialize_text<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&without_format_verbs(text))
}

/// `serialize_with` for an optional message kube-scheduler formats (or that
/// repeats such a message, as `/debug/queues` does).
pub fn serialize_optional_text<S: Serializer>(
    text: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match text {
        Some(text) => serializer.serialize_some(&without_format_verbs(text)),
        None => serializer.serialize_none(),
    }
}

/// `serialize_with` for node name → reason.
pub fn serialize_reasons<S: Serializer>(
    reasons: &BTreeMap<String, String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(
        reasons
            .iter()
            .map(|(node, reason)| (node, without_format_verbs(reason))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percent_sign_becomes_the_fullwidth_sign_and_other_text_is_kept() {
        assert_eq!(
            without_format_verbs("queue \"a%tb\" does not exist (100%)"),
            "queue \"a％tb\" does not exist (100％)"
        );
        assert!(matches!(
            without_format_verbs("80 percent"),
            Cow::Borrowed("80 percent")
        ));
    }
}
