//! One fresh namespace per test, removed when the test ends.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace made for one test. Dropping it deletes it (in the background:
/// the namespace controller finishes the job after the test).
#[derive(Debug)]
pub struct TestNamespace {
    name: String,
}

impl TestNamespace {
    /// Creates `e2e-<prefix>-<pid>-<n>`.
    pub async fn create(client: &kube::Client, prefix: &str) -> TestNamespace {
        let name = format!("e2e-{prefix}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace =
            Namespace { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, ..Default::default() };
        namespaces.create(&PostParams::default(), &namespace).await.expect("create test namespace");
        TestNamespace { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down:
        // delete from a thread with a runtime of its own.
        let name = self.name.clone();
        crate::control_plane::cluster::clean_up(move |client| async move {
            let namespaces: Api<Namespace> = Api::all(client);
            let _ = namespaces.delete(&name, &DeleteParams::background()).await;
        });
    }
}
