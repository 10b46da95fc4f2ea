//! What `gkq status` and `gkq watch` report, as pure functions of what was read: the status
//! report ([`status`]), each job's admission timeline and stuck states ([`timeline`]), and the
//! one ProvisioningRequest-state rule both use ([`provisioning`]).

pub mod explain;
pub mod provisioning;
pub mod stack;
pub mod status;
pub mod timeline;
