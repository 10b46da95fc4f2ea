//! What `gkq status` and `gkq watch` report, as pure functions of what was read: the one
//! ProvisioningRequest-state rule ([`provisioning`]).

pub mod provisioning;
