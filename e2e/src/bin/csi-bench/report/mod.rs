//! The pure parts of `make bench` (the `csi-bench` binary runs the scenarios against the control plane): what one
//! run measured, how rounds add up, results.json, the Markdown table, the SVG chart and the /proc readings.
//! Kept apart from the scenarios so `make test` checks them without a cluster.

pub mod chart;
pub mod proc_sample;
pub mod results;
pub mod table;

pub use proc_sample::ProcSample;
pub use results::{Results, Run, Summary};
