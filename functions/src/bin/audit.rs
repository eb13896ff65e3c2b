//! The `audit` function: reads the audit of a state and of the org. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("audit").await
}
