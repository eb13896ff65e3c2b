//! The management API over HTTP against the real server: who may call what (the whole
//! matrix), the permission allocation, audit completeness, and every bad input refused with
//! a clear message and nothing stored.

use hegemony_state_blackbox::*;
use serde_json::{json, Value};

struct Org {
    server: Server,
    http: Client,
    admin: String,
    operator: String,
}

impl Org {
    fn new() -> Org {
        let server = Server::start();
        let admin = server.token("acme", "root", "admin");
        let operator = server.token("acme", "alice", "operator");
        Org {
            server,
            http: client(),
            admin,
            operator,
        }
    }

    fn req(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
    ) -> reqwest::blocking::RequestBuilder {
        let r = self.http.request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            self.server.url(path),
        );
        match token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    fn write(&self, name: &str, serial: u64, value: &str) {
        let r = self
            .req(
                "POST",
                &format!("/api/tf-states/{name}/state"),
                Some(&self.operator),
            )
            .body(state_doc(serial, "lin", value))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    }

    fn json(&self, method: &str, path: &str, token: &str) -> Value {
        let r = self.req(method, path, Some(token)).send().unwrap();
        assert!(r.status().is_success(), "{method} {path}: {}", r.status());
        r.json().unwrap()
    }

    fn audit(&self) -> Vec<Value> {
        self.json("GET", "/api/audit?limit=500", &self.admin)["entries"]
            .as_array()
            .unwrap()
            .clone()
    }
}

fn error_code(r: Response) -> (u16, String, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().unwrap_or(Value::Null);
    (
        status,
        v["error"]["code"].as_str().unwrap_or("").to_owned(),
        v["error"]["message"].as_str().unwrap_or("").to_owned(),
    )
}

/// Who calls, in the matrix's columns.
#[derive(Clone, Copy, Debug)]
enum Who {
    Nobody,
    Garbage,
    Viewer,
    Operator,
    Admin,
    OtherOrgAdmin,
    Platform,
    BasicAdmin,
}

const COLUMNS: [Who; 8] = [
    Who::Nobody,
    Who::Garbage,
    Who::Viewer,
    Who::Operator,
    Who::Admin,
    Who::OtherOrgAdmin,
    Who::Platform,
    Who::BasicAdmin,
];

/// Every route x every kind of caller -> the status, each cell on a fresh state written in
/// two versions, so destructive cells do not disturb each other.
#[test]
fn authorization_matrix() {
    let org = Org::new();
    let viewer = org.server.token("acme", "vic", "viewer");
    let stranger = org.server.token("other", "sam", "admin");
    let platform = org.server.platform_token();
    // (method, path with {s}, body, statuses for COLUMNS in order)
    let rows: Vec<(&str, &str, Option<String>, [u16; 8])> = vec![
        (
            "GET",
            "/api/tf-states/{s}/state",
            None,
            [401, 401, 403, 200, 200, 404, 403, 200],
        ),
        (
            "POST",
            "/api/tf-states/{s}/state",
            Some(state_doc(3, "lin", "new")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "POST",
            "/api/tf-states/{s}/lock",
            Some(lock_doc("L")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "DELETE",
            "/api/tf-states/{s}/lock",
            Some(lock_doc("L")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "GET",
            "/api/tf-states",
            None,
            [401, 401, 200, 200, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}",
            None,
            [401, 401, 200, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/versions",
            None,
            [401, 401, 200, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/versions/1/content",
            None,
            [401, 401, 403, 200, 200, 404, 403, 401],
        ),
        (
            "POST",
            "/api/tf-states/{s}-new/import",
            Some(state_doc(1, "imp", "x")),
            [401, 401, 403, 201, 201, 201, 403, 401],
        ),
        (
            "POST",
            "/api/tf-states/{s}/rollback",
            Some(r#"{"version": 1}"#.into()),
            [401, 401, 403, 200, 200, 404, 403, 401],
        ),
        (
            "POST",
            "/api/tf-states/{s}/force-unlock",
            None,
            [401, 401, 403, 403, 200, 404, 403, 401],
        ),
        (
            "DELETE",
            "/api/tf-states/{s}",
            None,
            [401, 401, 403, 403, 204, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/audit",
            None,
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/audit",
            None,
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/org/permissions",
            None,
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "PUT",
            "/api/org/permissions",
            Some("{}".into()),
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/openapi.json",
            None,
            [200, 200, 200, 200, 200, 200, 200, 200],
        ),
        (
            "POST",
            "/api/runs/run-{s}/tf-state-tokens",
            Some(r#"{"org":"acme","state":"net","step":"plan","attempt":1,"kind":"plan","timeout_seconds":60}"#.into()),
            [401, 401, 403, 403, 403, 403, 201, 401],
        ),
        (
            "POST",
            "/api/runs/run-{s}/end",
            None,
            [401, 401, 403, 403, 403, 403, 200, 401],
        ),
        (
            "POST",
            "/api/runs/run-{s}/steps/plan/gone",
            Some(r#"{"attempt":1}"#.into()),
            [401, 401, 403, 403, 403, 403, 200, 401],
        ),
    ];
    let mut cell = 0;
    for (method, path, body, expected) in &rows {
        for (who, want) in COLUMNS.iter().zip(expected) {
            cell += 1;
            let name = format!("m{cell}");
            org.write(&name, 1, "one");
            org.write(&name, 2, "two");
            let mut r = org.req(method, &path.replace("{s}", &name), None);
            r = match who {
                Who::Nobody => r,
                Who::Garbage => r.bearer_auth("hgs_not-a-real-token"),
                Who::Viewer => r.bearer_auth(&viewer),
                Who::Operator => r.bearer_auth(&org.operator),
                Who::Admin => r.bearer_auth(&org.admin),
                Who::OtherOrgAdmin => r.bearer_auth(&stranger),
                Who::Platform => r.bearer_auth(&platform),
                Who::BasicAdmin => r.basic_auth("any", Some(&org.admin)),
            };
            if let Some(b) = body {
                r = r.body(b.clone());
            }
            let got = r.send().unwrap().status().as_u16();
            assert_eq!(got, *want, "{method} {path} as {who:?}");
        }
    }
}

#[test]
fn moving_and_disabling_permissions_refuses_accordingly_and_admins_keep_the_route() {
    let org = Org::new();
    org.write("net", 1, "x");
    let get = |token: &str| {
        org.req("GET", "/api/tf-states/net/state", Some(token))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(get(&org.operator), 200);
    let put = |body: &str| {
        org.req("PUT", "/api/org/permissions", Some(&org.admin))
            .body(body.to_owned())
            .send()
            .unwrap()
    };
    let r = put(r#"{"tf_state:read": "admin"}"#);
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"tf_state:read": "admin", "tf_state:write": "operator", "tf_state:manage": "admin"})
    );
    assert_eq!(get(&org.operator), 403);
    assert_eq!(get(&org.admin), 200);
    assert_eq!(put(r#"{"tf_state:read": null}"#).status(), 200);
    assert_eq!(get(&org.admin), 403, "disabled refuses everyone");
    // The admin role still reaches the permissions route, and can turn reads back on.
    assert_eq!(
        org.json("GET", "/api/org/permissions", &org.admin)["tf_state:read"],
        Value::Null
    );
    assert_eq!(put(r#"{"tf_state:read": "operator"}"#).status(), 200);
    assert_eq!(get(&org.operator), 200);
    let changes: Vec<Value> = org
        .audit()
        .into_iter()
        .filter(|e| e["action"] == "permissions.changed")
        .collect();
    assert_eq!(changes.len(), 3);
    assert_eq!(changes[2]["detail"]["old"]["tf_state:read"], "operator");
    assert_eq!(changes[2]["detail"]["new"]["tf_state:read"], "admin");
    // Moving manage to operators lets them force-unlock.
    assert_eq!(put(r#"{"tf_state:manage": "operator"}"#).status(), 200);
    let r = org
        .req(
            "POST",
            "/api/tf-states/net/force-unlock",
            Some(&org.operator),
        )
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// Each audited action produces exactly one entry; listings, version lists and plain
/// backend reads produce none.
#[test]
fn audit_is_complete_and_quiet() {
    let org = Org::new();
    let count =
        |org: &Org, action: &str| org.audit().iter().filter(|e| e["action"] == action).count();
    let before = org.audit().len(); // the tokens made at setup
    assert_eq!(count(&org, "token.created"), 2);

    // Three saves under one lock: one version, one entry.
    let lock = |id: &str| {
        org.req("POST", "/api/tf-states/net/lock", Some(&org.operator))
            .body(lock_doc(id))
            .send()
            .unwrap()
    };
    assert_eq!(lock("L1").status(), 200);
    for serial in 1..=3 {
        let r = org
            .req(
                "POST",
                "/api/tf-states/net/state?ID=L1",
                Some(&org.operator),
            )
            .body(state_doc(serial, "lin", &serial.to_string()))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    org.req("DELETE", "/api/tf-states/net/lock", Some(&org.operator))
        .body(lock_doc("L1"))
        .send()
        .unwrap();
    assert_eq!(count(&org, "version.created"), 1);

    // Reads of every kind: no entry.
    for path in [
        "/api/tf-states",
        "/api/tf-states/net",
        "/api/tf-states/net/versions",
        "/api/tf-states/net/state",
    ] {
        org.json("GET", path, &org.operator);
    }
    assert_eq!(org.audit().len(), before + 1);

    let r = org
        .req(
            "POST",
            "/api/tf-states/imported/import",
            Some(&org.operator),
        )
        .body(state_doc(4, "imp", "x"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = org
        .req("POST", "/api/tf-states/net/rollback", Some(&org.operator))
        .body(r#"{"version":1}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = org
        .req(
            "GET",
            "/api/tf-states/net/versions/1/content",
            Some(&org.operator),
        )
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    lock("L2");
    let r = org
        .req("POST", "/api/tf-states/net/force-unlock", Some(&org.admin))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = org
        .req("DELETE", "/api/tf-states/imported", Some(&org.admin))
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = org
        .req("PUT", "/api/org/permissions", Some(&org.admin))
        .body(r#"{"tf_state:write":"operator","tf_state:read":"viewer"}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let tokens = org.server.cli("", &["token", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&tokens.stdout).unwrap();
    let alice = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["user"] == "alice")
        .unwrap();
    let id = alice["id"].as_str().unwrap().to_owned();
    assert!(org
        .server
        .cli("", &["token", "revoke", &id])
        .status
        .success());
    let revoked = org
        .req("GET", "/api/tf-states", Some(&org.operator))
        .send()
        .unwrap();
    assert_eq!(
        revoked.status(),
        401,
        "a revocation takes effect at the next request"
    );

    for action in [
        "version.created",
        "state.imported",
        "state.rolled_back",
        "version.downloaded",
        "lock.force_unlocked",
        "state.deleted",
        "permissions.changed",
        "token.revoked",
    ] {
        assert_eq!(count(&org, action), 1, "{action}");
    }
    assert_eq!(org.audit().len(), before + 8);
    // Each names who, when, the state and the version.
    let rollback = org
        .audit()
        .into_iter()
        .find(|e| e["action"] == "state.rolled_back")
        .unwrap();
    assert_eq!(rollback["actor"], json!({"kind": "user", "user": "alice"}));
    assert_eq!(
        (rollback["state"].as_str(), rollback["version"].as_u64()),
        (Some("net"), Some(2))
    );
    assert_eq!(rollback["detail"]["from"], 1);
    // Filters and pages.
    let only = org.json("GET", "/api/audit?action=state.deleted", &org.admin);
    assert_eq!(only["entries"].as_array().unwrap().len(), 1);
    let of_state = org.json("GET", "/api/tf-states/imported/audit", &org.admin);
    let actions: Vec<&str> = of_state["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["state.deleted", "state.imported"]);
    let page = org.json("GET", "/api/audit?limit=2", &org.admin);
    let next = page["next_cursor"].as_str().unwrap();
    let rest = org.json(
        "GET",
        &format!("/api/audit?limit=500&cursor={next}"),
        &org.admin,
    );
    assert_eq!(
        rest["entries"].as_array().unwrap().len() + 2,
        org.audit().len()
    );
}

#[test]
fn versions_show_download_and_their_shapes() {
    let org = Org::new();
    org.write("net", 1, "one");
    org.write("net", 2, "two");
    let versions = org.json("GET", "/api/tf-states/net/versions", &org.operator);
    let list = versions["versions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let v = &list[0];
    assert_eq!(
        (v["version"].as_u64(), v["serial"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(v["source"], "write");
    assert!(v["key"].as_str().unwrap().starts_with("platform:"));
    assert_eq!(v["writer"], json!({"kind": "user", "user": "alice"}));
    assert_eq!(v["change"]["ended"], "unlocked_write");
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
    assert!(
        v.get("blob").is_none(),
        "where content lives is never shown"
    );
    let r = org
        .req(
            "GET",
            "/api/tf-states/net/versions/1/content",
            Some(&org.operator),
        )
        .send()
        .unwrap();
    assert_eq!(r.text().unwrap(), state_doc(1, "lin", "one"));
    let show = org.json("GET", "/api/tf-states/net", &org.operator);
    assert_eq!(show["latest_version"], 2);
    assert_eq!(
        show["allowed_actions"],
        json!({"download": true, "import": false, "rollback": true, "force_unlock": false, "delete": false})
    );
    let show = org.json("GET", "/api/tf-states/net", &org.admin);
    assert_eq!(show["allowed_actions"]["delete"], true);
}

#[test]
fn rollback_makes_an_old_version_current_with_a_higher_serial_byte_for_byte() {
    let org = Org::new();
    for (serial, value) in [(1, "one"), (2, "two"), (3, "three")] {
        org.write("net", serial, value);
    }
    let r = org
        .req("POST", "/api/tf-states/net/rollback", Some(&org.operator))
        .body(r#"{"version": 1}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().unwrap();
    assert_eq!(
        (
            v["version"].as_u64(),
            v["serial"].as_u64(),
            v["source"].as_str()
        ),
        (Some(4), Some(4), Some("rollback"))
    );
    assert_eq!(v["change"]["rolled_back_from"], 1);
    assert_eq!(v["change"]["ended"], "rollback");
    let now = org
        .req("GET", "/api/tf-states/net/state", Some(&org.operator))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(
        now,
        state_doc(1, "lin", "one").replace("\"serial\": 1,", "\"serial\": 4,")
    );
    // A client still holding serial 3 is refused as stale; one at serial 4 forks.
    let r = org
        .req("POST", "/api/tf-states/net/state", Some(&org.operator))
        .body(state_doc(3, "lin", "late"))
        .send()
        .unwrap();
    assert_eq!(error_code(r).1, "stale_serial");
    let r = org
        .req("POST", "/api/tf-states/net/state", Some(&org.operator))
        .body(state_doc(4, "lin", "three"))
        .send()
        .unwrap();
    assert_eq!(error_code(r).1, "fork");
}

#[test]
fn delete_then_a_new_state_of_the_name_starts_at_a_higher_version() {
    let org = Org::new();
    org.write("net", 1, "one");
    org.write("net", 2, "two");
    let lock = org
        .req("POST", "/api/tf-states/net/lock", Some(&org.operator))
        .body(lock_doc("L"))
        .send()
        .unwrap();
    assert_eq!(lock.status(), 200);
    let (status, code, _) = error_code(
        org.req("DELETE", "/api/tf-states/net", Some(&org.admin))
            .send()
            .unwrap(),
    );
    assert_eq!(
        (status, code.as_str()),
        (423, ""),
        "refused while locked, with the lock document"
    );
    org.req("DELETE", "/api/tf-states/net/lock", Some(&org.operator))
        .body(lock_doc("L"))
        .send()
        .unwrap();
    assert_eq!(
        org.req("DELETE", "/api/tf-states/net", Some(&org.admin))
            .send()
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        org.req("GET", "/api/tf-states/net/state", Some(&org.operator))
            .send()
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        org.req("GET", "/api/tf-states/net", Some(&org.operator))
            .send()
            .unwrap()
            .status(),
        404
    );
    assert!(org.json("GET", "/api/tf-states", &org.operator)["states"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        org.req("DELETE", "/api/tf-states/net", Some(&org.admin))
            .send()
            .unwrap()
            .status(),
        404
    );
    // Any lineage is accepted again, and numbering continues.
    let r = org
        .req("POST", "/api/tf-states/net/state", Some(&org.operator))
        .body(state_doc(1, "fresh-lineage", "new"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let versions = org.json("GET", "/api/tf-states/net/versions", &org.operator);
    let list = versions["versions"].as_array().unwrap();
    assert_eq!(
        list.len(),
        1,
        "the old versions belong to the deleted state"
    );
    assert_eq!(list[0]["version"], 3);
}

#[test]
fn force_unlock_releases_any_lock_and_says_what() {
    let org = Org::new();
    org.write("net", 1, "one");
    let r = org
        .req("POST", "/api/tf-states/net/force-unlock", Some(&org.admin))
        .send()
        .unwrap();
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"released": {"lock": null, "hold": null}})
    );
    org.req("POST", "/api/tf-states/net/lock", Some(&org.operator))
        .body(lock_doc("L9"))
        .send()
        .unwrap();
    let released: Value = org
        .req("POST", "/api/tf-states/net/force-unlock", Some(&org.admin))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(released["released"]["lock"]["id"], "L9");
    assert_eq!(released["released"]["lock"]["holder"]["user"], "alice");
    let r = org
        .req("POST", "/api/tf-states/net/lock", Some(&org.admin))
        .body(lock_doc("mine"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn opentofu_encrypted_versions_cannot_be_rolled_back_and_say_what_to_do() {
    let org = Org::new();
    let enc = |serial: u64, data: &str| {
        format!(
            r#"{{"serial":{serial},"lineage":"l","meta":{{}},"encrypted_data":"{data}","encryption_version":"v0"}}"#
        )
    };
    for (serial, data) in [(1, "AA"), (2, "BB")] {
        let r = org
            .req("POST", "/api/tf-states/enc/state", Some(&org.operator))
            .body(enc(serial, data))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let (status, code, message) = error_code(
        org.req("POST", "/api/tf-states/enc/rollback", Some(&org.operator))
            .body(r#"{"version":1}"#)
            .send()
            .unwrap(),
    );
    assert_eq!((status, code.as_str()), (409, "rollback_encrypted"));
    assert!(
        message.contains("tofu state push") && message.contains("download"),
        "{message}"
    );
}

/// method, path, Content-Type, body, token, status, error code, words the message names.
type BadCase<'a> = (
    &'a str,
    String,
    Option<&'a str>,
    Option<String>,
    &'a str,
    u16,
    &'a str,
    &'a str,
);

#[test]
fn bad_input_on_every_management_route_is_a_clear_4xx_and_stores_nothing() {
    let org = Org::with_limit("4096");
    org.write("net", 1, "one");
    let op = org.operator.clone();
    let admin = org.admin.clone();
    let cases: Vec<BadCase<'_>> = vec![
        (
            "GET",
            "/api/tf-states/.bad/versions".into(),
            None,
            None,
            &op,
            400,
            "invalid_name",
            "'.'",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/0/content".into(),
            None,
            None,
            &op,
            400,
            "invalid_request",
            "positive",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/abc/content".into(),
            None,
            None,
            &op,
            400,
            "invalid_request",
            "positive",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/99/content".into(),
            None,
            None,
            &op,
            404,
            "not_found",
            "version 99",
        ),
        (
            "GET",
            "/api/tf-states/nope/versions".into(),
            None,
            None,
            &op,
            404,
            "not_found",
            "state nope",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some("not json".into()),
            &op,
            400,
            "invalid_request",
            "version",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":0}"#.into()),
            &op,
            400,
            "invalid_request",
            "1 or more",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":"1"}"#.into()),
            &op,
            400,
            "invalid_request",
            "version",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":1,"x":2}"#.into()),
            &op,
            400,
            "invalid_request",
            "x",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":7}"#.into()),
            &op,
            404,
            "not_found",
            "version 7",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            None,
            Some("[1,2]".into()),
            &op,
            400,
            "not_a_state",
            "JSON object",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            Some("text/plain"),
            Some(state_doc(1, "l", "x")),
            &op,
            415,
            "unsupported_media_type",
            "text/plain",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            None,
            Some(state_doc(1, "l", &"x".repeat(5000))),
            &op,
            413,
            "too_large",
            "4096",
        ),
        (
            "POST",
            "/api/tf-states/net/import".into(),
            None,
            Some(state_doc(1, "l", "x")),
            &op,
            409,
            "state_exists",
            "delete it first",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some(r#"{"tf_state:read":"root"}"#.into()),
            &admin,
            400,
            "invalid_request",
            "viewer, operator or admin",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some(r#"{"tf_state:fly":"admin"}"#.into()),
            &admin,
            400,
            "invalid_request",
            "unknown permission",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some("[]".into()),
            &admin,
            400,
            "invalid_request",
            "JSON object",
        ),
        (
            "GET",
            "/api/audit?limit=0".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "limit",
        ),
        (
            "GET",
            "/api/audit?cursor=abc".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "cursor",
        ),
        (
            "GET",
            "/api/audit?state=..".into(),
            None,
            None,
            &admin,
            400,
            "invalid_name",
            "name",
        ),
        (
            "POST",
            "/api/tf-states/net/force-unlock".into(),
            None,
            Some("x".repeat(2 << 20)),
            &admin,
            413,
            "too_large",
            "1048576",
        ),
    ];
    for (method, path, content_type, body, token, status, code, words) in cases {
        let mut r = org.req(method, &path, Some(token));
        if let Some(ct) = content_type {
            r = r.header("Content-Type", ct);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        let (got_status, got_code, message) = error_code(r.send().unwrap());
        assert_eq!(
            (got_status, got_code.as_str()),
            (status, code),
            "{method} {path}: {message}"
        );
        assert!(
            message.contains(words),
            "{method} {path}: {message:?} should name {words:?}"
        );
    }
    // Nothing was stored: one state, one version, no new state, permissions unchanged.
    let states = org.json("GET", "/api/tf-states", &op);
    assert_eq!(states["states"].as_array().unwrap().len(), 1);
    assert_eq!(states["states"][0]["latest_version"], 1);
    assert_eq!(
        org.json("GET", "/api/org/permissions", &admin)["tf_state:read"],
        "operator"
    );
    // Import takes application/octet-stream and no Content-Type too.
    let r = org
        .req("POST", "/api/tf-states/bin/import", Some(&op))
        .header("Content-Type", "application/octet-stream")
        .body(state_doc(7, "b", "x"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().unwrap();
    assert_eq!(
        (
            v["serial"].as_u64(),
            v["lineage"].as_str(),
            v["source"].as_str()
        ),
        (Some(7), Some("b"), Some("import"))
    );
    // And while a lock is live on the name, an import is refused with the lock document.
    org.req("POST", "/api/tf-states/locked/lock", Some(&op))
        .body(lock_doc("L"))
        .send()
        .unwrap();
    let r = org
        .req("POST", "/api/tf-states/locked/import", Some(&op))
        .body(state_doc(1, "l", "x"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 423);
    assert_eq!(r.json::<Value>().unwrap()["ID"], "L");
}

impl Org {
    fn with_limit(limit: &str) -> Org {
        let server = Server::start_with(&[("HEGEMONY_TF_STATE_MAX_BYTES", limit)]);
        let admin = server.token("acme", "root", "admin");
        let operator = server.token("acme", "alice", "operator");
        Org {
            server,
            http: client(),
            admin,
            operator,
        }
    }
}

#[test]
fn the_openapi_document_is_served_without_credentials() {
    let org = Org::new();
    let doc: Value = org
        .req("GET", "/api/openapi.json", None)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/tf-states/{name}/rollback"]["post"].is_object());
}
