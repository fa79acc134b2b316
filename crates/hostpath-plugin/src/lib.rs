//! hostpath-plugin: the project's reference CSI plugin.
//!
//! Volumes are directories (mount) or sparse files (block) under a state directory, snapshots are copies.
//! By default the node service only keeps books, so the plugin runs unprivileged anywhere: in e2e tests, demos
//! and csi-sanity; with `--node-mounts` it mounts for real (bind mounts, loop devices), as a node plugin under a
//! kubelet must. All state lives in `<state-dir>/state.json`, written before every answer, so a
//! restart loses nothing. Faults can be injected per RPC for tests (see [`faults`]).
//!
//! Layout: [`flags`] (command line), [`server`] (socket and services), [`plugin`] (the call path shared
//! by every RPC), one module per service ([`identity`], [`controller`], [`group`], [`node`]), the RPC
//! logic ([`volumes`], [`snapshots`], [`publish`]), request checks ([`capability`], [`topology`], [`mutable`],
//! [`paging`]), persistence ([`state`], [`storage`], [`instant`]), what each Create call did with its name
//! ([`creations`], for tests that look for duplicated side effects), and the host side of `--node-mounts`
//! ([`node_mounts`] over [`mounts`] and [`loop_device`]).

pub mod capability;
pub mod controller;
pub mod creations;
pub mod faults;
pub mod flags;
pub mod group;
pub mod health;
pub mod identity;
pub mod instant;
pub mod loop_device;
pub mod mounts;
pub mod mutable;
pub mod node;
pub mod node_mounts;
pub mod paging;
pub mod plugin;
pub mod prng;
pub mod proxy;
pub mod publish;
pub mod server;
pub mod snapshots;
pub mod state;
pub mod storage;
pub mod topology;
pub mod volumes;

pub use plugin::{Config, Plugin};
