//! The unit tests of `server`, beside it so that the file holds its code alone.

use super::*;
use hegemony_state::http::ROUTES;

async fn a_defect() -> lambda_http::Response<Body> {
    panic!("a defect of ours")
}

async fn served() -> lambda_http::Response<Body> {
    lambda_http::Response::new(Body::Empty)
}

/// On the long-running server a panic must cost one request, not every request in
/// flight of every org (the release profile unwinds for this).
#[tokio::test]
async fn a_panicking_request_is_answered_500_and_the_next_is_served() {
    let route = ROUTES.iter().find(|r| r.path == "/api/tf-states").unwrap();
    let failed = isolated(route, a_defect()).await;
    assert_eq!(failed.status(), 500);
    let body: serde_json::Value = serde_json::from_slice(failed.body().as_ref()).unwrap();
    assert_eq!(body["error"]["code"], "internal");
    assert_eq!(isolated(route, served()).await.status(), 200);
}
