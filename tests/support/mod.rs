//! Shared test support. Include with `mod support;` from a test crate in `tests/`.
#![allow(dead_code)]

pub mod control_plane;
pub mod process;
