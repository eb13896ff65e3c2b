//! The inventory's records: what the index keeps of each resource instance of a state's
//! latest version (its address, type, provider, module, and a keyed digest of its identity),
//! and never an attribute's value. The extraction from a state document and the digest's
//! rules live here too, as pure functions.

use hmac::{Hmac, Mac};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::document::{Found, FoundResource, IndexKey};

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

/// The type namespaces of providers whose objects are not shared remote objects (files on
/// the machine that runs Terraform, random values, timestamps, keys made in memory): their
/// `id`s are content hashes, small numbers or words two unrelated objects can share, so
/// their instances get no identity. Terraform's own `terraform_data` is not among them:
/// its `id` is a UUID made when it is created, so two states holding one are two states
/// managing the same object (one copied from the other), which is what a conflict warns of.
const LOCAL_PROVIDERS: [&str; 6] = [
    "hashicorp/local",
    "hashicorp/null",
    "hashicorp/random",
    "hashicorp/time",
    "hashicorp/tls",
    "hashicorp/archive",
];

/// What the index keeps of a state's latest version `version`, from the resources its
/// document's sniff collected (`None`: the document cannot be read, so it is kept as not
/// indexed). Each managed instance's identity (its `arn`, else `self_link`, else `id`, else
/// `name`: [`super::document::IDENTITY_ATTRIBUTES`]) is kept only as an HMAC-SHA-256 under
/// `key` of the type, a NUL byte and the identity: the identity itself never leaves this
/// function.
pub fn inventory_of(version: u64, found: Option<&Found>, key: &[u8; 32]) -> StateInventory {
    let Some(found) = found else {
        return StateInventory {
            version,
            indexed: false,
            instances: Vec::new(),
        };
    };
    // The key's two padded blocks hashed once: each instance's digest then costs the
    // hashing of its own bytes and the outer block (half of a fresh HMAC's work).
    let keyed = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    let keyed = &keyed;
    // Resources of one module mostly name one provider: its source address is worked out
    // once for a run of them, not once a resource.
    let mut last: Option<(&str, String)> = None;
    let mut instances: Vec<Instance> = found
        .iter()
        .filter_map(|r| Some((r, mode_of(r.mode)?)))
        .flat_map(|(resource, mode)| {
            let provider = match &last {
                Some((raw, source)) if *raw == resource.provider => source.clone(),
                _ => {
                    let source = provider_source(resource.provider);
                    last = Some((resource.provider, source.clone()));
                    source
                }
            };
            let shared =
                mode == Mode::Managed && !LOCAL_PROVIDERS.contains(&namespace_type(&provider));
            resource.instances().map(move |instance| Instance {
                address: address(&resource, mode, instance.key),
                module: resource.module.to_owned(),
                mode,
                resource_type: resource.resource_type.to_owned(),
                provider: provider.clone(),
                digest: instance
                    .identity
                    .filter(|_| shared)
                    .map(|id| digest(keyed, resource.resource_type, id.0)),
            })
        })
        .collect();
    instances.sort_by(|a, b| a.address.cmp(&b.address));
    // A malformed document may name one instance twice: the index keeps an address once,
    // on every store, and counts what it keeps.
    instances.dedup_by(|later, earlier| later.address == earlier.address);
    StateInventory {
        version,
        indexed: true,
        instances,
    }
}

/// Names the rules [`inventory_of`] keeps a document by, in every fingerprint: a release that
/// changes them (what an identity is, which providers are local, how an address is spelled),
/// or how [`fingerprint`] frames the fields, changes this, so no save takes an entry kept by
/// the old rules for its own (2: the framing made smaller).
const RULES: &[u8] = b"hegemony-state inventory 2";

/// The fingerprint of what [`inventory_of`] keeps of the document whose sniff collected
/// `found`, under the org's key: two documents with equal fingerprints are kept as the same
/// instances (versions aside), so a save may leave an entry in place rather than rebuild it.
/// An HMAC-SHA-256 under `key` of every field the inventory reads, each framed by its
/// length: keyed, like the digests, because identities are among those fields. `None` for a
/// document that cannot be indexed (nothing to compare).
pub fn fingerprint(found: Option<&Found>, key: &[u8; 32]) -> Option<String> {
    let found = found?;
    // The fields laid end to end, then hashed at once: one HMAC call per field cost more
    // than the hashing itself. Hashing is most of the cost, so the framing is small.
    let mut fields = Vec::with_capacity(64 * 1024);
    // Each field: a tag byte saying what it is, its length (LEB128), its bytes.
    let mut field = |tag: u8, bytes: &[u8]| {
        fields.push(tag);
        let mut len = bytes.len();
        while len >= 0x80 {
            fields.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        fields.push(len as u8);
        fields.extend_from_slice(bytes);
    };
    let mut previous: Option<FoundResource<'_>> = None;
    for resource in found.iter() {
        // A module and a provider mostly repeat the previous resource's: said so in a byte.
        let (same_module, same_provider) = previous.map_or((false, false), |p| {
            (p.module == resource.module, p.provider == resource.provider)
        });
        if same_module {
            field(b'^', b"");
        } else {
            field(b's', resource.module.as_bytes());
        }
        if same_provider {
            field(b'^', b"");
        } else {
            field(b's', resource.provider.as_bytes());
        }
        for text in [resource.mode, resource.resource_type, resource.name] {
            field(b's', text.as_bytes());
        }
        let instances = resource.instances();
        field(b'n', &(instances.len() as u64).to_le_bytes());
        for instance in instances {
            match instance.key {
                None => field(b'-', b""),
                Some(IndexKey::Int(i)) => field(b'#', &i.to_le_bytes()),
                Some(IndexKey::Str(s)) => field(b'"', s.as_bytes()),
            }
            match instance.identity {
                None => field(b'-', b""),
                Some(identity) => field(b'=', identity.0.as_bytes()),
            }
        }
        previous = Some(resource);
    }
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(RULES);
    mac.update(&fields);
    Some(crate::ids::hex(&mac.finalize().into_bytes()))
}

fn mode_of(mode: &str) -> Option<Mode> {
    match mode {
        "managed" => Some(Mode::Managed),
        "data" => Some(Mode::Data),
        _ => None,
    }
}

/// The address as Terraform prints it: `module.a["k"].aws_x.y[0]`, `data.aws_ami.base`.
fn address(resource: &FoundResource<'_>, mode: Mode, key: Option<IndexKey<'_>>) -> String {
    let mut address = String::with_capacity(resource.module.len() + resource.name.len() + 40);
    if !resource.module.is_empty() {
        address.push_str(resource.module);
        address.push('.');
    }
    if mode == Mode::Data {
        address.push_str("data.");
    }
    address.push_str(resource.resource_type);
    address.push('.');
    address.push_str(resource.name);
    match key {
        Some(IndexKey::Int(i)) => {
            use std::fmt::Write;
            // Writing to a String cannot fail.
            let _ = write!(address, "[{i}]");
        }
        // JSON quoting is Terraform's quoting of a string key (`["a\"b"]`).
        Some(IndexKey::Str(s)) => {
            address.push('[');
            address.push_str(&serde_json::Value::from(s).to_string());
            address.push(']');
        }
        None => {}
    }
    address
}

/// The provider's source address from a resource's `provider`:
/// `module.m.provider["registry.terraform.io/hashicorp/aws"].west` gives
/// `registry.terraform.io/hashicorp/aws`. A legacy `provider.aws` (Terraform 0.12) gives
/// `registry.terraform.io/hashicorp/aws`, as Terraform itself upgrades it.
pub fn provider_source(provider: &str) -> String {
    if let Some(start) = provider.find("provider[\"") {
        let rest = &provider[start + "provider[\"".len()..];
        if let Some(end) = rest.find("\"]") {
            return rest[..end].to_owned();
        }
    }
    match provider.rsplit_once("provider.") {
        Some((_, name)) => {
            let name = name.split('.').next().unwrap_or(name);
            format!("registry.terraform.io/hashicorp/{name}")
        }
        None => provider.to_owned(),
    }
}

/// `namespace/type` of a source address (its last two parts).
pub fn namespace_type(source: &str) -> &str {
    let mut slashes = source.rmatch_indices('/');
    slashes.next();
    match slashes.next() {
        Some((i, _)) => &source[i + 1..],
        None => source,
    }
}

fn digest(keyed: &Hmac<Sha256>, resource_type: &str, identity: &str) -> String {
    let mut mac = keyed.clone();
    mac.update(resource_type.as_bytes());
    mac.update(b"\0");
    mac.update(identity.as_bytes());
    crate::ids::hex(&mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests;
