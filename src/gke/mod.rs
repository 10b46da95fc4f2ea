//! GKE REST API client (container.googleapis.com/v1) and Google credentials.
