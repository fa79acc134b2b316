//! csictl's command line.

use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(name = "csictl", version, about = "Talk to a CSI plugin over its unix socket")]
pub struct Args {
    /// The plugin's socket: unix:///path or a bare path.
    #[arg(long, global = true, env = "CSI_ENDPOINT", default_value = "/run/csi/socket")]
    pub endpoint: String,

    /// How long to wait for the socket and for each call (e.g. 10s, 500ms, 1m).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// GetPluginInfo: name, vendor version, manifest.
    Info,
    /// Probe once.
    Probe,
    /// Plugin, controller and group-controller capabilities.
    Capabilities,
    /// ListVolumes, following every page.
    ListVolumes,
    /// ListSnapshots, following every page.
    ListSnapshots {
        #[arg(long)]
        source_volume_id: Option<String>,
        #[arg(long)]
        snapshot_id: Option<String>,
    },
    /// CreateVolume.
    CreateVolume {
        name: String,
        /// Requested size in bytes or with a unit (1Gi, 500Mi, 10G).
        #[arg(long, value_parser = parse_size)]
        size: Option<i64>,
        /// Raw block instead of a mounted filesystem.
        #[arg(long)]
        block: bool,
        #[arg(long, default_value = "")]
        fs_type: String,
        #[arg(long, value_enum, default_value_t = AccessMode::SingleNodeWriter)]
        access_mode: AccessMode,
        /// StorageClass-style parameter key=value (repeatable).
        #[arg(long = "param", value_parser = parse_key_value)]
        params: Vec<(String, String)>,
        /// Mutable parameter key=value (repeatable), as a VolumeAttributesClass sets.
        #[arg(long = "mutable-param", value_parser = parse_key_value)]
        mutable_params: Vec<(String, String)>,
        /// Secret key=value (repeatable); never printed.
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
        /// Restore from this snapshot id.
        #[arg(long, conflicts_with = "from_volume")]
        from_snapshot: Option<String>,
        /// Clone this volume id.
        #[arg(long)]
        from_volume: Option<String>,
    },
    /// DeleteVolume.
    DeleteVolume {
        volume_id: String,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// ControllerExpandVolume.
    ExpandVolume {
        volume_id: String,
        #[arg(long, value_parser = parse_size)]
        size: i64,
        #[arg(long)]
        block: bool,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// ControllerModifyVolume.
    ModifyVolume {
        volume_id: String,
        #[arg(long = "mutable-param", value_parser = parse_key_value, required = true)]
        mutable_params: Vec<(String, String)>,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// ControllerPublishVolume: attach a volume to a node, as csi-attacher does for a VolumeAttachment.
    PublishVolume {
        volume_id: String,
        #[arg(long)]
        node_id: String,
        #[arg(long)]
        block: bool,
        #[arg(long, value_enum, default_value_t = AccessMode::SingleNodeWriter)]
        access_mode: AccessMode,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// ControllerUnpublishVolume: detach a volume from a node (no node: from every node).
    UnpublishVolume {
        volume_id: String,
        #[arg(long, default_value = "")]
        node_id: String,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// CreateSnapshot.
    CreateSnapshot {
        name: String,
        #[arg(long)]
        source_volume_id: String,
        #[arg(long = "param", value_parser = parse_key_value)]
        params: Vec<(String, String)>,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// DeleteSnapshot.
    DeleteSnapshot {
        snapshot_id: String,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// CreateVolumeGroupSnapshot.
    CreateGroupSnapshot {
        name: String,
        /// Source volume ids (repeat or comma-separate).
        #[arg(long = "source-volume-id", value_delimiter = ',', required = true)]
        source_volume_ids: Vec<String>,
        #[arg(long = "param", value_parser = parse_key_value)]
        params: Vec<(String, String)>,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// GetVolumeGroupSnapshot.
    GetGroupSnapshot {
        group_snapshot_id: String,
        #[arg(long = "snapshot-id", value_delimiter = ',')]
        snapshot_ids: Vec<String>,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
    /// DeleteVolumeGroupSnapshot.
    DeleteGroupSnapshot {
        group_snapshot_id: String,
        #[arg(long = "snapshot-id", value_delimiter = ',')]
        snapshot_ids: Vec<String>,
        #[arg(long = "secret", value_parser = parse_secret)]
        secrets: Vec<SecretArg>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AccessMode {
    SingleNodeWriter,
    SingleNodeReaderOnly,
    MultiNodeReaderOnly,
    MultiNodeSingleWriter,
    MultiNodeMultiWriter,
    SingleNodeSingleWriter,
    SingleNodeMultiWriter,
}

/// A `--secret key=value`; its Debug shows the key only.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretArg {
    pub key: String,
    pub value: String,
}

impl std::fmt::Debug for SecretArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}", self.key, csi_client::redact::Stripped)
    }
}

pub fn parse_secret(text: &str) -> Result<SecretArg, String> {
    // The error must not echo the text: it may be the secret itself.
    parse_key_value(text).map(|(key, value)| SecretArg { key, value }).map_err(|_| "secret is not key=value".into())
}

pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not key=value")),
    }
}

/// Sizes as Kubernetes quantities write them: plain bytes, binary (Ki..Ei)
/// or decimal (k, M, G, T, P, E) suffixes.
pub fn parse_size(text: &str) -> Result<i64, String> {
    csi_client::quantity::parse_bytes(text).map_err(|e| e.to_string())
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len()));
    let value: f64 = number.parse().map_err(|_| format!("{text:?} is not a duration"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" | "" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let table = [
            ("1024", Ok(1024)),
            ("1Ki", Ok(1024)),
            ("1Gi", Ok(1 << 30)),
            ("10G", Ok(10_000_000_000)),
            ("5Mi", Ok(5 << 20)),
            ("1.5Gi", Ok(3 << 29)),
            ("1Xi", Err(())),
            ("Gi", Err(())),
            ("99999999999Ei", Err(())),
        ];
        for (input, want) in table {
            assert_eq!(parse_size(input).map_err(|_| ()), want, "{input}");
        }
    }

    #[test]
    fn durations() {
        let table = [
            ("10s", Some(Duration::from_secs(10))),
            ("500ms", Some(Duration::from_millis(500))),
            ("2m", Some(Duration::from_secs(120))),
            ("3", Some(Duration::from_secs(3))),
            ("1d", None),
        ];
        for (input, want) in table {
            assert_eq!(parse_duration(input).ok(), want, "{input}");
        }
    }

    #[test]
    fn key_values() {
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("=b").is_err());
        assert!(parse_key_value("ab").is_err());
    }

    #[test]
    fn parses_a_full_create() {
        let args = Args::try_parse_from([
            "csictl",
            "--endpoint",
            "/tmp/x.sock",
            "-o",
            "json",
            "create-volume",
            "pvc-1",
            "--size",
            "1Gi",
            "--block",
            "--param",
            "type=fast",
            "--mutable-param",
            "iops=100",
            "--secret",
            "k=v",
        ])
        .unwrap();
        assert_eq!(args.output, Format::Json);
        match args.command {
            Command::CreateVolume { name, size, block, params, mutable_params, secrets, .. } => {
                assert_eq!(name, "pvc-1");
                assert_eq!(size, Some(1 << 30));
                assert!(block);
                assert_eq!(params, vec![("type".into(), "fast".into())]);
                assert_eq!(mutable_params, vec![("iops".into(), "100".into())]);
                assert_eq!(secrets, vec![SecretArg { key: "k".into(), value: "v".into() }]);
                assert_eq!(format!("{secrets:?}"), "[k=***stripped***]");
            }
            other => panic!("{other:?}"),
        }
    }
}
