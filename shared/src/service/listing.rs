//! The state list: what an org has, its latest versions and locks. Never any content.

use serde::Serialize;

use super::manage::existing;
use super::{App, Error};
use crate::domain::actor::Actor;
use crate::domain::hold::Hold;
use crate::domain::lock::Lock;
use crate::domain::manage::{allowed_actions, AllowedActions};
use crate::domain::name::StateName;
use crate::domain::permission::Allocation;
use crate::domain::protection::{check_change, protecting, Change, Protection};
use crate::domain::record::StateRecord;
use crate::domain::version::{ChangeRecord, Source, VersionRecord};
use crate::domain::{rfc3339, Principal, Timestamp};

/// The most states one page lists.
pub const MAX_PAGE: usize = 1000;

/// One page of an org's states.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "StateList")]
pub struct Listing {
    pub org: String,
    pub states: Vec<StateItem>,
    pub next_cursor: Option<String>,
}

/// A state as the list shows it (DESIGN section 3, "Shapes").
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StateItem {
    pub name: String,
    pub lineage: Option<String>,
    pub latest_version: Option<u64>,
    pub serial: Option<u64>,
    pub size: Option<u64>,
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    pub updated_at: Option<String>,
    pub updated_by: Option<Actor>,
    pub opentofu_encrypted: bool,
    pub lock: Option<LockView>,
    pub hold: Option<HoldView>,
    /// The org's protected-state rules that match it: only CI sessions of their trust
    /// policies (every rule's) may change it. Empty when it is not protected.
    pub protections: Vec<Protection>,
}

/// A run's hold as shown: `{"id": "hold-<run>", "run", "run_url", "since"}`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Hold")]
pub struct HoldView {
    pub id: String,
    pub run: String,
    pub run_url: Option<String>,
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub since: String,
}

impl HoldView {
    pub fn of(hold: &Hold, run_url: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            id: hold.id(),
            run: hold.run.clone(),
            run_url: run_url(&hold.run),
            since: rfc3339(hold.since),
        }
    }
}

/// A lock as shown: the holder's document fields, who holds it, since when.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Lock")]
pub struct LockView {
    pub id: String,
    pub operation: Option<String>,
    pub who: Option<String>,
    pub version: Option<String>,
    pub created: Option<String>,
    pub info: Option<String>,
    pub holder: LinkedActor,
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub since: String,
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    pub live_until: Option<String>,
}

impl LockView {
    pub fn of(lock: &Lock, run_url: &dyn Fn(&str) -> Option<String>) -> Self {
        let d = &lock.document;
        let holder = LinkedActor::of(&lock.holder, run_url);
        Self {
            id: d.id.clone(),
            operation: d.operation.clone(),
            who: d.who.clone(),
            version: d.version.clone(),
            created: d.created.clone(),
            info: d.info.clone(),
            holder,
            since: rfc3339(lock.since),
            live_until: lock.live_until.map(rfc3339),
        }
    }
}

/// A lock's holder or a version's writer as shown: the actor, and for a step its run's page.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkedActor {
    #[serde(flatten)]
    pub actor: Actor,
    /// A step's run page (null unless HEGEMONY_RUN_URL_TEMPLATE is set); absent for every
    /// other actor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_url: Option<Option<String>>,
}

impl LinkedActor {
    pub fn of(actor: &Actor, run_url: &dyn Fn(&str) -> Option<String>) -> Self {
        let link = match actor {
            Actor::Step { run, .. } => Some(run_url(run)),
            _ => None,
        };
        Self {
            actor: actor.clone(),
            run_url: link,
        }
    }
}

impl StateItem {
    fn of(
        record: &StateRecord,
        protections: &[Protection],
        now: Timestamp,
        run_url: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let latest = record.latest.as_ref();
        Self {
            name: record.name.clone(),
            lineage: latest.and_then(|l| l.lineage.clone()),
            latest_version: latest.map(|l| l.version),
            serial: latest.and_then(|l| l.serial),
            size: latest.map(|l| l.size),
            updated_at: latest.map(|l| rfc3339(l.change.last_save_at)),
            updated_by: latest.map(|l| l.writer.clone()),
            opentofu_encrypted: latest.is_some_and(|l| l.opentofu_encrypted),
            lock: record.live_lock(now).map(|l| LockView::of(l, run_url)),
            hold: record.hold.as_ref().map(|h| HoldView::of(h, run_url)),
            protections: protecting(protections, &record.name)
                .into_iter()
                .cloned()
                .collect(),
        }
    }
}

/// One state as its page shows it: the list's item and what the caller may do.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StateView {
    #[serde(flatten)]
    pub item: StateItem,
    pub allowed_actions: AllowedActions,
}

/// A version as listed (DESIGN section 3): everything but where its content is stored.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Version")]
pub struct VersionView {
    pub version: u64,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
    pub size: u64,
    pub sha256: String,
    pub source: Source,
    pub key: String,
    /// `transit`, `kms` or `platform`: which kind of service wrapped the key.
    pub key_backend: String,
    pub opentofu_encrypted: bool,
    /// Unknown (`null`) for versions written before it was recorded.
    pub terraform_version: Option<String>,
    /// Resource instances; unknown (`null`) when they cannot be counted or for versions
    /// written before they were.
    pub instances: Option<u64>,
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub created_at: String,
    pub writer: LinkedActor,
    pub change: ChangeRecord,
}

impl VersionView {
    pub fn of(v: &VersionRecord, run_url: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            version: v.version,
            serial: v.serial,
            lineage: v.lineage.clone(),
            size: v.size,
            sha256: v.sha256.clone(),
            source: v.source,
            key: v.key.clone(),
            key_backend: crate::ports::key_backend(&v.key).to_owned(),
            opentofu_encrypted: v.opentofu_encrypted,
            terraform_version: v.terraform_version.clone(),
            instances: v.instances,
            created_at: rfc3339(v.created_at),
            writer: LinkedActor::of(&v.writer, run_url),
            change: v.change.clone(),
        }
    }
}

/// One state of the caller's org, with the actions the caller may take. Any role may look.
///
/// # Errors
/// `Refused(NotFound)` for a state that does not exist in the caller's org.
pub async fn show(app: &App, principal: &Principal, name: &StateName) -> Result<StateView, Error> {
    let record = existing(app, &principal.org, name).await?;
    let (allocation, protections) = settings(app, &principal.org).await?;
    let now = app.clock.now();
    let mut allowed = allowed_actions(&record, principal, &allocation, now);
    // A protection refuses every change it covers alike: the page offers none of them.
    if check_change(&protections, name.as_str(), principal, Change::Write).is_err() {
        allowed.import = false;
        allowed.rollback = false;
        allowed.delete = false;
    }
    Ok(StateView {
        item: StateItem::of(&record, &protections, now, &|run| app.run_url(run)),
        allowed_actions: allowed,
    })
}

/// A state's versions, newest first. Any role may look; no content.
///
/// # Errors
/// `Refused(NotFound)` for a state that does not exist in the caller's org.
pub async fn versions(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Vec<VersionView>, Error> {
    let record = existing(app, &principal.org, name).await?;
    let versions = app
        .catalog
        .versions(&record.org, record.home(), &record.incarnation)
        .await?;
    let run_url = |run: &str| app.run_url(run);
    Ok(versions
        .iter()
        .map(|v| VersionView::of(v, &run_url))
        .collect())
}

/// Lists the caller's org's states in name order, `limit` at most, after `cursor`, and only
/// those whose name starts with `prefix` when one is given. Any role may list. States that
/// were never written and are not held (a lock only) or were deleted are left out; one a
/// run holds before its first version is listed, with no version.
///
/// A prefix costs one page read like any other: names are stored in order, so the page
/// starts just before the first name that can match and ends at the first that does not.
///
/// # Errors
/// `Unavailable` when the catalog cannot be read.
pub async fn list(
    app: &App,
    principal: &Principal,
    limit: usize,
    cursor: Option<&str>,
    prefix: Option<&StateName>,
) -> Result<Listing, Error> {
    let limit = limit.clamp(1, MAX_PAGE);
    let now = app.clock.now();
    let start = match (cursor, prefix) {
        (Some(cursor), _) => Some(cursor.to_owned()),
        (None, Some(prefix)) => Some(just_before(prefix.as_str())),
        (None, None) => None,
    };
    // The org's rules, for each state's mark, are read beside the page, not after it.
    let (records, (_, protections)) = tokio::try_join!(
        async {
            Ok::<_, Error>(
                app.catalog
                    .states(&principal.org, start.as_deref(), limit)
                    .await?,
            )
        },
        settings(app, &principal.org)
    )?;
    let mut records = records;
    let mut next_cursor = (records.len() == limit)
        .then(|| records.last().map(|r| r.name.clone()))
        .flatten();
    if let Some(prefix) = prefix {
        if let Some(end) = records
            .iter()
            .position(|r| !r.name.starts_with(prefix.as_str()))
        {
            records.truncate(end);
            next_cursor = None;
        }
    }
    Ok(Listing {
        org: principal.org.clone(),
        states: records
            .iter()
            .filter(|r| r.is_listed())
            .map(|r| StateItem::of(r, &protections, now, &|run| app.run_url(run)))
            .collect(),
        next_cursor,
    })
}

/// The org's allocation and protected-state rules, from its settings.
async fn settings(app: &App, org: &str) -> Result<(Allocation, Vec<Protection>), Error> {
    Ok(app
        .catalog
        .org(org)
        .await?
        .map(|o| (o.allocation, o.protections))
        .unwrap_or_default())
}

/// A cursor after which the first name is the first that starts with `prefix`: no valid
/// name lies between the two. The prefix's last character is lowered by one and followed by
/// `~`, above every character a name may hold, as many times as a name is long.
fn just_before(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    // A valid name's characters are ASCII from '-' up, so lowering one stays ASCII.
    if let Some(last) = bytes.pop() {
        bytes.push(last - 1);
    }
    bytes.resize(crate::domain::name::MAX_NAME_LEN + 1, b'~');
    String::from_utf8(bytes).expect("ASCII")
}

#[cfg(test)]
mod tests {
    use super::just_before;

    #[test]
    fn the_cursor_before_a_prefix_sorts_after_every_smaller_name_and_before_the_prefix() {
        let c = just_before("net");
        assert!(c.as_str() < "net" && c.as_str() < "net-a" && c.as_str() < "net.");
        assert!(c.as_str() > "nes" && c.as_str() > "nesz" && c > "nes".repeat(40));
        assert!(c.as_str() > "ne" && c.as_str() > "ne-");
        let c = just_before("0");
        assert!(c.as_str() < "0" && c.as_str() > "-zz" && c.as_str() > ".");
    }
}
