//! gkq: a declarative reconciler for AI training capacity on GKE.
//!
//! The data flows through the modules in this order (docs/architecture.md draws it; the layering
//! is checked by `tests/it/architecture.rs`):
//!
//! ```text
//! pure: plain data and functions, no files, network, clock or environment
//! vocab     Kubernetes/GKE/Kueue vocabulary: label keys, conditions, owners, durations, time
//! addr      ResourceAddr, ClusterRef: the stable keys of every managed thing
//! placement Kueue's flavor assignment, predicted from queues, quotas and usage
//! spec      what the user wrote (YAML/TOML, overlays, variables) with source spans; reads
//!           files only through the SpecFs trait
//! model     validated DesiredState (GKE requests, Kubernetes objects), LiveState, GKE facts
//! diff      the one list of ignored fields, field changes, in place vs replace, fingerprints
//! plan      plan(desired, live, options) -> Plan: ordered actions, reasons, diffs, provenance
//! report    what status and watch say, from what was read: the status report, each job's
//!           admission timeline and stuck states, the ProvisioningRequest-state rule
//!
//! I/O: the imperative shell
//! interrupt Ctrl-C for long waits
//! emulator  a faithful local stand-in for the GKE REST API
//! gke       GKE REST client, credentials, operation waits
//! kube      the Kubernetes client: discovery, lists, server-side apply and its dry run
//! observe   LiveState read from GKE (one clusters.get) and Kubernetes; status's snapshot
//! apply     the executor: walks a Plan, re-checks fingerprints, waits operations, emits events
//! gitops    the spec's files (working tree or commit), git, saved plans, the applied revision,
//!           the apply lock, watch-mode decisions
//! owner_only files and directories only their owner may read: the local target's state, locks,
//!           the agent's store and checkouts, plan files
//! local     the local target: an object store behind KubeApi and the simulated cluster
//!           (Kueue, KubeRay, DWS, autoscaler) on a clock
//! render    plan text/JSON/markdown; terminal and JSON-lines apply progress; status text
//! ops       the pipeline as library calls: load, session, plan, lock, apply, saved plans
//! agent     the in-cluster GitOps agent: a Controller over GkqStack objects, on top of ops
//! cli       the commands: parse arguments, call ops, render, exit code
//! ```

// Diagnostics are cold-path values built once per problem; boxing them would add noise, not speed.
#![allow(clippy::result_large_err)]

pub mod addr;
pub mod agent;
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
pub mod owner_only;
pub mod placement;
pub mod plan;
pub mod render;
pub mod report;
pub mod spec;
pub mod vocab;
