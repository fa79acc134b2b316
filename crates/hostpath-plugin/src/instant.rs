//! A point in time as the plugin stores it and CSI sends it (`google.protobuf.Timestamp`): when a snapshot or group
//! snapshot was cut, when a Create call made its object.

use serde::{Deserialize, Serialize};

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instant {
    pub seconds: i64,
    pub nanos: i32,
}

impl Instant {
    pub fn now() -> Self {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Self { seconds: since.as_secs() as i64, nanos: since.subsec_nanos() as i32 }
    }

    pub fn timestamp(self) -> prost_types::Timestamp {
        prost_types::Timestamp { seconds: self.seconds, nanos: self.nanos }
    }
}
