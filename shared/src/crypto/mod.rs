//! Envelope encryption of state content: each version compressed (zstd) and encrypted with
//! AES-256-GCM in STREAM segments under its own data key, the data key wrapped by a key
//! service (the platform key here). The format is documented in docs/encryption-format.md.

pub mod envelope;
pub mod platform_key;

pub use envelope::{open, open_into, read_header, seal, Binding, EnvelopeError, Header};
pub use platform_key::PlatformKey;
