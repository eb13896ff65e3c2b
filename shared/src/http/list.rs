//! `GET /api/tf-states?limit=&cursor=&prefix=`, `GET /api/tf-states/{name}` and
//! `GET .../versions`: what an org has, never any content.

use lambda_http::http::StatusCode;
use lambda_http::RequestExt;

use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::json_response;
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::listing::{self, VersionView, MAX_PAGE};
use schemars::JsonSchema;
use serde::Serialize;

const DEFAULT_PAGE: usize = 100;

pub async fn list(call: Call<'_>, principal: &Principal) -> Answer {
    let query = call.req.query_string_parameters();
    let limit = page_limit(&call.req, DEFAULT_PAGE, MAX_PAGE)?;
    // A prefix is checked as a name is, so it can only hold a name's characters.
    let prefix = match query.first("prefix") {
        None | Some("") => None,
        Some(raw) => Some(StateName::parse(raw)?),
    };
    let page = listing::list(
        call.app,
        principal,
        limit,
        query.first("cursor"),
        prefix.as_ref(),
    )
    .await?;
    Ok(json_response(StatusCode::OK, &page))
}

pub async fn show(call: Call<'_>, principal: &Principal) -> Answer {
    let view = listing::show(call.app, principal, &call.state()?).await?;
    Ok(json_response(StatusCode::OK, &view))
}

pub async fn versions(call: Call<'_>, principal: &Principal) -> Answer {
    let versions = listing::versions(call.app, principal, &call.state()?).await?;
    Ok(json_response(StatusCode::OK, &VersionList { versions }))
}

/// A state's versions, newest first.
#[derive(Serialize, JsonSchema)]
pub(super) struct VersionList {
    versions: Vec<VersionView>,
}
