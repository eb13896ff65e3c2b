//! `hegemony-state token create`: a personal access token in the local store, usable at
//! once by a running server (tokens are looked up on every request).

use std::path::Path;

use hegemony_state::adapters::local::SqliteCatalog;
use hegemony_state::domain::permission::Role;
use hegemony_state::service::tokens;

pub async fn create(data_dir: &Path, org: &str, user: &str, role: Role) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let catalog =
        SqliteCatalog::open(&data_dir.join(hegemony_state::adapters::local::CATALOG_FILE))
            .map_err(anyhow::Error::msg)?;
    let token = tokens::create(&catalog, org, user, role, time::OffsetDateTime::now_utc()).await?;
    eprintln!(
        "Created a {} token for user {user} in org {org}. It is shown only once:",
        role.as_str()
    );
    println!("{token}");
    Ok(())
}
