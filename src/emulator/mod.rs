//! A local emulator of the GKE REST API, faithful to the published API.
