//! gkq's integration tests: one test binary, one module per area, so that a run builds and links
//! one binary and starts one test control plane (see `support::control_plane`).
//!
//! Run one area with `cargo test --test it <module>::` (say `cargo test --test it gitops_cli::`),
//! one test with its full path. Tests of different modules run in parallel threads of one
//! process: no test may change the process environment or the current directory (pass values to
//! the commands and functions instead; `support::gkq` is the one way to run the binary).

#[path = "../support/mod.rs"]
mod support;

mod agent;
mod architecture;
mod cli;
mod converge;
mod dashboard;
mod engine;
mod faults_gke;
mod faults_interrupt;
mod faults_kube;
mod gitops_cli;
mod gitops_control_plane;
mod gke_auth;
mod gke_client;
mod gke_emulator;
mod gke_emulator_ladder;
mod image;
mod jobset_install;
mod k8s_proof;
mod kube_apply;
mod kueue_version;
mod ladder;
mod local_target;
mod logs;
mod placement_kueue;
mod placement_props;
mod placement_quantity;
mod placement_rules;
mod readme;
mod request_counts;
mod security;
mod spec;
mod whatif_kueue;
