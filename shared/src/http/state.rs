//! `GET` and `POST /api/tf-states/{name}/state`: the backend's read and write.

use lambda_http::{Body, RequestExt};

use super::error::{error_body, ErrorCode};
use super::handler::{Answer, Call};
use super::response::ok_empty;
use crate::domain::Principal;
use crate::service::state;

/// 200 with the stored bytes exactly as written (gzip when accepted); 404 when the state has
/// no version, which the tools read as "no state yet".
pub async fn read(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    match state::read(call.app, principal, &name).await? {
        Some(content) => super::content::answer(content, &call.req),
        None => Ok(error_body(
            ErrorCode::NotFound,
            &format!("state {name} has no version yet"),
        )),
    }
}

/// Writes a version: 200 on success (including an identical replay).
pub async fn write(call: Call<'_>, principal: &Principal) -> Answer {
    let name = &call.state()?;
    let Call { app, req, .. } = call;
    // Admission put the ID in the log context already.
    let lock_id = req.query_string_parameters().first("ID").map(str::to_owned);
    let body = into_bytes(req.into_body());
    let outcome = state::write(app, principal, name, lock_id.as_deref(), body).await?;
    tracing::info!(state = %name, ?outcome, "state written");
    Ok(ok_empty())
}

/// The body's bytes, without copying: API Gateway hands text bodies as `Text`.
pub fn into_bytes(body: Body) -> Vec<u8> {
    match body {
        Body::Text(text) => text.into_bytes(),
        Body::Binary(bytes) => bytes,
        // Empty, and any variant a later version adds, carries no bytes we can take.
        other => other.as_ref().to_vec(),
    }
}
