//! A journal of work in flight, kept in the annotations of one Lease: what a controller must remember across a crash
//! (a CSI call whose outcome it has not recorded yet) without writing each object it works on.
//!
//! Writes are grouped: callers [`Journal::put`] an entry and wait; one writer task folds every entry pending at that
//! moment into a single guarded update of the Lease (on Conflict it reads the Lease again and folds once more) and
//! then answers them all, so a hundred calls starting together cost one or two writes. Removals are not urgent (a
//! stale entry costs its owner a check, not a mistake): they ride along with the next write, or go together once no
//! caller has written for [`JournalOptions::removal_delay`] (and at the latest [`REMOVAL_MAX_WAIT`] times that after
//! the oldest of them).
//!
//! The journal never holds more than [`merge::Bounds`] allows; an entry it cannot take (too big, journal full, the
//! Lease not readable or writable) is answered with [`Refused`], and the caller protects its work another way.
//! Leases are what upstream's roles let every sidecar write in its namespace, so the journal needs no new RBAC.

pub mod merge;
#[cfg(test)]
#[path = "journal_prop.rs"]
mod prop_tests;
#[cfg(test)]
mod writer_tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api_error::{api_error_text, is_conflict, is_not_found};
pub use merge::{Bounds, Changes, Refused};

/// Where the journal lives and how it writes.
#[derive(Clone, Debug)]
pub struct JournalOptions {
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Every entry is the annotation `prefix` + key.
    pub prefix: String,
    pub bounds: Bounds,
    /// How long the journal must be quiet before pending removals are written on their own.
    pub removal_delay: Duration,
    /// How long the writer waits after the first of a group of entries for others to join it: claims created one
    /// after another arrive a few milliseconds apart, and each write costs a token of the rate limit.
    pub linger: Duration,
}

/// How often the writer tries to read the Lease until it can (and how long puts are refused meanwhile).
const LOAD_RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));
/// The longest removals wait, in multiples of [`JournalOptions::removal_delay`], however busy the journal is.
pub const REMOVAL_MAX_WAIT: u32 = 10;
/// Tries at one write that keeps meeting Conflicts before its puts are refused.
const WRITE_ATTEMPTS: usize = 5;

enum Message {
    Put { key: String, value: String, done: oneshot::Sender<Result<(), Refused>> },
    Remove { key: String },
}

/// The handle callers share. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    sender: mpsc::UnboundedSender<Message>,
    inner: Arc<Inner>,
}

struct Inner {
    options: JournalOptions,
    /// The entries as this process knows them: the Lease as last read or written, minus removals not yet written.
    view: Mutex<BTreeMap<String, String>>,
    /// Fires once the Lease has been read (entries loaded).
    loaded: CancellationToken,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Message>>>,
}

impl Journal {
    pub fn new(options: JournalOptions) -> Journal {
        let (sender, receiver) = mpsc::unbounded_channel();
        let inner = Inner {
            options,
            view: Mutex::default(),
            loaded: CancellationToken::new(),
            receiver: Mutex::new(Some(receiver)),
        };
        Journal { sender, inner: Arc::new(inner) }
    }

    /// `namespace/name` of the Lease, for logs.
    pub fn path(&self) -> String {
        format!("{}/{}", self.inner.options.namespace, self.inner.options.name)
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.options.namespace
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.inner.options.name
    }

    /// Records `value` under `key` and returns once it is stored in the Lease, or says why it was not taken.
    pub async fn put(&self, key: &str, value: String) -> Result<(), Refused> {
        let (done, answer) = oneshot::channel();
        let message = Message::Put { key: key.to_string(), value, done };
        if self.sender.send(message).is_err() {
            return Err(Refused::Unavailable("the journal writer has stopped".into()));
        }
        answer.await.unwrap_or_else(|_| Err(Refused::Unavailable("the journal writer has stopped".into())))
    }

    /// Forgets `key`; the Lease loses it with a later write. Sent even when the view lacks the key (the Lease not
    /// read yet): a removal of an absent entry writes nothing.
    pub fn remove(&self, key: &str) {
        self.view().remove(key);
        let _ = self.sender.send(Message::Remove { key: key.to_string() });
    }

    /// The entry under `key`, if the journal holds one.
    pub fn get(&self, key: &str) -> Option<String> {
        self.view().get(key).cloned()
    }

    /// Every entry. Empty until the Lease has been read ([`Journal::loaded`]).
    pub fn entries(&self) -> BTreeMap<String, String> {
        self.view().clone()
    }

    /// Waits until the Lease has been read once, so that [`Journal::entries`] lists what earlier runs left.
    pub async fn loaded(&self) {
        self.inner.loaded.cancelled().await;
    }

    fn view(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.inner.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer: reads the Lease, then writes what callers ask until `stop` fires. Run it once.
    pub async fn run(&self, client: kube::Client, stop: CancellationToken) {
        let Some(receiver) = self.inner.receiver.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let api: Api<Lease> = Api::namespaced(client, &self.inner.options.namespace);
        let mut writer = Writer { journal: self.clone(), api, lease: None, receiver };
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = writer.work() => {}
        }
    }
}

struct Writer {
    journal: Journal,
    api: Api<Lease>,
    /// The Lease as last read or written (`None`: it does not exist yet).
    lease: Option<Lease>,
    receiver: mpsc::UnboundedReceiver<Message>,
}

impl Writer {
    fn options(&self) -> &JournalOptions {
        &self.journal.inner.options
    }

    async fn work(&mut self) {
        self.load().await;
        let mut changes = Changes::default();
        let mut waiting: Vec<(String, oneshot::Sender<Result<(), Refused>>)> = Vec::new();
        // The oldest removal not written yet, and the last message: together they say when removals are due.
        let mut oldest_removal: Option<Instant> = None;
        let mut last_message = Instant::now();
        loop {
            let delay = self.options().removal_delay;
            let removal_due =
                oldest_removal.map(|oldest| (last_message + delay).min(oldest + delay * REMOVAL_MAX_WAIT));
            let message = match removal_due {
                Some(due) => tokio::select! {
                    message = self.receiver.recv() => message,
                    _ = tokio::time::sleep_until(due) => None,
                },
                None => match self.receiver.recv().await {
                    Some(message) => Some(message),
                    None => return,
                },
            };
            if let Some(message) = message {
                last_message = Instant::now();
                take(&self.journal, message, &mut changes, &mut waiting, &mut oldest_removal);
                if changes.has_sets() {
                    tokio::time::sleep(self.options().linger).await;
                }
                // Everything that arrived meanwhile goes into the same write.
                while let Ok(message) = self.receiver.try_recv() {
                    take(&self.journal, message, &mut changes, &mut waiting, &mut oldest_removal);
                }
            }
            let removals_due = removal_due.is_some_and(|due| Instant::now() >= due);
            if !changes.has_sets() && !removals_due {
                continue;
            }
            let outcome = self.write(&changes).await;
            let refused = match &outcome {
                Ok(refused) => refused.clone(),
                Err(_) => BTreeMap::new(),
            };
            for (key, done) in waiting.drain(..) {
                let answer = match &outcome {
                    Ok(_) => refused.get(&key).cloned().map_or(Ok(()), Err),
                    Err(refusal) => Err(refusal.clone()),
                };
                let _ = done.send(answer);
            }
            match outcome {
                Ok(_) => {
                    changes = Changes::default();
                    oldest_removal = None;
                }
                Err(_) => {
                    // The refused values are their callers' business now; removals are tried again later.
                    changes.0.retain(|_, value| value.is_none());
                    last_message = Instant::now();
                    oldest_removal = (!changes.is_empty()).then(Instant::now);
                }
            }
        }
    }

    /// Reads the Lease until it can; puts are refused meanwhile (their callers fall back at once).
    async fn load(&mut self) {
        let mut delay = LOAD_RETRY.0;
        loop {
            match self.api.get_opt(&self.options().name).await {
                Ok(lease) => {
                    self.adopt(lease, &Changes::default());
                    tracing::info!(journal = %self.journal.path(), entries = self.journal.view().len(), "journal read");
                    self.journal.inner.loaded.cancel();
                    return;
                }
                Err(err) => {
                    tracing::warn!(journal = %self.journal.path(), error = %api_error_text(&err), retry_in = ?delay,
                        "cannot read the journal; work that needs it is protected another way meanwhile");
                }
            }
            let until = Instant::now() + delay;
            loop {
                tokio::select! {
                    message = self.receiver.recv() => match message {
                        Some(Message::Put { done, .. }) => {
                            let _ = done.send(Err(Refused::Unavailable("the journal has not been read yet".into())));
                        }
                        Some(Message::Remove { .. }) => {}
                        None => return,
                    },
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
            delay = (delay * 2).min(LOAD_RETRY.1);
        }
    }

    /// Keeps `lease` as the last known state, and the view as its entries with `pending` applied.
    fn adopt(&mut self, lease: Option<Lease>, pending: &Changes) {
        let annotations = lease.as_ref().and_then(|l| l.metadata.annotations.clone()).unwrap_or_default();
        let mut view = merge::entries(&annotations, &self.options().prefix);
        for (key, value) in &pending.0 {
            if value.is_none() {
                view.remove(key);
            }
        }
        *self.journal.view() = view;
        self.lease = lease;
    }

    /// The entries of `changes` that the Lease now holds (every set not refused) are in the view.
    fn show_sets(&self, changes: &Changes, refused: &BTreeMap<String, Refused>) {
        let mut view = self.journal.view();
        for (key, value) in &changes.0 {
            if let (Some(value), false) = (value, refused.contains_key(key)) {
                view.insert(key.clone(), value.clone());
            }
        }
    }

    /// One guarded write of `changes` (create when the Lease does not exist); returns the keys refused for size.
    async fn write(&mut self, changes: &Changes) -> Result<BTreeMap<String, Refused>, Refused> {
        let mut last_error = String::new();
        for _ in 0..WRITE_ATTEMPTS {
            let current = self.lease.as_ref().and_then(|l| l.metadata.annotations.clone()).unwrap_or_default();
            let merged = merge::merge(&current, &self.options().prefix, changes, self.options().bounds);
            if merged.annotations == current {
                // Nothing to write (e.g. a removal not written yet, then the same entry put again): the Lease holds
                // every entry put, so the view must too, or the next removal of it would be skipped.
                self.show_sets(changes, &merged.refused);
                return Ok(merged.refused);
            }
            let result = match &self.lease {
                Some(lease) => {
                    let mut updated = lease.clone();
                    updated.metadata.annotations = Some(merged.annotations.clone());
                    self.api.replace(&self.options().name, &PostParams::default(), &updated).await
                }
                None => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(self.options().name.clone()),
                            namespace: Some(self.options().namespace.clone()),
                            annotations: Some(merged.annotations.clone()),
                            ..Default::default()
                        },
                        spec: None,
                    };
                    self.api.create(&PostParams::default(), &lease).await
                }
            };
            match result {
                Ok(stored) => {
                    let (sets, removals) = changes
                        .0
                        .values()
                        .fold((0, 0), |(s, r), v| (s + v.is_some() as usize, r + v.is_none() as usize));
                    tracing::debug!(journal = %self.journal.path(), sets, removals, refused = merged.refused.len(), "journal written");
                    self.adopt(Some(stored), &Changes::default());
                    self.show_sets(changes, &merged.refused);
                    return Ok(merged.refused);
                }
                // Someone else wrote the Lease (or created or deleted it): read it and fold again.
                Err(err) if is_not_found(&err) || is_conflict(&err) => {
                    last_error = api_error_text(&err);
                    match self.api.get_opt(&self.options().name).await {
                        Ok(lease) => self.adopt(lease, changes),
                        Err(err) => return Err(Refused::Unavailable(api_error_text(&err))),
                    }
                }
                Err(err) => {
                    let text = api_error_text(&err);
                    tracing::warn!(journal = %self.journal.path(), error = %text, "cannot write the journal");
                    return Err(Refused::Unavailable(text));
                }
            }
        }
        Err(Refused::Unavailable(last_error))
    }
}

/// Adds one caller's message to the pending changes.
fn take(
    journal: &Journal,
    message: Message,
    changes: &mut Changes,
    waiting: &mut Vec<(String, oneshot::Sender<Result<(), Refused>>)>,
    oldest_removal: &mut Option<Instant>,
) {
    match message {
        Message::Put { key, value, done } => {
            changes.set(&key, value);
            waiting.push((key, done));
        }
        Message::Remove { key } => {
            // Sent before the Lease was read, the removal was not in the view the read made.
            journal.view().remove(&key);
            changes.remove(&key);
            oldest_removal.get_or_insert_with(Instant::now);
        }
    }
}
