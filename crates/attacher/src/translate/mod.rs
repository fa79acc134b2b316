//! The attacher's rules as pure functions. No I/O.
//!
//! At startup, [`capabilities`] decides how VolumeAttachments are served. Then, as the controller drives them:
//! 1. [`filter`]: which change queues which VolumeAttachment or PV, and whether it goes to the attach or the detach
//!    queue.
//! 2. [`attach`]: the steps of one attach, [`detach`]: the steps of one detach, each with [`volume`] (what the
//!    VolumeAttachment attaches, in its CSI form), [`node`] (the node ID) and [`request`] (the CSI requests).
//! 3. [`volume_finalizer`]: when the finalizer leaves a PV.
//! 4. [`reconcile`]: which VolumeAttachments ListVolumes' published nodes contradict.
//!
//! Around them: [`patch`] (the writes as values) and [`names`] (every upstream string).

pub mod attach;
pub mod capabilities;
pub mod detach;
pub mod filter;
pub mod names;
pub mod node;
pub mod patch;
pub mod reconcile;
pub mod request;
pub mod volume;
pub mod volume_finalizer;
