//! The `import` function: imports a state file as a new state. Wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hegemony_state_functions::serve("import").await
}
