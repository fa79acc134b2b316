//! Identity and volume RPCs against an in-process plugin.

mod common;

use common::*;
use csi_client::proto::controller_service_capability::rpc;
use csi_client::proto::plugin_capability::service;
use csi_client::proto::volume_capability::access_mode::Mode;
use csi_client::proto::volume_capability::{AccessType, BlockVolume, MountVolume};
use csi_client::proto::{
    CapacityRange, ControllerExpandVolumeRequest, ControllerGetCapabilitiesRequest, ControllerGetVolumeRequest,
    ControllerModifyVolumeRequest, DeleteVolumeRequest, GetCapacityRequest, GetPluginCapabilitiesRequest,
    GetPluginInfoRequest, ListVolumesRequest, ProbeRequest, Topology, TopologyRequirement,
    ValidateVolumeCapabilitiesRequest,
};
use hostpath_plugin::mutable::MutableParameterPolicy;
use hostpath_plugin::topology::NODE_KEY;
use hostpath_plugin::volumes::ACCESS_MODES_CONTEXT_KEY;
use tonic::Code;

#[tokio::test]
async fn identity_reports_name_version_capabilities_and_readiness() {
    let plugin = TestPlugin::start_with(|c| c.driver_name = "example.csi.test".into()).await;
    let mut identity = plugin.identity().await;
    let info = identity.get_plugin_info(GetPluginInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.name, "example.csi.test");
    assert!(!info.vendor_version.is_empty());

    let capabilities = identity.get_plugin_capabilities(GetPluginCapabilitiesRequest {}).await.unwrap().into_inner();
    let mut services: Vec<i32> = capabilities
        .capabilities
        .iter()
        .filter_map(|c| c.r#type)
        .map(|t| match t {
            csi_client::proto::plugin_capability::Type::Service(s) => s.r#type,
            csi_client::proto::plugin_capability::Type::VolumeExpansion(_) => -1,
        })
        .collect();
    services.sort();
    let mut want = vec![
        service::Type::ControllerService as i32,
        service::Type::VolumeAccessibilityConstraints as i32,
        service::Type::GroupControllerService as i32,
    ];
    want.sort();
    assert_eq!(services, want);

    assert_eq!(identity.probe(ProbeRequest {}).await.unwrap().into_inner().ready, Some(true));
}

async fn controller_capabilities(plugin: &TestPlugin) -> Vec<i32> {
    let response =
        plugin.controller().await.controller_get_capabilities(ControllerGetCapabilitiesRequest {}).await.unwrap();
    response
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| c.r#type)
        .map(|csi_client::proto::controller_service_capability::Type::Rpc(r)| r.r#type)
        .collect()
}

#[tokio::test]
async fn controller_capabilities_follow_the_mutable_parameter_flag() {
    let plugin = TestPlugin::start().await;
    let capabilities = controller_capabilities(&plugin).await;
    for wanted in [
        rpc::Type::CreateDeleteVolume,
        rpc::Type::CreateDeleteSnapshot,
        rpc::Type::ListVolumes,
        rpc::Type::ListSnapshots,
        rpc::Type::CloneVolume,
        rpc::Type::ExpandVolume,
        rpc::Type::ModifyVolume,
        rpc::Type::GetCapacity,
        rpc::Type::SingleNodeMultiWriter,
    ] {
        assert!(capabilities.contains(&(wanted as i32)), "{wanted:?} missing");
    }
    assert!(!capabilities.contains(&(rpc::Type::PublishUnpublishVolume as i32)));

    let disabled = TestPlugin::start_with(|c| c.mutable_parameters = MutableParameterPolicy::from_flag("")).await;
    assert!(!controller_capabilities(&disabled).await.contains(&(rpc::Type::ModifyVolume as i32)));
    let mut controller = disabled.controller().await;
    let mut request = create_request("with-vac", GI, mount());
    request.mutable_parameters = pairs(&[("iops", "100")]);
    assert_code(controller.create_volume(request).await, Code::InvalidArgument);
    let id = controller
        .create_volume(create_request("plain", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let modify = ControllerModifyVolumeRequest {
        volume_id: id,
        mutable_parameters: pairs(&[("iops", "1")]),
        ..Default::default()
    };
    assert_code(controller.controller_modify_volume(modify).await, Code::Unimplemented);
}

#[tokio::test]
async fn create_is_idempotent_and_conflicts_are_already_exists() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut request = create_request("vol-a", 2 * GI, mount());
    request.parameters = pairs(&[("kind", "fast")]);
    let first = controller.create_volume(request.clone()).await.unwrap().into_inner().volume.unwrap();
    assert_eq!(first.capacity_bytes, 2 * GI);
    assert_eq!(first.volume_context, pairs(&[("kind", "fast")]));
    assert_eq!(first.accessible_topology[0].segments, pairs(&[(NODE_KEY, NODE)]));
    assert!(plugin.volume_path(&first.volume_id).is_dir());

    let again = controller.create_volume(request.clone()).await.unwrap().into_inner().volume.unwrap();
    assert_eq!(again, first);

    let conflicts = [
        ("bigger", {
            let mut r = request.clone();
            r.capacity_range = Some(CapacityRange { required_bytes: 3 * GI, limit_bytes: 0 });
            r
        }),
        ("block", {
            let mut r = request.clone();
            r.volume_capabilities = vec![block()];
            r
        }),
        ("parameters", {
            let mut r = request.clone();
            r.parameters = pairs(&[("kind", "slow")]);
            r
        }),
        ("mutable", {
            let mut r = request.clone();
            r.mutable_parameters = pairs(&[("iops", "5")]);
            r
        }),
        ("limit", {
            let mut r = request.clone();
            r.capacity_range = Some(CapacityRange { required_bytes: GI, limit_bytes: GI });
            r
        }),
    ];
    for (what, conflicting) in conflicts {
        let status = assert_code(controller.create_volume(conflicting).await, Code::AlreadyExists);
        assert!(status.message().contains("vol-a"), "{what}: {status:?}");
    }

    let listed = controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.entries.len(), 1, "conflicts created nothing");

    controller
        .delete_volume(DeleteVolumeRequest { volume_id: first.volume_id.clone(), ..Default::default() })
        .await
        .unwrap();
    assert!(!plugin.volume_path(&first.volume_id).exists());
    controller
        .delete_volume(DeleteVolumeRequest { volume_id: first.volume_id.clone(), ..Default::default() })
        .await
        .unwrap();
    controller
        .delete_volume(DeleteVolumeRequest { volume_id: "never-existed".into(), ..Default::default() })
        .await
        .unwrap();
}

#[tokio::test]
async fn block_volumes_are_sparse_files_and_mount_volumes_directories() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let block_volume =
        controller.create_volume(create_request("b", 5 * GI, block())).await.unwrap().into_inner().volume.unwrap();
    let file = std::fs::metadata(plugin.volume_path(&block_volume.volume_id)).unwrap();
    assert!(file.is_file());
    assert_eq!(file.len(), 5 << 30);

    let mount_volume =
        controller.create_volume(create_request("m", GI, mount())).await.unwrap().into_inner().volume.unwrap();
    assert!(plugin.volume_path(&mount_volume.volume_id).is_dir());

    // Without a capacity range a volume gets the default size.
    let mut no_size = create_request("default-size", 0, mount());
    no_size.capacity_range = None;
    assert_eq!(controller.create_volume(no_size).await.unwrap().into_inner().volume.unwrap().capacity_bytes, GI);
}

#[tokio::test]
async fn malformed_requests_get_the_spec_codes() {
    let plugin = TestPlugin::start_with(|c| c.max_volume_size = 10 * GI).await;
    let mut controller = plugin.controller().await;
    let no_mode = csi_client::proto::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: None,
    };
    let mut both = create_request("both", GI, mount());
    both.volume_capabilities.push(block());
    let mut negative = create_request("negative", GI, mount());
    negative.capacity_range = Some(CapacityRange { required_bytes: -1, limit_bytes: 0 });
    let mut inverted = create_request("inverted", GI, mount());
    inverted.capacity_range = Some(CapacityRange { required_bytes: 2 * GI, limit_bytes: GI });
    let mut bad_iops = create_request("bad-iops", GI, mount());
    bad_iops.mutable_parameters = pairs(&[("iops", "zero")]);
    let mut unknown_key = create_request("unknown-key", GI, mount());
    unknown_key.mutable_parameters = pairs(&[("XXX_FakeKey", "x")]);
    let mut elsewhere = create_request("elsewhere", GI, mount());
    elsewhere.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![Topology { segments: pairs(&[(NODE_KEY, "other-node")]) }],
        preferred: vec![],
    });
    let mut missing_snapshot = create_request("from-missing-snapshot", GI, mount());
    missing_snapshot.volume_content_source = Some(csi_client::proto::VolumeContentSource {
        r#type: Some(csi_client::proto::volume_content_source::Type::Snapshot(
            csi_client::proto::volume_content_source::SnapshotSource { snapshot_id: "nope".into() },
        )),
    });
    let mut missing_volume = create_request("from-missing-volume", GI, mount());
    missing_volume.volume_content_source = Some(csi_client::proto::VolumeContentSource {
        r#type: Some(csi_client::proto::volume_content_source::Type::Volume(
            csi_client::proto::volume_content_source::VolumeSource { volume_id: "nope".into() },
        )),
    });

    let cases = vec![
        ("no name", create_request("", GI, mount()), Code::InvalidArgument),
        (
            "no capabilities",
            {
                let mut r = create_request("x", GI, mount());
                r.volume_capabilities.clear();
                r
            },
            Code::InvalidArgument,
        ),
        ("no access mode", create_request("x", GI, no_mode), Code::InvalidArgument),
        ("block and mount", both, Code::InvalidArgument),
        ("negative size", negative, Code::InvalidArgument),
        ("required above limit", inverted, Code::InvalidArgument),
        ("too large", create_request("huge", 11 * GI, mount()), Code::OutOfRange),
        ("bad mutable value", bad_iops, Code::InvalidArgument),
        ("unknown mutable key", unknown_key, Code::InvalidArgument),
        ("other node only", elsewhere, Code::ResourceExhausted),
        ("missing snapshot", missing_snapshot, Code::NotFound),
        ("missing volume", missing_volume, Code::NotFound),
    ];
    for (what, request, code) in cases {
        let result = controller.create_volume(request).await;
        assert_eq!(result.as_ref().map_err(|s| s.code()).err(), Some(code), "{what}: {result:?}");
    }
    assert!(controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner().entries.is_empty());

    assert_code(controller.delete_volume(DeleteVolumeRequest::default()).await, Code::InvalidArgument);
    assert_code(
        controller.validate_volume_capabilities(ValidateVolumeCapabilitiesRequest::default()).await,
        Code::InvalidArgument,
    );
    let validate_missing = ValidateVolumeCapabilitiesRequest {
        volume_id: "nope".into(),
        volume_capabilities: vec![mount()],
        ..Default::default()
    };
    assert_code(controller.validate_volume_capabilities(validate_missing).await, Code::NotFound);
    assert_code(
        controller.controller_expand_volume(ControllerExpandVolumeRequest::default()).await,
        Code::InvalidArgument,
    );
    let expand_no_range = ControllerExpandVolumeRequest { volume_id: "nope".into(), ..Default::default() };
    assert_code(controller.controller_expand_volume(expand_no_range).await, Code::InvalidArgument);
    let expand_missing = ControllerExpandVolumeRequest {
        volume_id: "nope".into(),
        capacity_range: Some(CapacityRange { required_bytes: GI, limit_bytes: 0 }),
        ..Default::default()
    };
    assert_code(controller.controller_expand_volume(expand_missing).await, Code::NotFound);
    assert_code(
        controller.list_volumes(ListVolumesRequest { starting_token: "bogus".into(), ..Default::default() }).await,
        Code::Aborted,
    );
    assert_code(
        controller.list_volumes(ListVolumesRequest { max_entries: -1, ..Default::default() }).await,
        Code::InvalidArgument,
    );
    assert_code(
        controller.controller_get_volume(ControllerGetVolumeRequest { volume_id: "nope".into() }).await,
        Code::NotFound,
    );
}

#[tokio::test]
async fn topology_requirements_that_include_this_node_are_honoured() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut request = create_request("here", GI, mount());
    request.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![
            Topology { segments: pairs(&[(NODE_KEY, "other-node")]) },
            Topology { segments: pairs(&[(NODE_KEY, NODE)]) },
        ],
        preferred: vec![Topology { segments: pairs(&[(NODE_KEY, "other-node")]) }],
    });
    let volume = controller.create_volume(request).await.unwrap().into_inner().volume.unwrap();
    assert_eq!(volume.accessible_topology, vec![Topology { segments: pairs(&[(NODE_KEY, NODE)]) }]);
}

#[tokio::test]
async fn validate_confirms_matching_capabilities_only() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let id = controller
        .create_volume(create_request("v", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let ask = |capability| ValidateVolumeCapabilitiesRequest {
        volume_id: id.clone(),
        volume_capabilities: vec![capability],
        ..Default::default()
    };
    let confirmed = controller.validate_volume_capabilities(ask(mount())).await.unwrap().into_inner();
    assert_eq!(confirmed.confirmed.unwrap().volume_capabilities, vec![mount()]);
    let refused = controller.validate_volume_capabilities(ask(block())).await.unwrap().into_inner();
    assert!(refused.confirmed.is_none());
    assert!(refused.message.contains("mount"), "{}", refused.message);
}

#[tokio::test]
async fn expand_grows_the_volume_and_says_whether_the_node_must_follow() {
    let plugin = TestPlugin::start_with(|c| c.max_volume_size = 20 * GI).await;
    let mut controller = plugin.controller().await;
    let block_id = controller
        .create_volume(create_request("b", GI, block()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let mount_id = controller
        .create_volume(create_request("m", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let expand = |id: &str, bytes: i64| ControllerExpandVolumeRequest {
        volume_id: id.into(),
        capacity_range: Some(CapacityRange { required_bytes: bytes, limit_bytes: 0 }),
        ..Default::default()
    };

    let grown = controller.controller_expand_volume(expand(&block_id, 3 * GI)).await.unwrap().into_inner();
    assert_eq!((grown.capacity_bytes, grown.node_expansion_required), (3 * GI, false));
    assert_eq!(std::fs::metadata(plugin.volume_path(&block_id)).unwrap().len(), 3 << 30);

    let grown = controller.controller_expand_volume(expand(&mount_id, 2 * GI)).await.unwrap().into_inner();
    assert_eq!((grown.capacity_bytes, grown.node_expansion_required), (2 * GI, true));

    // Shrinking is a no-op that answers the current size; repeating an expansion answers the same.
    let shrunk = controller.controller_expand_volume(expand(&block_id, GI)).await.unwrap().into_inner();
    assert_eq!(shrunk.capacity_bytes, 3 * GI);
    assert_eq!(std::fs::metadata(plugin.volume_path(&block_id)).unwrap().len(), 3 << 30);
    let repeated = controller.controller_expand_volume(expand(&mount_id, 2 * GI)).await.unwrap().into_inner();
    assert_eq!((repeated.capacity_bytes, repeated.node_expansion_required), (2 * GI, true));

    assert_code(controller.controller_expand_volume(expand(&mount_id, 21 * GI)).await, Code::OutOfRange);
    let mut wrong_type = expand(&mount_id, 4 * GI);
    wrong_type.volume_capability = Some(block());
    assert_code(controller.controller_expand_volume(wrong_type).await, Code::InvalidArgument);

    let listed = controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
    let sizes: Vec<i64> = listed.entries.iter().map(|e| e.volume.as_ref().unwrap().capacity_bytes).collect();
    assert_eq!(sizes, vec![3 * GI, 2 * GI]);
}

#[tokio::test]
async fn capacity_is_what_volumes_have_not_taken() {
    let plugin = TestPlugin::start_with(|c| {
        c.capacity = 10 * GI;
        c.max_volume_size = 8 * GI;
    })
    .await;
    let mut controller = plugin.controller().await;
    let capacity =
        |topology: Option<Topology>| GetCapacityRequest { accessible_topology: topology, ..Default::default() };
    let empty = controller.get_capacity(capacity(None)).await.unwrap().into_inner();
    assert_eq!((empty.available_capacity, empty.maximum_volume_size), (10 * GI, Some(8 * GI)));

    let id = controller
        .create_volume(create_request("a", 4 * GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let after = controller.get_capacity(capacity(None)).await.unwrap().into_inner();
    assert_eq!((after.available_capacity, after.maximum_volume_size), (6 * GI, Some(6 * GI)));

    let here = Topology { segments: pairs(&[(NODE_KEY, NODE)]) };
    let there = Topology { segments: pairs(&[(NODE_KEY, "elsewhere")]) };
    assert_eq!(controller.get_capacity(capacity(Some(here))).await.unwrap().into_inner().available_capacity, 6 * GI);
    assert_eq!(controller.get_capacity(capacity(Some(there))).await.unwrap().into_inner().available_capacity, 0);

    assert_code(controller.create_volume(create_request("b", 7 * GI, mount())).await, Code::ResourceExhausted);
    let expand = ControllerExpandVolumeRequest {
        volume_id: id,
        capacity_range: Some(CapacityRange { required_bytes: 11 * GI, limit_bytes: 0 }),
        ..Default::default()
    };
    assert_code(controller.controller_expand_volume(expand).await, Code::OutOfRange);
}

#[tokio::test]
async fn modify_validates_then_stores_and_list_shows_the_values() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut request = create_request("vac", GI, mount());
    request.parameters = pairs(&[("kind", "fast")]);
    request.mutable_parameters = pairs(&[("iops", "3000"), ("throughput", "50MiB/s")]);
    let created = controller.create_volume(request).await.unwrap().into_inner().volume.unwrap();
    // CreateVolume's context is what a CO stores for good, so it carries no mutable parameters.
    assert_eq!(created.volume_context, pairs(&[("kind", "fast")]));
    let id = created.volume_id;

    let context = |controller: &mut csi_client::proto::controller_client::ControllerClient<_>| {
        let mut controller = controller.clone();
        let id = id.clone();
        async move {
            let got = controller.controller_get_volume(ControllerGetVolumeRequest { volume_id: id }).await.unwrap();
            let listed = controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
            let from_list = listed.entries[0].volume.clone().unwrap().volume_context;
            let from_get = got.into_inner().volume.unwrap().volume_context;
            assert_eq!(from_list, from_get);
            from_list
        }
    };
    assert_eq!(
        context(&mut controller).await,
        pairs(&[
            ("kind", "fast"),
            ("hostpath.csi.k8s.io/iops", "3000"),
            ("hostpath.csi.k8s.io/throughput", "50MiB/s"),
            (ACCESS_MODES_CONTEXT_KEY, "SINGLE_NODE_WRITER"),
        ])
    );

    let modify = |params: &[(&str, &str)]| ControllerModifyVolumeRequest {
        volume_id: id.clone(),
        mutable_parameters: pairs(params),
        ..Default::default()
    };
    controller.controller_modify_volume(modify(&[("iops", "6000")])).await.unwrap();
    assert_eq!(
        context(&mut controller).await,
        pairs(&[
            ("kind", "fast"),
            ("hostpath.csi.k8s.io/iops", "6000"),
            ("hostpath.csi.k8s.io/throughput", "50MiB/s"),
            (ACCESS_MODES_CONTEXT_KEY, "SINGLE_NODE_WRITER"),
        ]),
        "keys left out keep their values"
    );

    // A bad value or key anywhere in the request changes nothing, and the error names the key.
    for (params, key) in [
        (&[("iops", "9000"), ("throughput", "fast")][..], "throughput"),
        (&[("iops", "9000"), ("XXX_FakeKey", "1")][..], "XXX_FakeKey"),
        (&[("iops", "-1")][..], "iops"),
    ] {
        let status = assert_code(controller.controller_modify_volume(modify(params)).await, Code::InvalidArgument);
        assert!(status.message().contains(key), "{status:?}");
    }
    assert_eq!(context(&mut controller).await["hostpath.csi.k8s.io/iops"], "6000");

    controller.controller_modify_volume(modify(&[])).await.unwrap();
    let missing = ControllerModifyVolumeRequest {
        volume_id: "nope".into(),
        mutable_parameters: pairs(&[("iops", "1")]),
        ..Default::default()
    };
    assert_code(controller.controller_modify_volume(missing).await, Code::NotFound);
    let no_id = ControllerModifyVolumeRequest { mutable_parameters: pairs(&[("iops", "1")]), ..Default::default() };
    assert_code(controller.controller_modify_volume(no_id).await, Code::InvalidArgument);
}

#[tokio::test]
async fn list_pages_survive_deletions_and_see_new_volumes() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut ids = Vec::new();
    for name in ["a", "b", "c", "d"] {
        ids.push(
            controller
                .create_volume(create_request(name, GI, mount()))
                .await
                .unwrap()
                .into_inner()
                .volume
                .unwrap()
                .volume_id,
        );
    }
    let first = controller
        .list_volumes(ListVolumesRequest { max_entries: 2, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let page_ids: Vec<String> = first.entries.iter().map(|e| e.volume.clone().unwrap().volume_id).collect();
    assert_eq!(page_ids, ids[..2]);
    assert!(!first.next_token.is_empty());

    // Deleting the first page and adding a volume keeps the token valid: the rest, then the new one.
    for id in &ids[..2] {
        controller.delete_volume(DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() }).await.unwrap();
    }
    let added = controller
        .create_volume(create_request("e", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let rest = controller
        .list_volumes(ListVolumesRequest { starting_token: first.next_token, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let rest_ids: Vec<String> = rest.entries.iter().map(|e| e.volume.clone().unwrap().volume_id).collect();
    assert_eq!(rest_ids, vec![ids[2].clone(), ids[3].clone(), added]);
    assert!(rest.next_token.is_empty());
}

#[tokio::test]
async fn several_access_modes_are_accepted() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    for (index, mode) in
        [Mode::SingleNodeMultiWriter, Mode::SingleNodeReaderOnly, Mode::SingleNodeWriter].into_iter().enumerate()
    {
        let request =
            create_request(&format!("mode-{index}"), GI, capability(AccessType::Mount(MountVolume::default()), mode));
        controller.create_volume(request).await.unwrap();
    }
}

#[tokio::test]
async fn single_node_multi_writer_support_follows_the_flag() {
    let full = TestPlugin::start().await;
    let old = TestPlugin::start_with(|c| c.single_node_multi_writer = false).await;
    let advertised = rpc::Type::SingleNodeMultiWriter as i32;
    assert!(controller_capabilities(&full).await.contains(&advertised));
    assert!(!controller_capabilities(&old).await.contains(&advertised));

    // (mode, accepted by the full plugin, accepted without SINGLE_NODE_MULTI_WRITER)
    let table = [
        (Mode::SingleNodeWriter, true, true),
        (Mode::SingleNodeReaderOnly, true, true),
        (Mode::SingleNodeSingleWriter, true, false),
        (Mode::SingleNodeMultiWriter, true, false),
        // Its volumes live on one node: never a MULTI_NODE_* mode.
        (Mode::MultiNodeMultiWriter, false, false),
        (Mode::MultiNodeReaderOnly, false, false),
    ];
    for (plugin, column) in [(&full, 0), (&old, 1)] {
        let mut controller = plugin.controller().await;
        for (mode, full_accepts, old_accepts) in table {
            let accepted = [full_accepts, old_accepts][column];
            let name = format!("mode-{}", mode.as_str_name());
            let request = create_request(&name, GI, capability(AccessType::Mount(MountVolume::default()), mode));
            match controller.create_volume(request).await {
                Ok(created) => {
                    assert!(accepted, "{mode:?} accepted (column {column})");
                    let id = created.into_inner().volume.unwrap().volume_id;
                    let got = controller.controller_get_volume(ControllerGetVolumeRequest { volume_id: id }).await;
                    let context = got.unwrap().into_inner().volume.unwrap().volume_context;
                    assert_eq!(context[ACCESS_MODES_CONTEXT_KEY], mode.as_str_name(), "the mode is recorded");
                }
                Err(status) => {
                    assert!(!accepted, "{mode:?} refused (column {column}): {status:?}");
                    assert_eq!(status.code(), Code::InvalidArgument);
                }
            }
        }
    }
}

#[tokio::test]
async fn block_support_follows_the_flag() {
    let plugin = TestPlugin::start_with(|c| c.block = false).await;
    let mut controller = plugin.controller().await;
    let block = capability(AccessType::Block(BlockVolume {}), Mode::SingleNodeWriter);
    let refused = controller.create_volume(create_request("raw", GI, block.clone())).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("block volumes are not supported"), "{}", refused.message());

    let mount = capability(AccessType::Mount(MountVolume::default()), Mode::SingleNodeWriter);
    let created = controller.create_volume(create_request("fs", GI, mount)).await.unwrap().into_inner();
    let volume_id = created.volume.unwrap().volume_id;
    let validated = controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id,
            volume_capabilities: vec![block],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(validated.confirmed.is_none(), "block is not confirmed");
    assert!(validated.message.contains("block volumes are not supported"), "{}", validated.message);
}
