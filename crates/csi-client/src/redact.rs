//! Keeping secrets out of logs.
//!
//! Every CSI message with a `csi_secret` field gets a generated `Debug` (see
//! build.rs) that prints [`Stripped`] in place of the secret map, so `{:?}` and
//! `tracing` fields are safe by construction. The marker text is the one
//! csi-lib-utils' protosanitizer prints, so log scrapers keep working.

use std::fmt;

/// The text printed in place of a secret value.
pub const STRIPPED: &str = "***stripped***";

/// Formats as `***stripped***`.
#[derive(Clone, Copy)]
pub struct Stripped;

impl fmt::Debug for Stripped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(STRIPPED)
    }
}

/// Caps a rendered message at `max` characters, as upstream's
/// `SetMaxGRPCLogLength` does, so one huge ListVolumes reply cannot flood the log.
pub fn capped(rendered: String, max: usize) -> String {
    if max == 0 || rendered.chars().count() <= max {
        return rendered;
    }
    let mut out: String = rendered.chars().take(max).collect();
    out.push_str(&format!(" [response body too large, log capped to {max} chars]"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    #[test]
    fn spec_marks_twenty_two_secret_fields() {
        assert_eq!(proto::SECRET_FIELDS.len(), 22, "{:?}", proto::SECRET_FIELDS);
        // Spot-check a few of the spec's csi_secret fields by name, the three of v1.13's health requests among them.
        for expected in [
            ("ControllerListVolumeHealthRequest", "secrets"),
            ("ControllerGetVolumeHealthRequest", "secrets"),
            ("NodeGetStorageHealthRequest", "secrets"),
            ("CreateVolumeRequest", "secrets"),
            ("ControllerModifyVolumeRequest", "secrets"),
            ("NodeExpandVolumeRequest", "secrets"),
            ("GetMetadataDeltaRequest", "secrets"),
            ("CreateVolumeGroupSnapshotRequest", "secrets"),
        ] {
            assert!(proto::SECRET_FIELDS.contains(&expected), "{expected:?} missing");
        }
    }

    #[test]
    fn no_secret_survives_debug_formatting() {
        let rendered = proto::debug_with_secret("password", "hunter2-very-secret");
        assert_eq!(rendered.len(), 22);
        let messages: Vec<&str> = rendered.iter().map(|(message, _)| *message).collect();
        for health in
            ["ControllerListVolumeHealthRequest", "ControllerGetVolumeHealthRequest", "NodeGetStorageHealthRequest"]
        {
            assert!(messages.contains(&health), "{health} is not checked: {messages:?}");
        }
        for (message, text) in rendered {
            assert!(!text.contains("hunter2-very-secret"), "{message} leaked: {text}");
            assert!(!text.contains("password"), "{message} leaked the key: {text}");
            assert!(text.contains(STRIPPED), "{message} lacks the marker: {text}");
        }
    }

    #[test]
    fn non_secret_fields_still_print() {
        let request = proto::CreateVolumeRequest {
            name: "pvc-123".into(),
            parameters: [("type".to_string(), "fast".to_string())].into(),
            secrets: [("token".to_string(), "abc".to_string())].into(),
            ..Default::default()
        };
        let text = format!("{request:?}");
        assert!(text.contains("pvc-123") && text.contains("fast"), "{text}");
        assert!(!text.contains("abc"), "{text}");
    }

    #[test]
    fn capping_marks_the_cut() {
        let table = [
            ("short", 10, "short".to_string()),
            ("0123456789abc", 10, "0123456789 [response body too large, log capped to 10 chars]".to_string()),
            ("anything", 0, "anything".to_string()),
        ];
        for (input, max, want) in table {
            assert_eq!(capped(input.to_string(), max), want);
        }
    }
}
