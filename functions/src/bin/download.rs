//! The `download` function: downloads a version's content. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("download").await
}
