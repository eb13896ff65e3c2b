//! The `runs` function: the platform's runs API: step tokens, a run's end, a step's gone report. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("runs").await
}
