//! The `sweeper` function, run every minute by an EventBridge schedule: dead locks and holds
//! of ended runs, pruned versions, unused and never-committed blobs, expired tokens. Wiring
//! only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::sweep().await
}
