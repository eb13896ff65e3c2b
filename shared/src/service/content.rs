//! Sealed content of either kind of state: a Terraform state's version and an app state's
//! file are sealed and opened here, the same way. Sealing takes a fresh data key from the key
//! service and binds the envelope to where the content lives (org, incarnation, number,
//! blob); opening finds the data key in the record's key slot (or, for content sealed
//! before slots were kept, in a format-1 header) and unwraps it through the key cache, so
//! content read again calls no key service; a re-wrap wraps a recorded key anew without
//! opening the content. Where the sealed bytes are stored (the catalog
//! or a blob) and what the record says of them is the caller's.

use std::future::Future;
use std::sync::Arc;

use super::key_cache::KeySlot;
use super::{work, App, Error};
use crate::crypto::{self, Binding};
use crate::domain::version::KeySlot as RecordSlot;
use crate::domain::Timestamp;
use crate::ports::{KeyContext, KeyService, OpenedBlob, INLINE_MAX_BYTES};

/// Where a piece of content is sealed: what its envelope is bound to and its data key is
/// asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place<'a> {
    pub org: &'a str,
    /// The state the key service is asked for a key for: a state's name, or an app state's
    /// key name (`app_changes::key_state`), so neither kind's keys open the other's content.
    pub key_state: &'a str,
    pub incarnation: &'a str,
    /// A version, or an app file's sequence number.
    pub number: u64,
    pub blob: &'a str,
    /// How errors name it: `version 3 of state net`.
    pub what: &'a str,
}

impl Place<'_> {
    fn binding(&self) -> Binding<'_> {
        Binding {
            org: self.org,
            incarnation: self.incarnation,
            version: self.number,
            blob_id: self.blob,
        }
    }

    fn owned(&self) -> OwnedPlace {
        OwnedPlace {
            org: self.org.to_owned(),
            incarnation: self.incarnation.to_owned(),
            number: self.number,
            blob: self.blob.to_owned(),
        }
    }
}

/// What an envelope is bound to, owned, for the thread that seals it.
struct OwnedPlace {
    org: String,
    incarnation: String,
    number: u64,
    blob: String,
}

impl OwnedPlace {
    fn binding(&self) -> Binding<'_> {
        Binding {
            org: &self.org,
            incarnation: &self.incarnation,
            version: self.number,
            blob_id: &self.blob,
        }
    }
}

/// The key a record keeps beside its content: the key id, and the wrapped key itself (its
/// key slot, the one a re-wrap replaces), absent for content sealed before slots were kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordedKey<'a> {
    pub key_id: &'a str,
    pub wrapped: Option<&'a [u8]>,
}

/// Where sealed bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// In the catalog, with the commit, when they fit ([`INLINE_MAX_BYTES`]); else a blob.
    InlineWhenSmall,
    /// Always a blob, sealed into it as it is made: an upload holds its body and a segment,
    /// not its whole sealed object too.
    Blob,
}

/// The largest body sealed in memory, where its sealed size decides between inline and
/// blob; a larger one is sealed straight into its blob. Sealed to 64 KiB or less
/// ([`INLINE_MAX_BYTES`]), a state this large would have compressed more than 64 times,
/// which Terraform states do not (about 4 to 10 times); one that did is a blob version,
/// which reads the same.
const SEALED_IN_MEMORY_MAX: usize = 4 << 20;

/// Content sealed under a fresh data key.
pub(super) struct Sealed {
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    /// The sealed bytes, for the commit to store in the catalog; `None` when they were
    /// stored as the place's blob, pending until a commit names it.
    pub inline: Option<Arc<Vec<u8>>>,
}

/// Seals `body` for `place` under a fresh data key, running `beside` (the caller's own
/// work on the CPU) while the sealed bytes' writes wait on the disk: the pending record's
/// commit and the blob's, each ending in an fsync that leaves the CPU idle. Not while
/// sealing: that compresses on every core, and work beside it only slows it. Content kept
/// inline writes nothing: `beside` runs after.
///
/// # Errors
/// `NoKey` or `Unavailable` from the key service; `Unavailable` when the catalog or blob
/// store cannot take it; what `beside` fails with.
pub(super) async fn seal<T>(
    app: &App,
    keys: &dyn KeyService,
    place: &Place<'_>,
    body: &Arc<Vec<u8>>,
    keep: Keep,
    now: Timestamp,
    beside: impl Future<Output = Result<T, Error>>,
) -> Result<(T, Sealed), Error> {
    let context = KeyContext {
        org: place.org,
        state: place.key_state,
    };
    let data_key = keys.data_key(&context).await?;
    let (key_id, wrapped_key) = (data_key.key_id.clone(), data_key.wrapped.clone());
    let (body, bound) = (body.clone(), place.owned());
    // The store's writes are polled first, so each is under way before `beside` takes the
    // task's thread.
    let (inline, done) = if keep == Keep::Blob || body.len() > SEALED_IN_MEMORY_MAX {
        let ((), done) = tokio::try_join!(
            async { Ok(app.catalog.add_pending_blob(place.blob, now).await?) },
            beside
        )?;
        let write = Box::new(move |out: &mut dyn std::io::Write| {
            crypto::seal_into(&body, &data_key.plaintext, &bound.binding(), out)
        });
        app.blobs.put_written(place.blob, write).await?;
        (None, done)
    } else {
        let object = work::run(body.len(), "encryption", move || {
            crypto::seal(&body, &data_key.plaintext, &bound.binding())
        })
        .await?;
        if object.len() <= INLINE_MAX_BYTES {
            (Some(Arc::new(object)), beside.await?)
        } else {
            let store = async {
                app.catalog.add_pending_blob(place.blob, now).await?;
                Ok::<_, Error>(app.blobs.put(place.blob, object).await?)
            };
            let ((), done) = tokio::try_join!(store, beside)?;
            (None, done)
        }
    };
    Ok((
        done,
        Sealed {
            key_id,
            wrapped_key,
            inline,
        },
    ))
}

/// Unwraps the data key of `place`'s content (through the key cache) and opens the first
/// segment of its sealed bytes, so a wrong key or a moved object fails before any byte is
/// sent.
///
/// # Errors
/// `Damaged` for an object that is not a sealed envelope of this place or has no key;
/// `StorageFault` when its bytes cannot be read; what the key service answers.
pub(super) async fn opening(
    app: &App,
    keys: &dyn KeyService,
    place: &Place<'_>,
    recorded: RecordedKey<'_>,
    object: OpenedBlob,
) -> Result<crypto::Opening, Error> {
    let first_bytes = match &object {
        OpenedBlob::Whole(bytes) => bytes,
        OpenedBlob::Reading { head, .. } => head,
    };
    let header = crypto::read_header(first_bytes).map_err(|e| Error::Damaged(e.to_string()))?;
    // The record's key slot is the one a re-wrap replaces, and the only place a format-2
    // object's wrapped key is kept; a format-1 header's copy is the original wrapping, and
    // the only one of content recorded before the slot was kept.
    let (key_id, wrapped) = match (recorded.wrapped, &header.key) {
        (Some(wrapped), _) => (recorded.key_id, wrapped),
        (None, Some(key)) => (key.key_id.as_str(), key.wrapped.as_slice()),
        (None, None) => {
            return Err(Error::Damaged(format!(
                "{} has no wrapped data key in its record",
                place.what
            )))
        }
    };
    // The slot as read: a re-wrapped key is another cache entry.
    let slot = KeySlot {
        org: place.org,
        state: place.key_state,
        incarnation: place.incarnation,
        version: place.number,
        key_id,
        wrapped,
    };
    let data_key = app
        .key_cache
        .unwrap_key(keys, &slot, std::time::Instant::now())
        .await?;
    let binding = place.binding();
    let opened = match object {
        OpenedBlob::Whole(bytes) => crypto::Opening::new(bytes, &header, &data_key, &binding),
        OpenedBlob::Reading { head, rest, len } => {
            crypto::Opening::reading(head, rest, len, &header, &data_key, &binding)
        }
    };
    opened.map_err(|e| match e {
        crypto::EnvelopeError::Unreadable(why) => {
            Error::StorageFault(format!("{}: {why}", place.what))
        }
        e => Error::Damaged(format!("{}: {e}", place.what)),
    })
}

/// The whole plaintext of an opening (`size` bytes, into `buffer`, emptied first), off the
/// async threads when it is large: decompressing a large state takes a while.
///
/// # Errors
/// `Damaged` when the content fails its authentication or size; `Unavailable` when the
/// thread failed.
pub(super) async fn open_whole(
    opening: crypto::Opening,
    size: u64,
    buffer: Vec<u8>,
    what: &str,
) -> Result<Vec<u8>, Error> {
    let size = size as usize;
    work::run(size, "decryption", move || {
        crypto::open_into(opening, size, buffer)
    })
    .await?
    .map_err(|e| Error::Damaged(format!("{what}: {e}")))
}

/// A recorded key wrapped anew by the key in use, for a re-wrap of either kind of content:
/// the content itself is never read, but for a format-1 header, the only copy of a key
/// recorded before the record kept its slot.
///
/// # Errors
/// `Damaged` when neither the record nor the header has the key; what the key service
/// answers.
pub(super) async fn rewrap(
    app: &App,
    keys: &dyn KeyService,
    place: &Place<'_>,
    recorded: RecordedKey<'_>,
) -> Result<RecordSlot, Error> {
    let wrapped = match recorded.wrapped {
        Some(wrapped) => wrapped.to_vec(),
        None => header_wrapped_key(app, place).await?,
    };
    let context = KeyContext {
        org: place.org,
        state: place.key_state,
    };
    let new = keys.rewrap_key(recorded.key_id, &wrapped, &context).await?;
    Ok(RecordSlot {
        key: new.key_id,
        wrapped_key: Some(new.wrapped),
    })
}

/// The wrapped key in the header of `place`'s sealed blob.
async fn header_wrapped_key(app: &App, place: &Place<'_>) -> Result<Vec<u8>, Error> {
    let what = place.what;
    let object = app.blobs.get(place.blob).await?.ok_or_else(|| {
        Error::Damaged(format!(
            "the content of {what} is missing from the blob store"
        ))
    })?;
    let header = crypto::read_header(&object).map_err(|e| Error::Damaged(e.to_string()))?;
    header
        .key
        .map(|key| key.wrapped)
        .ok_or_else(|| Error::Damaged(format!("{what} has no wrapped data key in its record")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::MemoryStore;
    use crate::crypto::PlatformKey;
    use crate::ports::Unmeasured;
    use crate::service::issuers::Issuers;
    use crate::service::key_cache::KeyCache;
    use crate::service::{Limits, SystemClock};

    fn app() -> App {
        let store = Arc::new(MemoryStore::new());
        App {
            catalog: store.clone(),
            blobs: store,
            keys: None,
            key_cache: KeyCache::off(),
            index_keys: Default::default(),
            clock: Arc::new(SystemClock),
            limits: Limits {
                max_state_bytes: 32 << 20,
                keep_versions: 5,
                run_end_grace: time::Duration::seconds(600),
                deleted_retention: time::Duration::days(7),
                lambda_ceiling: None,
            },
            links: Default::default(),
            issuers: Issuers::off(),
            metrics: Arc::new(Unmeasured),
        }
    }

    /// Bytes no compressor shrinks: sealed, more than the catalog keeps inline, and sealed
    /// off the async thread.
    fn noise(len: usize) -> Arc<Vec<u8>> {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let bytes = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        Arc::new(bytes)
    }

    fn place(blob: &str) -> Place<'_> {
        Place {
            org: "acme",
            key_state: "net",
            incarnation: "i1",
            number: 1,
            blob,
            what: "version 1 of state net",
        }
    }

    async fn seal_with(
        body: &Arc<Vec<u8>>,
        keep: Keep,
        beside: Result<u32, Error>,
    ) -> (App, Result<(u32, Sealed), Error>) {
        let (app, keys) = (app(), PlatformKey::generate());
        let now = app.clock.now();
        let sealed = seal(&app, &keys, &place("b1"), body, keep, now, async { beside }).await;
        (app, sealed)
    }

    #[tokio::test]
    async fn work_beside_a_blob_comes_back_with_the_blob_stored() {
        for keep in [Keep::InlineWhenSmall, Keep::Blob] {
            let body = noise(256 << 10);
            let (app, sealed) = seal_with(&body, keep, Ok(7)).await;
            let (done, sealed) = sealed.unwrap();
            assert_eq!(done, 7);
            assert!(sealed.inline.is_none());
            assert!(app.blobs.get("b1").await.unwrap().is_some());
        }
    }

    #[tokio::test]
    async fn work_beside_inline_content_comes_back_with_it() {
        let (_, sealed) = seal_with(&Arc::new(b"{}".to_vec()), Keep::InlineWhenSmall, Ok(7)).await;
        let (done, sealed) = sealed.unwrap();
        assert_eq!(done, 7);
        assert!(sealed.inline.is_some());
    }

    #[tokio::test]
    async fn work_beside_that_fails_fails_the_seal_with_its_error() {
        let bodies = [
            (noise(256 << 10), Keep::InlineWhenSmall),
            (noise(256 << 10), Keep::Blob),
            (Arc::new(b"{}".to_vec()), Keep::InlineWhenSmall),
        ];
        for (body, keep) in bodies {
            let failed = Err(Error::Unavailable("the catalog is down".into()));
            let (_, sealed) = seal_with(&body, keep, failed).await;
            assert!(
                matches!(&sealed, Err(Error::Unavailable(why)) if why == "the catalog is down"),
                "{:?}",
                sealed.err()
            );
        }
    }
}
