//! The registrar's rules, without I/O, in the order the process meets them:
//!
//! 1. [`startup`]: what the flags ask for (exit at once, or register; where the health check listens), or which
//!    flag is wrong.
//! 2. [`registration`]: the registration socket's path from the driver's name, what GetInfo answers the kubelet,
//!    and what the kubelet's verdict (NotifyRegistrationStatus) means for the process.
//! 3. [`health`]: what `/healthz` answers for what it found at the registration socket.

pub mod health;
pub mod registration;
pub mod startup;
