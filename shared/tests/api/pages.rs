//! The pages beside the API: what matches no route is a page outside `/api` and a JSON 404
//! or 405 inside it, so a typo in an API path never answers HTML to a script.

use crate::support::api::Api;

#[tokio::test]
async fn paths_outside_the_api_are_pages_with_the_security_headers() {
    let api = Api::new();
    for path in ["/", "/states/network", "/audit"] {
        let r = api.request("GET", path).send().await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), "text/html; charset=utf-8");
        assert_eq!(r.header("cache-control"), "no-cache");
        assert!(r
            .header("content-security-policy")
            .starts_with("default-src 'self'"));
        assert_eq!(r.header("x-content-type-options"), "nosniff");
        assert_eq!(r.header("x-frame-options"), "DENY");
        assert_eq!(r.header("referrer-policy"), "no-referrer");
        assert!(r.text().contains("Hegemony State"));
    }
}

#[tokio::test]
async fn unknown_api_paths_and_other_methods_stay_json_errors() {
    let api = Api::new();
    let r = api.request("GET", "/api/nope").send().await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let r = api.request("GET", "/api").send().await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let r = api.request("POST", "/states/network").send().await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let r = api
        .request("GET", "/api/tf-states/net/rollback")
        .send()
        .await;
    assert_eq!(r.error().expect(405).0, "method_not_allowed");
}
