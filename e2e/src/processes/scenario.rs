//! Real processes for a test: the plugin and the sidecars, each logging to a
//! file that is printed if the test fails.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::control_plane::cluster::repo_root;
use crate::processes::plugin_command::{Placeholders, PluginCommand, PluginRequest};

/// Path of a workspace binary built by `cargo build --bins` (as `make e2e` does).
pub fn binary(name: &str) -> PathBuf {
    let path = binary_path(name);
    assert!(path.exists(), "{} is missing: run `cargo build --bins` first (`make e2e` does)", path.display());
    path
}

/// Where [`binary`] looks, whether or not it is there (a foreign plugin's run needs no hostpath-plugin).
fn binary_path(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    let profile = std::env::var("E2E_PROFILE").unwrap_or_else(|_| "debug".to_string());
    target.join(profile).join(name)
}

/// The node id every plugin the harness starts is given.
pub const PLUGIN_NODE_ID: &str = "e2e-node";

/// The files and processes of one test. When the test panics, the logs of
/// every process it started are printed as it unwinds.
pub struct Scenario {
    name: String,
    dir: tempfile::TempDir,
    logs: Vec<(String, PathBuf)>,
}

impl Scenario {
    pub fn new(name: &str) -> Scenario {
        // Short paths: a unix socket path must stay under 108 bytes.
        let dir = tempfile::Builder::new().prefix("e2e-").tempdir().expect("scenario dir");
        Scenario { name: name.to_string(), dir, logs: Vec::new() }
    }

    /// This scenario's private folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside this scenario's private folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts `binary` with `args`; stdout and stderr go to `<name>.log`.
    pub fn start(&mut self, name: &str, binary: &Path, args: &[String]) -> Process {
        self.start_with_env(name, binary, args, &[])
    }

    /// [`Scenario::start`] with extra environment variables (e.g. `POD_NAME` for a replica's identity).
    pub fn start_with_env(&mut self, name: &str, binary: &Path, args: &[String], env: &[(&str, &str)]) -> Process {
        let log_path = self.path(&format!("{name}.log"));
        let log = File::create(&log_path).expect("log file");
        let child = Command::new(binary)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        self.logs.push((name.to_string(), log_path.clone()));
        Process { name: name.to_string(), child: Some(child), log: log_path }
    }

    /// Starts the project's hostpath-plugin on a socket in this scenario;
    /// returns the process and the socket path.
    pub fn hostpath_plugin(&mut self, name: &str, extra_args: &[&str]) -> (Process, PathBuf) {
        let socket = self.path(&format!("{name}.sock"));
        let mut args = self.hostpath_base_args(name, &socket);
        args.extend(extra_args.iter().map(|a| a.to_string()));
        let process = self.start(name, &binary("hostpath-plugin"), &args);
        (process, socket)
    }

    /// Starts the plugin `E2E_PLUGIN_COMMAND` names, or the hostpath-plugin with the test's flags when it is unset
    /// (crate::processes::plugin_command). Returns the process, the socket path and the world's driver name. Panics with
    /// "not applicable to E2E_PLUGIN_COMMAND: …" when the test needs the hostpath-plugin itself.
    pub fn plugin(&mut self, name: &str, request: &PluginRequest) -> (Process, PathBuf, String) {
        let command = PluginCommand::from_env().unwrap_or_else(|e| panic!("{e}"));
        let socket = self.path(&format!("{name}.sock"));
        let state_dir = self.path(&format!("{name}-state"));
        let hostpath = binary_path("hostpath-plugin");
        let values = Placeholders { socket: &socket, driver: "", node_id: PLUGIN_NODE_ID, state_dir: &state_dir };
        let base = self.hostpath_base_args(name, &socket);
        let launch = command
            .launch(request, &hostpath.display().to_string(), &base, &values)
            .unwrap_or_else(|reason| panic!("{reason}"));
        if command != PluginCommand::Hostpath {
            std::fs::create_dir_all(&state_dir).expect("plugin state dir");
        }
        let process = self.start(name, Path::new(&launch.program), &launch.args);
        (process, socket, launch.driver)
    }

    /// The harness's own hostpath-plugin flags: endpoint, a state dir of its own, the node id, logging at -v=2.
    fn hostpath_base_args(&self, name: &str, socket: &Path) -> Vec<String> {
        vec![
            format!("--endpoint=unix://{}", socket.display()),
            format!("--state-dir={}", self.path(&format!("{name}-state")).display()),
            format!("--node-id={PLUGIN_NODE_ID}"),
            "-v=2".to_string(),
        ]
    }

    /// Starts the hostpath-plugin `name` again on the socket and state directory [`Scenario::hostpath_plugin`] gave
    /// it, after it was killed, as a kubelet restarts a driver container; its log goes to `<log_name>.log`.
    pub fn hostpath_plugin_again(&mut self, name: &str, log_name: &str, extra_args: &[&str]) -> Process {
        let mut args = self.hostpath_base_args(name, &self.path(&format!("{name}.sock")));
        args.extend(extra_args.iter().map(|a| a.to_string()));
        self.start(log_name, &binary("hostpath-plugin"), &args)
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for (name, path) in &self.logs {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("(unreadable: {e})"));
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(300)..];
            eprintln!("===== {} / {name} ({} lines, last {}) =====", self.name, lines.len(), tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}

/// A started process; killed (SIGKILL) when dropped so no test leaves one behind.
pub struct Process {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything the process has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// kill -9: no cleanup, as a crash or an OOM kill.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the exit; returns the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        child.wait().ok().and_then(|s| s.code())
    }

    /// Sends SIGTERM and returns at once; see [`Process::wait_exit`].
    pub fn send_sigterm(&self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        }
    }

    /// The exit code, if the process has ended on its own.
    pub fn exited(&mut self) -> Option<i32> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(status.code().unwrap_or(-1)),
            _ => None,
        }
    }

    /// Waits up to `timeout` for the process to end on its own; returns its exit code, or panics.
    pub async fn wait_exit(&mut self, timeout: std::time::Duration) -> i32 {
        let started = std::time::Instant::now();
        loop {
            if let Some(code) = self.exited() {
                return code;
            }
            assert!(started.elapsed() < timeout, "{} is still running after {timeout:?}", self.name);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}
