//! Kubernetes, GKE and Kueue vocabulary shared by every layer, each rule written once: the
//! duration grammar, RFC 3339 time, resource quantities, reading untyped objects (conditions,
//! owners), the well-known label, annotation and taint keys, and what Kubernetes accepts as a
//! label key or value. Pure: no I/O, no clock reads.

pub mod duration;
pub mod label_syntax;
pub mod labels;
pub mod object;
pub mod quantity;
pub mod ray;
pub mod time;
