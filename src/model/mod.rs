//! The desired state: validated, rendered GKE requests and Kubernetes objects.
