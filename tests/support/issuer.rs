//! A real OpenID Connect issuer for the tests: HTTPS on a loopback port with a CA made here
//! (the server under test trusts it through `HEGEMONY_OIDC_CA_FILE`), serving a discovery
//! document and a JWK set of RS256 and ES256 keys it can rotate, and minting GitHub- and
//! GitLab-shaped ID tokens. It counts the fetches of its key set, so a test can hold the
//! server to its fetch limit.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Seconds since the epoch, as tokens write times.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// One of the issuer's signing keys.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    /// Its public half as a JWK.
    pub jwk: Value,
}

impl SigningKey {
    /// An RSA key from a fixture (test keys made once with `openssl genrsa -traditional`:
    /// ring, which signs here, cannot make RSA keys).
    fn rsa(fixture: &str, kid: &str) -> SigningKey {
        let path = crate::repo_root().join("tests/fixtures/oidc").join(fixture);
        let pem = std::fs::read_to_string(path).unwrap();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        let pair = RsaKeyPair::from_der(&der).unwrap();
        let public: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
        SigningKey {
            kid: kid.into(),
            alg: Algorithm::RS256,
            encoding: EncodingKey::from_rsa_der(&der),
            jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                        "n": b64(&public.n), "e": b64(&public.e)}),
        }
    }

    /// A new P-256 key.
    fn ec(kid: &str) -> SigningKey {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        // An uncompressed point: 0x04, then x and y.
        let point = pair.public_key().as_ref();
        SigningKey {
            kid: kid.into(),
            alg: Algorithm::ES256,
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                        "x": b64(&point[1..33]), "y": b64(&point[33..65])}),
        }
    }
}

struct Published {
    keys: Vec<SigningKey>,
    /// The key set's `Cache-Control` header, when it sends one.
    cache_control: Option<String>,
}

/// Each token a test issuer mints gets a `jti` of its own, as real issuers' do.
static NEXT_JTI: AtomicUsize = AtomicUsize::new(0);

fn jti() -> String {
    format!("j-{}-{}", now(), NEXT_JTI.fetch_add(1, Ordering::SeqCst))
}

/// The issuer, serving until dropped.
pub struct TestIssuer {
    /// `https://127.0.0.1:<port>`: the issuer's identifier, as its tokens' `iss`.
    pub url: String,
    dir: tempfile::TempDir,
    published: Arc<Mutex<Published>>,
    jwks_fetches: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// The RS256 key it starts with, the ES256 one, and the RS256 key a rotation brings.
    pub rsa: SigningKey,
    pub ec: SigningKey,
    pub rotated: SigningKey,
}

impl TestIssuer {
    pub fn start() -> TestIssuer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("https://127.0.0.1:{port}");
        let dir = tempfile::tempdir().unwrap();
        // A CA of the test's own, and the issuer's certificate for 127.0.0.1 signed by it.
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "hegemony test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        let rsa = SigningKey::rsa("rsa-1.pem", "rsa-1");
        let ec = SigningKey::ec("ec-1");
        let rotated = SigningKey::rsa("rsa-2.pem", "rsa-2");
        let published = Arc::new(Mutex::new(Published {
            keys: vec![rsa.clone(), ec.clone()],
            cache_control: None,
        }));
        let jwks_fetches = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (config, published, fetches, stop, url) = (
                Arc::new(config),
                published.clone(),
                jwks_fetches.clone(),
                stop.clone(),
                url.clone(),
            );
            listener.set_nonblocking(false).unwrap();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (config, published, fetches, url) = (
                        config.clone(),
                        published.clone(),
                        fetches.clone(),
                        url.clone(),
                    );
                    std::thread::spawn(move || serve(stream, config, &published, &fetches, &url));
                }
            });
        }
        TestIssuer {
            url,
            dir,
            published,
            jwks_fetches,
            stop,
            rsa,
            ec,
            rotated,
        }
    }

    /// The CA certificate (PEM) the issuer's certificate chains to.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// How many times its JWK set was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Publishes the rotated key beside the others: tokens signed with it name a kid the
    /// server has not seen yet.
    pub fn rotate(&self) {
        self.published
            .lock()
            .unwrap()
            .keys
            .push(self.rotated.clone());
    }

    /// Stops publishing `key` (an issuer withdrawing a leaked key): tokens signed with it
    /// verify only while a server still believes the keys it fetched before.
    pub fn withdraw(&self, key: &SigningKey) {
        self.published
            .lock()
            .unwrap()
            .keys
            .retain(|k| k.kid != key.kid);
    }

    /// Sends `value` as the key set's `Cache-Control` from now on.
    pub fn cache_control(&self, value: &str) {
        self.published.lock().unwrap().cache_control = Some(value.to_owned());
    }

    /// A token of `claims` signed with `key`.
    pub fn mint(&self, key: &SigningKey, claims: &Value) -> String {
        let mut header = Header::new(key.alg);
        header.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
    }

    /// GitHub Actions' claims for a job of `acme/net` (repository 123, owner 77) on main,
    /// issued now and valid five minutes, as its ID tokens carry them.
    pub fn github_claims(&self, audience: &str) -> Value {
        let now = now();
        json!({
            "iss": self.url, "aud": audience,
            "sub": "repo:acme/net:environment:production",
            "iat": now, "nbf": now, "exp": now + 300, "jti": jti(),
            "repository": "acme/net", "repository_id": "123",
            "repository_owner": "acme", "repository_owner_id": "77",
            "ref": "refs/heads/main", "ref_type": "branch", "sha": "0123abcd",
            "environment": "production", "workflow": "deploy",
            "job_workflow_ref": "acme/net/.github/workflows/deploy.yml@refs/heads/main",
            "run_id": "9001", "run_number": "12", "run_attempt": "1",
            "event_name": "push", "actor": "alice",
        })
    }

    /// GitLab CI's claims for a job of project `acme/net` (id 42, group 7) on a protected
    /// main, issued now and valid five minutes.
    pub fn gitlab_claims(&self, audience: &str) -> Value {
        let now = now();
        json!({
            "iss": self.url, "aud": audience,
            "sub": "project_path:acme/net:ref_type:branch:ref:main",
            "iat": now, "nbf": now, "exp": now + 300, "jti": jti(),
            "namespace_id": "7", "namespace_path": "acme",
            "project_id": "42", "project_path": "acme/net",
            "user_login": "alice", "pipeline_id": "555", "pipeline_source": "push",
            "job_id": "8080", "ref": "main", "ref_type": "branch", "ref_protected": "true",
            "environment": "production", "sha": "4567cdef",
        })
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the stop.
        let _ = std::net::TcpStream::connect(self.url.trim_start_matches("https://"));
    }
}

/// Answers one connection: the discovery document, the key set, or 404; then closes.
fn serve(
    stream: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    published: &Mutex<Published>,
    fetches: &AtomicUsize,
    url: &str,
) {
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(&mut tls);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The head's other lines, up to the blank one (these requests carry no body).
    for _ in 0..100 {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let mut extra = String::new();
    let (status, body) = match path {
        "/.well-known/openid-configuration" => (
            "200 OK",
            json!({"issuer": url, "jwks_uri": format!("{url}/jwks"),
                   "id_token_signing_alg_values_supported": ["RS256", "ES256"]})
            .to_string(),
        ),
        "/jwks" => {
            fetches.fetch_add(1, Ordering::SeqCst);
            let published = published.lock().unwrap();
            if let Some(value) = &published.cache_control {
                extra = format!("cache-control: {value}\r\n");
            }
            let keys: Vec<Value> = published.keys.iter().map(|k| k.jwk.clone()).collect();
            ("200 OK", json!({ "keys": keys }).to_string())
        }
        _ => ("404 Not Found", "{}".to_owned()),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(answer.as_bytes());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}
