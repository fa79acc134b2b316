//! The controller's per-claim memory (caches only: losing it on a restart is safe; the one set that matters, the
//! uncertain modifications, is rebuilt from the claims found InProgress at startup). Keys are `namespace/name`.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use std::time::Instant;

use crate::translate::expansion::decide::ExpansionMemoryChange;
use crate::translate::memory::SetChange;
use crate::translate::modification::decide::ModificationMemoryChange;

#[derive(Default)]
struct Sets {
    expand_slow: HashMap<String, Instant>,
    modify_slow: HashMap<String, Instant>,
    final_errors: HashSet<String>,
    in_use_errors: HashSet<String>,
    uncertain: HashSet<String>,
}

pub struct Memory {
    /// How long a claim stays in a slow set (`--retry-interval-max`).
    slow_period: Duration,
    sets: Mutex<Sets>,
}

/// What the pure rules read about one claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub expand_slow_retry: Option<Duration>,
    pub modify_slow_retry: Option<Duration>,
    pub final_error: bool,
    pub in_use_error: bool,
    pub uncertain: bool,
}

fn change_set(set: &mut HashSet<String>, key: &str, change: SetChange) {
    match change {
        SetChange::Keep => {}
        SetChange::Insert => {
            set.insert(key.to_string());
        }
        SetChange::Remove => {
            set.remove(key);
        }
    }
}

/// A slow set keeps the first timestamp (csi-lib-utils `slowset`).
fn change_slow(set: &mut HashMap<String, Instant>, key: &str, change: SetChange) {
    match change {
        SetChange::Keep => {}
        SetChange::Insert => {
            set.entry(key.to_string()).or_insert_with(Instant::now);
        }
        SetChange::Remove => {
            set.remove(key);
        }
    }
}

fn slow_retry(set: &mut HashMap<String, Instant>, key: &str, period: Duration) -> Option<Duration> {
    let since = set.get(key)?.elapsed();
    if since >= period {
        set.remove(key);
        return None;
    }
    Some(period - since)
}

impl Memory {
    pub fn new(slow_period: Duration) -> Memory {
        Memory { slow_period, sets: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Sets> {
        self.sets.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn facts(&self, key: &str) -> Facts {
        let mut sets = self.lock();
        Facts {
            expand_slow_retry: slow_retry(&mut sets.expand_slow, key, self.slow_period),
            modify_slow_retry: slow_retry(&mut sets.modify_slow, key, self.slow_period),
            final_error: sets.final_errors.contains(key),
            in_use_error: sets.in_use_errors.contains(key),
            uncertain: sets.uncertain.contains(key),
        }
    }

    pub fn apply_expansion(&self, key: &str, change: ExpansionMemoryChange) {
        let mut sets = self.lock();
        change_slow(&mut sets.expand_slow, key, change.slow_set);
        change_set(&mut sets.final_errors, key, change.final_errors);
        change_set(&mut sets.in_use_errors, key, change.in_use_errors);
    }

    pub fn apply_modification(&self, key: &str, change: ModificationMemoryChange) {
        let mut sets = self.lock();
        change_slow(&mut sets.modify_slow, key, change.slow_set);
        change_set(&mut sets.uncertain, key, change.uncertain);
    }

    pub fn in_use_error(&self, key: &str) -> bool {
        self.lock().in_use_errors.contains(key)
    }

    /// A claim found InProgress at startup is uncertain: the driver may still be applying its target.
    pub fn mark_uncertain(&self, key: &str) {
        self.lock().uncertain.insert(key.to_string());
    }

    /// The claim is gone: forget everything about it.
    pub fn forget(&self, key: &str) {
        let mut sets = self.lock();
        sets.expand_slow.remove(key);
        sets.modify_slow.remove(key);
        sets.final_errors.remove(key);
        sets.in_use_errors.remove(key);
        sets.uncertain.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_sets_keep_the_first_time_and_expire() {
        let memory = Memory::new(Duration::from_secs(100));
        let insert = ModificationMemoryChange { slow_set: SetChange::Insert, uncertain: SetChange::Insert };
        memory.apply_modification("ns/a", insert);
        let first = memory.facts("ns/a").modify_slow_retry.expect("in the slow set");
        std::thread::sleep(Duration::from_millis(20));
        memory.apply_modification("ns/a", insert);
        let facts = memory.facts("ns/a");
        assert!(facts.modify_slow_retry.unwrap() < first, "first timestamp kept");
        assert!(facts.uncertain);
        assert_eq!(facts.expand_slow_retry, None, "the two slow sets are separate");
        memory.forget("ns/a");
        assert_eq!(memory.facts("ns/a"), Facts::default());

        let expired = Memory::new(Duration::ZERO);
        expired.apply_modification("ns/a", insert);
        assert_eq!(expired.facts("ns/a").modify_slow_retry, None, "expired");
    }
}
