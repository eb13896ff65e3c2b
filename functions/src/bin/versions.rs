//! The `versions` function: lists a state's versions. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("versions").await
}
