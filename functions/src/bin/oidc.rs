//! The `oidc` function: a CI job's OpenID Connect ID token exchanged for a workload session,
//! and a session's early end. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("oidc").await
}
