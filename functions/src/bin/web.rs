//! The `web` function: the pages, from the binary itself, behind the API's catch-all route.
//! Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve_pages().await
}
