//! Go-style command lines for clap.
//!
//! Driver manifests were written for Go's `flag`/`pflag` packages, which accept a
//! long flag after one dash (`-csi-address=/x`) as well as two. clap reads
//! `-csi-address` as a cluster of short flags, so such arguments are rewritten to
//! the double-dash form before clap sees them.

use std::collections::HashSet;
use std::ffi::OsString;

/// Rewrites `-name[=value]` to `--name[=value]` wherever `name` is longer than
/// one character and starts with a letter, so that clap parses Go-style long
/// flags. Short flags of `command` keep their single dash, including the klog
/// forms `-v 5`, `-v=5` and `-v5`. Unknown names are rewritten too, so clap's
/// error names the flag as the user meant it (`--foo`, not `-f`). Nothing after a
/// bare `--` is touched, and neither is the program name.
pub fn normalize_go_args<I, T>(command: &clap::Command, argv: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut built = command.clone();
    built.build();
    let longs: HashSet<String> = built
        .get_arguments()
        .flat_map(|arg| arg.get_long_and_visible_aliases().into_iter().flatten())
        .chain(built.get_arguments().flat_map(|arg| arg.get_aliases().into_iter().flatten()))
        .map(str::to_string)
        .collect();
    let shorts: HashSet<char> = built.get_arguments().filter_map(|arg| arg.get_short()).collect();

    let mut out = Vec::new();
    let mut passthrough = false;
    for (index, arg) in argv.into_iter().map(Into::into).enumerate() {
        if index == 0 || passthrough {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            passthrough = true;
            out.push(arg);
            continue;
        }
        match arg.to_str().and_then(|text| rewrite(text, &longs, &shorts)) {
            Some(rewritten) => out.push(rewritten.into()),
            None => out.push(arg),
        }
    }
    out
}

/// The double-dash form of one argument, or `None` to keep it as it is.
fn rewrite(arg: &str, longs: &HashSet<String>, shorts: &HashSet<char>) -> Option<String> {
    let body = arg.strip_prefix('-')?;
    if body.starts_with('-') {
        return None;
    }
    let name = body.split_once('=').map_or(body, |(name, _)| name);
    let mut chars = name.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic() || chars.next().is_none() {
        return None; // `-v`, `-1`, `-` stay as they are
    }
    if longs.contains(name) {
        return Some(format!("-{arg}"));
    }
    // `-v5`: a short flag with its value attached, as pflag allows.
    if shorts.contains(&first) && name[first.len_utf8()..].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("-{arg}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn command() -> Command {
        Command::new("sidecar")
            .arg(Arg::new("csi-address").long("csi-address"))
            .arg(Arg::new("v").short('v').long("v"))
            .arg(Arg::new("old").long("new-name").alias("old-name"))
            .arg(Arg::new("flag").long("leader-election").action(ArgAction::SetTrue))
    }

    #[test]
    fn rewrites_single_dash_long_flags_only() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["-csi-address=/x"], &["--csi-address=/x"]),
            (&["-csi-address", "/x"], &["--csi-address", "/x"]),
            (&["--csi-address=/x"], &["--csi-address=/x"]),
            (&["--csi-address", "/x"], &["--csi-address", "/x"]),
            (&["-v=5"], &["-v=5"]),
            (&["-v", "5"], &["-v", "5"]),
            (&["-v5"], &["-v5"]),
            (&["--v=5"], &["--v=5"]),
            (&["-leader-election"], &["--leader-election"]),
            (&["-leader-election=true"], &["--leader-election=true"]),
            (&["-old-name=1"], &["--old-name=1"]),
            (&["-unknown-flag=1"], &["--unknown-flag=1"]),
            (&["-x"], &["-x"]),
            (&["-1"], &["-1"]),
            (&["-"], &["-"]),
            (&["-h"], &["-h"]),
            (&["-help"], &["--help"]),
            (&["--", "-csi-address=/x"], &["--", "-csi-address=/x"]),
            (&["positional"], &["positional"]),
        ];
        for (input, expected) in cases {
            let argv = std::iter::once("sidecar").chain(input.iter().copied());
            let got = normalize_go_args(&command(), argv);
            let expected: Vec<OsString> =
                std::iter::once("sidecar").chain(expected.iter().copied()).map(OsString::from).collect();
            assert_eq!(got, expected, "input {input:?}");
        }
    }

    #[test]
    fn program_name_is_never_rewritten() {
        let got = normalize_go_args(&command(), ["-csi-address"]);
        assert_eq!(got, vec![OsString::from("-csi-address")]);
    }
}
