//! A test's own namespace on the shared API server.

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource};

use crate::TestBed;

/// A namespace created for one test, with an admin client.
#[derive(Clone)]
pub struct TestNamespace {
    bed: &'static TestBed,
    name: String,
    client: Client,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    pub(crate) fn new(bed: &'static TestBed, name: String, client: Client) -> Self {
        Self { bed, name, client }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin client (bound to the runtime that created this namespace).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The test bed the namespace lives on.
    pub fn bed(&self) -> &'static TestBed {
        self.bed
    }

    /// An admin `Api` for a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}
