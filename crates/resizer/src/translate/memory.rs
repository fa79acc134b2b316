//! The controller's per-claim memory (slow set, final errors, in-use errors, uncertain modifications) is kept by the
//! controller; the pure functions read it as plain facts and say how it changes.

/// A change to one of the controller's in-memory sets, for the claim at hand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SetChange {
    #[default]
    Keep,
    /// Add the claim. For a slow set: only when absent, so the first timestamp stays (csi-lib-utils `slowset`).
    Insert,
    Remove,
}

impl SetChange {
    /// `later` wins unless it keeps.
    pub fn then(self, later: SetChange) -> SetChange {
        if later == SetChange::Keep { self } else { later }
    }
}
