//! Events the resizer records on a claim: type, upstream reason, upstream message.

/// `Normal` or `Warning`, the two Kubernetes event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// An event to record on the claim (the involved object is always the claim, as upstream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimEvent {
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl ClaimEvent {
    pub fn normal(reason: &'static str, message: impl Into<String>) -> ClaimEvent {
        ClaimEvent { event_type: EventType::Normal, reason, message: message.into() }
    }

    pub fn warning(reason: &'static str, message: impl Into<String>) -> ClaimEvent {
        ClaimEvent { event_type: EventType::Warning, reason, message: message.into() }
    }
}
