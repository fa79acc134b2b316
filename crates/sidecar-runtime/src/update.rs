//! Changing an object with an `update`, the verb upstream's RBAC roles grant on claims and snapshots
//! (`persistentvolumeclaims`: get, list, watch, update; no patch), and the commonest such change: adding or removing
//! a finalizer. The write carries the resourceVersion and UID of the object it was computed from, so it never
//! overwrites a newer object or touches one recreated under the same name; on a Conflict the object is read again and
//! the change computed anew.

use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api_error::{is_conflict, is_not_found};

/// How many times a Conflict is answered by reading again before the error goes to the caller (whose work queue
/// retries with backoff).
const CONFLICT_ATTEMPTS: usize = 5;

/// The finalizer list with `finalizer` present (`wanted`) or absent; `None` when the list is already so.
pub fn finalizers_with(finalizers: Option<&[String]>, finalizer: &str, wanted: bool) -> Option<Vec<String>> {
    let finalizers = finalizers.unwrap_or_default();
    let present = finalizers.iter().any(|f| f == finalizer);
    if present == wanted {
        return None;
    }
    let mut changed: Vec<String> = finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
    if wanted {
        changed.push(finalizer.to_string());
    }
    Some(changed)
}

/// Creates `object`, or reads the one a previous run created under the same (derived) name.
pub async fn create_or_get<K>(api: &Api<K>, object: &K) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Err(err) if is_conflict(&err) => api.get(&object.name_any()).await,
        other => other,
    }
}

/// Deletes by name; NotFound counts as done.
pub async fn delete_by_name<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Err(err) if is_not_found(&err) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// What [`update`] did.
#[derive(Debug)]
pub enum Updated<K> {
    /// The object as stored after the update.
    Written(K),
    /// The object already was as wanted (as read last).
    Unchanged,
    /// The object is gone, or was recreated under the same name.
    Gone,
}

impl<K> Updated<K> {
    /// The stored object, when this call wrote one.
    pub fn written(self) -> Option<K> {
        match self {
            Updated::Written(object) => Some(object),
            _ => None,
        }
    }
}

/// Makes `finalizer` present (`wanted`) or absent on `object` (see [`update`]).
pub async fn set_finalizer<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
    wanted: bool,
) -> Result<Updated<K>, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    update(api, object, |current| {
        let finalizers = finalizers_with(current.meta().finalizers.as_deref(), finalizer, wanted)?;
        let mut updated = current.clone();
        updated.meta_mut().finalizers = Some(finalizers);
        Some(updated)
    })
    .await
}

/// Writes `change(object)` (`None`: nothing to change) with an update guarded by the object's resourceVersion and
/// UID. On a Conflict, reads the object again (by name; a different UID means it is gone) and applies `change` to
/// that, a few times before the Conflict goes to the caller.
pub async fn update<K>(api: &Api<K>, object: &K, change: impl Fn(&K) -> Option<K>) -> Result<Updated<K>, kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let uid = object.meta().uid.clone();
    let name = object.meta().name.clone().unwrap_or_default();
    let mut current = object.clone();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(updated) = change(&current) else { return Ok(Updated::Unchanged) };
        match api.replace(&name, &PostParams::default(), &updated).await {
            Ok(stored) => return Ok(Updated::Written(stored)),
            Err(err) if is_not_found(&err) => return Ok(Updated::Gone),
            Err(err) if is_conflict(&err) && attempt < CONFLICT_ATTEMPTS => match api.get_opt(&name).await? {
                Some(fresh) if fresh.meta().uid == uid => current = fresh,
                _ => return Ok(Updated::Gone),
            },
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_list_changes_only_when_it_must() {
        let ours = "example.com/protection";
        // (case, finalizers, wanted, result)
        type Row = (&'static str, Option<Vec<String>>, bool, Option<Vec<String>>);
        let table: [Row; 7] = [
            ("add to none", None, true, Some(list(&[ours]))),
            ("add to an empty list", Some(list(&[])), true, Some(list(&[ours]))),
            ("add after others, keeping their order", Some(list(&["a", "b"])), true, Some(list(&["a", "b", ours]))),
            ("already there", Some(list(&["a", ours])), true, None),
            ("remove, keeping the others' order", Some(list(&["a", ours, "b"])), false, Some(list(&["a", "b"]))),
            ("remove the last one", Some(list(&[ours])), false, Some(list(&[]))),
            ("already absent", Some(list(&["a"])), false, None),
        ];
        for (case, finalizers, wanted, want) in table {
            assert_eq!(finalizers_with(finalizers.as_deref(), ours, wanted), want, "{case}");
        }
    }
}
