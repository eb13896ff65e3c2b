//! What a read sends, against the real server: a format-2 version's gzip member as it is (a
//! `Content-Length`, not chunked, one member a single-member reader reads whole), or inflated
//! for a client that refuses gzip, byte for byte; and a store written in format 1 before
//! format 2 existed (tests/fixtures/format-1) read through every path that opens a version:
//! the backend GET, the download, the changes view, the CLI's download and a rollback.

use std::io::Read;
use std::path::Path;

use hegemony_state_blackbox::*;
use sha2::{Digest, Sha256};

/// A state of about `size` bytes that gzip shrinks a few times, as real states shrink.
fn state_of_size(size: usize) -> String {
    let mut pad = String::with_capacity(size);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while pad.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pad.push_str(&format!("r{}-", x % 10_007));
    }
    state_doc(1, "big", &pad)
}

fn gunzip_one_member(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// GET `path` with `Accept-Encoding: encoding`: the status, the headers a client relies on,
/// and the body's bytes as they crossed the wire.
fn fetch(
    api: &Api,
    path: &str,
    token: &str,
    bearer: bool,
    encoding: &str,
) -> (u16, Option<String>, Option<String>, Option<String>, Vec<u8>) {
    let req = if bearer {
        api.request("GET", path, Some(token))
    } else {
        api.backend("GET", path, token)
    };
    let r = req.header("Accept-Encoding", encoding).send().unwrap();
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (coding, length, chunked) = (
        header("content-encoding"),
        header("content-length"),
        header("transfer-encoding"),
    );
    let status = r.status().as_u16();
    (status, coding, length, chunked, r.bytes().unwrap().to_vec())
}

/// A large state (several segments, deflated in pieces on several threads) comes back byte
/// for byte: gzip'd as one member with its length declared, and plain when gzip is refused,
/// on the backend GET and the download alike.
#[test]
fn a_large_state_reads_back_exactly_gzipped_as_stored_or_inflated() {
    let server = Server::start();
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let body = state_of_size(5 << 20);
    assert_eq!(api.post_state(&t, "net", None, body.clone()).status(), 200);
    for (path, bearer) in [
        ("/api/tf-states/net/state", false),
        ("/api/tf-states/net/versions/1/content", true),
    ] {
        let (status, coding, length, chunked, gz) = fetch(&api, path, &t, bearer, "gzip");
        assert_eq!(status, 200, "{path}");
        assert_eq!(coding.as_deref(), Some("gzip"), "{path}");
        assert_eq!(length, Some(gz.len().to_string()), "{path}");
        assert_eq!(chunked, None, "{path}");
        assert!(gz.len() < body.len() * 3 / 4, "{path}: {} bytes", gz.len());
        assert_eq!(gunzip_one_member(&gz), body.as_bytes(), "{path}");
        for refused in ["identity", "gzip;q=0"] {
            let (status, coding, length, _, plain) = fetch(&api, path, &t, bearer, refused);
            assert_eq!(status, 200, "{path} {refused}");
            assert_eq!(coding, None, "{path} {refused}");
            assert_eq!(length, Some(body.len().to_string()), "{path} {refused}");
            assert!(plain == body.as_bytes(), "{path} {refused}: not byte-exact");
        }
    }
}

/// A small state too: gzip'd when accepted (it is kept that way), exact either way.
#[test]
fn a_small_state_reads_back_exactly_with_and_without_gzip() {
    let server = Server::start();
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let body = state_doc(1, "lin", "small");
    api.post_state(&t, "net", None, body.clone());
    let (_, coding, _, _, gz) = fetch(&api, "/api/tf-states/net/state", &t, false, "gzip");
    assert_eq!(coding.as_deref(), Some("gzip"));
    assert_eq!(gunzip_one_member(&gz), body.as_bytes());
    let (_, coding, _, _, plain) = fetch(&api, "/api/tf-states/net/state", &t, false, "br");
    assert_eq!(coding, None);
    assert_eq!(plain, body.as_bytes());
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A server on a copy of the format-1 store, its key file beside its data folder.
fn format_1_store() -> Server {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/format-1");
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture.join("data"), &dir.path().join("data"));
    let key = dir.path().join("data.key");
    std::fs::copy(fixture.join("data.key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    Server::start_in(dir)
}

/// Every path that opens a version opens one sealed in format 1 (zstd inside, the wrapped key
/// in its header, no key slot in its record), to the bytes the catalog recorded; and a
/// rollback to it seals its content anew, in format 2.
#[test]
fn a_store_written_in_format_1_reads_through_every_path() {
    let server = format_1_store();
    let api = Api::new(&server);
    let admin = server.token("default", "alice", "admin");
    let versions: serde_json::Value = api
        .request("GET", "/api/tf-states/net/versions", Some(&admin))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let recorded = |v: u64| {
        let found = versions["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["version"] == v)
            .unwrap();
        (
            found["sha256"].as_str().unwrap().to_owned(),
            found["size"].as_u64().unwrap() as usize,
        )
    };
    let (latest_sha, latest_size) = recorded(2);
    for encoding in ["gzip", "identity"] {
        let (status, coding, _, _, bytes) =
            fetch(&api, "/api/tf-states/net/state", &admin, false, encoding);
        assert_eq!(status, 200);
        let plain = match coding.as_deref() {
            Some("gzip") => gunzip_one_member(&bytes),
            _ => bytes,
        };
        assert_eq!(
            (sha256(&plain), plain.len()),
            (latest_sha.clone(), latest_size)
        );
    }
    let (first_sha, first_size) = recorded(1);
    let path = "/api/tf-states/net/versions/1/content";
    for encoding in ["gzip", "identity"] {
        let (status, coding, _, _, bytes) = fetch(&api, path, &admin, true, encoding);
        assert_eq!(status, 200);
        let plain = match coding.as_deref() {
            Some("gzip") => gunzip_one_member(&bytes),
            _ => bytes,
        };
        assert_eq!(
            (sha256(&plain), plain.len()),
            (first_sha.clone(), first_size)
        );
    }
    let downloaded = server.cli(&admin, &["states", "download", "net", "--version", "1"]);
    assert!(downloaded.status.success(), "{downloaded:?}");
    assert_eq!(sha256(&downloaded.stdout), first_sha);

    let changes = api
        .request("GET", "/api/tf-states/net/versions/2/changes", Some(&admin))
        .send()
        .unwrap();
    assert_eq!(changes.status(), 200);
    let changes: serde_json::Value = changes.json().unwrap();
    assert!(
        changes.to_string().contains("pad"),
        "the output the second version dropped: {changes}"
    );

    let rolled = api
        .request("POST", "/api/tf-states/net/rollback", Some(&admin))
        .json(&serde_json::json!({"version": 1}))
        .send()
        .unwrap();
    assert_eq!(rolled.status(), 200, "{:?}", rolled.text());
    let (_, _, _, _, plain) = fetch(&api, "/api/tf-states/net/state", &admin, false, "identity");
    let doc: serde_json::Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(doc["lineage"], "format-1-fixture");
    assert_eq!(doc["serial"], 3, "a rollback is the next serial");
    let sealed: Vec<Vec<u8>> = std::fs::read_dir(server.data_dir().join("blobs"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let formats: Vec<u8> = sealed.iter().map(|object| object[4]).collect();
    assert_eq!(
        formats.iter().filter(|f| **f == 2).count(),
        1,
        "{formats:?}"
    );
    assert_eq!(
        formats.iter().filter(|f| **f == 1).count(),
        2,
        "{formats:?}"
    );
}

/// A sealed object damaged in its first segment is refused before any byte is sent (500
/// `damaged`); damaged further on, the answer stops short of its `Content-Length`, so the
/// client sees a cut transfer, never altered content.
#[test]
fn a_damaged_object_is_refused_or_cut_short_never_sent_altered() {
    let server = Server::start();
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let body = state_of_size(2 << 20);
    assert_eq!(api.post_state(&t, "net", None, body.clone()).status(), 200);
    let blob = std::fs::read_dir(server.data_dir().join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read(p).unwrap().starts_with(b"HGST\x02"))
        .unwrap();
    let sealed = std::fs::read(&blob).unwrap();
    let mut late = sealed.clone();
    let last = late.len() - 1;
    late[last] ^= 1;
    std::fs::write(&blob, &late).unwrap();
    for encoding in ["gzip", "identity"] {
        let r = api
            .backend("GET", "/api/tf-states/net/state", &t)
            .header("Accept-Encoding", encoding)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{encoding}: the first segment opens");
        assert!(r.bytes().is_err(), "{encoding}: the body is cut short");
    }
    assert!(server.logs().contains("cut short"), "{}", server.logs());
    let mut early = sealed;
    early[40] ^= 1;
    std::fs::write(&blob, &early).unwrap();
    let (code, _) = error_body(api.get_state(&t, "net")).expect(500);
    assert_eq!(code, "damaged");
}
