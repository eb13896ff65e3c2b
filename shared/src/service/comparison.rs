//! What changed between two versions of a state: each version's content is opened once,
//! through the same path as a download. The `since` side is read into a summary of
//! digests and let go; the version asked about is then compared with that summary as it is
//! read, so one version's content and one summary are all that is ever held. The answer names resources, outputs and attribute paths,
//! never a value. Audited like a download, since it is derived from content.

use serde::Serialize;

use super::commit::find_version;
use super::manage::existing;
use super::state::open_version_into;
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::comparison::{
    check_format, check_readable, compare_to, summarize, Comparison, Facts, Summary,
};
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::{Principal, Refusal};
use crate::ports::{AuditEntry, KeyService};

/// The answer of `GET .../versions/{version}/changes?since={other}`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VersionComparison {
    pub state: String,
    /// The version asked about.
    pub version: Side,
    /// The version it is compared with; `None` for a first version, compared with nothing.
    pub since: Option<Side>,
    /// False when the two versions come from different configurations: compared all the
    /// same, and said so.
    pub same_lineage: bool,
    #[serde(flatten)]
    pub comparison: Comparison,
}

/// One side of a comparison, as its content says.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ComparedVersion")]
pub struct Side {
    pub version: u64,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
    pub terraform_version: Option<String>,
}

impl Side {
    fn of(version: u64, facts: &Facts) -> Self {
        Self {
            version,
            serial: facts.serial,
            lineage: facts.lineage.clone(),
            terraform_version: facts.terraform_version.clone(),
        }
    }
}

/// Compares `version` with `since` (by default the version before it; any older or newer
/// one may be named). Audited.
///
/// # Errors
/// `Refused`: without tf_state:read, `NotFound` (the state, or either version: unknown or
/// pruned), `CannotCompare` (an OpenTofu-encrypted version, or a format other than 4).
pub async fn compare(
    app: &App,
    principal: &Principal,
    name: &StateName,
    version: u64,
    since: Option<u64>,
) -> Result<VersionComparison, Error> {
    app.require(principal, Permission::Read).await?;
    let keys = app.keys()?;
    let record = existing(app, &principal.org, name).await?;
    let target = version_of(app, &record, name, version).await?;
    // The first version is compared with nothing: all it holds was added.
    let since = since.or_else(|| version.checked_sub(1).filter(|v| *v >= 1));
    let base = match since {
        Some(since) => Some(version_of(app, &record, name, since).await?),
        None => None,
    };
    check_readable(&target)?;
    if let Some(base) = &base {
        check_readable(base)?;
    }
    // One version's content at a time: the `since` side's is let go once summarized, and
    // the other side is compared with that summary as it is read.
    let (before, buffer) = match &base {
        Some(base) => {
            let (summary, buffer) = summary_of(app, keys, &record, base).await?;
            (Some(summary), buffer)
        }
        None => (None, Vec::new()),
    };
    let before_facts = before.as_ref().map(|b| b.facts.clone());
    let content = open_version_into(app, keys, &record, &target, buffer).await?;
    let (after, comparison) =
        tokio::task::spawn_blocking(move || compare_to(&before.unwrap_or_default(), &content))
            .await
            .map_err(|e| Error::Unavailable(format!("comparison task failed: {e}")))?
            .map_err(|e| unreadable(version, e))?;
    check_format(version, &after)?;
    let now = app.clock.now();
    app.catalog
        .append_audit(&AuditEntry {
            org: principal.org.clone(),
            at: now,
            action: AuditAction::VersionsCompared.as_str().into(),
            actor: principal.actor.clone(),
            state: Some(name.to_string()),
            version: Some(version),
            detail: serde_json::json!({"since": since}),
        })
        .await?;
    Ok(VersionComparison {
        state: name.to_string(),
        same_lineage: before_facts
            .as_ref()
            .is_none_or(|b| b.lineage == after.lineage),
        version: Side::of(version, &after),
        since: since
            .zip(before_facts.as_ref())
            .map(|(v, b)| Side::of(v, b)),
        comparison,
    })
}

async fn version_of(
    app: &App,
    record: &StateRecord,
    name: &StateName,
    version: u64,
) -> Result<VersionRecord, Error> {
    Ok(find_version(app, record, version)
        .await?
        .ok_or_else(|| Refusal::NotFound {
            what: format!("version {version} of state {name}"),
        })?)
}

/// Opens one version's content and reads it into its summary, off the async threads.
/// Returns the content's buffer too, for the other version to be opened into: the
/// allocator keeps a freed plaintext resident, so a second one of its own would count
/// twice at the peak.
async fn summary_of(
    app: &App,
    keys: &dyn KeyService,
    record: &StateRecord,
    version: &VersionRecord,
) -> Result<(Summary, Vec<u8>), Error> {
    let content = open_version_into(app, keys, record, version, Vec::new()).await?;
    let number = version.version;
    let (summary, content) = tokio::task::spawn_blocking(move || (summarize(&content), content))
        .await
        .map_err(|e| Error::Unavailable(format!("comparison task failed: {e}")))?;
    let summary = summary.map_err(|e| unreadable(number, e))?;
    check_format(number, &summary.facts)?;
    Ok((summary, content))
}

/// Stored content that was a state when written and no longer reads as one is damaged.
fn unreadable(version: u64, e: Refusal) -> Error {
    Error::Damaged(format!("version {version} does not read as a state: {e}"))
}
