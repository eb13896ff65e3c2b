//! Each org's inventory key, what the index's digests are made under: a data key made once
//! per org by the org's key service and kept wrapped as a version's is (under the context of
//! the org and a state name no state can have), and stored in the org's settings, which
//! every backend request reads already. Unwrapped keys are kept in memory for the process's
//! life, zeroized when they leave, so only the first save of an org after a start asks the
//! key service. Never a place a digest is made: the domain makes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use zeroize::Zeroizing;

use super::{work, App, Error};
use crate::domain::document::Found;
use crate::domain::inventory::{
    fingerprint, instances_of, inventory_of, tags_of, ResourceTags, StateInventory, TagSet,
};
use crate::domain::record::StateRecord;
use crate::ports::{
    InventoryChange, InventoryKey, InventoryPatch, KeyContext, KeyService, StoreError,
};

/// At most this many orgs' keys are kept; past it one is dropped (and unwrapped again when
/// next needed). Each is 32 bytes and its names: a server serving more orgs than this only
/// calls the key service more often.
const MAX_KEYS: usize = 4096;

/// The unwrapped inventory keys, by org and stored (wrapped) form: a key re-wrapped or
/// replaced misses, and one org's key is never another's.
#[derive(Default)]
pub struct IndexKeys {
    keys: Mutex<Unwrapped>,
}

/// Each org's key, by the org and its stored form.
type Unwrapped = HashMap<(String, InventoryKey), Zeroizing<[u8; 32]>>;

impl IndexKeys {
    fn lock(&self) -> std::sync::MutexGuard<'_, Unwrapped> {
        // Each change is one insert or remove: a panic elsewhere cannot leave it half made.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, org: &str, stored: &InventoryKey) -> Option<Zeroizing<[u8; 32]>> {
        self.lock()
            .get(&(org.to_owned(), stored.clone()))
            .map(|k| Zeroizing::new(**k))
    }

    fn put(&self, org: &str, stored: &InventoryKey, key: &Zeroizing<[u8; 32]>) {
        let mut keys = self.lock();
        if keys.len() >= MAX_KEYS {
            if let Some(any) = keys.keys().next().cloned() {
                keys.remove(&any);
            }
        }
        keys.insert((org.to_owned(), stored.clone()), Zeroizing::new(**key));
    }
}

fn context(org: &str) -> KeyContext<'_> {
    KeyContext {
        org,
        state: InventoryKey::STATE,
    }
}

/// The org's inventory key: `stored` (as the org's settings were read) unwrapped, from
/// memory when it was unwrapped before; made, wrapped and stored when the org has none.
/// Two first writers agree: the one whose store loses reads the winner's key and uses it.
///
/// # Errors
/// What the key service answers (`Unavailable`, `WrongKey`, `Damaged`), or a storage fault.
pub(super) async fn org_key(
    app: &App,
    keys: &dyn KeyService,
    org: &str,
    stored: Option<InventoryKey>,
) -> Result<Zeroizing<[u8; 32]>, Error> {
    let stored = match stored {
        Some(stored) => stored,
        None => match make(app, keys, org).await? {
            Made::Ours(stored, key) => {
                app.index_keys.put(org, &stored, &key);
                return Ok(key);
            }
            Made::Theirs(stored) => stored,
        },
    };
    if let Some(key) = app.index_keys.get(org, &stored) {
        return Ok(key);
    }
    let key = keys
        .unwrap_key(&stored.key_id, &stored.wrapped, &context(org))
        .await?;
    app.index_keys.put(org, &stored, &key);
    Ok(key)
}

enum Made {
    /// Stored by this call.
    Ours(InventoryKey, Zeroizing<[u8; 32]>),
    /// Another writer's, stored first.
    Theirs(InventoryKey),
}

async fn make(app: &App, keys: &dyn KeyService, org: &str) -> Result<Made, Error> {
    // Made as a data key is (KMS `GenerateDataKey`, Transit `datakey/plaintext`): a save
    // already has that permission, where wrapping bytes of our own (`Encrypt`) would need
    // one more in every deployment's key policy.
    let made = keys.data_key(&context(org)).await?;
    let key = made.plaintext;
    let stored = InventoryKey {
        key_id: made.key_id,
        wrapped: made.wrapped,
    };
    match app
        .catalog
        .put_inventory_key(org, None, &stored, app.clock.now())
        .await
    {
        Ok(()) => Ok(Made::Ours(stored, key)),
        Err(StoreError::Conflict) => app
            .catalog
            .org(org)
            .await?
            .and_then(|o| o.inventory_key)
            .map(Made::Theirs)
            .ok_or_else(|| {
                Error::Damaged(format!(
                    "org {org}'s inventory key was stored by another writer but cannot be read back"
                ))
            }),
        Err(e) => Err(e.into()),
    }
}

/// Up to this a document's index work runs on the request's task: it costs a fraction of
/// validating the document (a 2 MiB state's tags take 0.23 ms, its sniff 1.6), and below
/// this less than the hand-off to a blocking thread and back.
const IN_PLACE_BYTES: usize = 512 * 1024;

/// What a change that writes a version indexes it from: the resources its document's sniff
/// collected, the org's key when there are any, and, made when first asked for, their tags
/// and the fingerprint of what the index keeps of them. Its work on a large document runs on
/// a blocking thread, so that the request's task, free meanwhile, starts the blob's file as
/// soon as its pending record is committed: on the task, a 2 MiB state's work held the
/// file's start up by 0.1 to 0.15 ms.
pub(super) struct Indexer {
    found: Option<Arc<Found>>,
    key: Zeroizing<[u8; 32]>,
    digested: OnceLock<Arc<Digested>>,
    /// The document's size.
    bytes: usize,
    /// Whether an attempt of this change decided to keep the entry: the next asks first.
    kept: AtomicBool,
}

/// The tags of a document's resources and the fingerprint of what the index keeps of them.
struct Digested {
    tags: Option<ResourceTags>,
    fingerprint: Option<String>,
}

impl Digested {
    fn of(found: Option<&Found>, key: &[u8; 32]) -> Self {
        let tags = found.map(|f| tags_of(f, key));
        let fingerprint = tags.as_ref().map(|t| fingerprint(t.as_slice(), key));
        Self { tags, fingerprint }
    }
}

impl Indexer {
    /// Gets the org's key ([`org_key`]) when the document, of `bytes` bytes, has resources
    /// to digest.
    ///
    /// # Errors
    /// As [`org_key`].
    pub(super) async fn new(
        app: &App,
        keys: &dyn KeyService,
        org: &str,
        stored: Option<InventoryKey>,
        found: Option<Found>,
        bytes: usize,
    ) -> Result<Self, Error> {
        // A document with no resources digests nothing: it needs no key, and an org's first
        // saves (often empty) ask the key service for one data key each, not two. Nothing
        // is digested under the stand-in, so its fingerprint is the same on every save.
        let resources = found.as_ref().is_some_and(|f| !f.is_empty());
        let key = if resources {
            org_key(app, keys, org, stored).await?
        } else {
            Zeroizing::new([0; 32])
        };
        Ok(Self {
            found: found.map(Arc::new),
            key,
            digested: OnceLock::new(),
            bytes,
            kept: AtomicBool::new(false),
        })
    }

    /// Runs `f` on the resources and the key: in place for a document up to
    /// [`IN_PLACE_BYTES`], else on the blocking pool.
    ///
    /// # Errors
    /// `Unavailable` when the blocking thread failed.
    async fn work<T: Send + 'static>(
        &self,
        f: impl FnOnce(Option<&Found>, &[u8; 32]) -> T + Send + 'static,
    ) -> Result<T, Error> {
        let (found, key) = (self.found.clone(), self.key.clone());
        work::run_over(IN_PLACE_BYTES, self.bytes, "indexing", move || {
            f(found.as_deref(), &key)
        })
        .await
    }

    /// The resources' tags and fingerprint, made on the first call: a save makes them while
    /// its blob is written ([`Self::change_over`]), not before.
    ///
    /// # Errors
    /// `Unavailable` when the thread they were made on failed.
    async fn digested(&self) -> Result<Arc<Digested>, Error> {
        if let Some(digested) = self.digested.get() {
            return Ok(digested.clone());
        }
        let made = Arc::new(self.work(Digested::of).await?);
        // A change's own task is the only one to make them: none is set meanwhile.
        Ok(self.digested.get_or_init(|| made).clone())
    }

    /// The fingerprint of what the index keeps of the document (the new version's
    /// `VersionRecord::index`), once the change is made.
    pub(super) fn fingerprint(&self) -> Option<String> {
        let digested = self
            .digested
            .get_or_init(|| Arc::new(Digested::of(self.found.as_deref(), &self.key)));
        digested.fingerprint.clone()
    }

    /// The commit's change to the index, for the document as `version`: its whole entry.
    ///
    /// # Errors
    /// `Unavailable` when the thread it was made on failed.
    pub(super) async fn change(&self, version: u64) -> Result<InventoryChange, Error> {
        Ok(InventoryChange::Replace(self.entry(version).await?))
    }

    /// The index's entry of the document as `version`.
    ///
    /// # Errors
    /// `Unavailable` when the thread it was made on failed.
    pub(super) async fn entry(&self, version: u64) -> Result<StateInventory, Error> {
        let digested = self.digested().await?;
        // Without resources there is nothing to digest, so no key: an empty document is
        // indexed (with no instances) all the same.
        self.work(move |found, key| inventory_of(version, found.zip(digested.tags.as_ref()), key))
            .await
    }

    /// As [`Self::change`], for a save over `snapshot`: when the state's latest version
    /// has this document's fingerprint and the entry holds that version, it already holds
    /// these instances, and only its version moves (no digest made, no row compared); when the entry holds the tags of
    /// that version's resources, only the instances of the resources whose tags are new are
    /// built and sent, the store keeping the rest.
    ///
    /// # Errors
    /// A storage fault reading the entry; `Unavailable` when a thread its work ran
    /// on failed.
    pub(super) async fn change_over(
        &self,
        app: &App,
        snapshot: &StateRecord,
        version: u64,
    ) -> Result<InventoryChange, Error> {
        let latest = snapshot.latest.as_ref().filter(|_| snapshot.is_visible());
        let digested = self.digested().await?;
        // A fingerprint is made of tags: with one, the document has them.
        let (Some(new), Some((latest, kept))) = (
            &digested.fingerprint,
            latest.and_then(|l| Some((l.version, l.index.clone()?))),
        ) else {
            return self.change(version).await;
        };
        if *new == kept {
            // Kept only where the entry holds the latest version: one left not indexed is
            // built again, by this save and whatever its size, not carried on to this
            // version. A store that could hold such an entry refuses the keep in its commit
            // (see `InventoryChange::Keep`), so the first attempt reads nothing and one after
            // a refused commit asks.
            let again = self.kept.swap(true, Ordering::Relaxed);
            if again
                && !app
                    .catalog
                    .holds_version(&snapshot.org, &snapshot.name, latest)
                    .await?
            {
                return self.change(version).await;
            }
            return Ok(InventoryChange::Keep { version });
        }
        let Some(stored) = app
            .catalog
            .resource_tags(&snapshot.org, &snapshot.name)
            .await?
        else {
            return self.change(version).await;
        };
        // Decided and built on one thread: a whole entry is built there too, not handed back
        // to be sent to another.
        self.work(move |found, key| {
            let tags = digested.tags.as_ref();
            let whole = || InventoryChange::Replace(inventory_of(version, found.zip(tags), key));
            // The entry's tags are the latest version's when they give its fingerprint: an
            // entry rebuilt under other rules, or left behind, is replaced whole.
            if fingerprint(&stored, key) != kept {
                return whole();
            }
            let Some((found, tags)) = found.zip(tags) else {
                return whole();
            };
            let now = TagSet::of(tags.as_slice());
            let gone: Vec<_> = stored
                .iter()
                .copied()
                .filter(|t| !now.contains(*t))
                .collect();
            // Nothing kept (every resource renamed): the whole entry, whose rows the store
            // drops in one sweep rather than a resource at a time.
            if !stored.is_empty() && gone.len() == stored.len() {
                return whole();
            }
            match instances_of(found, tags, &stored, key) {
                Some(instances) => InventoryChange::Patch(InventoryPatch {
                    version,
                    tags: tags.as_slice().to_vec(),
                    gone,
                    instances,
                }),
                None => whole(),
            }
        })
        .await
    }
}
