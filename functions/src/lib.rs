//! What every Lambda function shares: JSON logs, the app on the AWS store built once at start
//! (the clients its routes need included), and the loop that hands each event to the
//! handlers. Each binary in `src/bin/` names its route group of the route table to
//! [`serve`], or is the sweeper and calls [`sweep`], or serves the pages and calls
//! [`serve_pages`]; nothing else happens in a function. Each reports its requests, key
//! calls and sweeps as CloudWatch EMF lines in its log (docs/metrics.md).

use std::convert::Infallible;
use std::sync::Arc;

use hegemony_state::adapters::aws;
use hegemony_state::adapters::emf::Emf;
use hegemony_state::config::Config;
use hegemony_state::http::groups::{self, GroupNeeds};
use hegemony_state::http::lambda;
use hegemony_state::http::pages;
use hegemony_state::service::sweep as sweeper;
use hegemony_state::wiring;
use lambda_http::{service_fn, Error, LambdaEvent, Request};

/// JSON logs on stderr (CloudWatch keeps them), level from `RUST_LOG`, info by default.
fn init_logging() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .without_time()
        .with_writer(std::io::stderr)
        .init();
}

/// The settings, or the first bad one (the function then fails to start, and its log says
/// which variable and why).
fn config() -> Result<Config, Error> {
    Ok(Config::from_env(&|name| std::env::var(name).ok())?)
}

/// Serves the rows of the route table that name `function` until the runtime stops the
/// process, with a blob store and the configured key service only when those rows' `needs`
/// call for them.
///
/// # Errors
/// A name no row of the table gives (the function would answer nothing), or a bad setting.
pub async fn serve(function: &'static str) -> Result<(), Error> {
    init_logging();
    if groups::rows(function).next().is_none() {
        return Err(format!("no row of the route table names the function {function}").into());
    }
    let needs = GroupNeeds::of(function);
    let sdk = aws::sdk_config().await;
    let app = wiring::aws::function_app(config()?, &sdk, function, needs)?
        .measured(Arc::new(Emf::to_stderr(function)));
    let app = Arc::new(app);
    tracing::info!(
        function,
        max_state_bytes = app.limits.max_state_bytes,
        blob_store = needs.blobs,
        key_service = needs.keys,
        "ready"
    );
    lambda_http::run(service_fn(move |req: Request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(lambda::answer(&app, function, req).await) }
    }))
    .await
}

/// Serves the pages (and the JSON 404 of an unknown API path) until the runtime stops the
/// process. They are in the binary: no settings, no store, no grants.
pub async fn serve_pages() -> Result<(), Error> {
    init_logging();
    tracing::info!(function = pages::FUNCTION, "ready");
    lambda_http::run(service_fn(|req: Request| async move {
        Ok::<_, Infallible>(lambda::answer_pages(&req))
    }))
    .await
}

/// The scheduled sweeper: one bounded pass per event, its report logged. A failed pass is
/// an error Lambda records; the next minute's event tries again.
pub async fn sweep() -> Result<(), Error> {
    init_logging();
    let app = wiring::aws::sweeper(config()?, &aws::sdk_config().await)?
        .measured(Arc::new(Emf::to_stderr("sweeper")));
    let app = Arc::new(app);
    tracing::info!(function = "sweeper", "ready");
    lambda_http::lambda_runtime::run(service_fn(move |_: LambdaEvent<serde_json::Value>| {
        let app = app.clone();
        async move {
            let report = sweeper::sweep(&app, app.clock.now()).await?;
            tracing::info!(?report, "swept");
            // Every count of the report, under its field's name.
            Ok::<_, Error>(serde_json::to_value(report)?)
        }
    }))
    .await
}
