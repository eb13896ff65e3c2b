//! The environment settings (DESIGN section 11), checked at start: a bad value stops the
//! process with a message naming the variable and its allowed range.

use crate::crypto::PlatformKey;
use crate::key_template::KeyTemplate;

/// The default and largest state size.
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;
pub const MIN_MAX_BYTES: u64 = 1024;
pub const LIMIT_MAX_BYTES: u64 = 128 * 1024 * 1024;
pub const DEFAULT_KEEP_VERSIONS: u64 = 50;
pub const DEFAULT_RUN_END_GRACE_SECONDS: u64 = 600;
/// Below this the grace can free a lock while the tool still runs: two minutes (heartbeat) +
/// one sweep interval + the stop timeout (at most two minutes) + time for the API and Docker.
pub const SAFE_RUN_END_GRACE_SECONDS: u64 = 480;

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
    /// `HEGEMONY_RUN_URL_TEMPLATE`: a run's link, `{run}` replaced by its id.
    pub run_url_template: Option<String>,
    /// `HEGEMONY_PUBLIC_URL`: the API's public base, without a trailing slash.
    pub public_url: Option<String>,
    /// `HEGEMONY_CONTAINER_URL`: the container front door's base, without a trailing slash,
    /// where the functions send reads too large for them.
    pub container_url: Option<String>,
    pub key: KeySetting,
    /// `HEGEMONY_TF_STATE_TABLE`: the DynamoDB table of the AWS store.
    pub table: Option<String>,
    /// `HEGEMONY_TF_STATE_BUCKET`: the S3 bucket of the AWS store.
    pub bucket: Option<String>,
}

/// A base URL setting (`HEGEMONY_PUBLIC_URL`, `HEGEMONY_CONTAINER_URL`) checked: an
/// absolute http(s) URL with a host, no query, fragment or white space, returned without its
/// trailing slashes so paths append to it.
fn base_url(variable: &'static str, value: &str) -> Result<String, ConfigError> {
    let refuse = |why: &str| {
        ConfigError {
        variable,
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
    pub variable: &'static str,
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
        variable,
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
        let platform = match env("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
            .filter(|v| !v.trim().is_empty())
        {
            Some(text) => Some(
                PlatformKey::from_base64(&text).map_err(|message| ConfigError {
                    variable: "HEGEMONY_TF_STATE_ENCRYPTION_KEY",
                    message,
                })?,
            ),
            None => None,
        };
        let backend = env("HEGEMONY_TF_STATE_KEY_BACKEND").filter(|v| !v.trim().is_empty());
        let key = match backend.as_deref().map(str::trim) {
            None | Some("none") => platform.map_or(KeySetting::Unset, KeySetting::Platform),
            Some(other) if other.starts_with("kms:") => KeySetting::Kms {
                key: KeyTemplate::parse(&other["kms:".len()..]).map_err(|message| ConfigError {
                    variable: "HEGEMONY_TF_STATE_KEY_BACKEND",
                    message,
                })?,
                platform,
            },
            Some(other) => {
                return Err(ConfigError {
                    variable: "HEGEMONY_TF_STATE_KEY_BACKEND",
                    message: format!(
                        "{other:?} is not allowed: use kms:<key id | arn | alias> or none"
                    ),
                })
            }
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
                    variable: "HEGEMONY_RUN_URL_TEMPLATE",
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
            run_url_template,
            public_url,
            container_url,
            key,
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
    fn key_backends_are_none_or_kms() {
        assert!(config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "none")]).is_ok());
        let err = config(&[("HEGEMONY_TF_STATE_KEY_BACKEND", "vault")]).unwrap_err();
        assert!(err.message.contains("kms:"));
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
