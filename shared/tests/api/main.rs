//! The HTTP API in-process: each request built as the local server builds it and answered
//! by `http::handle` over an app on the memory adapter (the local adapter where a race is
//! about SQLite's transactions), with a clock the tests move. Here live the cases that need
//! no wire, process or disk: statuses and exact bodies, the authorization matrix, management
//! and runs semantics, listing, audit, permissions, and what is logged. What crosses the
//! wire (streamed bodies, raw requests, kill -9, real Terraform) stays in the black-box
//! suites.
//!
//! Tests that read logs run on a current-thread runtime, so the subscriber they set for
//! their thread sees their requests and no other test's.

#[path = "../support/mod.rs"]
mod support;

mod access;
mod apps;
mod audit;
mod authorization;
mod backend;
mod comparison;
mod deleted;
mod identity;
mod inventory;
mod listing;
mod management;
mod outputs;
mod pages;
mod protection;
mod runs;
mod trust;
