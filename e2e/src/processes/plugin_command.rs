//! Which CSI plugin the e2e worlds start: the project's hostpath-plugin by default, or a driver author's own plugin
//! named by `E2E_PLUGIN_COMMAND` (docs/testing.md#testing-your-own-driver).
//!
//! `E2E_PLUGIN_COMMAND` is a command line split on whitespace (no shell, no quoting) in which these placeholders are
//! replaced for each test:
//!
//! | placeholder | value |
//! |---|---|
//! | `{endpoint}` | `unix://<socket>`, the endpoint the sidecars dial |
//! | `{socket}` | the socket path alone |
//! | `{driver}` | the test's driver name (`<namespace>.csi.e2e`) |
//! | `{node_id}` | the node id the harness's Nodes and topology use (`e2e-node`) |
//! | `{state_dir}` | an empty directory of the test's own, for a plugin that keeps state on disk |
//!
//! A plugin whose driver name is fixed leaves `{driver}` out and names it in `E2E_PLUGIN_DRIVER`; the tests then
//! share one driver name and must run one at a time (`--test-threads=1`). Tests that need the hostpath-plugin's
//! own flags (fault injection, capacity, turning block support off, …) or a driver name of their own cannot run
//! against another plugin: their world refuses to start with a message naming the reason.

use std::path::Path;

/// The environment variable naming the plugin command.
pub const PLUGIN_COMMAND_ENV: &str = "E2E_PLUGIN_COMMAND";
/// The environment variable naming a foreign plugin's fixed driver name.
pub const PLUGIN_DRIVER_ENV: &str = "E2E_PLUGIN_DRIVER";

/// What the worlds start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginCommand {
    /// The project's hostpath-plugin, with whatever flags a test asks for.
    Hostpath,
    /// A driver author's plugin: the words of `E2E_PLUGIN_COMMAND`, and its fixed driver name if `{driver}` is not
    /// among them.
    Foreign { words: Vec<String>, fixed_driver: Option<String> },
}

/// The per-test values of the placeholders.
pub struct Placeholders<'a> {
    pub socket: &'a Path,
    pub driver: &'a str,
    pub node_id: &'a str,
    pub state_dir: &'a Path,
}

/// What a world asks of its plugin.
pub struct PluginRequest<'a> {
    /// The name the test derives for its driver (`<namespace>.csi.e2e`).
    pub derived_driver: &'a str,
    /// A driver name the test itself needs (e.g. `ebs.csi.aws.com` for CSI migration).
    pub required_driver: Option<&'a str>,
    /// hostpath-plugin flags the test needs beyond the harness's own.
    pub hostpath_args: &'a [&'a str],
}

/// How to start the plugin of one world.
#[derive(Debug, PartialEq, Eq)]
pub struct PluginLaunch {
    pub program: String,
    pub args: Vec<String>,
    /// The driver name the world's classes and sidecars use.
    pub driver: String,
}

impl PluginCommand {
    /// From the environment: `Hostpath` unless `E2E_PLUGIN_COMMAND` is set and not blank.
    pub fn from_env() -> Result<PluginCommand, String> {
        let command = std::env::var(PLUGIN_COMMAND_ENV).ok();
        let driver = std::env::var(PLUGIN_DRIVER_ENV).ok();
        PluginCommand::parse(command.as_deref(), driver.as_deref())
    }

    /// The rules of [`PluginCommand::from_env`] on given values.
    pub fn parse(command: Option<&str>, fixed_driver: Option<&str>) -> Result<PluginCommand, String> {
        let words: Vec<String> = command.unwrap_or_default().split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return Ok(PluginCommand::Hostpath);
        }
        if !words.iter().any(|w| w.contains("{endpoint}") || w.contains("{socket}")) {
            return Err(format!("{PLUGIN_COMMAND_ENV} must pass {{endpoint}} or {{socket}} to the plugin"));
        }
        let fixed_driver = fixed_driver.map(str::trim).filter(|d| !d.is_empty()).map(str::to_string);
        let names_driver = words.iter().any(|w| w.contains("{driver}"));
        match (names_driver, fixed_driver) {
            (true, Some(_)) => Err(format!(
                "{PLUGIN_COMMAND_ENV} passes {{driver}}, so {PLUGIN_DRIVER_ENV} must not be set (the tests choose it)"
            )),
            (false, None) => Err(format!(
                "{PLUGIN_COMMAND_ENV} does not pass {{driver}}: name the plugin's fixed driver in {PLUGIN_DRIVER_ENV}"
            )),
            (_, fixed_driver) => Ok(PluginCommand::Foreign { words, fixed_driver }),
        }
    }

    /// The program, arguments and driver name for one world, or why this world cannot run against the plugin.
    /// `hostpath_base` are the harness's own hostpath-plugin flags (endpoint, state dir, node id, driver name).
    pub fn launch(
        &self,
        request: &PluginRequest,
        hostpath_program: &str,
        hostpath_base: &[String],
        values: &Placeholders,
    ) -> Result<PluginLaunch, String> {
        let (words, fixed_driver) = match self {
            PluginCommand::Hostpath => {
                let driver = request.required_driver.unwrap_or(request.derived_driver).to_string();
                let mut args = hostpath_base.to_vec();
                args.push(format!("--driver-name={driver}"));
                args.extend(request.hostpath_args.iter().map(|a| a.to_string()));
                return Ok(PluginLaunch { program: hostpath_program.to_string(), args, driver });
            }
            PluginCommand::Foreign { words, fixed_driver } => (words, fixed_driver),
        };
        if !request.hostpath_args.is_empty() {
            return Err(format!(
                "not applicable to {PLUGIN_COMMAND_ENV}: this test needs hostpath-plugin's {}",
                request.hostpath_args.join(" ")
            ));
        }
        let driver = match (request.required_driver, fixed_driver) {
            (Some(required), Some(fixed)) if required != fixed => {
                return Err(format!(
                    "not applicable to {PLUGIN_COMMAND_ENV}: this test needs the driver name {required}, the plugin is {fixed}"
                ));
            }
            (Some(required), _) => required.to_string(),
            (None, Some(fixed)) => fixed.clone(),
            (None, None) => request.derived_driver.to_string(),
        };
        let driver_values = Placeholders { driver: &driver, ..*values };
        let mut expanded = words.iter().map(|w| expand(w, &driver_values));
        let program = expanded.next().expect("parse keeps only non-empty commands");
        Ok(PluginLaunch { program, args: expanded.collect(), driver })
    }
}

fn expand(word: &str, values: &Placeholders) -> String {
    word.replace("{endpoint}", &format!("unix://{}", values.socket.display()))
        .replace("{socket}", &values.socket.display().to_string())
        .replace("{driver}", values.driver)
        .replace("{node_id}", values.node_id)
        .replace("{state_dir}", &values.state_dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foreign(command: &str, driver: Option<&str>) -> PluginCommand {
        PluginCommand::parse(Some(command), driver).expect("valid command")
    }

    #[test]
    fn parse_rules() {
        let rows: &[(&str, Option<&str>, Option<&str>, &str)] = &[
            // (command, E2E_PLUGIN_DRIVER, error fragment or None, why)
            ("", None, None, "unset or blank means the hostpath-plugin"),
            ("   ", Some("x"), None, "blank with a driver is still the hostpath-plugin"),
            ("my-plugin --driver={driver}", None, Some("{endpoint} or {socket}"), "no endpoint"),
            ("my-plugin --csi-address={socket} --name={driver}", None, None, "socket and driver"),
            ("my-plugin --endpoint={endpoint}", None, Some("E2E_PLUGIN_DRIVER"), "fixed name not given"),
            ("my-plugin --endpoint={endpoint}", Some("  "), Some("E2E_PLUGIN_DRIVER"), "blank fixed name"),
            ("my-plugin --endpoint={endpoint}", Some("my.csi.io"), None, "fixed name given"),
            ("my-plugin --endpoint={endpoint} --name={driver}", Some("my.csi.io"), Some("must not be set"), "both"),
        ];
        for (command, driver, error, why) in rows {
            let parsed = PluginCommand::parse(Some(command), *driver);
            match error {
                None => assert!(parsed.is_ok(), "{why}: {parsed:?}"),
                Some(fragment) => {
                    let message = parsed.expect_err(why);
                    assert!(message.contains(fragment), "{why}: {message}");
                }
            }
        }
        assert_eq!(PluginCommand::parse(None, None), Ok(PluginCommand::Hostpath));
    }

    fn launch(command: &PluginCommand, required: Option<&str>, args: &[&str]) -> Result<PluginLaunch, String> {
        let request = PluginRequest { derived_driver: "ns-1.csi.e2e", required_driver: required, hostpath_args: args };
        let values = Placeholders {
            socket: Path::new("/tmp/e2e-1/plugin.sock"),
            driver: "unused",
            node_id: "e2e-node",
            state_dir: Path::new("/tmp/e2e-1/state"),
        };
        command.launch(&request, "/bin/hostpath-plugin", &["--endpoint=unix:///tmp/e2e-1/plugin.sock".into()], &values)
    }

    #[test]
    fn hostpath_gets_the_harness_flags_the_driver_name_and_the_test_flags() {
        let plain = launch(&PluginCommand::Hostpath, None, &["--no-block"]).unwrap();
        assert_eq!(plain.program, "/bin/hostpath-plugin");
        assert_eq!(
            plain.args,
            ["--endpoint=unix:///tmp/e2e-1/plugin.sock", "--driver-name=ns-1.csi.e2e", "--no-block"]
        );
        assert_eq!(plain.driver, "ns-1.csi.e2e");
        let named = launch(&PluginCommand::Hostpath, Some("ebs.csi.aws.com"), &[]).unwrap();
        assert_eq!(named.driver, "ebs.csi.aws.com");
        assert!(named.args.contains(&"--driver-name=ebs.csi.aws.com".to_string()));
    }

    #[test]
    fn foreign_placeholders_are_replaced_in_every_word() {
        let command = foreign(
            "/opt/p --endpoint={endpoint} --sock={socket} --name={driver} --node={node_id} --data={state_dir}/d",
            None,
        );
        let launched = launch(&command, None, &[]).unwrap();
        assert_eq!(launched.program, "/opt/p");
        assert_eq!(
            launched.args,
            [
                "--endpoint=unix:///tmp/e2e-1/plugin.sock",
                "--sock=/tmp/e2e-1/plugin.sock",
                "--name=ns-1.csi.e2e",
                "--node=e2e-node",
                "--data=/tmp/e2e-1/state/d"
            ]
        );
        assert_eq!(launched.driver, "ns-1.csi.e2e");
    }

    /// (command, driver name the test requires, hostpath flags it needs, driver name or error fragment, why)
    type LaunchRow<'a> = (&'a PluginCommand, Option<&'a str>, &'a [&'a str], Result<&'a str, &'a str>, &'a str);

    #[test]
    fn foreign_driver_names_and_refusals() {
        let fixed = foreign("/opt/p --endpoint={endpoint}", Some("my.csi.io"));
        let chosen = foreign("/opt/p --endpoint={endpoint} --name={driver}", None);
        let rows: &[LaunchRow] = &[
            (&fixed, None, &[], Ok("my.csi.io"), "a fixed name is every world's"),
            (&fixed, Some("my.csi.io"), &[], Ok("my.csi.io"), "a required name equal to the fixed one"),
            (&fixed, Some("ebs.csi.aws.com"), &[], Err("needs the driver name ebs.csi.aws.com"), "another name"),
            (&chosen, Some("ebs.csi.aws.com"), &[], Ok("ebs.csi.aws.com"), "a chosen name can be the required one"),
            (&chosen, None, &["--fault-config=/f"], Err("needs hostpath-plugin's --fault-config=/f"), "hostpath flags"),
        ];
        for (command, required, args, expected, why) in rows {
            let result = launch(command, *required, args);
            match expected {
                Ok(driver) => assert_eq!(result.map(|l| l.driver).as_deref(), Ok(*driver), "{why}"),
                Err(fragment) => {
                    let message = result.expect_err(why);
                    assert!(message.starts_with("not applicable") && message.contains(fragment), "{why}: {message}");
                }
            }
        }
    }
}
