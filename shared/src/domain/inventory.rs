//! The inventory's records: what the index keeps of each resource instance of a state's
//! latest version (its address, type, provider, module, and a keyed digest of its identity),
//! and never an attribute's value. The extraction from a state document and the digest's
//! rules live here too, as pure functions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether an instance is a managed resource or a data source (`mode` in the state).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Managed,
    Data,
}

/// One resource instance of a state, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The full address, as Terraform prints it: `module.net["a"].aws_subnet.this[0]`,
    /// `data.aws_ami.base`.
    pub address: String,
    /// The module path (`module.net["a"]`), empty for the root module.
    pub module: String,
    pub mode: Mode,
    /// The resource type (`aws_s3_bucket`).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The provider's source address without its alias (`registry.terraform.io/hashicorp/aws`).
    pub provider: String,
    /// HMAC-SHA-256, under the org's inventory key, of the type and the instance's identity
    /// (hex); `None` for a data source or an instance that carries no identity. Equal
    /// digests in two states mean one object managed twice.
    pub digest: Option<String>,
}

/// What the index holds for one state's latest version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateInventory {
    /// The version indexed.
    pub version: u64,
    /// Whether its content could be read (`false` for an OpenTofu-encrypted state or a
    /// format the index does not know): then `instances` is empty.
    pub indexed: bool,
    /// In address order.
    pub instances: Vec<Instance>,
}
