//! Deleted states, for admins: `GET /api/deleted-states?limit=&cursor=`,
//! `POST /api/deleted-states/{id}/restore` (`{"name"}` optional), `DELETE
//! /api/deleted-states/{id}` (purge now).

use lambda_http::http::StatusCode;
use lambda_http::RequestExt;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::json_response;
use crate::domain::name::StateName;
use crate::domain::{Principal, Refusal};
use crate::service::deleted::{self, MAX_PAGE};

const DEFAULT_PAGE: usize = 100;

/// Whether `id` is spelled as the service spells deleted states' ids (`<seconds>-<hex>`).
fn well_formed(id: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-';
    !id.is_empty() && id.len() <= 64 && id.bytes().all(allowed)
}

/// The id the path names: anything not spelled as an id names no deleted state, and is
/// answered so before any read.
fn deleted_id(call: &Call<'_>) -> Result<String, HttpError> {
    let id = call.param("id").unwrap_or_default();
    if well_formed(&id) {
        Ok(id)
    } else {
        Err(Refusal::NotFound {
            what: "that deleted state".into(),
        }
        .into())
    }
}

pub async fn list(call: Call<'_>, principal: &Principal) -> Answer {
    let limit = page_limit(&call.req, DEFAULT_PAGE, MAX_PAGE)?;
    let query = call.req.query_string_parameters();
    let cursor = query.first("cursor");
    if let Some(cursor) = cursor.filter(|c| !well_formed(c)) {
        return Err(HttpError::InvalidRequest(format!(
            "cursor must be the next_cursor of the previous page, not {cursor:?}"
        )));
    }
    let page = deleted::list(call.app, principal, limit, cursor).await?;
    Ok(json_response(StatusCode::OK, &page))
}

/// The body is `{"name": "<new name>"}`, or empty (or `{}`) for the name it had.
pub async fn restore(call: Call<'_>, principal: &Principal) -> Answer {
    let id = deleted_id(&call)?;
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        name: Option<String>,
    }
    let raw = call.req.body();
    let body: Body = if raw.iter().all(u8::is_ascii_whitespace) {
        Body { name: None }
    } else {
        serde_json::from_slice(raw).map_err(|e| {
            HttpError::InvalidRequest(format!(
                "the body must be empty or {{\"name\": \"<new name>\"}}: {e}"
            ))
        })?
    };
    let name = body.name.as_deref().map(StateName::parse).transpose()?;
    let restored = deleted::restore(call.app, principal, &id, name.as_ref()).await?;
    tracing::info!(id, state = %restored.name, by = %principal.actor.describe(), "deleted state restored");
    Ok(json_response(StatusCode::OK, &restored))
}

pub async fn purge(call: Call<'_>, principal: &Principal) -> Answer {
    let id = deleted_id(&call)?;
    let purged = deleted::purge(call.app, principal, &id).await?;
    tracing::info!(id, state = %purged.name, by = %principal.actor.describe(), "deleted state purged");
    Ok(json_response(StatusCode::OK, &purged))
}
