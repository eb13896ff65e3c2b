//! The web pages: the single-page application built from `web/` and embedded at compile
//! time (`build.rs`), served outside `/api` by the local server and by the `web` Lambda
//! function alike. Content types; hashed assets cached for a year, everything else
//! revalidated; unknown paths answered with `index.html` so the application's own routes
//! load; a strict Content-Security-Policy (no inline script or style, no eval) and the
//! headers that keep the pages out of frames and their addresses out of referrers. The
//! pages call the API with the token they hold; nothing here reads credentials.

use lambda_http::http::{header, HeaderValue, StatusCode};
use lambda_http::{Body, Response};

include!(concat!(env!("OUT_DIR"), "/pages.rs"));

/// The Lambda function that serves the pages on AWS.
pub const FUNCTION: &str = "web";

/// The routes of the `web` function on API Gateway: the root and a catch-all, which API
/// Gateway matches only after every more specific route (so after every API route). They are
/// not rows of the route table: they take no credentials, touch no storage and are described
/// by no API document; the template test holds the template to this list.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/"), ("GET", "/{proxy+}")];

/// Scripts, styles, images and fonts from this origin only; no inline code, no eval, no
/// frames, no `<base>`, forms to this origin only.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Vite names what it puts under `/assets/` by a hash of its content: a new build is a new
/// name, so a cached copy never goes stale.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// Everything else (`index.html` above all) is revalidated, so a new build is seen at once.
const REVALIDATE: &str = "no-cache";

/// Served for every page while `web/dist` was not built when the binary was.
const NOT_BUILT: &str = "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Hegemony State</title></head>\n<body>\n<h1>The web interface is not built</h1>\n<p>This server was built without its pages. Run <code>make web</code> (or <code>make run</code>, which builds them and serves), with Node.js and npm installed, then start the server again.</p>\n<p>The API answers as usual under <code>/api/</code>; its description is at <a href=\"/api/openapi.json\">/api/openapi.json</a>.</p>\n</body>\n</html>\n";

/// Whether a request that matched no API route is the pages' to answer: a `GET` or `HEAD`
/// outside `/api` (an unknown API path stays a JSON 404).
pub fn serves(method: &str, path: &str) -> bool {
    matches!(method, "GET" | "HEAD") && path != "/api" && !path.starts_with("/api/")
}

/// The page or file at `path`.
pub fn answer(path: &str) -> Response<Body> {
    serve(FILES, path)
}

fn serve(files: &[(&str, &'static [u8])], path: &str) -> Response<Body> {
    let find = |p: &str| files.iter().find(|(name, _)| *name == p).map(|(_, b)| *b);
    let wanted = if path == "/" { "/index.html" } else { path };
    if let Some(bytes) = find(wanted) {
        let cache = if wanted.starts_with("/assets/") {
            IMMUTABLE
        } else {
            REVALIDATE
        };
        return page(StatusCode::OK, content_type(wanted), cache, bytes);
    }
    // A missing asset is a 404, never the application: a script tag given HTML would fail
    // with a confusing error instead of a missing file.
    if wanted.starts_with("/assets/") {
        return page(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            REVALIDATE,
            b"no such file\n",
        );
    }
    match find("/index.html") {
        Some(index) => page(
            StatusCode::OK,
            "text/html; charset=utf-8",
            REVALIDATE,
            index,
        ),
        None => page(
            StatusCode::OK,
            "text/html; charset=utf-8",
            REVALIDATE,
            NOT_BUILT.as_bytes(),
        ),
    }
}

fn page(
    status: StatusCode,
    content_type: &'static str,
    cache: &'static str,
    bytes: &'static [u8],
) -> Response<Body> {
    let mut response = Response::new(Body::Binary(bytes.to_vec()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, cache),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The content type of a built file, by its extension.
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILT: &[(&str, &[u8])] = &[
        ("/assets/index-3f2a.js", b"console.log(1)"),
        ("/assets/index-9c1d.css", b"body{}"),
        ("/favicon.svg", b"<svg/>"),
        ("/index.html", b"<!doctype html><div id=app></div>"),
    ];

    fn header<'a>(r: &'a Response<Body>, name: &str) -> &'a str {
        r.headers()[name].to_str().unwrap()
    }

    fn body(r: &Response<Body>) -> String {
        String::from_utf8(r.body().as_ref().to_vec()).unwrap()
    }

    #[test]
    fn the_root_is_index_html_revalidated_every_time() {
        let r = serve(BUILT, "/");
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&r, "cache-control"), "no-cache");
        assert!(body(&r).contains("id=app"));
    }

    #[test]
    fn hashed_assets_are_cached_for_a_year_with_their_content_type() {
        let js = serve(BUILT, "/assets/index-3f2a.js");
        assert_eq!(
            header(&js, "content-type"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            header(&js, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        let css = serve(BUILT, "/assets/index-9c1d.css");
        assert_eq!(header(&css, "content-type"), "text/css; charset=utf-8");
        let icon = serve(BUILT, "/favicon.svg");
        assert_eq!(header(&icon, "content-type"), "image/svg+xml");
        assert_eq!(header(&icon, "cache-control"), "no-cache");
    }

    #[test]
    fn the_applications_own_paths_load_index_html_but_a_missing_asset_is_404() {
        let r = serve(BUILT, "/states/network");
        assert_eq!(r.status(), 200);
        assert!(body(&r).contains("id=app"));
        assert_eq!(header(&r, "cache-control"), "no-cache");
        let missing = serve(BUILT, "/assets/index-0000.js");
        assert_eq!(missing.status(), 404);
        assert_eq!(
            header(&missing, "content-type"),
            "text/plain; charset=utf-8"
        );
    }

    #[test]
    fn every_answer_carries_the_security_headers() {
        for path in ["/", "/assets/index-3f2a.js", "/states/x", "/assets/nope.js"] {
            let r = serve(BUILT, path);
            assert_eq!(
                header(&r, "content-security-policy"),
                "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
                "{path}"
            );
            assert_eq!(header(&r, "x-content-type-options"), "nosniff");
            assert_eq!(header(&r, "x-frame-options"), "DENY");
            assert_eq!(header(&r, "referrer-policy"), "no-referrer");
        }
        let unbuilt = serve(&[], "/");
        assert_eq!(header(&unbuilt, "x-frame-options"), "DENY");
    }

    #[test]
    fn without_the_built_pages_every_page_says_how_to_build_them() {
        for path in ["/", "/states/x"] {
            let r = serve(&[], path);
            assert_eq!(r.status(), 200);
            assert!(body(&r).contains("make web"), "{path}");
            assert!(
                !body(&r).contains("<script"),
                "nothing for the CSP to refuse"
            );
        }
    }

    #[test]
    fn only_gets_and_heads_outside_the_api_are_pages() {
        assert!(serves("GET", "/"));
        assert!(serves("HEAD", "/states/x"));
        assert!(serves("GET", "/apiary"));
        assert!(!serves("GET", "/api"));
        assert!(!serves("GET", "/api/nope"));
        assert!(!serves("POST", "/"));
        assert!(!serves("DELETE", "/states/x"));
    }
}
