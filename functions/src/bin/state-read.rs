//! The `state-read` function: reads a state (GET .../state). Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("state-read").await
}
