//! The `apps` function: app states (Octo's remote state): locks, uploads, seals, archives
//! and their files. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("apps").await
}
