//! The `rollback` function: rolls a state back to an earlier version. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("rollback").await
}
