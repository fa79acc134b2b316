//! `expand` and `resolve` against a model of Go's `os.Expand` written from its rules over characters, on
//! templates drawn mostly from the characters those rules treat specially.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

/// Go's rules, one character at a time: (expansion, the names the mapping was asked for).
fn model(template: &str, known: impl Fn(&str) -> Option<String>) -> (String, BTreeSet<String>) {
    let chars: Vec<char> = template.chars().collect();
    let special = |c: char| "*#$@!?-0123456789".contains(c);
    let word = |c: char| c == '_' || c.is_ascii_alphanumeric();
    let (mut out, mut asked) = (String::new(), BTreeSet::new());
    let mut name = |n: String, out: &mut String| {
        out.push_str(&known(&n).unwrap_or_default());
        asked.insert(n);
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '$' || i == chars.len() {
            out.push(c);
            continue;
        }
        let next = chars[i];
        if next == '{' {
            if i + 2 < chars.len() && special(chars[i + 1]) && chars[i + 2] == '}' {
                name(chars[i + 1].to_string(), &mut out);
                i += 3;
            } else if let Some(close) = chars[i + 1..].iter().position(|&c| c == '}') {
                if close > 0 {
                    name(chars[i + 1..i + 1 + close].iter().collect(), &mut out);
                }
                i += close + 2;
            } else {
                i += 1; // `${` without a `}`: both vanish
            }
        } else if special(next) {
            name(next.to_string(), &mut out);
            i += 1;
        } else if word(next) {
            let run = chars[i..].iter().take_while(|&&c| word(c)).count();
            name(chars[i..i + run].iter().collect(), &mut out);
            i += run;
        } else {
            out.push('$');
        }
    }
    (out, asked)
}

fn template() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        4 => Just('$'),
        2 => Just('{'),
        2 => Just('}'),
        2 => prop::sample::select(vec!['*', '#', '@', '!', '?', '-', '0', '7']),
        4 => prop::sample::select(vec!['a', 'b', 'Z', '_', '9']),
        2 => prop::sample::select(vec!['.', '\'', '[', ']', ' ', 'é', '世']),
    ];
    prop::collection::vec(c, 0..24).prop_map(|chars| chars.into_iter().collect())
}

/// Names with a `b` in them are known; the others are not.
fn tokens(name: &str) -> Option<String> {
    name.contains('b').then(|| format!("<{name}>"))
}

proptest! {
    #[test]
    fn expand_is_go_os_expand(template in template()) {
        let (expected, asked) = model(&template, tokens);
        let mut seen = BTreeSet::new();
        let expanded = expand(&template, |name| {
            seen.insert(name.to_string());
            tokens(name).unwrap_or_default()
        });
        prop_assert_eq!(expanded, expected);
        prop_assert_eq!(seen, asked);
    }

    #[test]
    fn resolve_is_upstream_resolve_template(template in template()) {
        let (expected, asked) = model(&template, tokens);
        let unknown: Vec<String> = asked.into_iter().filter(|name| tokens(name).is_none()).collect();
        let want = if unknown.is_empty() { Ok(expected) } else { Err(unknown) };
        prop_assert_eq!(resolve(&template, tokens), want);
    }

    #[test]
    fn text_without_a_dollar_is_unchanged(text in "[^$]{0,40}") {
        prop_assert_eq!(expand(&text, |_| unreachable!("no name in {text:?}")), text.clone());
    }
}
