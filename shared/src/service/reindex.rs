//! Rebuilding an org's inventory from its states' latest versions: what fills the index of
//! a store that had none (a catalog brought up from schema 7, a migration's target) and
//! repairs one that fell behind. Each state whose entry is missing, older than its latest
//! version, or left not indexed over content that can be indexed is opened, indexed and
//! written with `put_inventory`, conditional on the record
//! read; a state that moved on meanwhile is read again (its commit may have indexed it
//! already). Resumable: a state done is up to date, so a second run skips it. Never a read's
//! work: every commit carries its version's entry, so a read answers from the index alone.

use std::collections::HashMap;

use super::indexing::{org_key, Indexer};
use super::keys::org_records;
use super::state::{examine, open_version};
use super::{App, Error};
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::ports::{IndexedState, StoreError};

/// How often a state that keeps moving on is read again before the rebuild leaves it to its
/// own commits (each of which indexes it anyway).
const ATTEMPTS: usize = 5;

/// What a rebuild of one org did, state by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// Indexed now.
    pub indexed: u64,
    /// Already indexed at their latest version.
    pub current: u64,
    /// Indexed now, as not readable (an OpenTofu-encrypted state, another format).
    pub not_indexed: u64,
    /// Left to their own commits: they kept changing, or were deleted, while the rebuild
    /// read them.
    pub moved_on: u64,
    /// Left as they were: their latest version does not open (damaged, or sealed under
    /// another key), which needs an operator; a run after it is mended indexes them.
    pub unopened: u64,
}

/// What happened to one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Indexed,
    Current,
    NotIndexed,
    MovedOn,
    /// Its latest version does not open, and why.
    Unopened(String),
}

/// The states of `org` a rebuild walks: those with a version, deleted ones aside.
///
/// # Errors
/// A storage fault.
pub async fn states_of(app: &App, org: &str) -> Result<Vec<StateRecord>, Error> {
    let mut records = org_records(app, org).await?;
    records.retain(StateRecord::is_visible);
    Ok(records)
}

/// Which entries a rebuild builds again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entries {
    /// Those missing, behind their state's latest version, or left not indexed.
    Behind,
    /// Every one, current or not: after an upgrade whose release changed what the index
    /// keeps of a state (how an identity is read), entries stay as the older rules made
    /// them until each state's next save, and this makes them all anew at once.
    All,
}

/// Rebuilds `org`'s index for `records` (from [`states_of`]), the entries `which` names,
/// calling `done` after each state.
///
/// A state whose latest version does not open is reported ([`Outcome::Unopened`]) and
/// the rest go on: it is that state's fault, and stopping there would leave every state
/// after it unindexed, run after run.
///
/// # Errors
/// `NoKey`, a key service fault, a storage fault: the states done so far stay done.
pub async fn rebuild(
    app: &App,
    org: &str,
    records: Vec<StateRecord>,
    which: Entries,
    done: &(dyn Fn(&str, &Outcome) + Sync),
) -> Result<Rebuilt, Error> {
    let keys = app.keys()?;
    let mut stored_key = app.catalog.org(org).await?.and_then(|o| o.inventory_key);
    if stored_key.is_none() && !records.is_empty() {
        // Made once here, not once for each state that would find none.
        org_key(app, keys, org, None).await?;
        stored_key = app.catalog.org(org).await?.and_then(|o| o.inventory_key);
    }
    let indexed: HashMap<String, Entry> = app
        .catalog
        .indexed_states(org)
        .await?
        .into_iter()
        .map(|e| {
            let entry = Entry::of(&e);
            (e.state, entry)
        })
        .collect();
    let mut report = Rebuilt::default();
    for record in records {
        let name = record.name.clone();
        let entry = indexed
            .get(&record.name)
            .copied()
            .filter(|_| which == Entries::Behind);
        let (outcome, _) = one(app, keys, &stored_key, entry, record).await?;
        match outcome {
            Outcome::Indexed => report.indexed += 1,
            Outcome::Current => report.current += 1,
            Outcome::NotIndexed => report.not_indexed += 1,
            Outcome::MovedOn => report.moved_on += 1,
            Outcome::Unopened(_) => report.unopened += 1,
        }
        done(&name, &outcome);
    }
    Ok(report)
}

/// What the rebuild reads of a state's entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    version: u64,
    indexed: bool,
}

impl Entry {
    fn of(entry: &IndexedState) -> Self {
        Self {
            version: entry.version,
            indexed: entry.indexed,
        }
    }

    /// Whether the entry is `latest`'s, as a rebuild would write it. One at that version but
    /// not indexed is, when the content cannot be indexed (no fingerprint: an
    /// OpenTofu-encrypted state, another format); it is not when the content has a
    /// fingerprint: a save found the entry missing and, having nothing to keep or patch,
    /// left it not indexed at its version for the rebuild to fill.
    fn is_of(self, latest: &VersionRecord) -> bool {
        self.version == latest.version && (self.indexed || latest.index.is_none())
    }
}

/// Indexes `record`'s latest version unless `entry`, the state's entry as read, is already
/// its; gives what happened and the record it ended on (read again after each commit that
/// came between). A latest version that does not open (damaged, or sealed under another
/// key) is that state's fault: it is reported ([`Outcome::Unopened`]), not raised.
async fn one(
    app: &App,
    keys: &dyn crate::ports::KeyService,
    stored_key: &Option<crate::ports::InventoryKey>,
    mut entry: Option<Entry>,
    mut record: StateRecord,
) -> Result<(Outcome, StateRecord), Error> {
    for _ in 0..ATTEMPTS {
        let Some(latest) = record.latest.clone().filter(|_| record.is_visible()) else {
            return Ok((Outcome::MovedOn, record));
        };
        if entry.is_some_and(|e| e.is_of(&latest)) {
            return Ok((Outcome::Current, record));
        }
        let opened = match open_version(app, keys, &record, &latest).await {
            Ok(plain) => examine(plain)
                .await
                .map(|(plain, _, _, found)| (plain.len(), found)),
            Err(e) => Err(e),
        };
        let (bytes, found) = match opened {
            Ok(opened) => opened,
            Err(Error::Damaged(why) | Error::WrongKey(why)) => {
                return Ok((Outcome::Unopened(why), record));
            }
            Err(e) => return Err(e),
        };
        let readable = found.is_some();
        let indexer =
            Indexer::new(app, keys, &record.org, stored_key.clone(), found, bytes).await?;
        let inventory = indexer.entry(latest.version).await?;
        match app
            .catalog
            .put_inventory(&record.org, &record.name, record.revision, &inventory)
            .await
        {
            Ok(()) if readable => return Ok((Outcome::Indexed, record)),
            Ok(()) => return Ok((Outcome::NotIndexed, record)),
            Err(StoreError::Conflict) => {
                // A commit came between: it carries its own index, unless it changed nothing
                // of the version (a lock); read both again and decide again.
                let Some(again) = app.catalog.state(&record.org, &record.name).await? else {
                    return Ok((Outcome::MovedOn, record));
                };
                record = again;
                entry = entry_of(app, &record.org, &record.name).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((Outcome::MovedOn, record))
}

/// What the rebuild reads of `state`'s entry.
async fn entry_of(app: &App, org: &str, state: &str) -> Result<Option<Entry>, Error> {
    Ok(app
        .catalog
        .indexed_states(org)
        .await?
        .into_iter()
        .find(|e| e.state == state)
        .map(|e| Entry::of(&e)))
}
