//! OpenID Connect ID tokens (compact JWS): what a token says before it is trusted (its
//! issuer, to find the policies that name it, and its key id), checking its signature with
//! one of its issuer's keys, and checking its times and audience against a given `now`. No
//! I/O and no clock: the keys and the time come in as arguments. Only asymmetric algorithms
//! are taken, so neither `none` nor an HMAC "signed" with a public key can pass.

use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::domain::untrusted::shown;
use crate::domain::Timestamp;

/// The algorithms a token may be signed with: RSA (PKCS#1 v1.5 and PSS) and ECDSA, the ones
/// GitHub, GitLab and the common CI issuers use. Never `none`, never an HMAC.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// The leeway on `exp`, `nbf` and `iat` for clocks that differ a little.
pub const LEEWAY_SECONDS: i64 = 60;

/// The longest ID token read at all: CI tokens are 1-2 KB.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The longest issuer taken, as a policy's issuer is bounded: an overlong `iss` is refused
/// before any store is asked for its policies (a key that long is refused by DynamoDB).
pub const MAX_ISSUER_BYTES: usize = 512;

/// The latest time a claim may name: the end of year 9999, so arithmetic on any time taken
/// (a leeway added, a lifetime subtracted) cannot overflow.
const MAX_TIME: i64 = 253_402_300_799;

/// Why a token was not taken, in words for the log and the caller (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenRefused(pub String);

fn refused(reason: impl Into<String>) -> TokenRefused {
    TokenRefused(reason.into())
}

/// What a token says of itself before it is verified: enough to find its issuer's policies
/// and key, and to name it in a log line. Nothing here may be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    pub issuer: String,
    pub key_id: Option<String>,
    /// The header's `alg` as written, for the refusal of one outside [`ALGORITHMS`].
    pub alg: String,
    pub claims: Map<String, Value>,
}

/// Reads a compact JWS's header and claims without checking anything but their form.
///
/// # Errors
/// When it is not three base64url parts whose first two are JSON objects, or has no `iss`.
pub fn unverified(token: &str) -> Result<Unverified, TokenRefused> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(refused(format!(
            "the ID token is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header, payload, _signature] = parts[..] else {
        return Err(refused(
            "the ID token is not a signed JWT (three base64url parts joined by dots)",
        ));
    };
    let object = |part: &str, what: &str| -> Result<Map<String, Value>, TokenRefused> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part.trim_end_matches('='))
            .map_err(|_| refused(format!("the ID token's {what} is not base64url")))?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(refused(format!(
                "the ID token's {what} is not a JSON object"
            ))),
        }
    };
    let header = object(header, "header")?;
    let claims = object(payload, "payload")?;
    let issuer = match claims.get("iss") {
        Some(Value::String(iss)) if !iss.is_empty() => iss.clone(),
        _ => return Err(refused("the ID token has no issuer (iss)")),
    };
    let host = issuer
        .strip_prefix("https://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("");
    if issuer.len() > MAX_ISSUER_BYTES
        || host.is_empty()
        || issuer.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(refused(format!(
            "the ID token's issuer (iss) is not an https:// URL of at most {MAX_ISSUER_BYTES} bytes"
        )));
    }
    Ok(Unverified {
        issuer,
        key_id: header.get("kid").and_then(Value::as_str).map(str::to_owned),
        alg: header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        claims,
    })
}

/// Whether `alg` (as a header writes it) is one of [`ALGORITHMS`].
///
/// # Errors
/// Naming the algorithm and the ones taken.
pub fn allowed_algorithm(alg: &str) -> Result<Algorithm, TokenRefused> {
    ALGORITHMS
        .iter()
        .copied()
        .find(|a| format!("{a:?}") == alg)
        .ok_or_else(|| {
            refused(format!(
                "the ID token is signed with \"{}\", which is not taken: only RS256, RS384, PS256, ES256 and ES384 (never none or an HMAC)",
                shown(alg)
            ))
        })
}

/// An issuer's signing keys, as its `jwks_uri` serves them.
#[derive(Debug, Clone)]
pub struct SigningKeys(JwkSet);

impl SigningKeys {
    /// # Errors
    /// When `text` is not a JWK set.
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text)
            .map(SigningKeys)
            .map_err(|e| format!("not a JWK set: {e}"))
    }

    /// The key of id `kid`.
    pub fn find(&self, kid: &str) -> Option<&Jwk> {
        self.0.find(kid)
    }
}

/// Checks the token's signature with `key` under `alg` (already one of [`ALGORITHMS`]), and
/// returns its claims.
///
/// # Errors
/// A key of another kind than the algorithm's, or a signature that does not verify.
pub fn verify_signature(
    token: &str,
    alg: Algorithm,
    key: &Jwk,
) -> Result<Map<String, Value>, TokenRefused> {
    let key = DecodingKey::from_jwk(key).map_err(|e| {
        refused(format!(
            "the issuer's key cannot check this token: {}",
            shown(&e.to_string())
        ))
    })?;
    // Times, issuer and audience are checked by `check_claims` against the service's clock;
    // the library checks the signature, and that the key fits the algorithm.
    let mut validation = Validation::new(alg);
    validation.algorithms = vec![alg];
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map(|data| data.claims)
        // The library's words may quote the unverified header (an unknown variant of its
        // `jwk`): escaped and cut like every unverified text.
        .map_err(|e| {
            refused(format!(
                "the ID token's signature does not verify: {}",
                shown(&e.to_string())
            ))
        })
}

/// A claim that is a number of seconds since the epoch, from 0 to the end of year 9999
/// (a fraction is dropped): anything else is not a time, so no check on it can overflow.
fn seconds(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, TokenRefused> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let in_range = value
        .as_i64()
        .or_else(|| {
            value
                .as_f64()
                .filter(|f| f.is_finite() && (0.0..=MAX_TIME as f64).contains(f))
                .map(|f| f as i64)
        })
        .filter(|t| (0..=MAX_TIME).contains(t));
    in_range.map(Some).ok_or_else(|| {
        refused(format!(
            "the ID token's {name} is not a time (seconds since 1970, before the year 10000)"
        ))
    })
}

/// What an ID token is known by for "used once": its issuer and `jti` where it has one,
/// else its signed part (header and payload: an ECDSA signature can be rewritten into
/// another that verifies too, so the signature must not make a second token of the same
/// one), digested (hex SHA-256), so the mark is of a bounded size and holds nothing of the
/// token.
pub fn replay_key(token: &str, issuer: &str, claims: &Map<String, Value>) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    match claims
        .get("jti")
        .and_then(Value::as_str)
        .filter(|j| !j.is_empty())
    {
        Some(jti) => {
            digest.update(b"jti\n");
            digest.update(issuer.as_bytes());
            digest.update(b"\n");
            digest.update(jti.as_bytes());
        }
        None => {
            let signed = token.rfind('.').map_or(token, |dot| &token[..dot]);
            digest.update(b"token\n");
            digest.update(signed.as_bytes());
        }
    }
    crate::ids::hex(&digest.finalize())
}

/// The audiences a token carries: `aud` as a string or a list of strings.
pub fn audiences(claims: &Map<String, Value>) -> Vec<String> {
    match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The times of a verified token, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// From `nbf`, else `iat`: when the token began to be valid.
    pub from: i64,
    pub expires: i64,
}

impl Lifetime {
    /// How long the issuer made it valid, in seconds.
    pub fn seconds(&self) -> i64 {
        self.expires - self.from
    }
}

/// Checks a verified token's issuer (exactly `issuer`) and its times against `now`, with
/// [`LEEWAY_SECONDS`]: `exp` is required and must not have passed, `nbf` must have come,
/// and `iat` (required) must not be in the future.
///
/// # Errors
/// The first check that fails, in words.
pub fn check_claims(
    claims: &Map<String, Value>,
    issuer: &str,
    now: Timestamp,
) -> Result<Lifetime, TokenRefused> {
    if claims.get("iss").and_then(Value::as_str) != Some(issuer) {
        return Err(refused("the ID token's issuer changed between reads"));
    }
    let now = now.unix_timestamp();
    let expires =
        seconds(claims, "exp")?.ok_or_else(|| refused("the ID token has no expiry (exp)"))?;
    let issued =
        seconds(claims, "iat")?.ok_or_else(|| refused("the ID token has no issue time (iat)"))?;
    let not_before = seconds(claims, "nbf")?;
    if expires + LEEWAY_SECONDS <= now {
        return Err(refused(format!(
            "the ID token expired {} seconds ago: request a new one",
            now - expires
        )));
    }
    if let Some(nbf) = not_before {
        if nbf - LEEWAY_SECONDS > now {
            return Err(refused(format!(
                "the ID token is not valid yet (nbf is {} seconds from now)",
                nbf - now
            )));
        }
    }
    if issued - LEEWAY_SECONDS > now {
        return Err(refused(format!(
            "the ID token was issued {} seconds in the future (iat)",
            issued - now
        )));
    }
    Ok(Lifetime {
        from: not_before.map_or(issued, |nbf| nbf.max(issued)),
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn encode(value: &Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    }

    fn token(header: Value, claims: Value) -> String {
        format!("{}.{}.c2ln", encode(&header), encode(&claims))
    }

    #[test]
    fn reads_the_issuer_and_key_id_before_anything_is_trusted() {
        let t = token(
            json!({"alg": "RS256", "kid": "k1"}),
            json!({"iss": "https://issuer.example", "sub": "s"}),
        );
        let u = unverified(&t).unwrap();
        assert_eq!(
            (u.issuer.as_str(), u.key_id.as_deref(), u.alg.as_str()),
            ("https://issuer.example", Some("k1"), "RS256")
        );
        assert!(unverified("a.b").is_err());
        assert!(unverified(&token(json!({"alg": "RS256"}), json!({"sub": "s"}))).is_err());
        assert!(unverified(&format!("{}.!!.x", encode(&json!({})))).is_err());
    }

    #[test]
    fn only_asymmetric_algorithms_are_taken() {
        for alg in ["RS256", "RS384", "PS256", "ES256", "ES384"] {
            assert!(allowed_algorithm(alg).is_ok(), "{alg}");
        }
        for alg in ["none", "HS256", "HS384", "HS512", "", "rs256"] {
            assert!(allowed_algorithm(alg).is_err(), "{alg}");
        }
    }

    const NOW: Timestamp = datetime!(2026-12-02 10:00:00 UTC);

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn times_are_checked_with_a_minute_of_leeway() {
        let now = NOW.unix_timestamp();
        let iss = "https://issuer.example";
        let ok = claims(json!({"iss": iss, "iat": now - 10, "exp": now + 290}));
        assert_eq!(
            check_claims(&ok, iss, NOW).unwrap(),
            Lifetime {
                from: now - 10,
                expires: now + 290
            }
        );
        let just_expired = claims(json!({"iss": iss, "iat": now - 400, "exp": now - 59}));
        assert!(
            check_claims(&just_expired, iss, NOW).is_ok(),
            "within the leeway"
        );
        let expired = claims(json!({"iss": iss, "iat": now - 400, "exp": now - 60}));
        assert!(check_claims(&expired, iss, NOW)
            .unwrap_err()
            .0
            .contains("expired"));
        let early = claims(json!({"iss": iss, "iat": now, "nbf": now + 61, "exp": now + 600}));
        assert!(check_claims(&early, iss, NOW)
            .unwrap_err()
            .0
            .contains("not valid yet"));
        let future = claims(json!({"iss": iss, "iat": now + 61, "exp": now + 600}));
        assert!(check_claims(&future, iss, NOW)
            .unwrap_err()
            .0
            .contains("future"));
        let no_exp = claims(json!({"iss": iss, "iat": now}));
        assert!(check_claims(&no_exp, iss, NOW).is_err());
        let other = claims(json!({"iss": "https://other", "iat": now, "exp": now + 60}));
        assert!(check_claims(&other, iss, NOW).is_err());
    }

    #[test]
    fn audiences_are_a_string_or_a_list() {
        assert_eq!(audiences(&claims(json!({"aud": "a"}))), ["a"]);
        assert_eq!(
            audiences(&claims(json!({"aud": ["a", 1, "b"]}))),
            ["a", "b"]
        );
        assert!(audiences(&claims(json!({}))).is_empty());
    }

    #[test]
    fn times_near_the_largest_number_are_a_plain_refusal() {
        let iss = "https://issuer.example";
        let now = NOW.unix_timestamp();
        for exp in [
            json!(i64::MAX),
            json!(u64::MAX),
            json!(1e300),
            json!(-1),
            json!(i64::MIN),
        ] {
            let c = claims(json!({"iss": iss, "iat": now, "exp": exp}));
            let refused = check_claims(&c, iss, NOW).unwrap_err().0;
            assert!(refused.contains("not a time"), "{exp}: {refused}");
        }
        let c = claims(json!({"iss": iss, "iat": i64::MIN, "nbf": i64::MAX, "exp": now + 60}));
        assert!(check_claims(&c, iss, NOW).is_err());
        let fraction =
            claims(json!({"iss": iss, "iat": now as f64 + 0.5, "exp": now as f64 + 60.5}));
        assert!(check_claims(&fraction, iss, NOW).is_ok());
    }

    #[test]
    fn an_issuer_is_a_short_https_url_before_anything_else_is_read() {
        let header = json!({"alg": "RS256", "kid": "k1"});
        let long = format!("https://{}.example", "a".repeat(MAX_ISSUER_BYTES));
        for bad in [
            long.as_str(),
            "http://issuer.example",
            "issuer",
            "https://",
            "https://a\nb",
        ] {
            let refused = unverified(&token(header.clone(), json!({"iss": bad}))).unwrap_err();
            assert!(
                refused.0.contains("https:// URL of at most 512 bytes"),
                "{bad}"
            );
        }
        assert!(unverified(&token(
            header,
            json!({"iss": "https://gitlab.example.com/sub"})
        ))
        .is_ok());
    }

    #[test]
    fn a_tokens_replay_key_is_its_issuer_and_jti_or_the_whole_token() {
        let with_jti = claims(json!({"jti": "j-1"}));
        assert_eq!(
            replay_key("a.b.c", "https://i", &with_jti),
            replay_key("x.y.z", "https://i", &with_jti)
        );
        assert_ne!(
            replay_key("a.b.c", "https://i", &with_jti),
            replay_key("a.b.c", "https://other", &with_jti)
        );
        let none = claims(json!({}));
        assert_ne!(
            replay_key("a.b.c", "https://i", &none),
            replay_key("a.d.c", "https://i", &none)
        );
        assert_eq!(
            replay_key("a.b.c", "https://i", &none),
            replay_key("a.b.other-signature", "https://i", &none),
            "a rewritten signature is the same token"
        );
        assert_eq!(replay_key("a.b.c", "https://i", &none).len(), 64);
    }
}
