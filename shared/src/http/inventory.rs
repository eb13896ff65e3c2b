//! `GET /api/resources`, `GET /api/resources/conflicts` and `GET /api/overview`: the
//! inventory across an org's states, read from its query strings into the service's terms.
//! The search's cursor is the (state, address) its page ended at, as `<state>~<address in
//! base64url>`: safe in a URL as it is, and, since no state name holds a `~`, any string
//! names a position in the search's order, so a cursor is never refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use lambda_http::http::StatusCode;
use lambda_http::RequestExt;
use schemars::JsonSchema;
use serde::Serialize;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::json_response;
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::ports::ResourceQuery;
use crate::service::overview;
use crate::service::resources::{self, Conflict, ResourceView, MAX_PAGE};

const DEFAULT_PAGE: usize = 100;
/// The longest filter taken: longer than any address or provider source a search needs,
/// short enough that a query costs what a search should.
const MAX_FILTER: usize = 512;

/// `GET /api/resources?q=&type=&provider=&module=&state=&limit=&cursor=`.
pub async fn search(call: Call<'_>, principal: &Principal) -> Answer {
    let params = call.req.query_string_parameters();
    let filter = |name: &str| -> Result<Option<String>, HttpError> {
        match params.first(name) {
            None | Some("") => Ok(None),
            Some(raw) if raw.chars().count() > MAX_FILTER => Err(HttpError::InvalidRequest(
                format!("{name} must be at most {MAX_FILTER} characters"),
            )),
            Some(raw) => Ok(Some(raw.to_owned())),
        }
    };
    // A state filter is a name: checked as one, so a wrong one says why.
    let state = match filter("state")? {
        Some(raw) => Some(StateName::parse(&raw)?.as_str().to_owned()),
        None => None,
    };
    // The root module's path is empty: `module=` with nothing after it selects it, while a
    // search without `module` takes every module.
    let module = match params.first("module") {
        Some("") => Some(String::new()),
        _ => filter("module")?,
    };
    let query = ResourceQuery {
        q: filter("q")?,
        resource_type: filter("type")?,
        provider: filter("provider")?,
        module,
        state,
        after: params.first("cursor").map(decode_cursor),
        limit: page_limit(&call.req, DEFAULT_PAGE, MAX_PAGE)?,
    };
    let page = resources::search(call.app, principal, query).await?;
    Ok(json_response(
        StatusCode::OK,
        &ResourceList {
            next_cursor: page.next.as_ref().map(encode_cursor),
            resources: page.resources,
        },
    ))
}

/// `GET /api/resources/conflicts?state=`.
pub async fn conflicts(call: Call<'_>, principal: &Principal) -> Answer {
    let state = match call.req.query_string_parameters().first("state") {
        None | Some("") => None,
        Some(raw) => Some(StateName::parse(raw)?),
    };
    let conflicts =
        resources::conflicts(call.app, principal, state.as_ref().map(StateName::as_str)).await?;
    Ok(json_response(StatusCode::OK, &ConflictList { conflicts }))
}

/// `GET /api/overview`.
pub async fn overview(call: Call<'_>, principal: &Principal) -> Answer {
    let view = overview::overview(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &view))
}

/// One page of a search.
#[derive(Serialize, JsonSchema)]
pub(super) struct ResourceList {
    resources: Vec<ResourceView>,
    /// Pass as `cursor` for the next page; `null` on the last (the page that holds the last
    /// match, even when full).
    next_cursor: Option<String>,
}

/// The objects two or more states manage.
#[derive(Serialize, JsonSchema)]
pub(super) struct ConflictList {
    conflicts: Vec<Conflict>,
}

fn encode_cursor(after: &(String, String)) -> String {
    format!("{}~{}", after.0, URL_SAFE_NO_PAD.encode(&after.1))
}

/// The position a cursor names: the state before its first `~`, the address after it
/// (taken as it is where it is not base64url of text, as in a cursor written by hand);
/// without a `~`, the start of the state it names.
fn decode_cursor(raw: &str) -> (String, String) {
    let (state, address) = raw.split_once('~').unwrap_or((raw, ""));
    let address = URL_SAFE_NO_PAD
        .decode(address)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| address.to_owned());
    (state.to_owned(), address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_any_address() {
        for address in ["aws_x.y[\"a,b\\n\u{e9}\"]", "aws_x.y[\"~~\"]", ""] {
            let after = ("net".to_owned(), address.to_owned());
            assert_eq!(decode_cursor(&encode_cursor(&after)), after);
        }
    }

    #[test]
    fn any_string_is_a_position() {
        assert_eq!(decode_cursor("prod"), ("prod".to_owned(), String::new()));
        assert_eq!(decode_cursor("~x!"), (String::new(), "x!".to_owned()));
        assert_eq!(decode_cursor(""), (String::new(), String::new()));
        let cursor = encode_cursor(&("net".to_owned(), "a b\"&#".to_owned()));
        assert!(cursor
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.~".contains(c)));
    }
}
