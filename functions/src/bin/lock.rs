//! The `lock` function: takes and releases locks (POST and DELETE .../lock). Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("lock").await
}
