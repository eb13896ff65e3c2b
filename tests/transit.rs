//! The Transit key backends against a real OpenBao (`bao server -dev`): a named backend
//! (by its tag alone or as `transit:<tag>`; a tag without settings stops the start), the
//! internal OpenBao with a key per org, a derived key refusing another state's context, the
//! engine sealed, stopped or refusing (503 with Retry-After, nothing written, never another
//! key), a move from the platform key to Transit, real Terraform through it all, and
//! rotation: `keys rewrap` after a key rotation (the old key version then retired), a move
//! to Transit with `--to` (the platform key then removed), and a re-wrap killed half way.

use hegemony_state::adapters::transit::TransitKeys;
use hegemony_state::ports::{KeyContext, KeyError, KeyOpener, KeyService};
use hegemony_state::transit_settings::{TransitAuth, TransitSettings};
use hegemony_state_blackbox::bao::Bao;
use hegemony_state_blackbox::*;
use serde_json::Value;

fn serve(env: &[(String, String)]) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Server::start_with(&env)
}

/// A state of one bucket: its save indexes it, so the org gets its inventory key.
fn bucket_doc(serial: u64) -> String {
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"l-b","outputs":{{}},"resources":[{{"mode":"managed","type":"aws_s3_bucket","name":"logs","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"id":"logs-{serial}"}}}}]}}]}}"#
    )
}

fn versions(api: &Api, token: &str, state: &str) -> Vec<Value> {
    api.json("GET", &format!("/api/tf-states/{state}/versions"), token)["versions"]
        .as_array()
        .unwrap()
        .clone()
}

fn content(api: &Api, token: &str, state: &str, version: u64) -> Response {
    api.request(
        "GET",
        &format!("/api/tf-states/{state}/versions/{version}/content"),
        Some(token),
    )
    .send()
    .unwrap()
}

fn save(api: &Api, token: &str, state: &str, serial: u64) -> Response {
    api.post_state(
        token,
        state,
        None,
        state_doc(serial, "l-1", &format!("v{serial}")),
    )
}

/// A 503 the tools retry: `unavailable` with Retry-After.
fn assert_retryable(r: Response) -> String {
    assert_eq!(r.status(), 503);
    assert!(r.headers().get("retry-after").is_some(), "no Retry-After");
    let (code, message) = error_body(r).expect(503);
    assert_eq!(code, "unavailable");
    message
}

/// The log holds a WARNING line with `reason`.
fn warned(server: &Server, reason: &str) -> bool {
    eventually(std::time::Duration::from_secs(5), || {
        server
            .logs()
            .lines()
            .any(|l| l.contains("WARN") && l.contains(reason))
    })
}

/// `transit:vault` wraps each version with the operator's key: the version records the
/// engine, key and key version, the list and the audit say `transit`, and an org whose key
/// the operator did not create is refused (never created, never another key).
#[test]
fn a_named_backend_wraps_each_version_and_the_list_shows_transit() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let server = serve(&bao.named_env("vault", &bao.root_token_file(), "state-{org}"));
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    assert_eq!(save(&api, &admin, "net", 2).status(), 200);
    let listed = versions(&api, &admin, "net");
    assert_eq!(listed.len(), 2);
    for v in &listed {
        assert_eq!(v["key_backend"], "transit");
        assert_eq!(v["key"], "transit:vault:state-acme:v1");
    }
    let got = api.get_state(&admin, "net");
    assert_eq!(got.status(), 200);
    assert_eq!(got.text().unwrap(), state_doc(2, "l-1", "v2"));
    let audit = api.json("GET", "/api/tf-states/net/audit", &admin);
    let created: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "version.created")
        .collect();
    assert_eq!(created.len(), 2);
    assert!(created
        .iter()
        .all(|e| e["detail"]["key_backend"] == "transit"));

    let other = server.token("globex", "root", "admin");
    let message = assert_retryable(save(&api, &other, "net", 1));
    assert!(message.contains("state-globex does not exist"), "{message}");
    assert!(!bao.keys().contains(&"state-globex".to_owned()));
    assert!(warned(&server, "state-globex does not exist"));
}

/// An AppRole login with the policy the configuration page gives: the service logs in with
/// the role id and secret id from their files, makes the org's key (internal OpenBao) and
/// wraps and opens under it.
#[test]
fn an_approle_login_with_the_documented_policy_wraps_and_opens() {
    let bao = Bao::start();
    let (role, secret) = bao.approle_files(
        "hegemony-state",
        r#"
path "transit/keys/hegemony-state-*"              { capabilities = ["read", "create", "update"] }
path "transit/datakey/plaintext/hegemony-state-*" { capabilities = ["update"] }
path "transit/decrypt/hegemony-state-*"           { capabilities = ["update"] }
"#,
    );
    let server = serve(&[
        ("HEGEMONY_OPENBAO_ADDR".into(), bao.addr.clone()),
        ("HEGEMONY_OPENBAO_ROLE_ID_FILE".into(), role),
        ("HEGEMONY_OPENBAO_SECRET_ID_FILE".into(), secret),
    ]);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    let saved = save(&api, &admin, "net", 1);
    assert_eq!(saved.status(), 200, "{}", server.logs());
    assert_eq!(
        api.get_state(&admin, "net").text().unwrap(),
        state_doc(1, "l-1", "v1")
    );
    assert_eq!(bao.keys(), ["hegemony-state-acme"]);
}

/// With no key backend set, the internal OpenBao wraps: one key per org, created on first
/// use, derived.
#[test]
fn the_internal_openbao_keeps_one_key_per_org_created_on_first_use() {
    let bao = Bao::start();
    let server = serve(&bao.internal_env(&bao.root_token_file()));
    let api = Api::new(&server);
    for org in ["acme", "globex"] {
        let admin = server.token(org, "root", "admin");
        assert_eq!(save(&api, &admin, "net", 1).status(), 200);
        assert_eq!(save(&api, &admin, "net", 2).status(), 200);
        let listed = versions(&api, &admin, "net");
        assert_eq!(
            listed[0]["key"],
            format!("transit:internal:hegemony-state-{org}:v1")
        );
        assert_eq!(
            api.get_state(&admin, "net").text().unwrap(),
            state_doc(2, "l-1", "v2")
        );
    }
    let mut keys = bao.keys();
    keys.sort();
    assert_eq!(keys, ["hegemony-state-acme", "hegemony-state-globex"]);
    let key = bao.ok(&["read", "-format=json", "transit/keys/hegemony-state-acme"]);
    let key: Value = serde_json::from_str(&key).unwrap();
    assert_eq!(key["data"]["derived"], true);
}

fn adapter(bao: &Bao, create_keys: bool) -> TransitKeys {
    TransitKeys::new(TransitSettings {
        tag: "internal".into(),
        addr: bao.addr.clone(),
        auth: TransitAuth::Token {
            file: bao.root_token_file().into(),
        },
        mount: "transit".into(),
        key: "hegemony-state-{org}".into(),
        namespace: None,
        ca_pem: None,
        create_keys,
    })
    .unwrap()
}

/// Two servers making the same org's key at once end with one key of one version, and both
/// data keys open; a wrapped key does not open under another state's context.
#[test]
fn keys_are_created_once_and_a_wrapped_key_opens_for_its_own_state_only() {
    let bao = Bao::start();
    let (one, two) = (adapter(&bao, true), adapter(&bao, true));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let net = KeyContext {
        org: "acme",
        state: "net",
    };
    let (a, b) = runtime.block_on(async { tokio::join!(one.data_key(&net), two.data_key(&net)) });
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(bao.keys(), ["hegemony-state-acme"]);
    assert_eq!(a.key_id, "transit:internal:hegemony-state-acme:v1");
    assert_eq!(b.key_id, a.key_id);
    runtime.block_on(async {
        let back = two.unwrap_key(&a.key_id, &a.wrapped, &net).await.unwrap();
        assert_eq!(*back, *a.plaintext);
        let elsewhere = KeyContext {
            org: "acme",
            state: "dns",
        };
        let err = one
            .unwrap_key(&a.key_id, &a.wrapped, &elsewhere)
            .await
            .unwrap_err();
        assert!(matches!(err, KeyError::Unwrap { .. }), "{err}");
        let other_org = KeyContext {
            org: "globex",
            state: "net",
        };
        let err = one
            .unwrap_key(&a.key_id, &a.wrapped, &other_org)
            .await
            .unwrap_err();
        assert!(matches!(err, KeyError::Unwrap { .. }), "{err}");
    });
}

/// A sealed engine: saves and reads answer 503 with Retry-After, nothing is written, no
/// other key wraps anything; once unsealed, the same save goes through under Transit.
#[test]
fn a_sealed_engine_answers_503_writes_nothing_and_the_retry_succeeds_after_unseal() {
    let bao = Bao::start();
    let key = PlatformKeyText::new();
    let mut env = bao.internal_env(&bao.root_token_file());
    env.push(("HEGEMONY_TF_STATE_ENCRYPTION_KEY".into(), key.0.clone()));
    let server = serve(&env);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    bao.seal();
    let message = assert_retryable(save(&api, &admin, "net", 2));
    assert!(message.contains("sealed"), "{message}");
    assert_retryable(api.get_state(&admin, "net"));
    assert!(warned(&server, "sealed"));
    let listed = versions(&api, &admin, "net");
    assert_eq!(listed.len(), 1, "nothing was written while sealed");
    bao.unseal();
    assert_eq!(save(&api, &admin, "net", 2).status(), 200);
    let listed = versions(&api, &admin, "net");
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|v| v["key_backend"] == "transit"),
        "{listed:?}"
    );
    assert_eq!(
        api.get_state(&admin, "net").text().unwrap(),
        state_doc(2, "l-1", "v2")
    );
}

/// A platform key as base64 text, for a server's setting.
struct PlatformKeyText(String);

impl PlatformKeyText {
    fn new() -> Self {
        Self(
            hegemony_state::crypto::PlatformKey::generate()
                .to_base64()
                .to_string(),
        )
    }
}

/// The engine stopped: 503 with Retry-After and the reason logged, nothing written.
#[test]
fn a_stopped_engine_answers_503() {
    let mut bao = Bao::start();
    bao.create_key("state-acme");
    let server = serve(&bao.named_env("vault", &bao.root_token_file(), "state-{org}"));
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    bao.stop();
    let message = assert_retryable(save(&api, &admin, "net", 2));
    assert!(message.contains("unreachable"), "{message}");
    assert_retryable(api.get_state(&admin, "net"));
    assert!(warned(&server, "unreachable"));
    assert_eq!(versions(&api, &admin, "net").len(), 1);
}

/// After a move of the key setting: `net`'s two versions name the backends that wrapped
/// them (newest first), and the first, wrapped before the move, still reads byte for byte.
fn assert_moved(api: &Api, admin: &str, backends: [&str; 2]) {
    let listed = versions(api, admin, "net");
    let named: Vec<&str> = listed
        .iter()
        .map(|v| v["key_backend"].as_str().unwrap())
        .collect();
    assert_eq!(named, backends, "newest first");
    let old = content(api, admin, "net", 1);
    assert_eq!(old.status(), 200);
    assert_eq!(old.text().unwrap(), state_doc(1, "l-1", "v1"));
}

/// A token whose policy lets it read the key but not make data keys: 503, and the log says
/// the engine refused and why.
#[test]
fn a_token_whose_policy_refuses_answers_503_and_the_reason_is_logged() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let token = bao.policy_token_file(
        "read-only",
        r#"path "transit/keys/*" { capabilities = ["read"] }"#,
    );
    let server = serve(&bao.named_env("vault", &token, "state-{org}"));
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    let message = assert_retryable(save(&api, &admin, "net", 1));
    assert!(message.contains("refused (403"), "{message}");
    assert!(
        warned(&server, "refused (403 permission denied)"),
        "{}",
        server.logs()
    );
    assert!(api.get_state(&admin, "net").status() != 200);
    assert!(versions_or_none(&api, &admin, "net").is_none_or(|v| v.is_empty()));
}

fn versions_or_none(api: &Api, token: &str, state: &str) -> Option<Vec<Value>> {
    let r = api
        .request(
            "GET",
            &format!("/api/tf-states/{state}/versions"),
            Some(token),
        )
        .send()
        .unwrap();
    (r.status() == 200).then(|| {
        r.json::<Value>().unwrap()["versions"]
            .as_array()
            .unwrap()
            .clone()
    })
}

/// Versions written under the platform key (the key file) stay readable after the setting
/// moves to Transit, which wraps everything new.
#[test]
fn moving_from_the_platform_key_to_transit_keeps_old_versions_readable() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let server = Server::start();
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    let server = server.restart_with(bao.named_env("vault", &bao.root_token_file(), "state-{org}"));
    let api = Api::new(&server);
    assert_eq!(save(&api, &admin, "net", 2).status(), 200);
    assert_moved(&api, &admin, ["transit", "platform"]);
    assert_eq!(
        api.get_state(&admin, "net").text().unwrap(),
        state_doc(2, "l-1", "v2")
    );
}

/// Real Terraform: init, apply, plan with no changes, through a Transit-backed server.
#[test]
fn terraform_applies_and_plans_through_a_transit_backed_server() {
    let bao = Bao::start();
    let server = serve(&bao.internal_env(&bao.root_token_file()));
    let token = server.token("default", "alice", "admin");
    let tf = Tf::new(TfVersion::V1_11, &server, "net", &token);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    let plan = tf.run(&["plan", "-detailed-exitcode", "-no-color"]);
    assert!(plan.ok, "no changes expected:\n{}", plan.output());
    let api = Api::new(&server);
    let listed = versions(&api, &token, "net");
    assert_eq!(
        listed[0]["key"],
        "transit:internal:hegemony-state-default:v1"
    );
    assert_eq!(bao.keys(), ["hegemony-state-default"]);
}

/// The spec's form, the backend named by its tag alone (`HEGEMONY_TF_STATE_KEY_BACKEND=vault`):
/// the same backend as `transit:vault`, each version recording it.
#[test]
fn a_backend_named_by_its_bare_tag_wraps_as_transit_tag_does() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let mut env = bao.named_env("vault", &bao.root_token_file(), "state-{org}");
    for (k, v) in &mut env {
        if k == "HEGEMONY_TF_STATE_KEY_BACKEND" {
            *v = "vault".into();
        }
    }
    let server = serve(&env);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    let listed = versions(&api, &admin, "net");
    assert_eq!(listed[0]["key"], "transit:vault:state-acme:v1");
    assert_eq!(
        api.get_state(&admin, "net").text().unwrap(),
        state_doc(1, "l-1", "v1")
    );
}

/// A tag with none of its settings stops `serve` at start, naming where it looked.
#[test]
fn a_bare_tag_without_settings_stops_the_server_naming_what_it_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("HEGEMONY_TF_STATE_KEY_BACKEND", "vault")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for looked in [
        "HEGEMONY_TF_STATE_KEY_BACKEND",
        "HEGEMONY_TRANSIT_VAULT_ADDR",
        "HEGEMONY_TRANSIT_VAULT_TOKEN_FILE",
    ] {
        assert!(stderr.contains(looked), "{stderr}");
    }
}

/// An incomplete Transit setting stops `serve` at start, naming the variable to fix.
#[test]
fn an_incomplete_transit_setting_stops_the_server_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("HEGEMONY_TF_STATE_KEY_BACKEND", "transit:vault")
        .env(
            "HEGEMONY_TRANSIT_VAULT_ADDR",
            "https://bao.example.com:8200",
        )
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("HEGEMONY_TRANSIT_VAULT_TOKEN_FILE"),
        "{stderr}"
    );
}

/// `HEGEMONY_TF_STATE_KEY_BACKEND=none` with the internal OpenBao still configured: the
/// platform key wraps what is new, the internal OpenBao still opens what it wrapped.
#[test]
fn forcing_the_platform_key_keeps_the_internal_openbaos_versions_readable() {
    let bao = Bao::start();
    let internal = bao.internal_env(&bao.root_token_file());
    let server = serve(&internal);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    let mut forced = internal.clone();
    forced.push(("HEGEMONY_TF_STATE_KEY_BACKEND".into(), "none".into()));
    forced.push((
        "HEGEMONY_TF_STATE_ENCRYPTION_KEY".into(),
        PlatformKeyText::new().0,
    ));
    let server = server.restart_with(forced);
    let api = Api::new(&server);
    assert_eq!(save(&api, &admin, "net", 2).status(), 200);
    assert_moved(&api, &admin, ["platform", "transit"]);
}

/// On the AWS store (moto), versions KMS wrapped stay readable after the setting moves to
/// Transit: KMS opens them by the ARN they record.
#[test]
fn moving_from_kms_to_transit_on_the_aws_store_keeps_kms_versions_readable() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let deployment = hegemony_state_blackbox::aws::Deployment::create();
    let server = deployment.container(&[]);
    let admin = deployment.token("acme", "root", "admin");
    let api = Api::new(&server);
    assert_eq!(save(&api, &admin, "net", 1).status(), 200);
    let mut env = deployment.env();
    // Later settings win: the key backend moves to Transit.
    env.extend(bao.named_env("vault", &bao.root_token_file(), "state-{org}"));
    let server = server.restart_with(env);
    let api = Api::new(&server);
    assert_eq!(save(&api, &admin, "net", 2).status(), 200);
    assert_moved(&api, &admin, ["transit", "kms"]);
}

/// Each state's key ids in a `keys report --json`, with how many versions and whether
/// they are behind: `(state, key, versions, behind)`.
fn report_rows(report: &[Value]) -> Vec<(String, String, u64, bool)> {
    let mut rows = Vec::new();
    for state in report {
        for k in state["keys"].as_array().unwrap() {
            rows.push((
                state["state"].as_str().unwrap().to_owned(),
                k["key"].as_str().unwrap().to_owned(),
                k["versions"].as_u64().unwrap(),
                k["behind"].as_bool().unwrap(),
            ));
        }
    }
    rows
}

fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Rotate the Transit key, re-wrap while the server runs: the report shows every version
/// on the latest key version, and once `min_decryption_version` retires the old one every
/// version still reads and, after a restart, a save still indexes (the org's inventory key
/// was moved too).
#[test]
fn a_rotation_then_rewrap_moves_every_version_and_the_old_key_version_can_be_retired() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let env = bao.named_env("vault", &bao.root_token_file(), "state-{org}");
    let server = serve(&env);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    for serial in 1..=3 {
        assert_eq!(save(&api, &admin, "net", serial).status(), 200);
    }
    assert_eq!(save(&api, &admin, "dns", 1).status(), 200);
    let bucket = api.post_state(&admin, "bucket", None, bucket_doc(1));
    assert_eq!(bucket.status(), 200);
    bao.ok(&["write", "-f", "transit/keys/state-acme/rotate"]);
    assert_eq!(save(&api, &admin, "dns", 2).status(), 200);
    let rows = report_rows(&server.key_report(&[]));
    assert_eq!(
        rows,
        [
            (
                "bucket".into(),
                "transit:vault:state-acme:v1".into(),
                1,
                true
            ),
            ("dns".into(), "transit:vault:state-acme:v1".into(), 1, true),
            ("dns".into(), "transit:vault:state-acme:v2".into(), 1, false),
            ("net".into(), "transit:vault:state-acme:v1".into(), 3, true),
        ]
    );

    // The same report for the org's admins over the API, and for them only.
    let api_report = api.json("GET", "/api/keys", &admin);
    assert_eq!(api_report["org"], "acme");
    assert_eq!(report_rows(api_report["states"].as_array().unwrap()), rows);
    let operator = server.token("acme", "bob", "operator");
    let refused = api
        .request("GET", "/api/keys", Some(&operator))
        .send()
        .unwrap();
    assert_eq!(refused.status(), 403);

    let dry = stdout_of(&server.keys(&["rewrap", "--dry-run"], &[]));
    assert!(
        dry.contains("5 versions would be re-wrapped, 1 are already"),
        "{dry}"
    );
    assert!(
        dry.contains("orgs' inventory keys: 1 would be re-wrapped, 0 already"),
        "{dry}"
    );
    let out = stdout_of(&server.keys(&["rewrap"], &[]));
    assert!(
        out.contains("re-wrapped 5 versions, 1 already on the key in use, 0 failed"),
        "{out}"
    );
    assert!(
        out.contains("orgs' inventory keys: 1 re-wrapped, 0 already on the key in use, 0 failed"),
        "{out}"
    );
    let rows = report_rows(&server.key_report(&[]));
    assert_eq!(
        rows,
        [
            (
                "bucket".into(),
                "transit:vault:state-acme:v2".into(),
                1,
                false
            ),
            ("dns".into(), "transit:vault:state-acme:v2".into(), 2, false),
            ("net".into(), "transit:vault:state-acme:v2".into(), 3, false),
        ]
    );
    assert_eq!(
        versions(&api, &admin, "net")[0]["key"],
        "transit:vault:state-acme:v2"
    );

    bao.ok(&[
        "write",
        "transit/keys/state-acme/config",
        "min_decryption_version=2",
    ]);
    for (state, count) in [("net", 3), ("dns", 2)] {
        for version in 1..=count {
            let got = content(&api, &admin, state, version);
            assert_eq!(got.status(), 200, "{state} v{version}");
            assert_eq!(
                got.text().unwrap(),
                state_doc(version, "l-1", &format!("v{version}"))
            );
        }
    }
    let audit = api.json("GET", "/api/tf-states/net/audit", &admin);
    let rewrapped: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "keys.rewrapped")
        .collect();
    assert_eq!(rewrapped.len(), 1, "the dry run is not audited");
    assert_eq!(rewrapped[0]["detail"]["rewrapped"], 3);

    // A restarted server has no unwrapped inventory key in memory: it unwraps the moved one.
    let server = server.restart_with(env);
    let api = Api::new(&server);
    let saved = api.post_state(&admin, "bucket", None, bucket_doc(2));
    assert_eq!(saved.status(), 200, "{}", server.logs());
    let found = api.json("GET", "/api/resources?q=logs", &admin);
    assert_eq!(found["resources"][0]["version"], 2, "{found}");
}

/// `--to transit:vault` moves the platform key's versions to Transit while the server still
/// wraps with the platform key; then the server moves to Transit and the key file goes:
/// every version reads without it.
#[test]
fn a_move_from_the_platform_key_to_transit_lets_the_platform_key_go() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let server = Server::start();
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    for serial in 1..=3 {
        assert_eq!(save(&api, &admin, "net", serial).status(), 200);
    }
    let transit = bao.named_env("vault", &bao.root_token_file(), "state-{org}");
    let settings: Vec<(String, String)> = transit
        .iter()
        .filter(|(k, _)| k != "HEGEMONY_TF_STATE_KEY_BACKEND")
        .cloned()
        .collect();
    let out = stdout_of(&server.keys(&["rewrap", "--to", "transit:vault"], &settings));
    assert!(out.contains("re-wrapped 3 versions, 0 already"), "{out}");
    for v in versions(&api, &admin, "net") {
        assert_eq!(v["key_backend"], "transit", "{v}");
    }

    let key_file = server.data_dir().with_extension("key");
    assert!(key_file.exists(), "{}", key_file.display());
    std::fs::remove_file(&key_file).unwrap();
    let server = server.restart_with(transit);
    let api = Api::new(&server);
    for version in 1..=3 {
        let got = content(&api, &admin, "net", version);
        assert_eq!(got.status(), 200, "v{version}: {}", server.logs());
        assert_eq!(
            got.text().unwrap(),
            state_doc(version, "l-1", &format!("v{version}"))
        );
    }
    assert!(
        !key_file.exists(),
        "the Transit-backed server made no key file"
    );
}

/// A re-wrap killed (SIGKILL) half way through many versions, then run again: the second
/// run moves exactly those the first did not reach (none wrapped twice), and every version
/// reads, with its content.
#[test]
fn a_rewrap_killed_half_way_continues_where_it_stopped() {
    const VERSIONS: u64 = 400;
    let bao = Bao::start();
    bao.create_key("state-acme");
    let mut env = bao.named_env("vault", &bao.root_token_file(), "state-{org}");
    env.push(("HEGEMONY_TF_STATE_KEEP_VERSIONS".into(), "1000".into()));
    let server = serve(&env);
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    for serial in 1..=VERSIONS {
        assert_eq!(save(&api, &admin, "net", serial).status(), 200);
    }
    bao.ok(&["write", "-f", "transit/keys/state-acme/rotate"]);
    let moved = || -> u64 {
        report_rows(&server.key_report(&[]))
            .iter()
            .filter(|r| !r.3)
            .map(|r| r.2)
            .sum()
    };
    let mut first = server
        .keys_command(&["rewrap"], &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        eventually(std::time::Duration::from_secs(60), || moved() > 0),
        "the re-wrap never started"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let done = moved();
    eprintln!("the first re-wrap was killed after {done} of {VERSIONS} versions");
    assert!(
        done > 0 && done < VERSIONS,
        "killed half way: {done} of {VERSIONS} moved"
    );

    let started = std::time::Instant::now();
    let out = stdout_of(&server.keys(&["rewrap"], &[]));
    eprintln!(
        "the second re-wrap moved {} versions in {:?}",
        VERSIONS - done,
        started.elapsed()
    );
    let expected = format!(
        "re-wrapped {} versions, {done} already on the key in use, 0 failed",
        VERSIONS - done
    );
    assert!(out.contains(&expected), "{out}");
    assert_eq!(moved(), VERSIONS);
    for version in 1..=VERSIONS {
        let got = content(&api, &admin, "net", version);
        assert_eq!(got.status(), 200, "v{version}");
        assert_eq!(
            got.text().unwrap(),
            state_doc(version, "l-1", &format!("v{version}"))
        );
    }
}

/// One sealed change of app state `app` uploading `files` (name, body) over the API; its
/// commit ID.
fn app_change(api: &Api, token: &str, app: &str, files: &[(&str, &str)]) -> String {
    let lock = api
        .request("POST", &format!("/api/apps/{app}/lock"), Some(token))
        .json(&serde_json::json!({"who": "ci"}))
        .send()
        .unwrap();
    assert_eq!(lock.status(), 200);
    let lock_id = lock.json::<Value>().unwrap()["lock_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (name, body) in files {
        let path = format!("/api/apps/{app}/locks/{lock_id}/files/{name}");
        let r = api
            .request("PUT", &path, Some(token))
            .body((*body).to_owned())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{name}");
    }
    let path = format!("/api/apps/{app}/locks/{lock_id}/seal");
    let sealed = api.request("POST", &path, Some(token)).send().unwrap();
    assert_eq!(sealed.status(), 200);
    sealed.json::<Value>().unwrap()["commit_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// An app state's files rotate with the states: after a Transit rotation the report (CLI and
/// API) counts each sealed file once, however many archives carry it, as behind the key in
/// use; `keys rewrap --app` moves them, and with the old key version retired every
/// archive's files still download.
#[test]
fn an_app_state_s_files_are_reported_and_rewrapped_and_the_old_key_version_can_be_retired() {
    let bao = Bao::start();
    bao.create_key("state-acme");
    let server = serve(&bao.named_env("vault", &bao.root_token_file(), "state-{org}"));
    let (api, admin) = (Api::new(&server), server.token("acme", "root", "admin"));
    let first = app_change(&api, &admin, "shop", &[("models.json", r#"{"m":1}"#)]);
    let second = app_change(&api, &admin, "shop", &[("plan.json", r#"{"p":2}"#)]);
    bao.ok(&["write", "-f", "transit/keys/state-acme/rotate"]);
    let third = app_change(&api, &admin, "shop", &[("late.json", r#"{"l":3}"#)]);

    let files = |report: &[Value]| -> Vec<(String, u64, bool)> {
        let app = report.iter().find(|e| e["app"] == "shop").expect("shop");
        app["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["key"].as_str().unwrap().to_owned(),
                    k["files"].as_u64().unwrap(),
                    k["behind"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let expected = vec![
        ("transit:vault:state-acme:v1".to_owned(), 2, true),
        ("transit:vault:state-acme:v2".to_owned(), 1, false),
    ];
    assert_eq!(files(&server.key_report(&[])), expected);
    let api_report = api.json("GET", "/api/keys", &admin);
    assert_eq!(files(api_report["apps"].as_array().unwrap()), expected);

    let out = stdout_of(&server.keys(&["rewrap", "--org", "acme", "--app", "shop"], &[]));
    assert!(
        out.contains("re-wrapped 2 app state files, 1 already on the key in use, 0 failed"),
        "{out}"
    );
    assert!(!out.contains("versions"), "--app covers no state: {out}");
    assert_eq!(
        files(&server.key_report(&[])),
        [("transit:vault:state-acme:v2".to_owned(), 3, false)]
    );

    bao.ok(&[
        "write",
        "transit/keys/state-acme/config",
        "min_decryption_version=2",
    ]);
    for (commit_id, file, body) in [
        (&first, "models.json", r#"{"m":1}"#),
        (&second, "models.json", r#"{"m":1}"#),
        (&second, "plan.json", r#"{"p":2}"#),
        (&third, "models.json", r#"{"m":1}"#),
        (&third, "late.json", r#"{"l":3}"#),
    ] {
        let path = format!("/api/apps/shop/archives/{commit_id}/files/{file}");
        let got = api.request("GET", &path, Some(&admin)).send().unwrap();
        assert_eq!(got.status(), 200, "{path}: {}", server.logs());
        assert_eq!(got.text().unwrap(), body, "{path}");
    }
}
