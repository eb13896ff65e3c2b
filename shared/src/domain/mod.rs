//! The domain: pure types and rules of managed state. No I/O, no clock, no AWS or HTTP types;
//! every decision is a function of (record, request, principal, now) that tests call directly.

pub mod actor;
pub mod app;
pub mod audit;
pub mod comparison;
pub mod deleted;
pub mod document;
pub mod hold;
pub mod inventory;
pub mod keys;
pub mod lock;
pub mod locking;
pub mod manage;
pub mod name;
pub mod outputs;
pub mod permission;
pub mod protection;
pub mod record;
pub mod refusal;
pub mod schema;
pub mod trust;
pub mod untrusted;
pub mod version;
pub mod write;

pub use actor::{Actor, Principal};
pub use refusal::Refusal;

/// Every time in the domain is UTC; it comes in as an argument, never from a clock.
pub type Timestamp = time::OffsetDateTime;

/// RFC 3339 text of a timestamp, as every shape and lock document shows times.
pub fn rfc3339(t: Timestamp) -> String {
    // Formatting an in-range UTC OffsetDateTime as RFC 3339 cannot fail: the only failure
    // is a year outside 0..=9999, which no clock here produces.
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("UTC timestamp formats as RFC 3339")
}
