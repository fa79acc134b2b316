/// Why something could not be translated. The texts end up in events and logs.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TranslationError {
    #[error("could not find in-tree storage class parameter translation logic for {0:?}")]
    UnknownPlugin(String),
    #[error("could not find in-tree plugin translation logic for {0}")]
    UnknownDriver(String),
    #[error("could not find in-tree plugin translation logic for {0:?}")]
    NotMigratable(String),
    #[error("CSI persistent volume {0:?} has no CSI source")]
    NotCsi(String),
    #[error("cannot simultaneously set allowed topologies and zone/zones parameters")]
    ZonesAndAllowedTopologies,
    #[error("failed to translate Kubernetes ID to EBS Volume ID: {0}")]
    EbsVolumeId(String),
    #[error("{0}")]
    VolumeHandle(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("failed to convert partition {0:?} to integer")]
    Partition(String),
    #[error("failed to translate topology: {0}")]
    Topology(String),
}
