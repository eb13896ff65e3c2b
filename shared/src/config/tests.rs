//! The unit tests of `config`, beside it so that the file holds its code alone.

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
    assert_eq!(c.deleted_retention_days, 7);
    assert!(matches!(c.key, KeySetting::Unset));
}

#[test]
fn the_deleted_retention_takes_zero_and_refuses_past_ten_years() {
    let c = config(&[("HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS", "0")]).unwrap();
    assert_eq!(c.deleted_retention_days, 0);
    let err = config(&[("HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS", "3651")]).unwrap_err();
    assert_eq!(err.variable, "HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS");
    assert!(err.message.contains("0 to 3650"), "{err}");
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

#[test]
fn the_oidc_keys_age_and_private_issuers_are_checked_settings() {
    let c = config(&[]).unwrap();
    assert_eq!(c.oidc_keys_max_age_seconds, 600);
    assert!(!c.oidc_allow_private_issuers);
    let c = config(&[
        ("HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS", "30"),
        ("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "true"),
    ])
    .unwrap();
    assert_eq!(c.oidc_keys_max_age_seconds, 30);
    assert!(c.oidc_allow_private_issuers);
    // An empty value is not set, as unit and compose files write it.
    let c = config(&[("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "")]).unwrap();
    assert!(!c.oidc_allow_private_issuers);
    for bad in ["0", "86401", "soon"] {
        let err = config(&[("HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS", bad)]).unwrap_err();
        assert_eq!(err.variable, "HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS");
        assert!(err.message.contains("1 to 86400"), "{err}");
    }
    let err = config(&[("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "maybe")]).unwrap_err();
    assert_eq!(err.variable, "HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS");
    assert!(err.message.contains("true or false"), "{err}");
}
