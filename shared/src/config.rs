//! The environment settings (DESIGN section 11), checked at start: a bad value stops the
//! process with a message naming the variable and its allowed range.

use crate::crypto::PlatformKey;
use crate::key_template::KeyTemplate;
use crate::transit_settings::{TransitAuth, TransitSettings, INTERNAL_TAG};

/// The default and largest state size.
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;
pub const MIN_MAX_BYTES: u64 = 1024;
pub const LIMIT_MAX_BYTES: u64 = 128 * 1024 * 1024;
pub const DEFAULT_KEEP_VERSIONS: u64 = 50;
pub const DEFAULT_RUN_END_GRACE_SECONDS: u64 = 600;
/// How long a deleted state is kept for a restore by default, and at most (ten years).
pub const DEFAULT_DELETED_RETENTION_DAYS: u64 = 7;
pub const LIMIT_DELETED_RETENTION_DAYS: u64 = 3650;
/// Below this the grace can free a lock while the tool still runs: two minutes (heartbeat) +
/// one sweep interval + the stop timeout (at most two minutes) + time for the API and Docker.
pub const SAFE_RUN_END_GRACE_SECONDS: u64 = 480;
/// The key cache's defaults: room for the versions a busy deployment reads within the age,
/// and an age that bounds how long a revoked grant or a sealed Transit key goes unnoticed.
pub const DEFAULT_KEY_CACHE_SIZE: u64 = 1024;
pub const LIMIT_KEY_CACHE_SIZE: u64 = 100_000;
pub const DEFAULT_KEY_CACHE_SECONDS: u64 = 300;
pub const LIMIT_KEY_CACHE_SECONDS: u64 = 3600;
/// The default and the largest age of an OpenID Connect issuer's fetched keys: how long a
/// key the issuer withdrew may go on verifying tokens.
pub const DEFAULT_OIDC_KEYS_MAX_AGE_SECONDS: u64 = 600;
pub const LIMIT_OIDC_KEYS_MAX_AGE_SECONDS: u64 = 86_400;

/// Where data keys are wrapped.
#[derive(Debug)]
pub enum KeySetting {
    /// `HEGEMONY_TF_STATE_ENCRYPTION_KEY`, the platform key.
    Platform(PlatformKey),
    /// `HEGEMONY_TF_STATE_KEY_BACKEND=kms:<key>`. A platform key configured as well still
    /// opens the versions it wrapped before the move to KMS; it wraps nothing new.
    Kms {
        key: KeyTemplate,
        platform: Option<PlatformKey>,
    },
    /// `HEGEMONY_TF_STATE_KEY_BACKEND=<tag>` or `transit:<tag>`, or no key backend with the
    /// internal OpenBao configured. A platform key configured as well still opens the versions it
    /// wrapped before the move; it wraps nothing new.
    Transit {
        backend: TransitSettings,
        platform: Option<PlatformKey>,
    },
    /// Neither a key backend nor a platform key is configured.
    Unset,
}

/// The settings read from the environment.
#[derive(Debug)]
pub struct Config {
    pub max_state_bytes: u64,
    /// How many versions of each state are kept (the sweeper prunes older ones).
    pub keep_versions: u64,
    /// How long a step's lock outlives its run's end.
    pub run_end_grace_seconds: u64,
    /// `HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS`: how long a deleted state is kept (0: it
    /// is purged at once).
    pub deleted_retention_days: u64,
    /// `HEGEMONY_TF_STATE_KEY_CACHE_SIZE`: how many unwrapped data keys are kept (0: none).
    pub key_cache_size: u64,
    /// `HEGEMONY_TF_STATE_KEY_CACHE_SECONDS`: how long one is kept (0: not at all).
    pub key_cache_seconds: u64,
    /// `HEGEMONY_RUN_URL_TEMPLATE`: a run's link, `{run}` replaced by its id.
    pub run_url_template: Option<String>,
    /// `HEGEMONY_PUBLIC_URL`: the API's public base, without a trailing slash.
    pub public_url: Option<String>,
    /// `HEGEMONY_CONTAINER_URL`: the container front door's base, without a trailing slash,
    /// where the functions send reads too large for them.
    pub container_url: Option<String>,
    pub key: KeySetting,
    /// `HEGEMONY_TF_STATE_RETIRED_KEYS`: platform keys that open the versions they wrapped
    /// and wrap nothing, kept until `keys rewrap` has moved those versions to the key in use.
    pub retired_keys: Vec<PlatformKey>,
    /// The internal OpenBao (`HEGEMONY_OPENBAO_*`), when configured: it wraps new versions
    /// only with no key backend set, and opens the versions it wrapped whatever the setting.
    pub internal_openbao: Option<TransitSettings>,
    /// `HEGEMONY_TF_STATE_TABLE`: the DynamoDB table of the AWS store.
    pub table: Option<String>,
    /// `HEGEMONY_TF_STATE_BUCKET`: the S3 bucket of the AWS store.
    pub bucket: Option<String>,
    /// `HEGEMONY_OIDC_CA_FILE`, read: extra CA certificates (PEM) trusted when fetching
    /// OpenID Connect issuers' keys, for a private issuer (a self-managed GitLab).
    pub oidc_ca_pem: Option<Vec<u8>>,
    /// `HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS`: how long an issuer's fetched keys are believed
    /// at most, so a key the issuer withdrew stops verifying within it.
    pub oidc_keys_max_age_seconds: u64,
    /// `HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS`: issuers and key sets on loopback, private,
    /// link-local and unique-local addresses may be fetched (a self-hosted GitLab on a
    /// private network, tests).
    pub oidc_allow_private_issuers: bool,
}

/// A `true`/`false` setting; unset or empty is `default`.
fn boolean(
    env: &dyn Fn(&str) -> Option<String>,
    variable: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    let Some(raw) = env(variable).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(ConfigError {
            variable: variable.to_owned(),
            message: format!("{raw:?} is not allowed: use true or false"),
        }),
    }
}

/// A base URL setting (`HEGEMONY_PUBLIC_URL`, `HEGEMONY_CONTAINER_URL`) checked: an
/// absolute http(s) URL with a host, no query, fragment or white space, returned without its
/// trailing slashes so paths append to it.
fn base_url(variable: &str, value: &str) -> Result<String, ConfigError> {
    let refuse = |why: &str| {
        ConfigError {
        variable: variable.to_owned(),
        message: format!("{value:?} {why}: give the base as clients reach it, e.g. https://state.example.com or https://example.com/state"),
    }
    };
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(|| refuse("is not an http:// or https:// URL"))?;
    if rest.split('/').next().unwrap_or_default().is_empty() {
        return Err(refuse("has no host"));
    }
    if value.contains(['?', '#']) || value.chars().any(char::is_whitespace) {
        return Err(refuse("has a query, a fragment or white space"));
    }
    Ok(value.trim_end_matches('/').to_owned())
}

/// A setting that does not parse, with the variable's name and what it allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: String,
    pub message: String,
}

fn integer(
    env: &dyn Fn(&str) -> Option<String>,
    variable: &'static str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let Some(raw) = env(variable).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    let error = || ConfigError {
        variable: variable.to_owned(),
        message: format!(
            "{raw:?} is not allowed: use a whole number from {} to {}",
            range.start(),
            range.end()
        ),
    };
    let value: u64 = raw.trim().parse().map_err(|_| error())?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(error())
    }
}

/// A credentials file setting: a file that can be read and is not empty (read again at each
/// login, so it is only checked here).
fn secret_file(variable: String, path: &str) -> Result<std::path::PathBuf, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Ok(path.into()),
        Ok(_) => Err(ConfigError {
            variable,
            message: format!("the file {path} is empty"),
        }),
        Err(e) => Err(ConfigError {
            variable,
            message: format!("cannot read the file {path}: {e}"),
        }),
    }
}

/// One Transit engine's settings, every variable beginning with `prefix`: `ADDR`, then
/// `TOKEN_FILE` or `ROLE_ID_FILE` + `SECRET_ID_FILE` (+ `APPROLE_MOUNT`), `MOUNT`, `KEY`,
/// `NAMESPACE`, `CA_FILE`.
fn transit(
    env: &dyn Fn(&str) -> Option<String>,
    prefix: &str,
    tag: &str,
    create_keys: bool,
) -> Result<TransitSettings, ConfigError> {
    let var = |suffix: &str| format!("{prefix}{suffix}");
    let get = |suffix: &str| {
        env(&var(suffix))
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let refuse = |suffix: &str, message: String| ConfigError {
        variable: var(suffix),
        message,
    };
    let addr = get("ADDR").ok_or_else(|| {
        refuse(
            "ADDR",
            format!("is not set: transit:{tag} needs its server's address, e.g. https://bao.example.com:8200"),
        )
    })?;
    let addr = base_url(&var("ADDR"), &addr)?;
    let auth = match (get("TOKEN_FILE"), get("ROLE_ID_FILE"), get("SECRET_ID_FILE")) {
        (Some(token), None, None) => TransitAuth::Token {
            file: secret_file(var("TOKEN_FILE"), &token)?,
        },
        (None, Some(role), Some(secret)) => TransitAuth::AppRole {
            mount: get("APPROLE_MOUNT").unwrap_or_else(|| "approle".into()),
            role_id_file: secret_file(var("ROLE_ID_FILE"), &role)?,
            secret_id_file: secret_file(var("SECRET_ID_FILE"), &secret)?,
        },
        (None, Some(_), None) => {
            return Err(refuse("SECRET_ID_FILE", "is not set: an AppRole login needs the role id and the secret id".into()))
        }
        (None, None, Some(_)) => {
            return Err(refuse("ROLE_ID_FILE", "is not set: an AppRole login needs the role id and the secret id".into()))
        }
        (None, None, None) => {
            return Err(refuse("TOKEN_FILE", format!("is not set: transit:{tag} needs a token file, or {prefix}ROLE_ID_FILE and {prefix}SECRET_ID_FILE for an AppRole login")))
        }
        (Some(_), _, _) => {
            return Err(refuse("TOKEN_FILE", format!("is set beside {prefix}ROLE_ID_FILE or {prefix}SECRET_ID_FILE: give a token file or an AppRole, not both")))
        }
    };
    let mount = get("MOUNT").unwrap_or_else(|| "transit".into());
    let mount = mount.trim_matches('/').to_owned();
    if mount.is_empty() || mount.contains(['?', '#', ' ']) {
        return Err(refuse(
            "MOUNT",
            format!("{mount:?} is not a mount path, e.g. transit"),
        ));
    }
    let key = get("KEY").unwrap_or_else(|| "hegemony-state-{org}".into());
    let bare = key.replace("{org}", "");
    if bare.is_empty()
        || !bare
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(refuse("KEY", format!("{key:?} is not a Transit key name: letters, digits, '-', '_' and '.', with {{org}} for the org's slug")));
    }
    if create_keys && !key.contains("{org}") {
        return Err(refuse(
            "KEY",
            format!("{key:?} has no {{org}}: the internal OpenBao keeps one key per organization"),
        ));
    }
    let ca_pem = match get("CA_FILE") {
        None => None,
        Some(path) => {
            let pem = std::fs::read(&path)
                .map_err(|e| refuse("CA_FILE", format!("cannot read the file {path}: {e}")))?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(refuse(
                    "CA_FILE",
                    format!("the file {path} holds no PEM certificate"),
                ));
            }
            Some(pem)
        }
    };
    Ok(TransitSettings {
        tag: tag.to_owned(),
        addr,
        auth,
        mount,
        key,
        namespace: get("NAMESPACE"),
        ca_pem,
        create_keys,
    })
}

/// The settings of one Transit engine, each read as `<prefix><suffix>` by [`transit`].
const TRANSIT_SETTINGS: [&str; 9] = [
    "ADDR",
    "TOKEN_FILE",
    "ROLE_ID_FILE",
    "SECRET_ID_FILE",
    "APPROLE_MOUNT",
    "MOUNT",
    "KEY",
    "NAMESPACE",
    "CA_FILE",
];

/// Tags a named backend may not take: `internal` is the internal OpenBao's, and the others
/// are the setting's own words (`none`, `kms:`, `transit:`, and `keys rewrap --to platform`),
/// so that a bare tag never reads as one of them.
const RESERVED_TAGS: [&str; 4] = ["none", "kms", "transit", "platform"];

/// The named Transit backend `tag`, as `given` in `HEGEMONY_TF_STATE_KEY_BACKEND` (the tag
/// alone, or `transit:<tag>`), with its settings `HEGEMONY_TRANSIT_<TAG>_*`.
fn named_transit(
    env: &dyn Fn(&str) -> Option<String>,
    given: &str,
    tag: &str,
) -> Result<TransitSettings, ConfigError> {
    let refuse = |message: String| ConfigError {
        variable: "HEGEMONY_TF_STATE_KEY_BACKEND".into(),
        message,
    };
    if tag.is_empty()
        || tag.len() > 32
        || !tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(refuse(if given.starts_with("transit:") {
            format!("{given:?}: the tag is 1 to 32 lower-case letters, digits and underscores, e.g. transit:vault")
        } else {
            format!("{given:?} is not allowed: use a Transit backend's tag (1 to 32 lower-case letters, digits and underscores, e.g. vault or transit:vault), kms:<key id | arn | alias> or none")
        }));
    }
    if tag == INTERNAL_TAG {
        return Err(refuse(format!("{given:?}: the tag {INTERNAL_TAG} names the internal OpenBao (HEGEMONY_OPENBAO_*); leave HEGEMONY_TF_STATE_KEY_BACKEND unset to use it")));
    }
    if RESERVED_TAGS.contains(&tag) {
        return Err(refuse(format!("{given:?}: {tag} is not a backend's tag; use none (the platform key), kms:<key id | arn | alias>, or a Transit backend's tag such as vault (or transit:vault)")));
    }
    let prefix = format!("HEGEMONY_TRANSIT_{}_", tag.to_ascii_uppercase());
    let set =
        |suffix: &&str| env(&format!("{prefix}{suffix}")).is_some_and(|v| !v.trim().is_empty());
    if !TRANSIT_SETTINGS.iter().any(set) {
        return Err(refuse(format!("{given:?} names the Transit backend tagged {tag}, and none of its settings is set: looked for {prefix}ADDR and {prefix}TOKEN_FILE (or {prefix}ROLE_ID_FILE and {prefix}SECRET_ID_FILE), and {prefix}MOUNT, {prefix}KEY, {prefix}NAMESPACE, {prefix}CA_FILE, {prefix}APPROLE_MOUNT")));
    }
    transit(env, &prefix, tag, false)
}

impl Config {
    /// Reads the settings through `env` (the process environment in production).
    ///
    /// # Errors
    /// The first setting that is out of range or malformed.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let max_state_bytes = integer(
            env,
            "HEGEMONY_TF_STATE_MAX_BYTES",
            DEFAULT_MAX_BYTES,
            MIN_MAX_BYTES..=LIMIT_MAX_BYTES,
        )?;
        let keep_versions = integer(
            env,
            "HEGEMONY_TF_STATE_KEEP_VERSIONS",
            DEFAULT_KEEP_VERSIONS,
            1..=u64::from(u32::MAX),
        )?;
        let run_end_grace_seconds = integer(
            env,
            "HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS",
            DEFAULT_RUN_END_GRACE_SECONDS,
            0..=86_400,
        )?;
        let deleted_retention_days = integer(
            env,
            "HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS",
            DEFAULT_DELETED_RETENTION_DAYS,
            0..=LIMIT_DELETED_RETENTION_DAYS,
        )?;
        let key_cache_size = integer(
            env,
            "HEGEMONY_TF_STATE_KEY_CACHE_SIZE",
            DEFAULT_KEY_CACHE_SIZE,
            0..=LIMIT_KEY_CACHE_SIZE,
        )?;
        let key_cache_seconds = integer(
            env,
            "HEGEMONY_TF_STATE_KEY_CACHE_SECONDS",
            DEFAULT_KEY_CACHE_SECONDS,
            0..=LIMIT_KEY_CACHE_SECONDS,
        )?;
        let platform = match env("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
            .filter(|v| !v.trim().is_empty())
        {
            Some(text) => Some(
                PlatformKey::from_base64(&text).map_err(|message| ConfigError {
                    variable: "HEGEMONY_TF_STATE_ENCRYPTION_KEY".into(),
                    message,
                })?,
            ),
            None => None,
        };
        let retired_keys = env("HEGEMONY_TF_STATE_RETIRED_KEYS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .enumerate()
            .map(|(n, text)| {
                PlatformKey::from_base64(text).map_err(|why| ConfigError {
                    variable: "HEGEMONY_TF_STATE_RETIRED_KEYS".into(),
                    message: format!("key {} of the comma-separated list: {why}", n + 1),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let internal_openbao = env("HEGEMONY_OPENBAO_ADDR")
            .filter(|v| !v.trim().is_empty())
            .map(|_| transit(env, "HEGEMONY_OPENBAO_", INTERNAL_TAG, true))
            .transpose()?;
        let backend = env("HEGEMONY_TF_STATE_KEY_BACKEND").filter(|v| !v.trim().is_empty());
        let refuse = |message: String| ConfigError {
            variable: "HEGEMONY_TF_STATE_KEY_BACKEND".into(),
            message,
        };
        let key = match backend.as_deref().map(str::trim) {
            Some("none") => platform.map_or(KeySetting::Unset, KeySetting::Platform),
            None => match &internal_openbao {
                Some(internal) => KeySetting::Transit {
                    backend: internal.clone(),
                    platform,
                },
                None => platform.map_or(KeySetting::Unset, KeySetting::Platform),
            },
            Some(other) if other.starts_with("kms:") => KeySetting::Kms {
                key: KeyTemplate::parse(&other["kms:".len()..]).map_err(refuse)?,
                platform,
            },
            Some(other) if other.starts_with("transit:") => {
                let tag = &other["transit:".len()..];
                KeySetting::Transit {
                    backend: named_transit(env, other, tag)?,
                    platform,
                }
            }
            // The spec names the backend by its tag alone: a bare tag is `transit:<tag>`.
            // `none` and the `kms:`/`transit:` forms are matched above, and a tag holds no
            // `:`, so a bare tag is never mistaken for them.
            Some(tag) => KeySetting::Transit {
                backend: named_transit(env, tag, tag)?,
                platform,
            },
        };
        let name = |variable| {
            env(variable)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let run_url_template = env("HEGEMONY_RUN_URL_TEMPLATE").filter(|v| !v.trim().is_empty());
        if let Some(template) = &run_url_template {
            if !template.contains("{run}") {
                return Err(ConfigError {
                    variable: "HEGEMONY_RUN_URL_TEMPLATE".into(),
                    message: format!("{template:?} has no {{run}} to replace with the run's id"),
                });
            }
        }
        let base = |variable: &'static str| {
            env(variable)
                .filter(|v| !v.trim().is_empty())
                .map(|v| base_url(variable, &v))
                .transpose()
        };
        let public_url = base("HEGEMONY_PUBLIC_URL")?;
        let container_url = base("HEGEMONY_CONTAINER_URL")?;
        let oidc_ca_pem = match name("HEGEMONY_OIDC_CA_FILE") {
            None => None,
            Some(path) => {
                let refuse = |message: String| ConfigError {
                    variable: "HEGEMONY_OIDC_CA_FILE".into(),
                    message,
                };
                let pem = std::fs::read(&path)
                    .map_err(|e| refuse(format!("cannot read the file {path}: {e}")))?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(refuse(format!("the file {path} holds no PEM certificate")));
                }
                Some(pem)
            }
        };
        let oidc_keys_max_age_seconds = integer(
            env,
            "HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS",
            DEFAULT_OIDC_KEYS_MAX_AGE_SECONDS,
            1..=LIMIT_OIDC_KEYS_MAX_AGE_SECONDS,
        )?;
        let oidc_allow_private_issuers =
            boolean(env, "HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", false)?;
        Ok(Self {
            max_state_bytes,
            keep_versions,
            run_end_grace_seconds,
            deleted_retention_days,
            key_cache_size,
            key_cache_seconds,
            run_url_template,
            public_url,
            container_url,
            key,
            retired_keys,
            internal_openbao,
            table: name("HEGEMONY_TF_STATE_TABLE"),
            bucket: name("HEGEMONY_TF_STATE_BUCKET"),
            oidc_ca_pem,
            oidc_keys_max_age_seconds,
            oidc_allow_private_issuers,
        })
    }

    /// The warning to give at start for a grace shorter than the rule allows, if any.
    pub fn grace_warning(&self) -> Option<String> {
        (self.run_end_grace_seconds < SAFE_RUN_END_GRACE_SECONDS).then(|| {
            format!(
                "HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS={} is under {SAFE_RUN_END_GRACE_SECONDS}: keep it longer than the sweep of a dead worker's step containers can take (two minutes + one sweep interval + the stop timeout + time for the API and Docker calls), or a lock can be freed while the tool still runs",
                self.run_end_grace_seconds
            )
        })
    }
}

#[cfg(test)]
mod tests;
