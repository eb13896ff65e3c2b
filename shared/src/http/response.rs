//! Building responses: JSON bodies, and gzip for clients that accept it.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use lambda_http::http::{header, HeaderMap, StatusCode};
use lambda_http::{Body, Response};
use serde::Serialize;

/// Bodies smaller than this are sent as they are: gzip would not pay for its header.
const GZIP_MIN_BYTES: usize = 1024;

/// A JSON response.
pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    // Response shapes are plain data: serializing them cannot fail.
    let body = serde_json::to_string(value).expect("response serializes");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::Text(body))
        .expect("static headers are valid")
}

/// Whether the request's `Accept-Encoding` accepts gzip (and does not refuse it with q=0).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    // RFC 9110: `gzip` named with any weight but 0 accepts it; named with weight 0 (`q=0`,
    // `q=0.00`, `Q=0.000`) refuses it whatever `*` says; otherwise `*` decides.
    let (mut gzip, mut any) = (None, None);
    for coding in headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let accepted = !parts.any(|p| {
            p.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f32>() == Ok(0.0)
            })
        });
        if name.eq_ignore_ascii_case("gzip") {
            gzip = Some(accepted);
        } else if name == "*" {
            any = Some(accepted);
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// A 200 with `bytes` as they are, gzip-encoded when the client accepts it.
pub fn content_response(bytes: Vec<u8>, gzip: bool) -> Response<Body> {
    let builder = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json");
    if gzip && bytes.len() >= GZIP_MIN_BYTES {
        // Level 1: the state is already read from a compressed blob, and the fastest level
        // keeps large reads quick while still shrinking JSON several times.
        let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 5), Compression::fast());
        // Writing to memory cannot fail.
        encoder.write_all(&bytes).expect("gzip to memory");
        let gzipped = encoder.finish().expect("gzip to memory");
        return builder
            .header(header::CONTENT_ENCODING, "gzip")
            .header(header::VARY, "Accept-Encoding")
            .body(Body::Binary(gzipped))
            .expect("static headers are valid");
    }
    builder
        .body(Body::Binary(bytes))
        .expect("static headers are valid")
}

/// An empty 200: what the tools require from lock and unlock.
pub fn ok_empty() -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .body(Body::Empty)
        .expect("static headers are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
        h
    }

    #[test]
    fn gzip_is_accepted_unless_refused() {
        assert!(accepts_gzip(&headers("gzip")));
        assert!(accepts_gzip(&headers("deflate, gzip;q=0.5")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        for refused in [
            "gzip;q=0.00",
            "gzip; q=0.000",
            "GZIP;Q=0",
            "gzip;q=0, *",
            "*;q=0",
        ] {
            assert!(!accepts_gzip(&headers(refused)), "{refused}");
        }
        assert!(accepts_gzip(&headers("*")));
        assert!(accepts_gzip(&headers("gzip;q=0.001")));
        assert!(!accepts_gzip(&headers("br")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
