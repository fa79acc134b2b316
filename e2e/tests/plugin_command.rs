//! The harness with a driver author's plugin (`E2E_PLUGIN_COMMAND`, crate::processes::plugin_command): here the command names
//! the project's hostpath-plugin through every placeholder, as an author's own plugin would be named, so the
//! route a foreign plugin takes is the one under test.
//!
//! One test per file: the environment variable is the whole test binary's.

use csi_sidecars_e2e::processes::plugin_command::PLUGIN_COMMAND_ENV;
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::worlds::provisioner::ProvisionerWorld as World;

#[tokio::test]
async fn worlds_start_the_plugin_the_environment_names() {
    let command = format!(
        "{} --endpoint={{endpoint}} --state-dir={{state_dir}} --node-id={{node_id}} --driver-name={{driver}} -v=4",
        binary("hostpath-plugin").display()
    );
    // SAFETY: the only test of this binary sets the variable before it starts anything that reads the environment.
    unsafe { std::env::set_var(PLUGIN_COMMAND_ENV, &command) };

    let mut world = World::new("plugin-cmd", &[]).await;
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", world.plugin.pid())).expect("plugin cmdline");
    let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert!(args.contains(&format!("--driver-name={}", world.driver)), "{args:?}");
    assert!(args.contains(&"-v=4".to_string()), "the command's own flags, not the harness's: {args:?}");
    assert!(!args.contains(&"-v=2".to_string()), "no hostpath flags of the harness: {args:?}");

    let class = world.class("any", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &class, None, "ReadWriteOnce").await;
    let volume = world.bound("data").await;
    assert_eq!(world.plugin_volumes().len(), 1, "the named plugin made {volume}");

    // A world that needs the hostpath-plugin's own flags refuses to start, naming why.
    let refused = tokio::spawn(async { World::new("plugin-cmd-faults", &["--no-block"]).await }).await;
    let panic = refused.err().expect("a world needing --no-block refuses a foreign plugin").into_panic();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("not applicable to E2E_PLUGIN_COMMAND") && message.contains("--no-block"), "{message}");
}
