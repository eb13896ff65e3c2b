//! The `hegemony-state` command: the local server on the embedded store, and tokens.
//!
//! Parses the command line, sets up logging, and hands each subcommand to its module.

mod local;
mod server;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

#[derive(Subcommand)]
enum Command {
    /// Run the state server on the local embedded store.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// The data folder (SQLite catalog and blob files).
        #[arg(
            long,
            env = "HEGEMONY_TF_STATE_DATA_DIR",
            default_value = "./.hegemony"
        )]
        data_dir: PathBuf,
        /// The platform key file, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is not set.
        /// Default: beside the data folder (<data-dir>.key), created on first start.
        #[arg(long)]
        key_file: Option<PathBuf>,
    },
    /// Manage personal access tokens in the local store.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it, alone, on the last line. It is shown only this once.
    Create {
        #[arg(long)]
        org: String,
        #[arg(long)]
        user: String,
        /// viewer, operator or admin.
        #[arg(long)]
        role: hegemony_state::domain::permission::Role,
        #[arg(
            long,
            env = "HEGEMONY_TF_STATE_DATA_DIR",
            default_value = "./.hegemony"
        )]
        data_dir: PathBuf,
    },
}

fn main() -> ExitCode {
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
                data_dir,
                key_file,
            } => server::serve(listen, &data_dir, key_file.as_deref()).await,
            Command::Token {
                command:
                    TokenCommand::Create {
                        org,
                        user,
                        role,
                        data_dir,
                    },
            } => token::create(&data_dir, &org, &user, role).await,
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
