//! Shared test support for the integration tests (`tests/it`), one copy of each helper:
//!
//! * [`cmd::gkq`]: the `gkq` binary with the tests' one environment policy;
//! * [`workspace::Workspace`]: a spec copied into a temporary directory, optionally a git
//!   repository;
//! * [`kueue`]: Kueue object builders and the seed's queue setup and RayJob;
//! * [`control_plane`]: the run's one Kubernetes control plane, namespaces and unique names;
//! * [`process`]: long-running `gkq` processes and output helpers;
//! * [`sshd`]: a real OpenSSH server on loopback, for git over ssh.
#![allow(dead_code)]

pub mod cmd;
pub mod control_plane;
pub mod kueue;
pub mod process;
pub mod sshd;
pub mod workspace;

pub use cmd::gkq;
pub use control_plane::repo_root;
pub use workspace::Workspace;
