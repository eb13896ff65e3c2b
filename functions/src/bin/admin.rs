//! The `admin` function: force-unlocks and deletes states, and reads and sets the org's permissions. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("admin").await
}
