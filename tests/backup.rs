//! `backup`, `backup verify` and `restore` against a running server: a backup taken while
//! writers save holds every version acknowledged before it began, byte for byte, once
//! restored (and the restored server takes the same tokens); a backup killed part way is
//! never taken for a whole one; a restore killed part way leaves no store, and the next one
//! works; a folder that is not empty is refused; a missing, damaged or undecryptable blob
//! fails the check, named; Terraform continues on the restored store.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hegemony_state_blackbox::*;
use serde_json::Value;

/// `hegemony-state ARGS` with no key or data folder from the environment.
fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .env_remove("HEGEMONY_TF_STATE_DATA_DIR")
        .stdin(Stdio::null());
    cmd
}

/// Runs `hegemony-state ARGS`; returns whether it succeeded, and stdout with stderr.
fn run(args: &[&str]) -> (bool, String) {
    let out = command(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs `hegemony-state ARGS` and kills it after `delay` ms (it may have ended by then).
fn killed_after(args: &[&str], delay: u64) -> std::process::ExitStatus {
    let mut child = command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(delay));
    let _ = child.kill();
    child.wait().unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every version of `name` as (serial, content), read from the server.
fn versions(api: &Api, token: &str, name: &str) -> Vec<(u64, String)> {
    let listed = api.json("GET", &format!("/api/tf-states/{name}/versions"), token);
    let mut out = Vec::new();
    for v in listed["versions"].as_array().unwrap() {
        let n = v["version"].as_u64().unwrap();
        let path = format!("/api/tf-states/{name}/versions/{n}/content");
        let r = api.request("GET", &path, Some(token)).send().unwrap();
        assert_eq!(r.status(), 200);
        out.push((v["serial"].as_u64().unwrap(), r.text().unwrap()));
    }
    out
}

#[test]
fn a_backup_taken_while_writers_save_restores_every_acknowledged_version() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    let admin = server.token("acme", "root", "admin");
    for serial in 1..=3 {
        api.post_state(&token, "large", None, noise_doc(serial, "big", 150_000));
    }
    api.post_state(&token, "gone", None, noise_doc(1, "g", 150_000));
    let deleted = api
        .request("DELETE", "/api/tf-states/gone", Some(&admin))
        .send();
    assert_eq!(deleted.unwrap().status(), 204);
    // Saves to four states, each acknowledged one recorded (state, serial, content).
    let acked: Arc<Mutex<Vec<(String, u64, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        let (api, token) = (Api::new(&server), token.clone());
        std::thread::spawn(move || {
            for serial in 1..=40u64 {
                for name in ["w0", "w1", "w2", "w3"] {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let doc = match name {
                        "w0" => noise_doc(serial, "w", 90_000),
                        _ => state_doc(serial, "w", &format!("{name}-{serial}")),
                    };
                    if api.post_state(&token, name, None, doc.clone()).status() == 200 {
                        acked.lock().unwrap().push((name.into(), serial, doc));
                    }
                }
            }
        })
    };
    assert!(eventually(Duration::from_secs(20), || {
        acked.lock().unwrap().len() >= 20
    }));
    let before: Vec<_> = acked.lock().unwrap().clone();
    let backups = tempfile::tempdir().unwrap();
    let to = backups.path().join("b1");
    let (ok, said) = run(&[
        "backup",
        "--to",
        path(&to),
        "--data-dir",
        path(&server.data_dir()),
        "--include-key",
    ]);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(ok, "{said}");
    assert!(said.contains("Backed up"), "{said}");
    let (ok, said) = run(&["backup", "verify", path(&to)]);
    assert!(ok && said.contains("can be restored"), "{said}");

    let restored = tempfile::tempdir().unwrap();
    let data = restored.path().join("data");
    let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&data)]);
    assert!(ok, "{said}");
    let again = run(&["restore", path(&to), "--data-dir", path(&data)]);
    assert!(!again.0 && again.1.contains("is not empty"), "{}", again.1);
    let copy = Server::start_in(restored);
    let api = Api::new(&copy);
    let mut stored = std::collections::BTreeMap::new();
    for name in ["large", "w0", "w1", "w2", "w3"] {
        for (serial, content) in versions(&api, &token, name) {
            stored.insert((name.to_owned(), serial), content);
        }
    }
    for (name, serial, doc) in &before {
        let found = stored.get(&(name.clone(), *serial));
        assert!(
            found == Some(doc),
            "{name} serial {serial}, acknowledged before the backup, is not restored byte for byte"
        );
    }
    for serial in 1..=3 {
        let doc = noise_doc(serial, "big", 150_000);
        assert_eq!(stored.get(&("large".to_owned(), serial)), Some(&doc));
    }
    // The deleted state comes back with the store, and can still be restored.
    let listed = api.json("GET", "/api/deleted-states", &admin);
    let id = listed["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.json("POST", &format!("/api/deleted-states/{id}/restore"), &admin);
    let back = api.get_state(&token, "gone").text().unwrap();
    assert_eq!(back, noise_doc(1, "g", 150_000));
}

#[test]
fn a_backup_killed_part_way_is_never_taken_for_a_whole_one() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for n in 0..30 {
        let doc = noise_doc(1, "k", 200_000 + n);
        api.post_state(&token, &format!("s{n}"), None, doc);
    }
    let backups = tempfile::tempdir().unwrap();
    let key = format!("{}.key", server.data_dir().display());
    // A kill can land after the manifest is in place and before the process exits: that
    // backup is whole, and must verify and restore. Any other kill must be refused.
    let mut refused = 0;
    for (i, delay) in [0u64, 5, 20, 60, 150].into_iter().enumerate() {
        let to = backups.path().join(format!("b{i}"));
        let source = server.data_dir();
        let backup = ["backup", "--to", path(&to), "--data-dir", path(&source)];
        let status = killed_after(&backup, delay);
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(9), "the backup failed by itself");
        }
        let (verified, said) = run(&["backup", "verify", path(&to), "--key-file", &key]);
        let data = backups.path().join(format!("r{i}"));
        let (restored, told) = run(&["restore", path(&to), "--data-dir", path(&data)]);
        if status.success() || verified {
            assert!(verified, "a finished backup verifies: {said}");
            assert!(said.contains("Opened all 30 versions"), "{said}");
            assert!(restored, "a verified backup restores: {told}");
        } else {
            refused += 1;
            assert!(said.contains("not a finished backup"), "{said}");
            assert!(
                !restored && told.contains("not a finished backup"),
                "{told}"
            );
        }
    }
    assert!(refused > 0, "no backup was killed part way");
}

/// A restore killed at any point leaves either the whole store or none that `serve` would
/// open (no catalog in the folder), and a second restore into the same folder works, with
/// the key a killed one may have put in place. A folder that is not empty, with or without
/// a catalog, is refused and left as it was.
#[test]
fn a_restore_killed_part_way_leaves_no_store_and_the_next_one_works() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for n in 0..30 {
        let doc = noise_doc(1, "k", 200_000 + n);
        api.post_state(&token, &format!("s{n}"), None, doc);
    }
    let backups = tempfile::tempdir().unwrap();
    let to = backups.path().join("b");
    let (ok, said) = run(&[
        "backup",
        "--to",
        path(&to),
        "--data-dir",
        path(&server.data_dir()),
        "--include-key",
    ]);
    assert!(ok, "{said}");
    let catalog = hegemony_state::adapters::local::CATALOG_FILE;
    let mut killed = 0;
    for delay in [0u64, 5, 20, 60, 150] {
        let home = tempfile::tempdir().unwrap();
        let data = home.path().join("data");
        let status = killed_after(&["restore", path(&to), "--data-dir", path(&data)], delay);
        if status.success() {
            assert!(data.join(catalog).exists());
            continue;
        }
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "the restore failed by itself");
        // A kill can land after the last rename, before the process exits: that store is
        // whole. Any other leaves no catalog, and the next restore puts the store there.
        if data.join(catalog).exists() {
            let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&data)]);
            assert!(!ok && said.contains("is not empty"), "{said}");
        } else {
            killed += 1;
            let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&data)]);
            assert!(ok, "the restore after one killed at {delay} ms: {said}");
        }
        let copy = Server::start_in(home);
        let api = Api::new(&copy);
        let read = api.get_state(&token, "s29").text().unwrap();
        assert!(read == noise_doc(1, "k", 200_029), "s29 reads as saved");
    }
    assert!(killed > 0, "no restore was killed part way");

    let stray = backups.path().join("stray");
    std::fs::create_dir(&stray).unwrap();
    std::fs::write(stray.join("notes.txt"), b"mine").unwrap();
    let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&stray)]);
    assert!(!ok && said.contains("is not empty"), "{said}");
    assert_eq!(std::fs::read(stray.join("notes.txt")).unwrap(), b"mine");
    let empty = backups.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&empty)]);
    assert!(ok, "an empty folder is restored into: {said}");
}

#[test]
fn a_missing_damaged_or_unopenable_blob_fails_the_check_by_name() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    api.post_state(&token, "net", None, noise_doc(1, "n", 200_000));
    api.post_state(&token, "net", None, noise_doc(2, "n", 200_000));
    api.post_state(&token, "small", None, state_doc(1, "s", "x"));
    let backups = tempfile::tempdir().unwrap();
    let good = backups.path().join("good");
    let data_dir = server.data_dir();
    let (ok, said) = run(&["backup", "--to", path(&good), "--data-dir", path(&data_dir)]);
    assert!(ok, "{said}");
    assert!(said.contains("which it does not hold"), "{said}");
    let key = format!("{}.key", data_dir.display());
    let (ok, said) = run(&["backup", "verify", path(&good)]);
    assert!(!ok && said.contains("--key-file"), "{said}");
    let (ok, said) = run(&["backup", "verify", path(&good), "--key-file", &key]);
    assert!(ok, "{said}");
    // The key beside the data folder, as serve finds it, by --data-dir or its variable.
    let (ok, said) = run(&[
        "backup",
        "verify",
        path(&good),
        "--data-dir",
        path(&data_dir),
    ]);
    assert!(ok, "{said}");
    let by_variable = command(&["backup", "verify", path(&good)])
        .env("HEGEMONY_TF_STATE_DATA_DIR", &data_dir)
        .output()
        .unwrap();
    assert!(
        by_variable.status.success(),
        "{}",
        String::from_utf8_lossy(&by_variable.stderr)
    );

    let copy = |name: &str| {
        let to = backups.path().join(name);
        let (ok, said) = run(&["backup", "--to", path(&to), "--data-dir", path(&data_dir)]);
        assert!(ok, "{said}");
        let blob = std::fs::read_dir(to.join("blobs"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        (to, blob)
    };
    let (missing, blob) = copy("missing");
    std::fs::remove_file(&blob).unwrap();
    let (ok, said) = run(&["backup", "verify", path(&missing), "--key-file", &key]);
    let name = blob.file_name().unwrap().to_str().unwrap();
    assert!(
        !ok && said.contains(&format!("blobs/{name} is missing")),
        "{said}"
    );

    let (damaged, blob) = copy("damaged");
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let (ok, said) = run(&["backup", "verify", path(&damaged), "--key-file", &key]);
    let name = blob.file_name().unwrap().to_str().unwrap();
    assert!(
        !ok && said.contains(&format!("blobs/{name} is damaged")),
        "{said}"
    );
    let data = backups.path().join("restored");
    let (ok, said) = run(&["restore", path(&damaged), "--data-dir", path(&data)]);
    assert!(!ok && said.contains("is damaged"), "{said}");

    // Damaged with a manifest to match: only opening it finds it, and names the version.
    let manifest_path = damaged.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    for entry in manifest["files"].as_array_mut().unwrap() {
        if entry["path"] == format!("blobs/{name}") {
            let sha = sha256_hex(&bytes);
            entry["sha256"] = Value::String(sha);
        }
    }
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (ok, said) = run(&["backup", "verify", path(&damaged), "--key-file", &key]);
    assert!(!ok, "{said}");
    assert!(said.contains("of state net:"), "{said}");
    assert!(said.contains("1 of 3 versions and files"), "{said}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn terraform_continues_on_a_restored_store() {
    let server = Server::start();
    let token = server.token("default", "alice", "operator");
    let tf = Tf::new(TfVersion::V1_11, &server, "net", &token);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=one"]);
    let backups = tempfile::tempdir().unwrap();
    let to = backups.path().join("b");
    let (ok, said) = run(&[
        "backup",
        "--to",
        path(&to),
        "--data-dir",
        path(&server.data_dir()),
        "--include-key",
    ]);
    assert!(ok, "{said}");
    drop(server);
    let restored = tempfile::tempdir().unwrap();
    let data = restored.path().join("data");
    let (ok, said) = run(&["restore", path(&to), "--data-dir", path(&data)]);
    assert!(ok, "{said}");
    let copy = Server::start_in(restored);
    let tf = Tf::new(TfVersion::V1_11, &copy, "net", &token);
    tf.init();
    let plan = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=one",
    ]);
    assert!(
        plan.ok,
        "the restored state is the configuration's:\n{}",
        plan.output()
    );
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
}
