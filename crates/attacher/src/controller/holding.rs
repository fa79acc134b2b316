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
        shared.holding.try_hold(name, direction).then(|| Held { shared, name: name.to_string() })
    }

    /// Takes `name`, or records that `direction` waits for it.
    fn try_hold(&self, name: &str, direction: Direction) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(waiting) = held.get_mut(name) {
            *waiting = Some(direction);
            return false;
        }
        held.insert(name.to_string(), None);
        true
    }

    /// Lets `name` go; the direction that waited for it, if any.
    fn release(&self, name: &str) -> Option<Direction> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(name).flatten()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(direction) = self.shared.holding.release(&self.name) {
            self.shared.queue(direction).add(self.name.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_direction_waits_and_is_handed_the_name_on_release() {
        let holding = Holding::default();
        assert!(holding.try_hold("va-1", Direction::Attach));
        assert!(!holding.try_hold("va-1", Direction::Detach), "held by the attach worker");
        assert!(holding.try_hold("va-2", Direction::Detach), "another name is free");
        assert_eq!(holding.release("va-1"), Some(Direction::Detach), "the detach queue gets it back");
        assert_eq!(holding.release("va-2"), None, "nobody waited");
        assert!(holding.try_hold("va-1", Direction::Detach), "free again");
        assert_eq!(holding.release("va-1"), None);
    }
}
