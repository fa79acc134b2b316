//! The Gateway API's ReferenceGrant, which cross-namespace data sources are checked against (KEP-3294). The CRD belongs
//! to the Gateway API and the chart does not ship it; [`crate::crds::reference_grant_crd`] generates the part the
//! sidecars read, for clusters (and the e2e suite) that lack it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `gateway.networking.k8s.io/v1beta1` ReferenceGrant, the part the provisioner reads.
#[derive(CustomResource, JsonSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1beta1",
    kind = "ReferenceGrant",
    doc = "Lets objects of other namespaces refer to objects of this one (Gateway API).",
    plural = "referencegrants",
    singular = "referencegrant",
    shortname = "refgrant",
    namespaced
)]
pub struct ReferenceGrantSpec {
    /// Who may refer (namespace and kind of the referring object).
    #[serde(default)]
    pub from: Vec<ReferenceGrantFrom>,
    /// What may be referred to in the grant's namespace.
    #[serde(default)]
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantFrom {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantTo {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    /// Empty or absent: every object of the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
