//! gkq: a declarative reconciler for AI training capacity on GKE.
//!
//! The data flows through the modules in this order:
//!
//! ```text
//! spec      what the user wrote (YAML/TOML, overlays, variables) with source spans
//! model     validated DesiredState: GKE requests and Kubernetes objects (pure data)
//! placement Kueue's flavor assignment, predicted from queues, quotas and usage (pure)
//! gke       GKE REST client and credentials (I/O)
//! emulator  a faithful local stand-in for the GKE REST API (I/O)
//! ```
//!
//! Everything before `gke` is pure: functions over plain data, tested without I/O.

// Diagnostics are cold-path values built once per problem; boxing them would add noise, not speed.
#![allow(clippy::result_large_err)]

pub mod cli;
pub mod addr;
pub mod apply;
pub mod diff;
pub mod emulator;
pub mod gke;
pub mod kube;
pub mod model;
pub mod observe;
pub mod placement;
pub mod plan;
pub mod render;
pub mod spec;
