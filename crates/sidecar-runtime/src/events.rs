//! core/v1 Events, written as client-go's `record.EventRecorder` writes them.
//!
//! Why not `kube::runtime::events::Recorder`: it writes events.k8s.io/v1 Events,
//! whose `source.component` (the "From" column of `kubectl describe` on older
//! clients, and what tools filter on) stays empty. The upstream sidecars fill it
//! (`external-resizer <driver>`, `csi-snapshotter <driver>`, ...), so ours do too.
//!
//! Repeats are folded the way client-go's correlator folds them: an event equal
//! to one already sent (same object, type, reason and message) patches that
//! Event's `count` and `lastTimestamp` instead of creating another. client-go's
//! further aggregation of *similar* messages and its spam filter are not
//! reproduced; the sidecars emit far fewer events than that guards against.
//!
//! As client-go's broadcaster, the recorder never makes its caller wait for the API server: events go into a queue
//! of [`QUEUE_CAPACITY`] that one background task sends in order, so a worker's CSI calls and writes are not held up
//! behind its events. [`crate::Sidecar::events`] gives the recorder a client on the work's rate limit at background
//! priority: an event takes a token only while no work request waits for one. When the queue is full, further events
//! are dropped with a log line, as client-go drops them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use tokio::sync::mpsc;

/// client-go keeps this many distinct events in its correlation cache.
const CACHE_CAPACITY: usize = 4096;
/// client-go's broadcaster queue length.
pub const QUEUE_CAPACITY: usize = 1000;

/// `Normal` or `Warning`, the two core/v1 event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event that pure decision code asks for: the controller records it on
/// the object it is about. Sidecars' `translate` modules return these so that
/// the event reasons and texts are table-tested without an API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl PlannedEvent {
    pub fn normal(reason: &'static str, message: impl Into<String>) -> PlannedEvent {
        PlannedEvent { event_type: EventType::Normal, reason, message: message.into() }
    }

    pub fn warning(reason: &'static str, message: impl Into<String>) -> PlannedEvent {
        PlannedEvent { event_type: EventType::Warning, reason, message: message.into() }
    }
}

/// Publishes Events from one component. Clones share the correlation cache and the send queue.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    source: EventSource,
    sent: Arc<Mutex<SentEvents>>,
    /// The background sender's queue, started by the first event (a recorder may be built outside a runtime).
    queue: Arc<OnceLock<mpsc::Sender<Pending>>>,
}

/// An event waiting in the queue.
struct Pending {
    object: ObjectReference,
    event_type: EventType,
    reason: String,
    message: String,
}

/// What makes two events "the same" for folding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    kind: Option<String>,
    api_version: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    event_type: EventType,
    reason: String,
    message: String,
}

#[derive(Debug, Clone)]
struct SentEvent {
    namespace: String,
    name: String,
    count: i32,
    sequence: u64,
}

#[derive(Default)]
struct SentEvents {
    events: HashMap<EventKey, SentEvent>,
    sequence: u64,
}

impl SentEvents {
    /// Forgets the least recently used half once full: cheap, and a forgotten
    /// event only means the next repeat creates a new Event.
    fn make_room(&mut self) {
        if self.events.len() < CACHE_CAPACITY {
            return;
        }
        let mut sequences: Vec<u64> = self.events.values().map(|e| e.sequence).collect();
        sequences.sort_unstable();
        let cutoff = sequences[sequences.len() / 2];
        self.events.retain(|_, e| e.sequence >= cutoff);
    }
}

impl EventRecorder {
    /// A recorder whose events say they come from `component` on this host, as
    /// client-go's `EventSource{Component, Host}`.
    pub fn new(client: kube::Client, component: impl Into<String>) -> EventRecorder {
        let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
        EventRecorder {
            client,
            source: EventSource { component: Some(component.into()), host: (!host.is_empty()).then_some(host) },
            sent: Arc::default(),
            queue: Arc::default(),
        }
    }

    pub fn component(&self) -> &str {
        self.source.component.as_deref().unwrap_or_default()
    }

    /// Records `event`, decided by pure code, about `object`.
    pub async fn record<K: Resource<DynamicType = ()>>(&self, object: &K, event: &PlannedEvent) {
        self.publish(&object_reference(object), event.event_type, event.reason, &event.message).await;
    }

    /// Records an event about `object`: queued for the background sender, so this never waits for the API server.
    /// Like client-go, never fails the caller: an event the API server refuses is logged and dropped, and so is one
    /// that finds the queue full.
    pub async fn publish(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        let message = bounded_message(message);
        let pending = Pending { object: object.clone(), event_type, reason: reason.to_string(), message };
        let queue = self.queue.get_or_init(|| self.start_sender());
        if let Err(err) = queue.try_send(pending) {
            let dropped = match &err {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            };
            tracing::warn!(reason = %dropped.reason, object = dropped.object.name.as_deref().unwrap_or_default(),
                "event queue full, dropping the event");
        }
    }

    /// The task that sends queued events in order; it ends when every recorder is gone.
    fn start_sender(&self) -> mpsc::Sender<Pending> {
        let (sender, mut receiver) = mpsc::channel::<Pending>(QUEUE_CAPACITY);
        let recorder = EventRecorder { queue: Arc::default(), ..self.clone() };
        tokio::spawn(async move {
            while let Some(p) = receiver.recv().await {
                if let Err(err) = recorder.try_publish(&p.object, p.event_type, &p.reason, &p.message).await {
                    tracing::warn!(
                        error = %err, reason = %p.reason, message = %p.message,
                        object = p.object.name.as_deref().unwrap_or_default(),
                        "Server rejected event (will not retry)"
                    );
                }
            }
        });
        sender
    }

    async fn try_publish(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let key = EventKey {
            kind: object.kind.clone(),
            api_version: object.api_version.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            uid: object.uid.clone(),
            event_type,
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let now = Timestamp::now();
        let previous = self.sent.lock().unwrap_or_else(|p| p.into_inner()).events.get(&key).cloned();

        if let Some(previous) = previous {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &previous.namespace);
            let count = previous.count.saturating_add(1);
            let patch = serde_json::json!({ "count": count, "lastTimestamp": Time(now) });
            match api.patch(&previous.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    self.remember(key, SentEvent { count, ..previous });
                    return Ok(());
                }
                // Expired or deleted since: start a new one.
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(err) => return Err(err),
            }
        }

        let event = self.new_event(object, event_type, reason, message, now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        Api::<Event>::namespaced(self.client.clone(), &namespace).create(&PostParams::default(), &event).await?;
        self.remember(key, SentEvent { namespace, name, count: 1, sequence: 0 });
        Ok(())
    }

    fn remember(&self, key: EventKey, mut sent: SentEvent) {
        let mut cache = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        cache.make_room();
        cache.sequence += 1;
        sent.sequence = cache.sequence;
        cache.events.insert(key, sent);
    }

    fn new_event(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Event {
        new_event(&self.source, object, event_type, reason, message, now)
    }
}

/// The reference an Event (or a content's back-pointer) makes to `object`: kind, apiVersion, namespace, name, uid and
/// resourceVersion, as client-go's `reference.GetReference` fills it.
pub fn object_reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// Longest event message sent: the note limit of events.k8s.io/v1. A driver's error can quote a user's value at any
/// length (a 64 KiB parameter); the event keeps its start, which names the problem, instead of storing it all.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `message`, cut to at most [`MAX_MESSAGE_BYTES`] on a character boundary with `...` marking the cut.
fn bounded_message(message: &str) -> String {
    const MARK: &str = "...";
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE_BYTES - MARK.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &message[..end])
}

/// The Event client-go would create: named `<object>.<unix nanos in hex>`, in
/// the object's namespace (`default` for cluster-scoped objects such as PVs).
fn new_event(
    source: &EventSource,
    object: &ObjectReference,
    event_type: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let object_name = object.name.clone().unwrap_or_default();
    let namespace = object.namespace.clone().filter(|ns| !ns.is_empty()).unwrap_or_else(|| "default".to_string());
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{object_name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        type_: Some(event_type.as_str().to_string()),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: source.host.clone(),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let ascii = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let wide = "é".repeat(MAX_MESSAGE_BYTES); // two bytes each: the cut falls inside one unless moved
        // (message, expected length in bytes, expected ending)
        let cases: [(&str, usize, &str); 4] = [
            ("short", 5, "short"),
            (&ascii[..MAX_MESSAGE_BYTES], MAX_MESSAGE_BYTES, "x"),
            (&ascii, MAX_MESSAGE_BYTES, "x..."),
            (&wide, MAX_MESSAGE_BYTES - 1, "é..."),
        ];
        for (message, length, ending) in cases {
            let bounded = bounded_message(message);
            assert_eq!(bounded.len(), length, "{}", &message[..5.min(message.len())]);
            assert!(bounded.ends_with(ending));
        }
    }

    #[test]
    fn events_look_like_client_go_ones() {
        let source =
            EventSource { component: Some("external-resizer hostpath.csi.k8s.io".into()), host: Some("node-1".into()) };
        let claim = ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some("apps".into()),
            name: Some("data".into()),
            uid: Some("1234".into()),
            api_version: Some("v1".into()),
            ..ObjectReference::default()
        };
        let now = Timestamp::from_nanosecond(1_800_000_000_000_000_255).unwrap();
        let event = new_event(&source, &claim, EventType::Warning, "VolumeResizeFailed", "boom", now);
        assert_eq!(event.metadata.name.as_deref(), Some("data.18fae27693b400ff"));
        assert_eq!(event.metadata.namespace.as_deref(), Some("apps"));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("VolumeResizeFailed"));
        assert_eq!(event.count, Some(1));
        assert_eq!(event.source, Some(source));
        assert_eq!(event.reporting_component.as_deref(), Some("external-resizer hostpath.csi.k8s.io"));
        assert_eq!(event.reporting_instance.as_deref(), Some("node-1"));
        assert_eq!(event.involved_object, claim);

        let volume = ObjectReference { kind: Some("PersistentVolume".into()), name: Some("pv-1".into()), ..claim };
        let volume = ObjectReference { namespace: None, ..volume };
        let event = new_event(&EventSource::default(), &volume, EventType::Normal, "R", "m", now);
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn references_name_the_object_as_client_go_does() {
        let claim = k8s_openapi::api::core::v1::PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("apps".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            ..Default::default()
        };
        let reference = object_reference(&claim);
        assert_eq!(reference.kind.as_deref(), Some("PersistentVolumeClaim"));
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(
            (reference.namespace.as_deref(), reference.name.as_deref(), reference.uid.as_deref()),
            (Some("apps"), Some("data"), Some("u-1"))
        );
        assert_eq!(reference.resource_version.as_deref(), Some("7"));
        assert_eq!(reference.field_path, None);
    }

    #[test]
    fn the_cache_forgets_the_oldest_half_when_full() {
        let mut cache = SentEvents::default();
        for i in 0..CACHE_CAPACITY {
            cache.sequence += 1;
            let key = EventKey {
                kind: None,
                api_version: None,
                namespace: None,
                name: Some(i.to_string()),
                uid: None,
                event_type: EventType::Normal,
                reason: "R".into(),
                message: "m".into(),
            };
            let sent =
                SentEvent { namespace: "default".into(), name: i.to_string(), count: 1, sequence: cache.sequence };
            cache.events.insert(key, sent);
        }
        cache.make_room();
        assert_eq!(cache.events.len(), CACHE_CAPACITY / 2);
        assert!(cache.events.values().all(|e| e.sequence > (CACHE_CAPACITY / 2) as u64));
    }
}
