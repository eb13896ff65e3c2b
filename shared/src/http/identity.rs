//! `GET /api/whoami`: who the Bearer token is, for the pages' header and the actions they
//! offer.

use lambda_http::http::StatusCode;

use super::handler::{Answer, Call};
use super::response::json_response;
use crate::domain::Principal;
use crate::service::identity;

pub async fn whoami(call: Call<'_>, principal: &Principal) -> Answer {
    let identity = identity::whoami(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &identity))
}
