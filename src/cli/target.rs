//! `--target` and the flags that say where `plan` and `apply` act: Google Cloud, or the embedded
//! local target (the session itself is `ops::session`'s).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::ops::session::TargetOptions;
use crate::spec::types::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetFlag {
    Gcp,
    Local,
}

#[derive(Debug, Args, Clone, Default)]
pub struct TargetArgs {
    /// Where to act: `gcp` (Google Cloud, Application Default Credentials) or `local` (the
    /// embedded emulator; no credentials, no network). Defaults to the spec's `target`.
    #[arg(long, value_enum)]
    pub target: Option<TargetFlag>,
    /// State directory of the local target (default: .gkq/local next to the spec).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// GKE API endpoint (for example a `gkq emulator serve` URL); overrides the target's.
    #[arg(long, value_name = "URL", env = "GKQ_GKE_ENDPOINT")]
    pub gke_endpoint: Option<String>,
    /// Reach Kubernetes through this kubeconfig file instead of credentials derived from the
    /// GKE cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (implies a kubeconfig: --kubeconfig, $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl TargetArgs {
    /// The target as the pipeline takes it.
    pub fn options(&self) -> TargetOptions {
        TargetOptions {
            target: self.target.map(|t| match t {
                TargetFlag::Gcp => Target::Gcp,
                TargetFlag::Local => Target::Local,
            }),
            state_dir: self.state_dir.clone(),
            gke_endpoint: self.gke_endpoint.clone(),
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            // Set per stack by the agent only.
            impersonate: None,
            workload_identity: None,
            sts_endpoint: None,
        }
    }
}
