//! The spec: what the user wrote, parsed with source locations.
