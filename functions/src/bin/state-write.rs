//! The `state-write` function: saves a state (POST .../state). Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("state-write").await
}
