//! Adapters: the ports on concrete storage. `memory` for tests, `local` for the embedded
//! store a person runs with `make run`. Every adapter passes the same contract suite
//! (`shared/tests/contract.rs`).

pub mod local;
pub mod memory;
