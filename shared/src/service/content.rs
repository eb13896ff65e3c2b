//! Sealed content of either kind of state: a Terraform state's version and an app state's
//! file are sealed and opened here, the same way. Sealing takes a fresh data key from the key
//! service and binds the envelope to where the content lives (org, incarnation, number,
//! blob); opening finds the data key in the record's key slot (or, for content sealed
//! before slots were kept, in a format-1 header) and unwraps it through the key cache, so
//! content read again calls no key service; a re-wrap wraps a recorded key anew without
//! opening the content. Where the sealed bytes are stored (the catalog
//! or a blob) and what the record says of them is the caller's.

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

/// Seals `body` for `place` under a fresh data key.
///
/// # Errors
/// `NoKey` or `Unavailable` from the key service; `Unavailable` when the catalog or blob
/// store cannot take it.
pub(super) async fn seal(
    app: &App,
    keys: &dyn KeyService,
    place: &Place<'_>,
    body: &Arc<Vec<u8>>,
    keep: Keep,
    now: Timestamp,
) -> Result<Sealed, Error> {
    let context = KeyContext {
        org: place.org,
        state: place.key_state,
    };
    let data_key = keys.data_key(&context).await?;
    let (key_id, wrapped_key) = (data_key.key_id.clone(), data_key.wrapped.clone());
    let (body, bound) = (body.clone(), place.owned());
    let inline = if keep == Keep::Blob || body.len() > SEALED_IN_MEMORY_MAX {
        app.catalog.add_pending_blob(place.blob, now).await?;
        let write = Box::new(move |out: &mut dyn std::io::Write| {
            crypto::seal_into(&body, &data_key.plaintext, &bound.binding(), out)
        });
        app.blobs.put_written(place.blob, write).await?;
        None
    } else {
        let object = work::run(body.len(), "encryption", move || {
            crypto::seal(&body, &data_key.plaintext, &bound.binding())
        })
        .await?;
        if object.len() <= INLINE_MAX_BYTES {
            Some(Arc::new(object))
        } else {
            app.catalog.add_pending_blob(place.blob, now).await?;
            app.blobs.put(place.blob, object).await?;
            None
        }
    };
    Ok(Sealed {
        key_id,
        wrapped_key,
        inline,
    })
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
