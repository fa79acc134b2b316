//! Reading the Secret a CSI call needs, live (as upstream: no Secret cache, so a sidecar needs `get` on Secrets only
//! when a class names one). The data goes into the CSI request only; it is never logged.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

/// The Secret's data as strings (`stringData` filling keys `data` lacks).
pub async fn secret_data(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<HashMap<String, String>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get(name).await?;
    let mut data: HashMap<String, String> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, String::from_utf8_lossy(&value.0).into_owned()))
        .collect();
    for (key, value) in secret.string_data.unwrap_or_default() {
        data.entry(key).or_insert(value);
    }
    Ok(data)
}
