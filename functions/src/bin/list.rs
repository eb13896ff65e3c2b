//! The `list` function: lists states, shows one, and serves the API description. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("list").await
}
