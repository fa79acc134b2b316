//! The command line of `csi-sidecars`: `--sidecars=provisioner,resizer,…` and the union of the selected sidecars'
//! flags, Go forms included. It is split into one command line per sidecar, which that sidecar's own parser reads
//! (so each keeps its defaults, checks and messages), and the flags of the whole process.
//!
//! - A flag goes to every selected sidecar that has it (`--timeout=30s` to all of them).
//! - `--<sidecar>.<flag>` goes to that sidecar alone, after the shared value, which it overrides
//!   (`--resizer.timeout=2m`).
//! - The flags of the process itself (driver address, Kubernetes client, logging, HTTP, leader election) take no
//!   prefix: there is one of each. `--feature-gates` is the exception, since each sidecar knows its own gates.

mod help;

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::CommandFactory;
use sidecar_runtime::flags::normalize_go_args;
use sidecar_runtime::{CommonArgs, ConfigError, Configured, Description, Registration};

use crate::sidecars::SIDECARS;

pub use help::command;

/// A sidecar `csi-sidecars` can run: one of [`SIDECARS`], as its own crate describes it.
#[derive(Clone, Copy)]
pub struct Kind(&'static Registration);

impl Kind {
    /// Every sidecar, in [`SIDECARS`]' order (that of the help and the messages).
    pub fn all() -> impl Iterator<Item = Kind> {
        SIDECARS.iter().map(Kind)
    }

    pub fn description(self) -> &'static Description {
        &self.0.description
    }

    /// Its name in `--sidecars` and in flag prefixes.
    pub fn name(self) -> &'static str {
        self.0.description.name
    }

    /// The binary it is otherwise, which its parser's messages name.
    pub fn binary(self) -> &'static str {
        self.0.description.binary
    }

    /// Whether it talks to Kubernetes. The node pod's registrar and livenessprobe do not: a set of only those runs
    /// without a Kubernetes client (and needs no credentials).
    pub fn uses_kubernetes(self) -> bool {
        self.0.description.uses_kubernetes()
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::all().find(|kind| kind.name() == name)
    }

    /// Its own command line, as its single binary parses it.
    pub fn command(self) -> clap::Command {
        (self.0.command)()
    }

    /// Parses and checks its command line (program name first) with its own parser and checks.
    pub fn configure(self, argv: Vec<OsString>) -> Result<Box<dyn Configured>, ConfigError> {
        (self.0.configure)(argv)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Kind {}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The flags of the whole process: the ones every sidecar shares, parsed once for the runtime they share.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "csi-sidecars")]
pub struct ProcessArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A command line split between the process and its sidecars.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLine {
    /// The selected sidecars, each with the command line its own parser reads (program name first).
    pub sidecars: Vec<(Kind, Vec<OsString>)>,
    /// The process's flags, for [`ProcessArgs`] (program name first).
    pub process: Vec<OsString>,
    /// `--leader-election-shared`.
    pub leader_election_shared: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandLineError {
    #[error("--sidecars is required: a comma-separated list of {}", names())]
    NoSidecars,
    #[error("--sidecars: unknown sidecar {0:?} (known: {known})", known = names())]
    UnknownSidecar(String),
    #[error("unknown flag {0}")]
    UnknownFlag(String),
    #[error("{flag}: no selected sidecar has this flag (it is a flag of {owners})")]
    NotSelected { flag: String, owners: String },
    #[error("{flag}: {sidecar} is not in --sidecars")]
    PrefixNotSelected { flag: String, sidecar: String },
    #[error("{flag}: {sidecar} has no flag --{name}")]
    NotAFlagOf { flag: String, sidecar: String, name: String },
    #[error("{0}: a flag of the whole process, which takes no sidecar prefix")]
    ProcessFlagWithPrefix(String),
    #[error("{0}: the flag needs a value")]
    MissingValue(String),
    #[error("--leader-election-shared: {0:?} is not a boolean")]
    NotABoolean(String),
}

fn names() -> String {
    Kind::all().map(Kind::name).collect::<Vec<_>>().join(", ")
}

/// The flags of [`CommonArgs`] that may still be given per sidecar.
const PER_SIDECAR_COMMON: &[&str] = &["feature-gates"];

/// One flag as written: its argument(s), the sidecar prefix if any, and its long name.
#[derive(Debug)]
struct Given {
    prefix: Option<String>,
    name: String,
    /// The flag rewritten without its prefix, and its separate value if it has one.
    args: Vec<OsString>,
    /// As the user wrote it, for messages.
    written: String,
}

/// Splits `argv` (program name first). `--help` is not handled here (see [`command`]).
pub fn split(argv: Vec<OsString>) -> Result<CommandLine, CommandLineError> {
    let union = command();
    let mut argv = normalize_go_args(&union, argv).into_iter();
    let program = argv.next().unwrap_or_else(|| "csi-sidecars".into());
    let given = tokenize(argv, &union)?;
    // `--version` answers without a sidecar to run, as every single binary does (the image test runs it so). With
    // `--sidecars` the selected sidecars' flags are checked first, as a single binary's are.
    let sidecars_given = given.iter().any(|g| g.prefix.is_none() && g.name == "sidecars");
    if let Some(version) = given.iter().find(|g| g.prefix.is_none() && g.name == "version" && !sidecars_given) {
        let value = if version.args[0].to_string_lossy().contains('=') { value_of(version)? } else { "true".into() };
        if sidecar_runtime::flags::parse_go_bool(&value).map_err(|_| CommandLineError::NotABoolean(value.clone()))? {
            let process = vec![program, "--version".into()];
            return Ok(CommandLine { sidecars: Vec::new(), process, leader_election_shared: false });
        }
    }

    let mut selected: Vec<Kind> = Vec::new();
    let mut leader_election_shared = false;
    for flag in given.iter().filter(|g| g.prefix.is_none()) {
        match flag.name.as_str() {
            "sidecars" => {
                selected.clear();
                for name in value_of(flag)?.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let kind = Kind::from_name(name).ok_or_else(|| CommandLineError::UnknownSidecar(name.into()))?;
                    if !selected.contains(&kind) {
                        selected.push(kind);
                    }
                }
            }
            "leader-election-shared" => {
                let value = if flag.args[0].to_string_lossy().contains('=') { value_of(flag)? } else { "true".into() };
                leader_election_shared = sidecar_runtime::flags::parse_go_bool(&value)
                    .map_err(|_| CommandLineError::NotABoolean(value.clone()))?;
            }
            _ => {}
        }
    }
    if selected.is_empty() {
        return Err(CommandLineError::NoSidecars);
    }

    let commands: Vec<(Kind, BTreeSet<String>)> = Kind::all().map(|k| (k, longs(&k.command()))).collect();
    let has = |kind: Kind, name: &str| commands.iter().any(|(k, longs)| *k == kind && longs.contains(name));
    let process_flags = longs(&ProcessArgs::command());

    let mut process = vec![program];
    let mut shared: Vec<Vec<OsString>> = vec![Vec::new(); selected.len()];
    let mut overrides: Vec<Vec<OsString>> = vec![Vec::new(); selected.len()];
    for flag in given {
        if matches!(flag.name.as_str(), "sidecars" | "leader-election-shared") && flag.prefix.is_none() {
            continue;
        }
        if let Some(prefix) = &flag.prefix {
            let kind = Kind::from_name(prefix).ok_or_else(|| CommandLineError::UnknownFlag(flag.written.clone()))?;
            let Some(index) = selected.iter().position(|k| *k == kind) else {
                return Err(CommandLineError::PrefixNotSelected { flag: flag.written, sidecar: prefix.clone() });
            };
            if !has(kind, &flag.name) {
                return Err(CommandLineError::NotAFlagOf {
                    flag: flag.written,
                    sidecar: prefix.clone(),
                    name: flag.name,
                });
            }
            if process_flags.contains(&flag.name) && !PER_SIDECAR_COMMON.contains(&flag.name.as_str()) {
                return Err(CommandLineError::ProcessFlagWithPrefix(flag.written));
            }
            overrides[index].extend(flag.args);
            continue;
        }
        if process_flags.contains(&flag.name) {
            process.extend(flag.args.iter().cloned());
        }
        let mut taken = false;
        for (index, kind) in selected.iter().enumerate() {
            if has(*kind, &flag.name) {
                shared[index].extend(flag.args.iter().cloned());
                taken = true;
            }
        }
        if !taken {
            let owners: Vec<&str> = Kind::all().filter(|k| has(*k, &flag.name)).map(Kind::name).collect();
            if owners.is_empty() {
                return Err(CommandLineError::UnknownFlag(flag.written));
            }
            return Err(CommandLineError::NotSelected { flag: flag.written, owners: owners.join(", ") });
        }
    }
    let sidecars = selected
        .into_iter()
        .zip(shared.into_iter().zip(overrides))
        .map(|(kind, (shared, overrides))| {
            let mut argv: Vec<OsString> = vec![kind.binary().into()];
            argv.extend(shared);
            argv.extend(overrides);
            (kind, argv)
        })
        .collect();
    Ok(CommandLine { sidecars, process, leader_election_shared })
}

/// The long names (and aliases) of a command's flags.
fn longs(command: &clap::Command) -> BTreeSet<String> {
    command
        .get_arguments()
        .flat_map(|arg| arg.get_long().into_iter().chain(arg.get_all_aliases().unwrap_or_default()))
        .map(str::to_string)
        .collect()
}

fn value_of(flag: &Given) -> Result<String, CommandLineError> {
    let first = flag.args[0].to_string_lossy();
    match first.split_once('=') {
        Some((_, value)) => Ok(value.to_string()),
        None => flag
            .args
            .get(1)
            .map(|v| v.to_string_lossy().into_owned())
            .ok_or_else(|| CommandLineError::MissingValue(flag.written.clone())),
    }
}

/// Groups the (normalized) arguments into flags, each with its separate value when it takes one.
fn tokenize(argv: impl Iterator<Item = OsString>, union: &clap::Command) -> Result<Vec<Given>, CommandLineError> {
    let mut argv = argv.peekable();
    let mut given = Vec::new();
    while let Some(arg) = argv.next() {
        let text = arg.to_string_lossy().into_owned();
        let (prefix, name, rewritten) = if let Some(body) = text.strip_prefix("--") {
            let flag = body.split_once('=').map_or(body, |(flag, _)| flag);
            match flag.split_once('.') {
                Some((prefix, name)) => {
                    (Some(prefix.to_string()), name.to_string(), format!("--{}", &body[prefix.len() + 1..]))
                }
                None => (None, flag.to_string(), text.clone()),
            }
        } else if let Some(rest) = text.strip_prefix("-v") {
            // klog's -v: `-v 5`, `-v5`, `-v=5`.
            (
                None,
                "v".to_string(),
                if rest.is_empty() { text.clone() } else { format!("--v={}", rest.trim_start_matches('=')) },
            )
        } else {
            return Err(CommandLineError::UnknownFlag(text));
        };
        if name.is_empty() {
            return Err(CommandLineError::UnknownFlag(text));
        }
        let mut args: Vec<OsString> = vec![rewritten.clone().into()];
        if !rewritten.contains('=') && takes_separate_value(union, &name) {
            match argv.next() {
                Some(value) => args.push(value),
                None => return Err(CommandLineError::MissingValue(text)),
            }
        }
        given.push(Given { prefix, name, args, written: text });
    }
    Ok(given)
}

/// Whether `--name value` (two arguments) is how the flag takes its value: not for booleans, which take theirs
/// only after `=`, as in Go.
fn takes_separate_value(union: &clap::Command, name: &str) -> bool {
    union
        .get_arguments()
        .find(|arg| arg.get_long() == Some(name))
        .is_some_and(|arg| arg.get_action().takes_values() && !arg.is_require_equals_set())
}

#[cfg(test)]
mod tests;
