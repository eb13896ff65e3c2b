//! Reading and writing state content: the backend protocol's GET and POST.

use std::future::Future;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::commit::take_over_dead_lock;
use super::content::{self, open_whole, Keep, Place, RecordedKey};
use super::indexing::Indexer;
use super::retry::{commit, until_done, Attempt, Carried};
use super::{work, App, Error};
use crate::crypto;
use crate::domain::audit::AuditAction;
use crate::domain::document::{
    check_escapes, sniff_resources, sniff_resources_but_escapes, Found, StateMeta,
};
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::protection::Change;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::write::{
    apply_write, plan_write, SealedContent, Target, WriteDecision, WriteRequest,
};
use crate::domain::{Principal, Refusal, Timestamp};
use crate::ids::{hex, new_id};
use crate::ports::{key_backend, AuditEntry, Commit, InlineContent, OpenedBlob, VersionKind};

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The same bytes were already stored at that serial: nothing new.
    Unchanged,
    /// A new version.
    Created { version: u64 },
    /// The lock's open version took the new content.
    Replaced { version: u64 },
}

/// The blob key of a version's content: ids only, never the state's name.
fn blob_key(org: &str, incarnation: &str, version: u64, blob_id: &str) -> String {
    format!("orgs/{org}/states/{incarnation}/{version}-{blob_id}")
}

/// A version's content as a read gets it.
pub enum Content {
    /// Sealed in format 1 (zstd inside): the plaintext, opened whole.
    Whole(Vec<u8>),
    /// Sealed in format 2: its gzip member, opened segment by segment as it is sent (the
    /// first already, so a wrong key or a moved object fails before any byte), and the
    /// plaintext's recorded size.
    Gzip {
        opening: Box<crypto::Opening>,
        size: u64,
    },
}

/// Reads the latest version's content, exactly as written. `None` when the state has no
/// version. Reading works while the state is locked. An inline latest version comes with its
/// record in one catalog read.
///
/// # Errors
/// `Refused` without tf_state:read; `NoKey`, `WrongKey`, `Damaged` or `Unavailable` when
/// the content cannot be opened.
pub async fn read(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<Content>, Error> {
    let state = app
        .require_with_content(principal, Permission::Read, name)
        .await?;
    let keys = app.keys()?;
    let Some((record, inline)) = state else {
        return Ok(None);
    };
    let Some(latest) = &record.latest else {
        return Ok(None);
    };
    content(app, keys, &record, latest, inline).await.map(Some)
}

/// A version's content for a read: a format-2 object stays compressed, to be sent as it is
/// or inflated as it goes; a format-1 object is opened whole, as it always was. `inline` is
/// an inline version's sealed bytes when the read that found the record brought them.
pub(super) async fn content(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    record: &StateRecord,
    version: &VersionRecord,
    inline: Option<Vec<u8>>,
) -> Result<Content, Error> {
    let object = match inline {
        Some(object) if version.inline => OpenedBlob::Whole(object),
        _ if version.inline => OpenedBlob::Whole(sealed_object(app, record, version).await?),
        _ => read_as_sent(app, record, version).await?,
    };
    let opening = opening(app, keys, record, version, object).await?;
    if opening.compression() == crypto::Compression::Gzip {
        return Ok(Content::Gzip {
            opening: Box::new(opening),
            size: version.size,
        });
    }
    let what = version_of(record, version);
    open_whole(opening, version.size, Vec::new(), &what)
        .await
        .map(Content::Whole)
}

pub(super) async fn open_version(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    record: &StateRecord,
    version: &VersionRecord,
) -> Result<Vec<u8>, Error> {
    open_version_into(app, keys, record, version, Vec::new()).await
}

/// [`open_version`] into `buffer` (emptied first), so opening versions one after another
/// reuses one plaintext's memory. A blob is read a segment at a time as it is opened, where
/// the blob store can: held whole beside the plaintext, a large state's sealed bytes took a
/// third more memory again (a restore's and a rollback's peak).
pub(super) async fn open_version_into(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    record: &StateRecord,
    version: &VersionRecord,
    buffer: Vec<u8>,
) -> Result<Vec<u8>, Error> {
    let object = if version.inline {
        OpenedBlob::Whole(sealed_object(app, record, version).await?)
    } else {
        read_as_sent(app, record, version).await?
    };
    let opening = opening(app, keys, record, version, object).await?;
    let what = version_of(record, version);
    open_whole(opening, version.size, buffer, &what).await
}

/// How errors name a version: `version 3 of state net`.
fn version_of(record: &StateRecord, version: &VersionRecord) -> String {
    format!("version {} of state {}", version.version, record.name)
}

/// A version's sealed bytes: from the catalog when inline, else from its blob.
async fn sealed_object(
    app: &App,
    record: &StateRecord,
    version: &VersionRecord,
) -> Result<Vec<u8>, Error> {
    let (object, place) = if version.inline {
        let content = app
            .catalog
            .content(
                &record.org,
                record.home(),
                &record.incarnation,
                version.version,
            )
            .await?;
        (content, "catalog")
    } else {
        (app.blobs.get(&version.blob).await?, "blob store")
    };
    object.ok_or_else(|| missing(record, version, place))
}

/// A version whose content is not where its record says.
fn missing(record: &StateRecord, version: &VersionRecord, place: &str) -> Error {
    Error::Damaged(format!(
        "the content of version {} of state {} is missing from the {place}",
        version.version, record.name
    ))
}

/// A blob version's sealed bytes to be read as they are sent, where the blob store can:
/// its header at hand, the rest read a segment at a time. An object whose header is longer
/// than [`HEAD_BYTES`] (only a format-1 header can be, and none written was) is read whole.
async fn read_as_sent(
    app: &App,
    record: &StateRecord,
    version: &VersionRecord,
) -> Result<OpenedBlob, Error> {
    let blob = app.blobs.open(&version.blob, HEAD_BYTES).await?;
    match blob {
        Some(OpenedBlob::Reading { head, .. })
            if matches!(
                crypto::read_header(&head),
                Err(crypto::EnvelopeError::TruncatedHeader)
            ) =>
        {
            sealed_object(app, record, version)
                .await
                .map(OpenedBlob::Whole)
        }
        Some(blob) => Ok(blob),
        None => Err(missing(record, version, "blob store")),
    }
}

/// How much of a blob is read before its header is: a format-2 header is 17 bytes, the
/// format-1 headers written held a key id and a wrapped key of a few hundred.
const HEAD_BYTES: usize = 4096;

/// Unwraps a version's data key and opens the first segment of its sealed bytes.
async fn opening(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    record: &StateRecord,
    version: &VersionRecord,
    object: OpenedBlob,
) -> Result<crypto::Opening, Error> {
    let what = version_of(record, version);
    let recorded = RecordedKey {
        key_id: &version.key,
        wrapped: version.wrapped_key.as_deref(),
    };
    content::opening(
        app,
        keys,
        &place(record, version.version, &version.blob, &what),
        recorded,
        object,
    )
    .await
}

/// Where a version of `record` is sealed.
fn place<'a>(record: &'a StateRecord, version: u64, blob: &'a str, what: &'a str) -> Place<'a> {
    Place {
        org: &record.org,
        key_state: record.home(),
        incarnation: &record.incarnation,
        number: version,
        blob,
        what,
    }
}

/// Sealed content, remembered across compare-and-swap retries so the same decision does not
/// encrypt and store the body twice.
pub(super) struct Sealed {
    incarnation: String,
    version: u64,
    pub(super) blob: String,
    /// Its key, and the sealed bytes of a version small enough to live inline in the
    /// catalog (the commit carries them, and no blob was written).
    pub(super) sealed: content::Sealed,
}

impl Sealed {
    /// What a commit records of this content: its facts and where it is sealed.
    pub(super) fn content(
        &self,
        size: usize,
        sha256: String,
        index: Option<String>,
    ) -> SealedContent {
        SealedContent {
            index,
            size: size as u64,
            sha256,
            key: self.sealed.key_id.clone(),
            wrapped_key: self.sealed.wrapped_key.clone(),
            blob: self.blob.clone(),
            inline: self.sealed.inline.is_some(),
        }
    }

    /// Whether this was sealed for `version` of the snapshot's incarnation.
    pub(super) fn fits(&self, snapshot: &StateRecord, version: u64) -> bool {
        self.incarnation == snapshot.incarnation && self.version == version
    }

    /// Adds what storing this content needs to `commit`: the inline bytes for the catalog,
    /// or the blob whose pending record goes.
    pub(super) fn add_to(&self, mut commit: Commit) -> Commit {
        match &self.sealed.inline {
            Some(sealed) => commit.contents.push(InlineContent {
                version: self.version,
                sealed: sealed.clone(),
            }),
            None => commit.committed_blobs.push(self.blob.clone()),
        }
        commit
    }
}

/// Writes a new state document (the backend POST), with `?ID=` as `lock_id`.
///
/// # Errors
/// `Refused` for every failed write check (DESIGN section 6, in order), `NoKey` without a
/// key, `Unavailable` on a transient fault.
pub async fn write(
    app: &App,
    principal: &Principal,
    name: &StateName,
    lock_id: Option<&str>,
    body: Vec<u8>,
) -> Result<WriteOutcome, Error> {
    let (_, first) = app
        .require_to_change(principal, Permission::Write, Change::Write, name)
        .await?;
    let keys = app.keys()?;
    let bytes = body.len() as u64;
    let (body, document, sha256, found) = examine(body).await?;
    let org = principal.org.as_str();
    let indexer = Indexer::new(app, keys, org, first.inventory_key(), found, body.len()).await?;
    let request = WriteRequest {
        lock_id,
        document: &document,
        sha256: &sha256,
    };
    let sealed: Carried<Sealed> = Carried::default();
    let outcome = until_done(|| async {
        let now = app.clock.now();
        let snapshot = first.snapshot(app, org, name, now).await?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        let plan = match plan_write(&snapshot, &request, principal, now)? {
            WriteDecision::Unchanged => return Ok(Attempt::Done(WriteOutcome::Unchanged)),
            WriteDecision::Write(plan) => plan,
        };
        let version = plan.version();
        // The index's work (the document's digests, the entry's tags read and compared)
        // is done while the blob's writes wait on the disk, not before the seal.
        let change = indexer.change_over(app, &snapshot, version);
        let (inventory, blob) = match sealed.take() {
            Some(blob) if blob.fits(&snapshot, version) => (change.await?, blob),
            _ => seal(app, keys, &snapshot, version, &body, now, change).await?,
        };
        // Only a new version is audited and may push an old one past the limit; a replaced
        // one is the same operation's.
        let (outcome, audit, version_marks) = match plan.target {
            Target::Create { .. } => (
                WriteOutcome::Created { version },
                vec![AuditEntry {
                    org: org.to_owned(),
                    at: now,
                    action: AuditAction::VersionCreated.as_str().into(),
                    actor: principal.actor.clone(),
                    state: Some(name.to_string()),
                    version: Some(version),
                    detail: serde_json::json!({"source": "write", "key": blob.sealed.key_id, "key_backend": key_backend(&blob.sealed.key_id)}),
                }],
                app.prune_mark(&snapshot.incarnation, version),
            ),
            Target::Replace { .. } => (WriteOutcome::Replaced { version }, Vec::new(), Vec::new()),
        };
        let content = blob.content(body.len(), sha256.clone(), indexer.fingerprint());
        let applied = apply_write(&snapshot, plan, content, principal, now);
        let changes = takeover.into_commit(blob.add_to(Commit {
            version_marks,
            versions: vec![applied.version],
            doomed_blobs: applied.replaced_blob.into_iter().collect(),
            inventory: Some(inventory),
            audit,
            ..Commit::over(&snapshot, now, Some(applied.state))
        }));
        sealed.put(blob);
        commit(app, changes, outcome).await
    })
    .await?;
    // Counted once committed: a lost race re-decides, and an unchanged body seals nothing.
    if outcome != WriteOutcome::Unchanged {
        app.metrics.version_written(VersionKind::Save, Some(bytes));
    }
    Ok(outcome)
}

/// Below this a body's two passes run one after the other: a thread costs more than it saves.
const PARALLEL_PASSES: usize = 1 << 20;

/// Validates a body as a state document and digests it: one pass each, off the async
/// threads when the body is large, side by side on two cores for a very large one (sealing it
/// then compresses on every core, so the passes would otherwise leave one idle). The
/// classification is kept, not raised, so it is reported in its turn.
pub(super) async fn examine(body: Vec<u8>) -> Result<Examined, Error> {
    work::run(body.len(), "validation", move || {
        let (sniffed, sha256) = if body.len() < PARALLEL_PASSES {
            (sniff_resources(&body), hex(&Sha256::digest(&body)))
        } else {
            // The digest is the shorter pass by more than the escapes' check: it takes that.
            let ((sha256, escapes), sniffed) = work::side_by_side(
                || (hex(&Sha256::digest(&body)), check_escapes(&body)),
                || sniff_resources_but_escapes(&body),
            );
            (
                sniffed.and_then(|sniffed| escapes.map(|()| sniffed)),
                sha256,
            )
        };
        let (document, found) = match sniffed {
            Ok((meta, found)) => (Ok(meta), found),
            Err(refusal) => (Err(refusal), None),
        };
        (Arc::new(body), document, sha256, found)
    })
    .await
}

/// A body examined: its bytes, its classification (kept, not raised), its SHA-256, and the
/// resources the index keeps of it (`None` when it cannot be indexed).
pub(super) type Examined = (
    Arc<Vec<u8>>,
    Result<StateMeta, Refusal>,
    String,
    Option<Found>,
);

/// Seals the body for one version under a fresh data key: kept for the commit to store
/// inline when small, else stored as a blob pending until a commit names it; `beside` runs
/// while the blob's writes wait on the disk ([`content::seal`]).
pub(super) async fn seal<T>(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    snapshot: &StateRecord,
    version: u64,
    body: &Arc<Vec<u8>>,
    now: Timestamp,
    beside: impl Future<Output = Result<T, Error>>,
) -> Result<(T, Sealed), Error> {
    let blob = blob_key(&snapshot.org, &snapshot.incarnation, version, &new_id());
    let what = format!("version {version} of state {}", snapshot.name);
    let place = place(snapshot, version, &blob, &what);
    let keep = Keep::InlineWhenSmall;
    let (done, sealed) = content::seal(app, keys, &place, body, keep, now, beside).await?;
    let sealed = Sealed {
        incarnation: snapshot.incarnation.clone(),
        version,
        blob,
        sealed,
    };
    Ok((done, sealed))
}
