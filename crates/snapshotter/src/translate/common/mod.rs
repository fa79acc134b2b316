//! The snapshot-controller's rules (reference §3.1).
