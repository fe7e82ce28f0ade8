//! The cluster port on kube-rs: connection, server-filtered paginated lists, fenced writes.
