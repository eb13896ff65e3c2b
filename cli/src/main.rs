//! The `hegemony-state` command: the local server on the embedded store, tokens, the
//! management commands and the import script over the HTTP API.
//!
//! Parses the command line, sets up logging, and hands each subcommand to its module.

mod apps;
mod backup;
mod body;
mod chunks;
mod client;
mod comparison;
mod import;
mod index;
mod keys;
mod login;
mod migrate;
mod outputs;
mod overview;
mod pacing;
mod protect;
mod resources;
mod server;
mod stalled;
mod states;
mod store;
mod streamed;
mod table;
mod token;
mod trust;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use hegemony_state::domain::permission::Role;
use store::Store;

#[derive(Parser)]
#[command(
    name = "hegemony-state",
    version,
    about = "Managed Terraform and OpenTofu state"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the API is and who calls it.
#[derive(Args, Clone)]
pub struct Api {
    /// The server's base URL.
    #[arg(long, env = "HEGEMONY_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A personal access token (better passed as HEGEMONY_TOKEN than on the command line).
    #[arg(long, env = "HEGEMONY_TOKEN", hide_env_values = true)]
    pub token: String,
}

#[derive(Subcommand)]
enum Command {
    /// Run the state server: on the local embedded store, or (--store aws) as the container
    /// front door of an AWS deployment, for states up to 128 MiB.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        #[command(flatten)]
        store: Store,
        /// The most bytes of request bodies held at once; a save beyond it waits for none
        /// and gets 503 with Retry-After. At least HEGEMONY_TF_STATE_MAX_BYTES.
        #[arg(long, env = "HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT", default_value_t = server::DEFAULT_BYTES_IN_FLIGHT)]
        max_body_bytes_in_flight: u64,
        /// The most connections served at once; more wait to be accepted until one ends.
        #[arg(long, env = "HEGEMONY_MAX_CONNECTIONS", default_value_t = server::DEFAULT_MAX_CONNECTIONS,
              value_parser = setting("HEGEMONY_MAX_CONNECTIONS", 1..=MAX_CONNECTIONS))]
        max_connections: u64,
        /// Seconds a client may take to send a request head, leave a connection idle, go
        /// without sending a byte of a body (408), or leave its answer unread.
        #[arg(long, env = "HEGEMONY_CLIENT_TIMEOUT_SECONDS", default_value_t = server::DEFAULT_CLIENT_TIMEOUT_SECONDS,
              value_parser = setting("HEGEMONY_CLIENT_TIMEOUT_SECONDS", 1..=3600))]
        client_timeout_seconds: u64,
        /// The least rate a request body must arrive at, in bytes per second averaged over
        /// each window of --client-rate-window-seconds (408 when slower); 0 turns it off.
        #[arg(long, env = "HEGEMONY_CLIENT_MIN_BYTES_PER_SECOND", default_value_t = server::DEFAULT_MIN_BYTES_PER_SECOND,
              value_parser = setting("HEGEMONY_CLIENT_MIN_BYTES_PER_SECOND", 0..=MAX_MIN_BYTES_PER_SECOND))]
        client_min_bytes_per_second: u64,
        /// Seconds over which a request body's rate is averaged.
        #[arg(long, env = "HEGEMONY_CLIENT_RATE_WINDOW_SECONDS", default_value_t = server::DEFAULT_RATE_WINDOW_SECONDS,
              value_parser = setting("HEGEMONY_CLIENT_RATE_WINDOW_SECONDS", 1..=3600))]
        client_rate_window_seconds: u64,
        /// Address to serve Prometheus metrics on (GET /metrics), apart from the API's;
        /// off when not set (docs/metrics.md).
        #[arg(long, env = "HEGEMONY_METRICS_LISTEN")]
        metrics_listen: Option<SocketAddr>,
        /// The platform key file, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is not set.
        /// Default: beside the data folder (<data-dir>.key), created on first start.
        #[arg(long)]
        key_file: Option<PathBuf>,
    },
    /// Manage tokens in the local or the AWS store.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manage states over the HTTP API.
    States {
        #[command(flatten)]
        api: Api,
        #[command(subcommand)]
        command: states::Command,
    },
    /// App states (Octo's remote state) over the HTTP API: list, archives, files, download,
    /// force-unlock, delete an old archive.
    Apps {
        #[command(flatten)]
        api: Api,
        #[command(subcommand)]
        command: apps::Command,
    },
    /// The org's trust policies for CI jobs (OpenID Connect workloads).
    Trust {
        #[command(flatten)]
        api: Api,
        #[command(subcommand)]
        command: trust::Command,
    },
    /// The org's protected states: changed only by CI sessions of named trust policies.
    Protect {
        #[command(flatten)]
        api: Api,
        #[command(subcommand)]
        command: protect::Command,
    },
    /// In a CI job: exchange the job's OpenID Connect ID token for a session and print its
    /// token (for TF_HTTP_PASSWORD).
    Login(login::Options),
    /// The org's inventory: find which state manages a resource (`search`), and the
    /// objects two states manage (`conflicts`).
    Resources {
        #[command(flatten)]
        api: Api,
        #[command(subcommand)]
        command: resources::Command,
    },
    /// The org at a glance: counts, resources by provider and type, largest states, locks
    /// and holds with their age, stale and unindexed states.
    Overview {
        #[command(flatten)]
        api: Api,
        #[arg(long)]
        json: bool,
    },
    /// Import state files, and folders of them, as new states.
    Import(import::Options),
    /// Key rotation on the local or the AWS store: which keys wrap the versions, and
    /// re-wrapping them under the key in use.
    Keys {
        #[command(subcommand)]
        command: keys::Command,
    },
    /// The resource index: build it again from the states' latest versions.
    Index {
        #[command(subcommand)]
        command: index::Command,
    },
    /// Run one sweeper pass (the server runs one every minute; on AWS, a scheduled function).
    Sweep {
        #[command(flatten)]
        store: Store,
    },
    /// Back up the local store while the server runs (`--to DIR`), or check a backup by
    /// opening everything in it (`verify DIR`).
    Backup(backup::Backup),
    /// Put a backup back as a new local store (`--data-dir NEW`).
    Restore(backup::Restore),
    /// Move everything a store holds to another deployment's (`--from local --to aws`, and
    /// back): orgs, tokens, trust policies, states with every version, the audit log.
    Migrate(migrate::Options),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it, alone, on the last line. It is shown only this once.
    Create {
        /// The org of a personal token.
        #[arg(long, required_unless_present = "platform")]
        org: Option<String>,
        /// The user a personal token acts as.
        #[arg(long, required_unless_present = "platform")]
        user: Option<String>,
        /// viewer, operator or admin.
        #[arg(long, required_unless_present = "platform")]
        role: Option<Role>,
        /// A platform token instead: it calls the runs API only, for any org.
        #[arg(long, conflicts_with_all = ["org", "user", "role"])]
        platform: bool,
        #[command(flatten)]
        store: Store,
    },
    /// List tokens (never the tokens themselves: only their ids and owners).
    List {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: Store,
    },
    /// Revoke a token by its id (from `token list`); it stops working at once.
    Revoke {
        id: String,
        #[command(flatten)]
        store: Store,
    },
}

/// The largest connection cap: far past what one process's descriptors allow.
const MAX_CONNECTIONS: u64 = 1_000_000;

/// The largest least rate of a body: 1 GiB/s, past any client's link.
const MAX_MIN_BYTES_PER_SECOND: u64 = 1 << 30;

/// A whole-number setting in `range`, refused naming its variable and range, as the
/// settings of the store are (hegemony_state::config).
fn setting(
    variable: &'static str,
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |raw: &str| {
        raw.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                format!(
                    "{variable}: {raw:?} is not allowed: use a whole number from {} to {}",
                    range.start(),
                    range.end()
                )
            })
    }
}

/// An empty setting is an unset one, as operators write them in unit and compose files
/// (`HEGEMONY_METRICS_LISTEN=`): the command line's parser would read it as a value and stop
/// the start. Called first, before any thread exists, so changing the environment is sound.
fn forget_empty_settings() {
    let empty: Vec<std::ffi::OsString> = std::env::vars_os()
        .filter(|(name, value)| {
            name.to_string_lossy().starts_with("HEGEMONY_")
                && value.to_string_lossy().trim().is_empty()
        })
        .map(|(name, _)| name)
        .collect();
    for name in empty {
        std::env::remove_var(name);
    }
}

fn main() -> ExitCode {
    forget_empty_settings();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hegemony-state: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                listen,
                store,
                key_file,
                max_body_bytes_in_flight,
                max_connections,
                client_timeout_seconds,
                client_min_bytes_per_second,
                client_rate_window_seconds,
                metrics_listen,
            } => {
                let shutdown =
                    server::shutdown_signal().context("cannot install the signal handlers")?;
                // Bound now, so a port in use stops the start at once; it listens only
                // once the store is ready (server::serve).
                let socket =
                    server::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
                let metrics = metrics_listen
                    .map(|at| {
                        server::bind(at).with_context(|| {
                            format!("cannot listen for metrics on {at} (HEGEMONY_METRICS_LISTEN)")
                        })
                    })
                    .transpose()?;
                server::serve(
                    socket,
                    &store,
                    key_file.as_deref(),
                    server::ClientLimits {
                        bytes_in_flight: max_body_bytes_in_flight,
                        max_connections,
                        timeout: Duration::from_secs(client_timeout_seconds),
                        min_rate: (client_min_bytes_per_second > 0).then(|| body::MinRate {
                            bytes_per_second: client_min_bytes_per_second,
                            window: Duration::from_secs(client_rate_window_seconds),
                        }),
                    },
                    metrics,
                    shutdown,
                )
                .await
            }
            Command::Token { command } => match command {
                TokenCommand::Create {
                    org,
                    user,
                    role,
                    platform,
                    store,
                } => token::create(&store, org, user, role, platform).await,
                TokenCommand::List { json, store } => token::list(&store, json).await,
                TokenCommand::Revoke { id, store } => token::revoke(&store, &id).await,
            },
            Command::States { api, command } => states::run(&api, command).await,
            Command::Apps { api, command } => apps::run(&api, command).await,
            Command::Trust { api, command } => trust::run(&api, command).await,
            Command::Protect { api, command } => protect::run(&api, command).await,
            Command::Resources { api, command } => resources::run(&api, command).await,
            Command::Overview { api, json } => overview::run(&api, json).await,
            Command::Login(options) => login::run(options).await,
            Command::Import(options) => import::run(options).await,
            Command::Keys { command } => keys::run(command).await,
            Command::Index { command } => index::run(command).await,
            Command::Sweep { store } => server::sweep_once(&store).await,
            Command::Backup(options) => backup::run(options).await,
            Command::Restore(options) => backup::restore(options),
            Command::Migrate(options) => migrate::run(options).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hegemony-state: {e:#}");
            ExitCode::FAILURE
        }
    }
}
