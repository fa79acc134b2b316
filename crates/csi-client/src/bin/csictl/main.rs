//! csictl: a command-line CSI client for driver authors and tests.
//!
//! Exits 0 on success; on failure prints the gRPC code and message and exits 1
//! (2 for bad usage, from clap).

mod args;
mod render;
mod requests;

use std::process::ExitCode;

use clap::Parser;
use csi_client::{CsiClient, Endpoint, OperationMetrics, connect};

use args::{Args, Command};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("CSICTL_LOG"))
        .with_writer(std::io::stderr)
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("csictl: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let endpoint: Endpoint = args.endpoint.parse()?;
    let connection = connect(&endpoint, args.timeout).await?;
    let client = CsiClient::new(&connection, args.timeout, OperationMetrics::default());
    let out = render::Output::new(args.output);
    match args.command {
        Command::Info => out.info(&client.driver_info().await?),
        Command::Probe => out.probe(client.probe().await?),
        Command::Capabilities => {
            let plugin = client.plugin_capabilities().await?;
            let controller = client.controller_capabilities().await.unwrap_or_default();
            let group = client.group_controller_capabilities().await.unwrap_or_default();
            out.capabilities(&plugin, &controller, &group)
        }
        Command::ListVolumes => out.volumes(&requests::all_volumes(&client).await?),
        Command::ListSnapshots { source_volume_id, snapshot_id } => {
            out.snapshots(&requests::all_snapshots(&client, source_volume_id, snapshot_id).await?)
        }
        command @ Command::CreateVolume { .. } => {
            let response = client.create_volume(requests::create_volume(command)).await?;
            out.volume(&response.volume.unwrap_or_default())
        }
        Command::DeleteVolume { volume_id, secrets } => {
            client
                .delete_volume(csi_client::proto::DeleteVolumeRequest {
                    volume_id: volume_id.clone(),
                    secrets: requests::secrets(secrets),
                })
                .await?;
            out.done("deleted volume", &volume_id)
        }
        Command::ExpandVolume { volume_id, size, block, secrets } => {
            let response =
                client.controller_expand_volume(requests::expand_volume(volume_id, size, block, secrets)).await?;
            out.expanded(&response)
        }
        Command::ModifyVolume { volume_id, mutable_params, secrets } => {
            client
                .controller_modify_volume(csi_client::proto::ControllerModifyVolumeRequest {
                    volume_id: volume_id.clone(),
                    secrets: requests::secrets(secrets),
                    mutable_parameters: mutable_params.into_iter().collect(),
                })
                .await?;
            out.done("modified volume", &volume_id)
        }
        Command::PublishVolume { volume_id, node_id, block, access_mode, secrets } => {
            let request = requests::publish_volume(volume_id.clone(), node_id, block, access_mode, secrets);
            let response = client.controller_publish_volume(request).await?;
            out.published(&volume_id, &response.publish_context)
        }
        Command::UnpublishVolume { volume_id, node_id, secrets } => {
            client
                .controller_unpublish_volume(csi_client::proto::ControllerUnpublishVolumeRequest {
                    volume_id: volume_id.clone(),
                    node_id,
                    secrets: requests::secrets(secrets),
                })
                .await?;
            out.done("unpublished volume", &volume_id)
        }
        Command::CreateSnapshot { name, source_volume_id, params, secrets } => {
            let response = client
                .create_snapshot(csi_client::proto::CreateSnapshotRequest {
                    source_volume_id,
                    name,
                    secrets: requests::secrets(secrets),
                    parameters: params.into_iter().collect(),
                })
                .await?;
            out.snapshot(&response.snapshot.unwrap_or_default())
        }
        Command::DeleteSnapshot { snapshot_id, secrets } => {
            client
                .delete_snapshot(csi_client::proto::DeleteSnapshotRequest {
                    snapshot_id: snapshot_id.clone(),
                    secrets: requests::secrets(secrets),
                })
                .await?;
            out.done("deleted snapshot", &snapshot_id)
        }
        Command::CreateGroupSnapshot { name, source_volume_ids, params, secrets } => {
            let response = client
                .create_volume_group_snapshot(csi_client::proto::CreateVolumeGroupSnapshotRequest {
                    name,
                    source_volume_ids,
                    secrets: requests::secrets(secrets),
                    parameters: params.into_iter().collect(),
                })
                .await?;
            out.group_snapshot(&response.group_snapshot.unwrap_or_default())
        }
        Command::GetGroupSnapshot { group_snapshot_id, snapshot_ids, secrets } => {
            let response = client
                .get_volume_group_snapshot(csi_client::proto::GetVolumeGroupSnapshotRequest {
                    group_snapshot_id,
                    snapshot_ids,
                    secrets: requests::secrets(secrets),
                })
                .await?;
            out.group_snapshot(&response.group_snapshot.unwrap_or_default())
        }
        Command::DeleteGroupSnapshot { group_snapshot_id, snapshot_ids, secrets } => {
            client
                .delete_volume_group_snapshot(csi_client::proto::DeleteVolumeGroupSnapshotRequest {
                    group_snapshot_id: group_snapshot_id.clone(),
                    snapshot_ids,
                    secrets: requests::secrets(secrets),
                })
                .await?;
            out.done("deleted group snapshot", &group_snapshot_id)
        }
    }
    Ok(())
}
