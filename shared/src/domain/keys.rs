//! Key rotation's decisions: whether a version's key slot must move to the key in use (a
//! re-wrap), and how the versions of a state spread over keys and key versions (the report).

use std::collections::BTreeMap;

use serde::Serialize;

/// A Transit key id's key (`transit:<tag>:<key>`) and key version (`v<N>`).
fn transit_parts(key_id: &str) -> Option<(&str, u64)> {
    let rest = key_id.strip_prefix("transit:")?;
    let (key, version) = rest.rsplit_once(":v")?;
    Some((key, version.parse().ok()?))
}

/// Whether a version wrapped by `recorded` must be re-wrapped to reach `current`, the key id
/// a data key made now records. A Transit version already at the current key version, or
/// past it (the key rotated after `current` was read), is left alone, so no version is
/// wrapped twice; any other key id than `current` (an older platform key, another KMS key,
/// another backend) must move.
pub fn needs_rewrap(recorded: &str, current: &str) -> bool {
    if recorded == current {
        return false;
    }
    match (transit_parts(recorded), transit_parts(current)) {
        (Some((key, version)), Some((current_key, current_version))) if key == current_key => {
            version < current_version
        }
        _ => true,
    }
}

/// How many versions of one state one key id wraps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyUse {
    /// The key id: `transit:<tag>:<key>:v<N>`, `kms:<arn>` or `platform:<fingerprint>`.
    pub key: String,
    pub versions: u64,
    /// Whether these versions are behind the key in use: a re-wrap would move them.
    pub behind: bool,
}

/// The versions' key ids, counted per key id in key id order, each marked behind `current`
/// or not.
pub fn tally<'a>(keys: impl IntoIterator<Item = &'a str>, current: &str) -> Vec<KeyUse> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for key in keys {
        *counts.entry(key).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(key, versions)| KeyUse {
            key: key.to_owned(),
            versions,
            behind: needs_rewrap(key, current),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transit_version_moves_only_when_behind_the_current_key_version() {
        let now = "transit:bao:tf-acme:v3";
        assert!(needs_rewrap("transit:bao:tf-acme:v1", now));
        assert!(needs_rewrap("transit:bao:tf-acme:v2", now));
        assert!(!needs_rewrap(now, now));
        assert!(
            !needs_rewrap("transit:bao:tf-acme:v4", now),
            "rotated after the current version was read: already newer"
        );
        assert!(
            !needs_rewrap("transit:bao:tf-acme:v10", now),
            "versions compare as numbers"
        );
    }

    #[test]
    fn another_key_or_backend_always_moves() {
        let now = "transit:bao:tf-acme:v3";
        assert!(needs_rewrap("transit:bao:tf-other:v9", now));
        assert!(needs_rewrap("transit:internal:tf-acme:v9", now));
        assert!(needs_rewrap("platform:00aa", now));
        assert!(needs_rewrap("kms:arn:aws:kms:eu-west-1:1:key/a", now));
        assert!(needs_rewrap("platform:00aa", "platform:11bb"));
        assert!(!needs_rewrap("platform:11bb", "platform:11bb"));
        let kms = "kms:arn:aws:kms:eu-west-1:1:key/b";
        assert!(needs_rewrap("kms:arn:aws:kms:eu-west-1:1:key/a", kms));
        assert!(!needs_rewrap(kms, kms));
    }

    #[test]
    fn the_tally_counts_each_key_version_and_marks_those_behind() {
        let keys = [
            "transit:bao:tf:v1",
            "transit:bao:tf:v2",
            "transit:bao:tf:v1",
            "platform:00aa",
        ];
        let tally = tally(keys, "transit:bao:tf:v2");
        let rows: Vec<(&str, u64, bool)> = tally
            .iter()
            .map(|u| (u.key.as_str(), u.versions, u.behind))
            .collect();
        assert_eq!(
            rows,
            [
                ("platform:00aa", 1, true),
                ("transit:bao:tf:v1", 2, true),
                ("transit:bao:tf:v2", 1, false),
            ]
        );
    }
}
