//! What `gkq status` and `gkq watch` report, as pure functions of what was read: the status
//! report ([`status`]), each job's admission timeline and stuck states ([`timeline`]), and the
//! explanation of one job's placement ([`explain`]). The rules they share are placement's:
//! which Workload is a job's (`placement::job_workload`) and which ProvisioningRequest is a
//! Workload's and its state (`placement::provisioning`).

pub mod dashboard;
pub mod explain;
pub mod logs;
pub mod rung;
pub mod stack;
pub mod status;
pub mod timeline;
