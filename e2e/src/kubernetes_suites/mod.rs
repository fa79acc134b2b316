//! Kubernetes' own e2e.test suites against our sidecars: the External Storage suites (`conformance`, `make
//! conformance`) and the CSI mock tests (`csimock`, `make csimock`).

pub mod conformance;
pub mod csimock;
