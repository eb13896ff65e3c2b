//! `hegemony-state token create | list | revoke` on the local or the AWS store. A running server sees
//! a change at once: tokens are looked up on every request.

use hegemony_state::domain::permission::Role;
use hegemony_state::domain::Actor;
use hegemony_state::ports::TokenKind;
use hegemony_state::service::tokens::{self, NewToken};

use crate::store::Store;

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

pub async fn create(
    store: &Store,
    org: Option<String>,
    user: Option<String>,
    role: Option<Role>,
    platform: bool,
) -> anyhow::Result<()> {
    let catalog = store.catalog().await?;
    let new = match (platform, org.as_deref(), user.as_deref(), role) {
        (true, ..) => NewToken::Platform,
        (false, Some(org), Some(user), Some(role)) => NewToken::Personal { org, user, role },
        // clap requires all three without --platform.
        _ => anyhow::bail!("give --org, --user and --role, or --platform"),
    };
    let (token, record) = tokens::create(catalog.as_ref(), new, &Actor::Cli, now())
        .await
        .map_err(|e| anyhow::anyhow!("cannot create the token: {e}"))?;
    if platform {
        eprintln!(
            "Created platform token {}. It is shown only once:",
            record.id
        );
    } else {
        eprintln!(
            "Created {} token {} for user {} in org {}. It is shown only once:",
            record.role.as_str(),
            record.id,
            record.user,
            record.org
        );
    }
    println!("{token}");
    Ok(())
}

pub async fn list(store: &Store, json: bool) -> anyhow::Result<()> {
    let records = tokens::list(store.catalog().await?.as_ref()).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&records.iter().map(|t| serde_json::json!({
            "id": t.id, "kind": t.kind, "org": t.org, "user": t.user, "role": t.role,
            "created_at": hegemony_state::domain::rfc3339(t.created_at), "revoked": t.revoked,
        })).collect::<Vec<_>>())?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|t| {
            vec![
                t.id.clone(),
                match t.kind {
                    TokenKind::Personal => "personal",
                    TokenKind::Platform => "platform",
                    TokenKind::Step => "step",
                    TokenKind::Session => "session",
                }
                .to_owned(),
                t.org.clone(),
                t.user.clone(),
                t.role.as_str().to_owned(),
                hegemony_state::domain::rfc3339(t.created_at),
                if t.revoked { "revoked" } else { "active" }.to_owned(),
            ]
        })
        .collect();
    crate::table::print(
        &["ID", "KIND", "ORG", "USER", "ROLE", "CREATED", "STATUS"],
        &rows,
    );
    Ok(())
}

pub async fn revoke(store: &Store, id: &str) -> anyhow::Result<()> {
    let record = tokens::revoke(store.catalog().await?.as_ref(), id, &Actor::Cli, now()).await?;
    eprintln!(
        "Token {} ({} in org {}) is revoked.",
        record.id, record.user, record.org
    );
    Ok(())
}
