//! `GET /api/tf-states/{name}/outputs` and `GET /api/tf-states/{name}/outputs/state`: a
//! state's outputs for its consumers, and the state document a consumer's
//! `terraform_remote_state` reads over the http backend. Both answers carry an `ETag` named
//! after the version they were built from, and an `If-None-Match` naming it is a 304.

use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use lambda_http::{Body, Response};

use super::error::{error_body, ErrorCode};
use super::handler::{Answer, Call};
use super::response::{accepts_gzip, content_response, json_response};
use crate::domain::Principal;
use crate::service::outputs::{self, Source};

/// The latest version's outputs: a sensitive one by its type alone.
pub async fn outputs(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    let Some((source, view)) = outputs::outputs(call.app, principal, &name).await? else {
        return Ok(no_version(&name));
    };
    let tag = etag("outputs", &source);
    if not_modified(call.req.headers(), &tag) {
        return Ok(unchanged(tag));
    }
    Ok(tagged(json_response(StatusCode::OK, &view), tag))
}

/// The consumer's state document: the same bytes for the same version.
pub async fn consumer_state(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    let Some((source, document)) = outputs::consumer_state(call.app, principal, &name).await?
    else {
        return Ok(no_version(&name));
    };
    let tag = etag("outputs-state", &source);
    if not_modified(call.req.headers(), &tag) {
        return Ok(unchanged(tag));
    }
    let gzip = accepts_gzip(call.req.headers());
    Ok(tagged(content_response(document, gzip), tag))
}

/// A 404 as the backend's read answers it: the tools read it as "no state yet".
fn no_version(name: &impl std::fmt::Display) -> Response<Body> {
    error_body(
        ErrorCode::NotFound,
        &format!("state {name} has no version yet"),
    )
}

/// A strong tag naming the answer's kind and the version it was built from: a version's
/// content never changes, and a rollback is a new version, so the tag changes exactly when
/// the answer may.
fn etag(kind: &str, source: &Source) -> HeaderValue {
    let text = format!("\"{kind}-{}-{}\"", source.version, source.sha256);
    // A kind, a number and hex digits are all visible ASCII: a valid header value.
    HeaderValue::from_str(&text).expect("an entity tag is a valid header value")
}

/// Whether `If-None-Match` names `tag` (or is `*`), weak or strong, as RFC 9110 compares
/// for a GET.
fn not_modified(headers: &HeaderMap, tag: &HeaderValue) -> bool {
    let tag = tag.to_str().unwrap_or_default();
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|given| given == "*" || given.strip_prefix("W/").unwrap_or(given) == tag)
}

fn tagged(mut response: Response<Body>, tag: HeaderValue) -> Response<Body> {
    let headers = response.headers_mut();
    headers.insert(header::ETAG, tag);
    // The answer depends on the caller's permission: no shared cache keeps it, and a
    // client asks again with the tag before using its copy.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    response
}

fn unchanged(tag: HeaderValue) -> Response<Body> {
    let response = Response::builder()
        .status(StatusCode::NOT_MODIFIED)
        .body(Body::Empty)
        .expect("static headers are valid");
    tagged(response, tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            version: 3,
            sha256: "ab".repeat(32),
        }
    }

    fn asking(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, value.parse().unwrap());
        h
    }

    #[test]
    fn the_tag_names_the_kind_the_version_and_its_content() {
        let tag = etag("outputs-state", &source());
        assert_eq!(
            tag.to_str().unwrap(),
            format!("\"outputs-state-3-{}\"", "ab".repeat(32))
        );
        assert_ne!(tag, etag("outputs", &source()));
    }

    #[test]
    fn if_none_match_names_the_tag_among_others_weak_or_strong() {
        let tag = etag("outputs", &source());
        let text = tag.to_str().unwrap();
        assert!(not_modified(&asking(text), &tag));
        assert!(not_modified(&asking(&format!("\"x\", W/{text}")), &tag));
        assert!(not_modified(&asking("*"), &tag));
        assert!(!not_modified(&asking("\"outputs-2-ab\""), &tag));
        assert!(!not_modified(&HeaderMap::new(), &tag));
    }
}
