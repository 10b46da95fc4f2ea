//! gkq: a declarative reconciler for AI training capacity on GKE.
//!
//! The data flows through the modules in this order:
//!
//! ```text
//! spec      what the user wrote (YAML/TOML, overlays, variables) with source spans
//! model     validated DesiredState: GKE requests and Kubernetes objects (pure data)
//! addr      ResourceAddr: the stable key of every managed thing (gke.nodepool/dws-pool, ...)
//! observe   LiveState read from GKE (one clusters.get) and Kubernetes; fingerprints
//! diff      the one list of ignored fields, field-level changes, in-place vs replace (pure)
//! placement Kueue's flavor assignment, predicted from queues, quotas and usage (pure)
//! plan      plan(desired, live, options) -> Plan: ordered actions, reasons, diffs (pure)
//! apply     the executor: walks a Plan, re-checks fingerprints, waits operations, emits events
//! render    plan text/JSON/markdown; terminal and JSON-lines apply progress
//! gke       GKE REST client and credentials (I/O)
//! kube      Kubernetes API: discovery, lists, server-side apply and its dry run (I/O)
//! emulator  a faithful local stand-in for the GKE REST API (I/O)
//! local     the local target's Kubernetes: an object store behind KubeApi, and the simulated
//!           cluster (Kueue, KubeRay, DWS, autoscaler) on a clock (I/O)
//! gitops    what a plan was made from (spec digest, commit), saved plans, the applied revision,
//!           the apply lock, watch-mode decisions and job admission timelines
//! vocab     Kubernetes/GKE/Kueue vocabulary: durations, RFC 3339 time, conditions, owners, keys
//! cli       the commands, thin: parse arguments, call the modules above, render
//! ```
//!
//! Everything but `observe`, `apply`, `gke`, `kube`, `emulator` and `cli` is pure: functions
//! over plain data, tested without I/O. The CLI calls, in order: `observe::observe_gke` (and the Kubernetes
//! observer), `plan::plan`, a `render::plan` renderer, then `apply::Executor::apply` with a
//! `render::apply` sink.

// Diagnostics are cold-path values built once per problem; boxing them would add noise, not speed.
#![allow(clippy::result_large_err)]

pub mod addr;
pub mod apply;
pub mod cli;
pub mod diff;
pub mod emulator;
pub mod gitops;
pub mod gke;
pub mod interrupt;
pub mod kube;
pub mod local;
pub mod model;
pub mod observe;
pub mod ops;
pub mod placement;
pub mod plan;
pub mod render;
pub mod spec;
pub mod vocab;
