//! One VolumeAttachment is worked on by one worker at a time, across the attach and the detach queue (upstream's one
//! queue gives it that for free): a detach must not run beside an attach of the same VolumeAttachment that is still
//! calling the driver. A worker that finds the other direction holding it leaves it; the holder queues it in that
//! direction when it lets go.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Shared;
use crate::translate::filter::Direction;

#[derive(Default)]
pub(super) struct Holding {
    /// Held names, and the direction that found them held and waits.
    held: Mutex<HashMap<String, Option<Direction>>>,
}

/// A VolumeAttachment held by one worker until dropped.
pub(super) struct Held<'a> {
    shared: &'a Shared,
    name: String,
}

impl Holding {
    /// Holds `name` for a worker of `direction`; `None` when another worker holds it (it will be queued again).
    pub(super) fn hold<'a>(shared: &'a Shared, name: &str, direction: Direction) -> Option<Held<'a>> {
        let mut held = shared.holding.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(waiting) = held.get_mut(name) {
            *waiting = Some(direction);
            return None;
        }
        held.insert(name.to_string(), None);
        Some(Held { shared, name: name.to_string() })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut held = self.shared.holding.held.lock().unwrap_or_else(|p| p.into_inner());
            held.remove(&self.name).flatten()
        };
        if let Some(direction) = waiting {
            self.shared.queue(direction).add(self.name.clone());
        }
    }
}
