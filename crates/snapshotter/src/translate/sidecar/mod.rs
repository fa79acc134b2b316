//! csi-snapshotter's rules (reference §3.2).
