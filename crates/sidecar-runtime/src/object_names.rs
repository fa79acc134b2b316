//! Kubernetes' rules for object names and namespaces (apimachinery's `IsDNS1123Label` / `IsDNS1123Subdomain`), which
//! every sidecar applies to the Secret names and namespaces its templates resolve to.

/// A namespace or a label-like name: at most 63 characters, lowercase alphanumerics and `-`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_shape(s)
}

/// An object name such as a Secret's: at most 253 characters, dot-separated labels.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shape)
}

fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && edge(&b[0]) && edge(&b[b.len() - 1]) && b.iter().all(|c| edge(c) || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_apimachinery() {
        // (name, label, subdomain)
        let long_label = "a".repeat(64);
        let long_name = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join(".");
        let table: [(&str, bool, bool); 11] = [
            ("secret", true, true),
            ("my-secret-1", true, true),
            ("0abc", true, true),
            ("a.b", false, true),
            ("", false, false),
            ("-a", false, false),
            ("a-", false, false),
            ("Upper", false, false),
            ("under_score", false, false),
            ("a..b", false, false),
            (&long_label, false, true),
        ];
        for (name, label, subdomain) in table {
            assert_eq!(is_dns1123_label(name), label, "label {name:?}");
            assert_eq!(is_dns1123_subdomain(name), subdomain, "subdomain {name:?}");
        }
        assert_eq!(long_name.len(), 253);
        assert!(is_dns1123_subdomain(&long_name));
        assert!(!is_dns1123_subdomain(&format!("{long_name}e")));
    }
}
