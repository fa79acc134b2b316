//! The template syntax of upstream's secret parameters: Go's `os.Expand` (Go src/os/env.go, `Expand` and
//! `getShellName`), which external-provisioner's `resolveTemplate` (pkg/controller/controller.go) and
//! external-snapshotter's (pkg/utils/util.go) run with a mapping that records the names it does not know.
//!
//! After a `$`: `{name}` up to the first `}`, or one of `*#$@!?-` and the digits (alone, braced or not), or the
//! longest run of ASCII letters, digits and `_`. `${}` and an unclosed `${` are bad syntax and vanish; a `$` before
//! anything else, or at the end, stays as it is. `$$` is no escape: it names the variable `$`.

/// The template with every name replaced by what `mapping` answers for it, as `os.Expand`.
pub fn expand(template: &str, mut mapping: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if after.is_empty() {
            // A trailing `$` is copied with the text after the last name.
            out.push('$');
            return out;
        }
        let (name, width) = shell_name(after);
        match (name, width) {
            ("", 0) => out.push('$'),
            ("", _) => {}
            (name, _) => out.push_str(&mapping(name)),
        }
        rest = &after[width..];
    }
    out.push_str(rest);
    out
}

/// The template resolved against `tokens`, as upstream's `resolveTemplate`: every name it uses must be known, else
/// the unknown names, sorted and without repeats.
pub fn resolve(template: &str, tokens: impl Fn(&str) -> Option<String>) -> Result<String, Vec<String>> {
    let mut unknown = std::collections::BTreeSet::new();
    let resolved = expand(template, |name| {
        tokens(name).unwrap_or_else(|| {
            unknown.insert(name.to_string());
            String::new()
        })
    });
    if unknown.is_empty() { Ok(resolved) } else { Err(unknown.into_iter().collect()) }
}

fn is_special(c: u8) -> bool {
    matches!(c, b'*' | b'#' | b'$' | b'@' | b'!' | b'?' | b'-' | b'0'..=b'9')
}

/// The name after a `$` (`s` is not empty) and how many bytes of `s` it takes; an empty name with a width is bad
/// syntax, with none no name at all.
fn shell_name(s: &str) -> (&str, usize) {
    let bytes = s.as_bytes();
    if bytes[0] == b'{' {
        if bytes.len() > 2 && is_special(bytes[1]) && bytes[2] == b'}' {
            return (&s[1..2], 3);
        }
        return match s[1..].find('}') {
            Some(0) => ("", 2),
            Some(end) => (&s[1..end + 1], end + 2),
            None => ("", 1),
        };
    }
    if is_special(bytes[0]) {
        return (&s[..1], 1);
    }
    let end = bytes.iter().position(|&c| !(c == b'_' || c.is_ascii_alphanumeric())).unwrap_or(bytes.len());
    (&s[..end], end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_follows_go() {
        let mapping = |name: &str| format!("<{name}>");
        // (template, what os.Expand makes of it)
        let table = [
            ("plain", "plain"),
            ("$a-$b_c.d", "<a>-<b_c>.d"),
            ("${pvc.name}-x", "<pvc.name>-x"),
            ("${pvc.annotations['k']}", "<pvc.annotations['k']>"),
            ("$$", "<$>"),
            ("$1x", "<1>x"),
            ("${1}x", "<1>x"),
            ("${12}", "<12>"),
            ("${}", ""),
            ("a${", "a"),
            ("a${b", "ab"),
            ("a$", "a$"),
            ("a$.b", "a$.b"),
            ("${a}}", "<a>}"),
            ("${a${b}}", "<a${b>}"),
            ("$é", "$é"),
            ("${é}", "<é>"),
        ];
        for (template, expanded) in table {
            assert_eq!(expand(template, mapping), expanded, "{template}");
        }
    }

    #[test]
    fn unknown_names_are_listed_once_and_sorted() {
        let tokens = |name: &str| (name == "pv.name").then(|| "pv-1".to_string());
        assert_eq!(resolve("${pv.name}", tokens), Ok("pv-1".to_string()));
        assert_eq!(resolve("$z-${pv.name}-$a-$z", tokens), Err(vec!["a".to_string(), "z".to_string()]));
    }
}

#[cfg(test)]
#[path = "go_expand_prop.rs"]
mod prop_tests;
