use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The last error of a snapshot operation, as the controllers record it in a status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotError {
    /// When the error happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// The error text. It may be shown to users, so it never carries secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
