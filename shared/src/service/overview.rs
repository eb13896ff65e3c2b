//! An org at a glance: how many states, versions and resource instances it has, by provider
//! and by type, its largest states, its locks and holds with their age, the states nobody
//! has written for a long time, those the inventory could not index, and how many objects
//! two states manage. Read from the state records and the inventory; never any content.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::{App, Error};
use crate::domain::record::StateRecord;
use crate::domain::{rfc3339, Principal, Timestamp};
use crate::paging::{self, Page};
use crate::ports::IndexedState;

/// How many providers and types the overview names; the rest count in the totals.
const TOP_KINDS: usize = 20;
/// How many of the largest states it names.
const LARGEST: usize = 10;
/// A state not written for this many days is stale.
pub const STALE_DAYS: i64 = 90;
/// The page size the overview walks the state records in.
const WALK_PAGE: usize = 1000;

/// The overview's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Overview {
    pub org: String,
    /// Live states (deleted ones wait in the deleted list and are not counted).
    pub states: u64,
    /// Versions those states hold, summed: each state's as its versions list shows them
    /// once the sweeper has pruned past the limit of versions kept.
    pub versions: u64,
    /// Resource instances the inventory holds.
    pub resources: u64,
    /// Objects managed by two or more states (`GET /api/resources/conflicts`).
    pub conflicts: u64,
    /// Instances by provider, largest first, at most 20.
    pub by_provider: Vec<ProviderCount>,
    /// Instances by type, largest first, at most 20.
    pub by_type: Vec<TypeCount>,
    /// The largest states by their latest version's size, at most 10.
    pub largest: Vec<SizedState>,
    /// Every lock held, oldest first.
    pub locks: Vec<LockAge>,
    /// Every hold, oldest first.
    pub holds: Vec<HoldAge>,
    /// States whose latest version is older than 90 days, oldest first.
    pub stale: Vec<StaleState>,
    /// States whose latest version the inventory does not hold: OpenTofu-encrypted, another
    /// format, or written before the index was built (`hegemony-state index rebuild`).
    pub not_indexed: Vec<NotIndexed>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ProviderCount {
    pub provider: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TypeCount {
    #[serde(rename = "type")]
    pub resource_type: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SizedState {
    pub state: String,
    /// The latest version's size in bytes.
    pub size: u64,
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct LockAge {
    pub state: String,
    pub since: String,
    pub age_seconds: u64,
    /// Who holds it, as the lock list shows a holder.
    pub who: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HoldAge {
    pub state: String,
    pub since: String,
    pub age_seconds: u64,
    pub run: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StaleState {
    pub state: String,
    pub updated_at: String,
    pub days: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NotIndexed {
    pub state: String,
    pub version: u64,
}

/// The org's overview, as it stands now.
///
/// # Errors
/// Storage faults alone, as [`super::resources::search`]: any principal of the org may see
/// it (the http layer keeps workload sessions and step tokens to their own states).
pub async fn overview(app: &App, principal: &Principal) -> Result<Overview, Error> {
    let org = principal.org.as_str();
    let (records, index) = tokio::try_join!(state_records(app, org), async {
        Ok::<_, Error>(app.catalog.inventory_summary(org).await?)
    })?;
    let counts = index.counts;
    let mut view = summarize(org, &records, &index.states, app.clock.now());
    view.versions = versions_held(app, &records).await?;
    view.resources = counts.instances;
    view.conflicts = index.conflicts;
    view.by_provider = top(counts.by_provider)
        .map(|(provider, count)| ProviderCount { provider, count })
        .collect();
    view.by_type = top(counts.by_type)
        .map(|(resource_type, count)| TypeCount {
            resource_type,
            count,
        })
        .collect();
    Ok(view)
}

/// How many versions the states of `records` hold, summed: each record's count where it
/// knows its incarnation's first version, else its versions read (a record stored before it
/// kept one, until its state is next deleted and written again).
async fn versions_held(app: &App, records: &[StateRecord]) -> Result<u64, Error> {
    let keep = app.limits.keep_versions;
    let mut total = 0u64;
    for record in records {
        let held = match record.versions_held(keep) {
            Some(held) => held,
            None => {
                let versions = app
                    .catalog
                    .versions(&record.org, record.home(), &record.incarnation)
                    .await?;
                (versions.len() as u64).min(keep)
            }
        };
        total = total.saturating_add(held);
    }
    Ok(total)
}

/// Every live state's record.
async fn state_records(app: &App, org: &str) -> Result<Vec<StateRecord>, Error> {
    let records = paging::all(|after: Option<String>| async move {
        let page = app.catalog.states(org, after.as_deref(), WALK_PAGE).await?;
        Ok::<_, Error>(Page::of(page, WALK_PAGE, |r: &StateRecord| r.name.clone()))
    })
    .await?;
    Ok(records.into_iter().filter(StateRecord::is_listed).collect())
}

fn top(counts: Vec<(String, u64)>) -> impl Iterator<Item = (String, u64)> {
    let mut counts = counts;
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts.into_iter().take(TOP_KINDS)
}

/// What the state records and the index's entries say, as of `now` (the inventory's counts
/// and the versions held are the caller's to add).
fn summarize(
    org: &str,
    records: &[StateRecord],
    indexed: &[IndexedState],
    now: Timestamp,
) -> Overview {
    let entries: HashMap<&str, &IndexedState> =
        indexed.iter().map(|e| (e.state.as_str(), e)).collect();
    let age = |since: Timestamp| u64::try_from((now - since).whole_seconds()).unwrap_or(0);
    let mut view = Overview {
        org: org.to_owned(),
        states: records.len() as u64,
        versions: 0,
        resources: 0,
        conflicts: 0,
        by_provider: Vec::new(),
        by_type: Vec::new(),
        largest: Vec::new(),
        locks: Vec::new(),
        holds: Vec::new(),
        stale: Vec::new(),
        not_indexed: Vec::new(),
    };
    let mut oldest_first: Vec<(Timestamp, &StateRecord)> = Vec::new();
    for record in records {
        // A step's or session's lock past its end is no lock: listed as the state list and
        // the state's page show it, not as stored.
        if let Some(lock) = record.live_lock(now) {
            view.locks.push(LockAge {
                state: record.name.clone(),
                since: rfc3339(lock.since),
                age_seconds: age(lock.since),
                who: lock.holder.describe(),
            });
        }
        if let Some(hold) = &record.hold {
            view.holds.push(HoldAge {
                state: record.name.clone(),
                since: rfc3339(hold.since),
                age_seconds: age(hold.since),
                run: hold.run.clone(),
            });
        }
        let Some(latest) = &record.latest else {
            continue;
        };
        view.largest.push(SizedState {
            state: record.name.clone(),
            size: latest.size,
            version: latest.version,
        });
        if (now - latest.created_at).whole_days() >= STALE_DAYS {
            oldest_first.push((latest.created_at, record));
        }
        let current = entries
            .get(record.name.as_str())
            .is_some_and(|e| e.indexed && e.version == latest.version);
        if !current {
            view.not_indexed.push(NotIndexed {
                state: record.name.clone(),
                version: latest.version,
            });
        }
    }
    view.largest
        .sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.state.cmp(&b.state)));
    view.largest.truncate(LARGEST);
    view.locks
        .sort_by_key(|lock| std::cmp::Reverse(lock.age_seconds));
    view.holds
        .sort_by_key(|hold| std::cmp::Reverse(hold.age_seconds));
    oldest_first.sort_by_key(|(at, _)| *at);
    view.stale = oldest_first
        .into_iter()
        .map(|(at, record)| StaleState {
            state: record.name.clone(),
            updated_at: rfc3339(at),
            days: u64::try_from((now - at).whole_days()).unwrap_or(0),
        })
        .collect();
    view
}
