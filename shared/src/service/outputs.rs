//! A state's outputs for its consumers: the latest version's content is opened as the
//! backend's read opens it, and the domain reads its outputs and builds what is shown
//! (never a sensitive value). Not audited: no secret crosses, and a consumer's every plan
//! reads it, as a plain backend read (also unaudited) does.

use super::content::open_whole;
use super::state::{content, Content};
use super::{work, App, Error};
use crate::domain::name::StateName;
use crate::domain::outputs::{
    check_readable, consumer_document, read_outputs, OutputsView, StateOutputs,
};
use crate::domain::permission::Permission;
use crate::domain::{Principal, Refusal};

/// Which version an answer was built from: its number and its content's SHA-256, so the
/// same version always names the same answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub version: u64,
    pub sha256: String,
}

/// The latest version's outputs, a sensitive one by its type alone. `None` when the state
/// has no version (or does not exist in the caller's org).
///
/// # Errors
/// `Refused`: without tf_state:outputs, `OutputsUnreadable` for an OpenTofu-encrypted
/// version or a format other than 4; `NoKey`, `Damaged` or `Unavailable` when the content
/// cannot be opened.
pub async fn outputs(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<(Source, OutputsView)>, Error> {
    Ok(latest(app, principal, name)
        .await?
        .map(|(source, outputs)| (source, OutputsView::of(&outputs))))
}

/// The state document a consumer's `terraform_remote_state` reads: the latest version's
/// serial, lineage and Terraform version, no resources, its non-sensitive outputs.
/// `None` as for [`outputs`].
///
/// # Errors
/// As [`outputs`].
pub async fn consumer_state(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<(Source, Vec<u8>)>, Error> {
    Ok(latest(app, principal, name)
        .await?
        .map(|(source, outputs)| (source, consumer_document(&outputs))))
}

/// The latest version's outputs, read from its content.
async fn latest(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<(Source, StateOutputs)>, Error> {
    let state = app
        .require_with_content(principal, Permission::Outputs, name)
        .await?;
    let keys = app.keys()?;
    let Some((record, inline)) = state else {
        return Ok(None);
    };
    let Some(latest) = &record.latest else {
        return Ok(None);
    };
    check_readable(latest)?;
    let what = format!("version {} of state {name}", latest.version);
    let plaintext = match content(app, keys, &record, latest, inline).await? {
        Content::Whole(bytes) => bytes,
        Content::Gzip { opening, size } => open_whole(*opening, size, Vec::new(), &what).await?,
    };
    let number = latest.version;
    let outputs = work::run(plaintext.len(), "outputs", move || {
        read_outputs(number, &plaintext)
    })
    .await?
    .map_err(|e| match e {
        // Stored content was a state when written: one that no longer reads is damaged.
        Refusal::NotAState { reason } => {
            Error::Damaged(format!("{what} does not read as a state: {reason}"))
        }
        other => Error::Refused(other),
    })?;
    let source = Source {
        version: latest.version,
        sha256: latest.sha256.clone(),
    };
    Ok(Some((source, outputs)))
}
