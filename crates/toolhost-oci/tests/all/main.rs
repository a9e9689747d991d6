//! toolhost-oci's integration tests: one binary, a module per subject.

mod registry;
