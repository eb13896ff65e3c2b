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
/// Below this the grace can free a lock while the tool still runs: two minutes (heartbeat) +
/// one sweep interval + the stop timeout (at most two minutes) + time for the API and Docker.
pub const SAFE_RUN_END_GRACE_SECONDS: u64 = 480;
/// The key cache's defaults: room for the versions a busy deployment reads within the age,
/// and an age that bounds how long a revoked grant or a sealed Transit key goes unnoticed.
pub const DEFAULT_KEY_CACHE_SIZE: u64 = 1024;
pub const LIMIT_KEY_CACHE_SIZE: u64 = 100_000;
pub const DEFAULT_KEY_CACHE_SECONDS: u64 = 300;
pub const LIMIT_KEY_CACHE_SECONDS: u64 = 3600;

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
        Ok(Self {
            max_state_bytes,
            keep_versions,
            run_end_grace_seconds,
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
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_env(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_without_settings() {
        let c = config(&[]).unwrap();
        assert_eq!(c.max_state_bytes, 32 * 1024 * 1024);
        assert_eq!(c.keep_versions, 50);
        assert!(matches!(c.key, KeySetting::Unset));
    }

    #[test]
    fn a_bad_value_names_the_variable_and_the_range() {
        for bad in ["0", "1023", "134217729", "lots", "-5"] {
            let err = config(&[("HEGEMONY_TF_STATE_MAX_BYTES", bad)]).unwrap_err();
            assert_eq!(err.variable, "HEGEMONY_TF_STATE_MAX_BYTES");
            assert!(err.message.contains("1024 to 134217728"), "{err}");
        }
        let err = config(&[("HEGEMONY_TF_STATE_KEEP_VERSIONS", "0")]).unwrap_err();
        assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEEP_VERSIONS");
    }

    #[test]
    fn the_key_cache_is_on_by_default_off_at_zero_and_bounded() {
        let c = config(&[]).unwrap();
        assert_eq!((c.key_cache_size, c.key_cache_seconds), (1024, 300));
        let off = config(&[
            ("HEGEMONY_TF_STATE_KEY_CACHE_SIZE", "0"),
            ("HEGEMONY_TF_STATE_KEY_CACHE_SECONDS", "0"),
        ])
        .unwrap();
        assert_eq!((off.key_cache_size, off.key_cache_seconds), (0, 0));
        for (variable, bad, range) in [
            ("HEGEMONY_TF_STATE_KEY_CACHE_SIZE", "100001", "0 to 100000"),
            ("HEGEMONY_TF_STATE_KEY_CACHE_SIZE", "-1", "0 to 100000"),
            ("HEGEMONY_TF_STATE_KEY_CACHE_SECONDS", "3601", "0 to 3600"),
            ("HEGEMONY_TF_STATE_KEY_CACHE_SECONDS", "5m", "0 to 3600"),
        ] {
            let err = config(&[(variable, bad)]).unwrap_err();
            assert_eq!(err.variable, variable);
            assert!(err.message.contains(range), "{err}");
        }
    }

    #[test]
    fn retired_keys_are_a_comma_separated_list_and_a_bad_one_is_named_by_its_place() {
        let (a, b) = (PlatformKey::generate(), PlatformKey::generate());
        let list = format!("{}, {},", *a.to_base64(), *b.to_base64());
        let c = config(&[("HEGEMONY_TF_STATE_RETIRED_KEYS", &list)]).unwrap();
        let ids: Vec<&str> = c.retired_keys.iter().map(PlatformKey::key_id).collect();
        assert_eq!(ids, [a.key_id(), b.key_id()]);
        let bad = format!("{},AAAA", *a.to_base64());
        let err = config(&[("HEGEMONY_TF_STATE_RETIRED_KEYS", &bad)]).unwrap_err();
        assert_eq!(err.variable, "HEGEMONY_TF_STATE_RETIRED_KEYS");
        assert!(err.message.starts_with("key 2 "), "{err}");
        assert!(config(&[]).unwrap().retired_keys.is_empty());
    }

    #[test]
    fn the_platform_key_must_be_32_bytes_of_base64() {
        let err = config(&[("HEGEMONY_TF_STATE_ENCRYPTION_KEY", "c2hvcnQ=")]).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("HEGEMONY_TF_STATE_ENCRYPTION_KEY: "));
        let key = PlatformKey::generate().to_base64();
        let c = config(&[("HEGEMONY_TF_STATE_ENCRYPTION_KEY", &key)]).unwrap();
        assert!(matches!(c.key, KeySetting::Platform(_)));
    }

    #[test]
    fn kms_takes_a_key_and_keeps_a_platform_key_for_old_versions() {
        let key = PlatformKey::generate().to_base64();
        let c = config(&[
            ("HEGEMONY_TF_STATE_KEY_BACKEND", "kms:alias/hs-{org}"),
            ("HEGEMONY_TF_STATE_ENCRYPTION_KEY", &key),
        ])
        .unwrap();
        match c.key {
            KeySetting::Kms { key, platform } => {
                assert_eq!(key.for_org("acme"), "alias/hs-acme");
                assert!(platform.is_some());
            }
            other => panic!("{other:?}"),
        }
        let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "kms:")]).unwrap_err();
        assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEY_BACKEND");
        let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "kms:1234-{org}")]).unwrap_err();
        assert!(err.message.contains("alias"), "{err}");
        let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "vault:x")]).unwrap_err();
        assert!(err.message.contains("kms:<key id | arn | alias>"), "{err}");
    }

    #[test]
    fn none_forces_the_platform_key() {
        let key = PlatformKey::generate().to_base64();
        let c = config(&[
            ("HEGEMONY_TF_STATE_KEY_BACKEND", "none"),
            ("HEGEMONY_TF_STATE_ENCRYPTION_KEY", &key),
        ])
        .unwrap();
        assert!(matches!(c.key, KeySetting::Platform(_)));
    }

    #[test]
    fn a_short_grace_is_accepted_with_a_warning_naming_the_rule() {
        let c = config(&[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "60")]).unwrap();
        assert_eq!(c.run_end_grace_seconds, 60);
        assert!(c
            .grace_warning()
            .unwrap()
            .contains("two minutes + one sweep interval"));
        assert!(config(&[]).unwrap().grace_warning().is_none());
        assert!(config(&[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "-1")]).is_err());
    }

    #[test]
    fn key_backends_are_none_kms_or_a_transit_tag() {
        assert!(config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "none")]).is_ok());
        for bad in ["vault:x", "Vault", "a-b", " kms", "transit"] {
            let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", bad)]).unwrap_err();
            assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEY_BACKEND", "{bad}");
            assert!(err.message.contains("kms:"), "{bad}: {err}");
        }
    }

    /// The spec's `HEGEMONY_TF_STATE_KEY_BACKEND=<tag>`: the tag alone names the same
    /// Transit backend as `transit:<tag>`, with the same settings.
    #[test]
    fn a_bare_tag_is_the_transit_backend_of_that_tag() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s.abc\n").unwrap();
        let settings = [
            (
                "HEGEMONY_TRANSIT_VAULT_ADDR",
                "https://bao.example.com:8200",
            ),
            ("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", token.to_str().unwrap()),
        ];
        for given in ["vault", "transit:vault"] {
            let mut vars = settings.to_vec();
            vars.push(("HEGEMONY_TF_STATE_KEY_BACKEND", given));
            match config(&vars).unwrap().key {
                KeySetting::Transit { backend, .. } => {
                    assert_eq!(backend.name(), "transit:vault", "{given}");
                    assert_eq!(backend.addr, "https://bao.example.com:8200");
                    assert!(!backend.create_keys);
                }
                other => panic!("{given}: {other:?}"),
            }
        }
    }

    /// A tag with nothing configured under it stops the start, naming where it looked.
    #[test]
    fn a_tag_without_settings_names_the_variables_it_looked_for() {
        for given in ["vault", "transit:vault"] {
            let err = config(&[
                ("HEGEMONY_TF_STATE_KEY_BACKEND", given),
                ("HEGEMONY_TRANSIT_OTHER_ADDR", "https://bao.example.com"),
            ])
            .unwrap_err();
            assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEY_BACKEND", "{given}");
            for looked in [
                "HEGEMONY_TRANSIT_VAULT_ADDR",
                "HEGEMONY_TRANSIT_VAULT_TOKEN_FILE",
                "HEGEMONY_TRANSIT_VAULT_ROLE_ID_FILE",
                "HEGEMONY_TRANSIT_VAULT_SECRET_ID_FILE",
            ] {
                assert!(err.message.contains(looked), "{given}: {err}");
            }
        }
    }

    /// The setting's own words are never a tag, in either form, so a bare tag cannot read
    /// as one of them (and `none` keeps meaning the platform key).
    #[test]
    fn the_settings_own_words_are_not_tags() {
        let key = PlatformKey::generate().to_base64();
        let c = config(&[
            ("HEGEMONY_TF_STATE_KEY_BACKEND", " none "),
            ("HEGEMONY_TF_STATE_ENCRYPTION_KEY", &key),
            ("HEGEMONY_TRANSIT_NONE_ADDR", "https://bao.example.com"),
        ])
        .unwrap();
        assert!(matches!(c.key, KeySetting::Platform(_)));
        for given in [
            "kms",
            "transit",
            "platform",
            "internal",
            "transit:none",
            "transit:kms",
            "transit:platform",
            "transit:transit",
        ] {
            let tag = given.trim_start_matches("transit:").to_ascii_uppercase();
            let err = config(&[
                ("HEGEMONY_TF_STATE_KEY_BACKEND", given),
                (
                    &format!("HEGEMONY_TRANSIT_{tag}_ADDR"),
                    "https://bao.example.com",
                ),
            ])
            .unwrap_err();
            assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEY_BACKEND", "{given}");
        }
    }

    #[test]
    fn a_named_transit_backend_takes_its_settings_by_tag() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s.abc\n").unwrap();
        let token = token.to_str().unwrap();
        let c = config(&[
            ("HEGEMONY_TF_STATE_KEY_BACKEND", "transit:vault"),
            (
                "HEGEMONY_TRANSIT_VAULT_ADDR",
                "https://bao.example.com:8200/",
            ),
            ("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", token),
            ("HEGEMONY_TRANSIT_VAULT_KEY", "state-{org}"),
        ])
        .unwrap();
        match c.key {
            KeySetting::Transit { backend, platform } => {
                assert_eq!(backend.addr, "https://bao.example.com:8200");
                assert_eq!(backend.mount, "transit");
                assert_eq!(backend.key_for("acme"), "state-acme");
                assert_eq!(backend.name(), "transit:vault");
                assert!(!backend.create_keys);
                assert!(platform.is_none());
            }
            other => panic!("{other:?}"),
        }
        let named = |extra: &[(&str, &str)]| {
            let mut vars = vec![("HEGEMONY_TF_STATE_KEY_BACKEND", "transit:vault")];
            vars.extend_from_slice(extra);
            config(&vars).unwrap_err()
        };
        let addr = ("HEGEMONY_TRANSIT_VAULT_ADDR", "https://bao.example.com");
        assert_eq!(named(&[]).variable, "HEGEMONY_TF_STATE_KEY_BACKEND");
        let no_addr = named(&[("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", token)]);
        assert_eq!(no_addr.variable, "HEGEMONY_TRANSIT_VAULT_ADDR");
        assert_eq!(named(&[addr]).variable, "HEGEMONY_TRANSIT_VAULT_TOKEN_FILE");
        let missing = named(&[
            addr,
            ("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", "/nonexistent/token"),
        ]);
        assert!(missing.message.contains("cannot read"), "{missing}");
        let half = named(&[addr, ("HEGEMONY_TRANSIT_VAULT_ROLE_ID_FILE", token)]);
        assert_eq!(half.variable, "HEGEMONY_TRANSIT_VAULT_SECRET_ID_FILE");
        let bad_key = named(&[
            addr,
            ("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", token),
            ("HEGEMONY_TRANSIT_VAULT_KEY", "a/b"),
        ]);
        assert_eq!(bad_key.variable, "HEGEMONY_TRANSIT_VAULT_KEY");
        let bad_ca = named(&[
            addr,
            ("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE", token),
            ("HEGEMONY_TRANSIT_VAULT_CA_FILE", token),
        ]);
        assert_eq!(bad_ca.variable, "HEGEMONY_TRANSIT_VAULT_CA_FILE");
        for tag in [
            "transit:",
            "transit:Vault",
            "transit:a-b",
            "transit:internal",
        ] {
            let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", tag)]).unwrap_err();
            assert_eq!(err.variable, "HEGEMONY_TF_STATE_KEY_BACKEND", "{tag}");
        }
    }

    #[test]
    fn the_internal_openbao_wraps_only_with_no_key_backend_set() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s.abc").unwrap();
        let internal = [
            ("HEGEMONY_OPENBAO_ADDR", "http://127.0.0.1:8200"),
            ("HEGEMONY_OPENBAO_TOKEN_FILE", token.to_str().unwrap()),
        ];
        let c = config(&internal).unwrap();
        match &c.key {
            KeySetting::Transit { backend, .. } => {
                assert_eq!(backend.tag, "internal");
                assert!(backend.create_keys);
                assert_eq!(backend.key_for("acme"), "hegemony-state-acme");
            }
            other => panic!("{other:?}"),
        }
        assert!(c.internal_openbao.is_some());
        let key = PlatformKey::generate().to_base64();
        let mut forced = internal.to_vec();
        forced.extend([
            ("HEGEMONY_TF_STATE_KEY_BACKEND", "none"),
            ("HEGEMONY_TF_STATE_ENCRYPTION_KEY", &key),
        ]);
        let c = config(&forced).unwrap();
        assert!(matches!(c.key, KeySetting::Platform(_)));
        assert!(c.internal_openbao.is_some(), "still opens what it wrapped");
        let mut one_key = internal.to_vec();
        one_key.push(("HEGEMONY_OPENBAO_KEY", "shared"));
        assert_eq!(
            config(&one_key).unwrap_err().variable,
            "HEGEMONY_OPENBAO_KEY"
        );
    }

    #[test]
    fn the_public_url_is_an_http_base_without_its_trailing_slash() {
        for (given, kept) in [
            ("https://state.example.com/", "https://state.example.com"),
            (
                "http://10.0.0.5:8080/prefix/",
                "http://10.0.0.5:8080/prefix",
            ),
        ] {
            let c = config(&[("HEGEMONY_PUBLIC_URL", given)]).unwrap();
            assert_eq!(c.public_url.as_deref(), Some(kept));
        }
        assert_eq!(config(&[]).unwrap().public_url, None);
        for bad in [
            "state.example.com",
            "ftp://x",
            "https://",
            "https://x/?a=1",
            "https://x/#f",
        ] {
            let e = config(&[("HEGEMONY_PUBLIC_URL", bad)]).unwrap_err();
            assert_eq!(e.variable, "HEGEMONY_PUBLIC_URL", "{bad}");
        }
    }

    #[test]
    fn the_container_url_is_checked_as_a_base_too() {
        let c = config(&[("HEGEMONY_CONTAINER_URL", "https://door.example.com/")]).unwrap();
        assert_eq!(c.container_url.as_deref(), Some("https://door.example.com"));
        assert_eq!(config(&[]).unwrap().container_url, None);
        let e = config(&[("HEGEMONY_CONTAINER_URL", "door.example.com")]).unwrap_err();
        assert_eq!(e.variable, "HEGEMONY_CONTAINER_URL");
    }
}
