//! The unit tests of `document`, beside it so that the file holds its code alone.

use super::*;

fn reason(body: &str) -> String {
    match sniff(body.as_bytes()) {
        Err(Refusal::NotAState { reason }) => reason,
        other => panic!("expected a refusal for {body:?}, got {other:?}"),
    }
}

#[test]
fn keeps_serial_and_lineage_of_a_terraform_state() {
    let meta = sniff(
        br#"{"version":4,"terraform_version":"1.11.4","serial":9,"lineage":"abc","outputs":{"x":{"value":[1,{"a":null}]}},"resources":[],"check_results":null}"#,
    )
    .unwrap();
    assert_eq!(
        meta,
        StateMeta {
            serial: Some(9),
            lineage: Some("abc".into()),
            opentofu_encrypted: false,
            terraform_version: Some("1.11.4".into()),
            instances: Some(0),
        }
    );
}

#[test]
fn counts_every_instance_of_every_resource_in_the_same_pass() {
    let meta = sniff(
        br#"{"version":4,"terraform_version":"1.11.4","serial":2,"lineage":"l","resources":[
            {"mode":"managed","type":"terraform_data","name":"a","instances":[{"attributes":{"instances":[1,2,3]}}]},
            {"module":"module.m","mode":"data","type":"t","name":"b","instances":[{"index_key":0},{"index_key":1},{"index_key":"x","deposed":"0001"}]},
            {"mode":"managed","type":"t","name":"empty","instances":[]}
        ]}"#,
    )
    .unwrap();
    assert_eq!(meta.instances, Some(4));
    assert_eq!(meta.terraform_version.as_deref(), Some("1.11.4"));
}

#[test]
fn instances_of_other_shapes_and_formats_are_unknown() {
    let count = |doc: &str| sniff(doc.as_bytes()).unwrap().instances;
    assert_eq!(count(r#"{"version":4,"serial":1,"lineage":"l"}"#), Some(0));
    assert_eq!(
        count(r#"{"version":4,"serial":1,"lineage":"l","resources":{}}"#),
        None
    );
    assert_eq!(
        count(r#"{"version":4,"serial":1,"lineage":"l","resources":[7]}"#),
        None
    );
    assert_eq!(
        count(r#"{"version":4,"serial":1,"lineage":"l","resources":[{"instances":"x"}]}"#),
        None
    );
    assert_eq!(
        count(r#"{"version":3,"serial":1,"lineage":"l","modules":[{"resources":{}}]}"#),
        None
    );
    let encrypted = sniff(br#"{"serial":7,"lineage":"l","terraform_version":"1.10.0","resources":[{"instances":[{}]}],"encrypted_data":"AAAA","encryption_version":"v0"}"#).unwrap();
    assert_eq!(encrypted.instances, None);
    assert_eq!(encrypted.terraform_version.as_deref(), Some("1.10.0"));
}

#[test]
fn broken_json_inside_counted_resources_is_still_refused() {
    assert!(reason(
        r#"{"version":4,"serial":1,"lineage":"l","resources":[{"instances":[{"a":tru}]}]}"#
    )
    .contains("invalid JSON"));
}

#[test]
fn classifies_opentofu_encryption_by_its_last_field() {
    let meta = sniff(br#"{"serial":7,"lineage":"l","meta":{"key_provider.pbkdf2.main":"eA=="},"encrypted_data":"AAAA","encryption_version":"v0"}"#).unwrap();
    assert!(meta.opentofu_encrypted);
    assert_eq!(meta.serial, Some(7));
    let bare = sniff(br#"{"encrypted_data":"AAAA","encryption_version":"v0"}"#).unwrap();
    assert!(bare.opentofu_encrypted);
    assert_eq!(bare.serial, None);
}

#[test]
fn an_empty_encryption_version_is_a_plain_state_and_needs_its_fields() {
    assert!(reason(r#"{"encryption_version":"","encrypted_data":"x"}"#).contains("version"));
}

#[test]
fn refuses_broken_json_anywhere_in_the_document() {
    assert!(
        reason(r#"{"version":4,"serial":1,"lineage":"l","resources":[1,2,}"#)
            .contains("invalid JSON")
    );
    assert!(
        reason(r#"{"version":4,"serial":1,"lineage":"l","outputs":{"a":"\q"}}"#)
            .contains("invalid JSON")
    );
    assert!(reason(r#"{"version":4,"serial":1,"lineage":"l"} trailing"#).contains("invalid JSON"));
}

#[test]
fn refuses_invalid_utf8_inside_ignored_strings() {
    let mut body = br#"{"version":4,"serial":1,"lineage":"l","outputs":{"a":""#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe]);
    body.extend_from_slice(br#""}}"#);
    assert!(matches!(sniff(&body), Err(Refusal::NotAState { reason }) if reason.contains("UTF-8")));
}

#[test]
fn refuses_non_objects_and_empty_bodies() {
    assert!(reason("[]").contains("not a JSON object"));
    assert!(reason("42").contains("not a JSON object"));
    assert!(reason("  ").contains("empty"));
}

#[test]
fn names_the_missing_or_mistyped_field() {
    assert!(reason(r#"{"serial":1,"lineage":"l"}"#).contains("\"version\""));
    assert!(reason(r#"{"version":4,"lineage":"l"}"#).contains("\"serial\""));
    assert!(reason(r#"{"version":4,"serial":1}"#).contains("\"lineage\""));
    assert!(reason(r#"{"version":4,"serial":"1","lineage":"l"}"#).contains("not a string"));
    assert!(reason(r#"{"version":4,"serial":-1,"lineage":"l"}"#).contains("negative"));
    assert!(reason(r#"{"version":4,"serial":1.5,"lineage":"l"}"#).contains("fraction"));
    assert!(reason(r#"{"version":4,"serial":1,"lineage":7}"#).contains("must be a string"));
    assert!(reason(r#"{"version":4,"serial":1,"lineage":""}"#).contains("empty"));
}

#[test]
fn raising_the_serial_changes_only_its_digits() {
    let body = b"{\n  \"version\": 4,\n  \"serial\": 9,\n  \"lineage\": \"l\",\n  \"outputs\": {\"serial\": 1, \"s\": \"}\\\"\"}\n}\n";
    let raised = with_serial(body.to_vec(), 12).unwrap();
    let expected = String::from_utf8_lossy(body).replace("\"serial\": 9", "\"serial\": 12");
    assert_eq!(String::from_utf8(raised.clone()).unwrap(), expected);
    assert_eq!(sniff(&raised).unwrap().serial, Some(12));
    let compact =
        br#"{"serial":7,"lineage":"l","meta":{},"encrypted_data":"x","encryption_version":"v0"}"#;
    assert_eq!(
        sniff(&with_serial(compact.to_vec(), 8).unwrap())
            .unwrap()
            .serial,
        Some(8)
    );
}

#[test]
fn raising_needs_a_top_level_serial() {
    assert!(with_serial(br#"{"outputs":{"serial":1}}"#.to_vec(), 2).is_err());
    assert!(with_serial(b"[]".to_vec(), 2).is_err());
    assert!(with_serial(b"{}".to_vec(), 2).is_err());
}

#[test]
fn a_later_duplicate_key_wins() {
    let meta = sniff(br#"{"version":4,"serial":1,"serial":2,"lineage":"l"}"#).unwrap();
    assert_eq!(meta.serial, Some(2));
}

#[test]
fn collecting_resources_counts_as_sniff_does() {
    let doc = br#"{"version":4,"serial":2,"lineage":"l","resources":[
        {"module":"module.m","mode":"managed","type":"t","name":"a","provider":"p","instances":[{"index_key":0,"attributes":{"id":"x","secret":"s"}},{"index_key":"k","deposed":"0001"}]},
        {"mode":"data","type":"d","name":"b","instances":[{}]}
    ]}"#;
    let (meta, found) = sniff_resources(doc).unwrap();
    assert_eq!(meta, sniff(doc).unwrap());
    assert_eq!(meta.instances, Some(3));
    let found = found.unwrap();
    assert_eq!(found.len(), 2);
    let mut resources = found.iter();
    let first = resources.next().unwrap();
    assert_eq!(first.module, "module.m");
    let instances: Vec<_> = first.instances().collect();
    assert_eq!(instances.len(), 1, "the deposed object is left out");
    assert_eq!(instances[0].key, Some(IndexKey::Int(0)));
    assert_eq!(
        instances[0].identity,
        Some(Identity {
            kind: IdentityKind::Scoped,
            text: "x"
        })
    );
    let second = resources.next().unwrap();
    assert_eq!(second.module, "");
    assert_eq!(second.provider, "");
}

#[test]
fn an_identity_never_shows_its_value() {
    let (_, found) = sniff_resources(
        br#"{"version":4,"serial":2,"lineage":"l","resources":[{"mode":"managed","type":"t","name":"a","instances":[{"attributes":{"arn":"arn:secret"}}]}]}"#,
    )
    .unwrap();
    let shown = format!("{found:?}");
    assert!(!shown.contains("arn:secret"), "{shown}");
}

#[test]
fn collecting_still_refuses_what_sniff_refuses() {
    for doc in [&b"{"[..], br#"{"version":4,"serial":1,"lineage":"l","resources":[{"instances":[{"attributes":{"id":"x"}}]]}"#] {
        assert!(sniff_resources(doc).is_err());
    }
}

#[test]
fn what_a_skipped_resource_or_a_repeated_field_collected_is_not_kept() {
    // The first resource has no type: its instances and strings are dropped, and the next
    // resource's are read as its own. The second names `instances` twice (the later wins)
    // and `id` after an empty `arn`.
    let doc = br#"{"version":4,"serial":2,"lineage":"l","resources":[
        {"module":"module.gone","mode":"managed","name":"a","instances":[{"index_key":"gone","attributes":{"id":"gone"}}]},
        {"mode":"managed","type":"t","name":"b","provider":"p",
         "instances":[{"index_key":"old"},{"index_key":"old2"}],
         "instances":[{"index_key":"new","attributes":{"arn":"","name":"n","id":"i","id":""}}]}
    ]}"#;
    let (meta, found) = sniff_resources(doc).unwrap();
    assert_eq!(
        meta.instances,
        Some(2),
        "each resource's later `instances` counted"
    );
    let found = found.unwrap();
    assert_eq!(found.len(), 1);
    let resource = found.iter().next().unwrap();
    assert_eq!(
        (
            resource.module,
            resource.mode,
            resource.resource_type,
            resource.name,
            resource.provider
        ),
        ("", "managed", "t", "b", "p")
    );
    let instances: Vec<_> = resource.instances().collect();
    assert_eq!(instances.len(), 1);
    assert_eq!(instances[0].key, Some(IndexKey::Str("new")));
    assert_eq!(
        instances[0].identity,
        Some(Identity {
            kind: IdentityKind::Scoped,
            text: "i"
        }),
        "the last non-empty `id` counts"
    );
}

/// The identities of each instance of the document's one resource.
fn identities(doc: &[u8]) -> Vec<Option<(IdentityKind, String)>> {
    let (_, found) = sniff_resources(doc).unwrap();
    let found = found.unwrap();
    let resource = found.iter().next().unwrap();
    resource
        .instances()
        .map(|i| i.identity.map(|id| (id.kind, id.text.to_owned())))
        .collect()
}

#[test]
fn a_declared_identity_comes_first_its_members_sorted_and_set() {
    // As Terraform 1.12 and later write it: `identity` after `attributes`, members in the
    // provider's order; one named twice (the later counts), one null (left out).
    let doc = br#"{"version":4,"serial":2,"lineage":"l","resources":[
        {"mode":"managed","type":"aws_s3_bucket","name":"b","instances":[
            {"attributes":{"arn":"arn:aws:s3:::b"},"identity_schema_version":0,
             "identity":{"region":"eu-west-1","bucket":"b","account_id":"1","region":"us-east-1","tags":null,"ports":[2,1]}},
            {"attributes":{"arn":"arn:aws:s3:::c"},"identity_schema_version":0},
            {"attributes":{"id":"d"},"identity":{}},
            {"identity":{"zone":null},"attributes":{"name":"e"}},
            {"identity":"odd","attributes":{"arn":"\u0001{}"}}
        ]}
    ]}"#;
    assert_eq!(
        identities(doc),
        [
            Some((
                IdentityKind::Declared,
                r#"{"account_id":"1","bucket":"b","ports":[2,1],"region":"us-east-1"}"#.to_owned()
            )),
            Some((IdentityKind::Named, "arn:aws:s3:::c".to_owned())),
            Some((IdentityKind::Scoped, "d".to_owned())),
            Some((IdentityKind::Scoped, "e".to_owned())),
            None,
        ]
    );
    // Any value, escaped and sorted as compact JSON.
    let odd = br#"{"version":4,"serial":2,"lineage":"l","resources":[
        {"mode":"managed","type":"t","name":"b","instances":[
            {"identity":{"n":1.5,"b":{"y":-1,"x":"q\"\u0007"},"a":true,"l":[null,"s"]}}]}]}"#;
    assert_eq!(
        identities(odd)[0],
        Some((
            IdentityKind::Declared,
            r#"{"a":true,"b":{"x":"q\"\u0007","y":-1},"l":[null,"s"],"n":1.5}"#.to_owned()
        ))
    );
    // Another member order is the same identity.
    let other = br#"{"version":4,"serial":2,"lineage":"l","resources":[
        {"mode":"managed","type":"aws_s3_bucket","name":"b","instances":[
            {"identity":{"ports":[2,1],"account_id":"1","bucket":"b","region":"us-east-1"}}]}]}"#;
    assert_eq!(identities(other)[0], identities(doc)[0]);
}

#[test]
fn identity_attributes_rank_in_the_order_they_are_listed() {
    for (rank, name) in IDENTITY_ATTRIBUTES.iter().enumerate() {
        assert_eq!((resources::IDENTITY_RANKS.0)(name), Some(rank), "{name}");
    }
    for other in ["", "ARN", "arns", "tags", "self"] {
        assert_eq!((resources::IDENTITY_RANKS.0)(other), None, "{other}");
    }
}

#[test]
fn refuses_a_unicode_escape_without_four_hex_digits_in_a_skipped_value() {
    let refused = reason(
        "{\"version\":4,\"serial\":1,\"lineage\":\"l\",\n\"outputs\":{\"a\":{\"value\":\"\\u00zz\"}}}",
    );
    assert!(
        refused.contains("invalid JSON at line 2 column 26"),
        "{refused}"
    );
    assert!(
        sniff(br#"{"version":4,"serial":1,"lineage":"l","outputs":{"a":"\u00e9\\u"}}"#).is_ok()
    );
}

#[test]
fn a_refusal_never_quotes_the_bytes_around_the_fault() {
    for body in [
        r#"{"version":4,"serial":1,"lineage":"l","outputs":{"pw":{"value":"hunter2-secret"},}}"#,
        r#"{"version":4,"serial":1,"lineage":"l","outputs":{"pw":{"value":"hunter2-secret" x}}}"#,
        r#"{"version":4,"serial":1,"lineage":"l","resources":[{"instances":[{"attributes":{"password":"hunter2-secret"]}}]}"#,
    ] {
        let refused = reason(body);
        assert!(
            refused.starts_with("invalid JSON at line 1 column "),
            "{refused}"
        );
        assert!(!refused.contains("hunter2"), "{refused}");
        assert!(!refused.contains('\n'), "{refused}");
    }
}
