//! Envelope encryption of state content: each version compressed (gzip; zstd in format 1)
//! and encrypted with AES-256-GCM in STREAM segments under its own data key, the data key
//! wrapped by a key service (the platform key here, KMS or Transit elsewhere). The format is
//! documented in docs/encryption-format.md.

pub mod envelope;
mod gzip;
pub mod id_token;
pub mod opening;
pub mod platform_key;

pub use envelope::{
    read_header, seal, seal_into, Binding, Compression, EnvelopeError, Header, HeaderKey,
};
pub use opening::{open_into, Inflating, Opening};
pub use platform_key::PlatformKey;
