//! The inventory's records: what the index keeps of each resource instance of a state's
//! latest version (its address, type, provider, module, and a keyed digest of its identity),
//! and never an attribute's value. The extraction from a state document, the digest's rules,
//! and the resources' tags and fingerprint by which a save finds what it changed live here
//! too, as pure functions.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use siphasher::sip::SipHasher24;

use super::document::{Found, FoundResource, Identity, IdentityKind, IndexKey, DECLARED};

/// Whether an instance is a managed resource or a data source (`mode` in the state).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Managed,
    Data,
}

/// One resource instance of a state, as the index keeps it. Its module, type and provider
/// are shared with the state's other instances that have the same ones (a state's thousands
/// of instances name a few): each is made and freed once, not once an instance. Copied
/// into each instance, they took about a fifth of a whole entry's build to make, and most
/// of the time its commit spent freeing the instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The full address, as Terraform prints it: `module.net["a"].aws_subnet.this[0]`,
    /// `data.aws_ami.base`.
    pub address: String,
    /// The module path (`module.net["a"]`), empty for the root module.
    pub module: Arc<str>,
    pub mode: Mode,
    /// The resource type (`aws_s3_bucket`).
    #[serde(rename = "type")]
    pub resource_type: Arc<str>,
    /// The provider's source address without its alias (`registry.terraform.io/hashicorp/aws`).
    pub provider: Arc<str>,
    /// HMAC-SHA-256, under the org's inventory key, of the type and the instance's identity
    /// (hex); `None` for a data source or an instance that carries no identity. Equal
    /// digests in two states mean one object managed twice.
    pub digest: Option<String>,
    /// The tag of the resource it is an instance of, by which a save keeps or drops it.
    /// Not kept where entries are stored whole (the tags are then of no use).
    #[serde(skip)]
    pub resource: ResourceTag,
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
    /// Every resource's tag, in the document's order, by which the next save sends only
    /// the resources it changed ([`instances_of`]); `None` when the entry can only be
    /// replaced whole: not indexed, or two of its resources name one address (which of them
    /// is kept depends on every resource, so none is kept or dropped alone).
    #[serde(skip)]
    pub tags: Option<Vec<ResourceTag>>,
}

/// A keyed tag of one resource of a document: SipHash-2-4, under a key made from the org's
/// inventory key and [`RULES`], of every field the inventory reads of it (module, mode,
/// type, name, provider, and each instance's key and identity), each framed by its length.
/// Two resources with equal tags are kept as the same instances, wherever they lie in their
/// documents, so a save keeps the rows of every resource whose tag the entry holds and
/// builds only the others'. Keyed, because identities are among the fields: a tag tells
/// nothing of them to whoever reads it without the key. 64 bits: two different resources
/// of one state sharing a tag by chance is a one in 10^11 event for a state of 10,000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceTag(pub u64);

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

/// Every resource's tag in a document, in its order, with a hash of each one's module,
/// mode, type and name (where its addresses start), made in the same pass: what says
/// whether two resources may name one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTags {
    tags: Vec<ResourceTag>,
    names: Vec<u64>,
}

impl ResourceTags {
    pub fn as_slice(&self) -> &[ResourceTag] {
        &self.tags
    }

    /// Whether no two resources share a module, mode, type and name (nor, by a one in
    /// 2^64 chance, its hash: the document is then indexed whole, which is always right).
    fn distinct_names(&self) -> bool {
        let mut names = self.names.clone();
        names.sort_unstable();
        names.windows(2).all(|w| w[0] != w[1])
    }
}

/// A set of tags, sorted: a save compares a few thousand, for which sorting once and
/// searching is cheaper than hashing each (a tag is a keyed hash already).
#[derive(Debug, Clone, Default)]
pub struct TagSet(Vec<ResourceTag>);

impl TagSet {
    pub fn of(tags: &[ResourceTag]) -> Self {
        let mut tags = tags.to_vec();
        tags.sort_unstable();
        tags.dedup();
        Self(tags)
    }

    pub fn contains(&self, tag: ResourceTag) -> bool {
        self.0.binary_search(&tag).is_ok()
    }

    /// Each tag once, in order.
    pub fn iter(&self) -> impl Iterator<Item = ResourceTag> + '_ {
        self.0.iter().copied()
    }
}

/// What the index keeps of a state's latest version `version`, from the resources its
/// document's sniff collected and their tags (`None`: the document cannot be read, so it is
/// kept as not indexed). Each managed instance's identity ([`identity_of`]) is kept only as
/// an HMAC-SHA-256 under `key` of the type, a NUL byte and the identity: the identity itself
/// never leaves this function.
pub fn inventory_of(
    version: u64,
    found: Option<(&Found, &ResourceTags)>,
    key: &[u8; 32],
) -> StateInventory {
    let Some((found, tags)) = found else {
        return StateInventory {
            version,
            indexed: false,
            instances: Vec::new(),
            tags: None,
        };
    };
    let built = build(found, &tags.tags, key, |_| true);
    StateInventory {
        version,
        indexed: true,
        instances: built.instances,
        tags: (!built.shared_address).then(|| tags.tags.clone()),
    }
}

/// The instances of the resources of `found` (tagged `tags`) whose tags `kept` lacks, in
/// address order: what a save sends of a state whose entry holds the resources of `kept`,
/// the entry keeping the rest. `None` when two resources of the document share a module,
/// mode, type and name: they may name one address, which only a whole entry settles.
pub fn instances_of(
    found: &Found,
    tags: &ResourceTags,
    kept: &[ResourceTag],
    key: &[u8; 32],
) -> Option<Vec<Instance>> {
    if !tags.distinct_names() {
        return None;
    }
    let kept = TagSet::of(kept);
    Some(build(found, &tags.tags, key, |tag| !kept.contains(tag)).instances)
}

/// Instances built, and whether two resources named one address (one of them dropped).
struct Built {
    instances: Vec<Instance>,
    shared_address: bool,
}

/// The instances of the resources whose tags `wanted` takes, sorted by address, each
/// address once.
fn build(
    found: &Found,
    tags: &[ResourceTag],
    key: &[u8; 32],
    wanted: impl Fn(ResourceTag) -> bool,
) -> Built {
    // The key's two padded blocks hashed once: each instance's digest then costs the
    // hashing of its own bytes and the outer block (half of a fresh HMAC's work).
    let keyed = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    let keyed = &keyed;
    // A document names a few providers (one a module that passes its own) across its
    // resources: each one's source address, and whether its objects can be managed twice,
    // are worked out once, not once a resource.
    let mut providers: HashMap<&str, (Arc<str>, bool)> = HashMap::new();
    let mut names = Shared::default();
    // Walked twice rather than collected (a resource's view is 120 bytes: collected, the
    // views of a 60,000-resource state took more than its instances): once to size the
    // instances' vector (grown as it filled, it copied them about twice over), once to
    // build them.
    let chosen = || {
        found
            .iter()
            .zip(tags.iter().copied())
            .filter(|(_, tag)| wanted(*tag))
            .filter_map(|(r, tag)| Some((r, tag, mode_of(r.mode)?)))
    };
    let mut built = Vec::with_capacity(chosen().map(|(r, ..)| r.instances().len()).sum());
    for (resource, tag, mode) in chosen() {
        let (provider, local) = providers.entry(resource.provider).or_insert_with(|| {
            let source = provider_source(resource.provider);
            let local = LOCAL_PROVIDERS.contains(&namespace_type(&source));
            (source.into(), local)
        });
        let (provider, local) = (provider.clone(), *local);
        let shared = mode == Mode::Managed && !local;
        let (module, resource_type) = (names.of(resource.module), names.of(resource.resource_type));
        built.extend(resource.instances().map(|instance| {
            Instance {
                address: address(&resource, mode, instance.key),
                module: module.clone(),
                mode,
                resource_type: resource_type.clone(),
                provider: provider.clone(),
                digest: identity_of(resource.resource_type, instance.identity)
                    .filter(|_| shared)
                    .map(|id| digest(keyed, resource.resource_type, id)),
                resource: tag,
            }
        }));
    }
    // The order is sorted, not the instances: each is then moved into place along its
    // cycle of the order, in the vector itself (sorting them moved about a fifth of the
    // time away, and moving them into a second vector held two copies at once). A stable
    // sort, so of two instances at one address the document's first comes first.
    let mut order: Vec<usize> = (0..built.len()).collect();
    order.sort_by(|&a, &b| built[a].address.cmp(&built[b].address));
    in_order(&mut built, &mut order);
    let mut instances = built;
    // A malformed document may name one instance twice: the index keeps an address once,
    // on every store, and counts what it keeps.
    let mut shared_address = false;
    instances.dedup_by(|later, earlier| {
        let same = later.address == earlier.address;
        shared_address |= same && later.resource != earlier.resource;
        same
    });
    Built {
        instances,
        shared_address,
    }
}

/// Rearranges `items` so that the item at `i` is the one that was at `order[i]`, each cycle
/// of the order rotated in place (`order` is spent).
fn in_order<T>(items: &mut [T], order: &mut [usize]) {
    const DONE: usize = usize::MAX;
    for start in 0..order.len() {
        if order[start] == DONE {
            continue;
        }
        let mut at = start;
        loop {
            let from = order[at];
            order[at] = DONE;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

/// What names an instance's object for the conflicts, as its digest takes it: the identity
/// its provider declares (behind [`DECLARED`], so it never equals an attribute's value),
/// else its `arn` or `self_link`, else its `id` or `name` only for a type of
/// [`names_one_object`]. `None`: two instances with this identity in two states may be two
/// objects.
fn identity_of<'a>(resource_type: &str, identity: Option<Identity<'a>>) -> Option<Identified<'a>> {
    let identity = identity?;
    match identity.kind {
        IdentityKind::Declared => Some(Identified(Some(DECLARED), identity.text)),
        IdentityKind::Named => Some(Identified(None, identity.text)),
        IdentityKind::Scoped => {
            names_one_object(resource_type).then_some(Identified(None, identity.text))
        }
    }
}

/// An identity as its digest takes it: a mark, then its text.
struct Identified<'a>(Option<char>, &'a str);

/// Whether a type's `id` or `name` names one object wherever it is: Terraform's own
/// `terraform_data` (its `id` is a UUID made at its creation), `aws_s3_bucket` (a bucket's
/// name is unique in its partition), and every `azurerm_*` and `google_*` type (an `id`
/// there is a path from the subscription or the project). Elsewhere an `id` names an object
/// within a cluster, an account or a region that the state does not record: two states of
/// two clusters each holding a `kubernetes_namespace` "monitoring" hold two objects.
fn names_one_object(resource_type: &str) -> bool {
    matches!(resource_type, "terraform_data" | "aws_s3_bucket")
        || resource_type.starts_with("azurerm_")
        || resource_type.starts_with("google_")
}

/// The modules and types a build has named, each made once.
#[derive(Default)]
struct Shared<'a>(HashMap<&'a str, Arc<str>>);

impl<'a> Shared<'a> {
    fn of(&mut self, name: &'a str) -> Arc<str> {
        self.0.entry(name).or_insert_with(|| name.into()).clone()
    }
}

/// Names the rules [`inventory_of`] keeps a document by, in every tag and fingerprint: a
/// release that changes them (what an identity is, which providers are local, how an
/// address is spelled), or how [`tags_of`] frames the fields, changes this, so no save
/// takes an entry kept by the old rules for its own (4: a tag for each resource, a
/// provider's declared identity first, `id` and `name` for [`names_one_object`] alone).
const RULES: &[u8] = b"hegemony-state inventory 4";

/// Every resource's [`ResourceTag`] under the org's `key`, in the document's order.
pub fn tags_of(found: &Found, key: &[u8; 32]) -> ResourceTags {
    let mut derived =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    derived.update(RULES);
    derived.update(b" resource tags");
    let derived = derived.finalize().into_bytes();
    let mut sip_key = [0u8; 16];
    sip_key.copy_from_slice(&derived[..16]);
    let sip_key = zeroize::Zeroizing::new(sip_key);
    // One resource's fields laid end to end, then hashed at once: SipHash over one slice
    // costs a fraction of a call per field.
    let mut fields = Vec::with_capacity(1024);
    let mut tags = Vec::with_capacity(found.len());
    let mut names = Vec::with_capacity(found.len());
    for resource in found.iter() {
        fields.clear();
        for text in [
            resource.module,
            resource.mode,
            resource.resource_type,
            resource.name,
        ] {
            frame(&mut fields, b's', text.as_bytes());
        }
        let named = fields.len();
        frame(&mut fields, b's', resource.provider.as_bytes());
        let instances = resource.instances();
        frame(&mut fields, b'n', &(instances.len() as u64).to_le_bytes());
        for instance in instances {
            match instance.key {
                None => frame(&mut fields, b'-', b""),
                Some(IndexKey::Int(i)) => frame(&mut fields, b'#', &i.to_le_bytes()),
                Some(IndexKey::Str(s)) => frame(&mut fields, b'"', s.as_bytes()),
            }
            // Where it was read from says what the index makes of it (`identity_of`).
            match instance.identity {
                None => frame(&mut fields, b'-', b""),
                Some(Identity { kind, text }) => {
                    let tag = match kind {
                        IdentityKind::Declared => b'@',
                        IdentityKind::Named => b'=',
                        IdentityKind::Scoped => b'~',
                    };
                    frame(&mut fields, tag, text.as_bytes());
                }
            }
        }
        // The name's hash on the way: the tag's hash as it stands after those fields.
        let mut sip = SipHasher24::new_with_key(&sip_key);
        sip.write(&fields[..named]);
        names.push(sip.finish());
        sip.write(&fields[named..]);
        tags.push(ResourceTag(sip.finish()));
    }
    ResourceTags { tags, names }
}

/// Appends one field: a byte saying what it is, its length (LEB128), its bytes.
fn frame(fields: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    fields.push(tag);
    let mut len = bytes.len();
    while len >= 0x80 {
        fields.push((len & 0x7f) as u8 | 0x80);
        len >>= 7;
    }
    fields.push(len as u8);
    fields.extend_from_slice(bytes);
}

/// The fingerprint of what [`inventory_of`] keeps of a document whose resources have
/// `tags`, under the org's key: two documents with equal fingerprints are kept as the same
/// instances (versions aside), so a save may leave an entry in place rather than rebuild
/// it. An HMAC-SHA-256 under `key` of the rules and the tags in order; made from the tags an
/// entry holds, it says whether they are the entry of the version whose fingerprint it is.
pub fn fingerprint(tags: &[ResourceTag], key: &[u8; 32]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(RULES);
    // Laid end to end first: one update a tag costs more than the hashing.
    let bytes: Vec<u8> = tags.iter().flat_map(|t| t.0.to_le_bytes()).collect();
    mac.update(&bytes);
    crate::ids::hex(&mac.finalize().into_bytes())
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
    // Sized as it will be (an escaped key aside): each of a large state's tens of thousands
    // of addresses is kept until its entry is committed, and room to spare is kept with it.
    let dots = usize::from(!resource.module.is_empty()) + 1;
    let data = if mode == Mode::Data { "data.".len() } else { 0 };
    let key_len = match key {
        None => 0,
        Some(IndexKey::Int(i)) => {
            "[]".len()
                + i.unsigned_abs()
                    .checked_ilog10()
                    .map_or(1, |d| d as usize + 1)
                + usize::from(i < 0)
        }
        Some(IndexKey::Str(s)) => "[\"\"]".len() + s.len(),
    };
    let mut address = String::with_capacity(
        resource.module.len()
            + dots
            + data
            + resource.resource_type.len()
            + resource.name.len()
            + key_len,
    );
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

fn digest(keyed: &Hmac<Sha256>, resource_type: &str, identity: Identified<'_>) -> String {
    let mut mac = keyed.clone();
    mac.update(resource_type.as_bytes());
    mac.update(b"\0");
    if let Some(mark) = identity.0 {
        mac.update(mark.encode_utf8(&mut [0; 4]).as_bytes());
    }
    mac.update(identity.1.as_bytes());
    crate::ids::hex(&mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests;
