//! The unit tests of `inventory`, beside it so that the file holds its code alone.

use super::*;
use crate::domain::document::sniff_resources;

const KEY: [u8; 32] = [7; 32];

fn index(doc: &str) -> StateInventory {
    let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
    inventory_of(3, found.as_ref(), &KEY)
}

fn state(resources: &str) -> String {
    format!(r#"{{"version":4,"serial":1,"lineage":"l","resources":[{resources}]}}"#)
}

const AWS: &str = r#"provider[\"registry.terraform.io/hashicorp/aws\"]"#;

#[test]
fn addresses_are_printed_as_terraform_prints_them_and_sorted() {
    let doc = state(&format!(
        r#"{{"module":"module.a[\"k\"]","mode":"managed","type":"aws_x","name":"y","provider":"module.a.{AWS}.west","instances":[{{"index_key":0,"attributes":{{"id":"i"}}}},{{"index_key":1}}]}},
           {{"mode":"data","type":"aws_ami","name":"base","provider":"{AWS}","instances":[{{"attributes":{{"id":"ami-1"}}}}]}},
           {{"mode":"managed","type":"aws_s3_bucket","name":"b","provider":"{AWS}","instances":[{{"index_key":"a\"b"}}]}}"#
    ));
    let inventory = index(&doc);
    assert!(inventory.indexed);
    assert_eq!(inventory.version, 3);
    let addresses: Vec<_> = inventory
        .instances
        .iter()
        .map(|i| i.address.as_str())
        .collect();
    assert_eq!(
        addresses,
        [
            r#"aws_s3_bucket.b["a\"b"]"#,
            "data.aws_ami.base",
            r#"module.a["k"].aws_x.y[0]"#,
            r#"module.a["k"].aws_x.y[1]"#,
        ]
    );
    let first = &inventory.instances[2];
    assert_eq!(first.module, r#"module.a["k"]"#);
    assert_eq!(first.mode, Mode::Managed);
    assert_eq!(first.resource_type, "aws_x");
    assert_eq!(first.provider, "registry.terraform.io/hashicorp/aws");
    assert!(first.digest.is_some());
    assert_eq!(inventory.instances[1].mode, Mode::Data);
    assert_eq!(
        inventory.instances[1].digest, None,
        "a data source has no identity"
    );
    assert_eq!(
        inventory.instances[3].digest, None,
        "no candidate, no identity"
    );
}

#[test]
fn identity_is_arn_then_self_link_then_id_then_name() {
    let one = |attributes: &str| {
        let doc = state(&format!(
            r#"{{"mode":"managed","type":"t","name":"n","provider":"{AWS}","instances":[{{"attributes":{attributes}}}]}}"#
        ));
        index(&doc).instances[0].digest.clone().unwrap()
    };
    let arn = one(r#"{"arn":"A","self_link":"S","id":"I","name":"N"}"#);
    assert_eq!(arn, one(r#"{"arn":"A"}"#));
    assert_eq!(
        one(r#"{"self_link":"S","id":"I","name":"N"}"#),
        one(r#"{"self_link":"S"}"#)
    );
    assert_eq!(
        one(r#"{"arn":"","id":"I","name":"N"}"#),
        one(r#"{"id":"I"}"#)
    );
    assert_eq!(one(r#"{"arn":7,"name":"N"}"#), one(r#"{"name":"N"}"#));
    assert_ne!(arn, one(r#"{"arn":"B"}"#));
}

#[test]
fn the_digest_is_keyed_and_covers_the_type() {
    let doc = |kind: &str| {
        state(&format!(
            r#"{{"mode":"managed","type":"{kind}","name":"n","provider":"{AWS}","instances":[{{"attributes":{{"id":"same"}}}}]}}"#
        ))
    };
    let (_, found) = sniff_resources(doc("t").as_bytes()).unwrap();
    let under = |key: [u8; 32]| {
        inventory_of(1, found.as_ref(), &key).instances[0]
            .digest
            .clone()
    };
    assert_ne!(under(KEY), under([8; 32]));
    assert_ne!(
        index(&doc("t")).instances[0].digest,
        index(&doc("u")).instances[0].digest
    );
    let digest = under(KEY).unwrap();
    assert_eq!(digest.len(), 64);
    assert!(!digest.contains("same"));
}

#[test]
fn providers_of_local_objects_give_no_identity() {
    for source in [
        "registry.terraform.io/hashicorp/random",
        "registry.terraform.io/hashicorp/null",
        "registry.terraform.io/hashicorp/local",
        "registry.terraform.io/hashicorp/time",
        "registry.terraform.io/hashicorp/tls",
        "registry.terraform.io/hashicorp/archive",
    ] {
        let doc = state(&format!(
            r#"{{"mode":"managed","type":"t","name":"n","provider":"provider[\"{source}\"]","instances":[{{"attributes":{{"id":"x"}}}}]}}"#
        ));
        let inventory = index(&doc);
        assert_eq!(inventory.instances[0].provider, source);
        assert_eq!(inventory.instances[0].digest, None, "{source}");
    }
}

#[test]
fn terraform_data_is_identified_by_its_id() {
    let doc = state(
        r#"{"mode":"managed","type":"terraform_data","name":"n","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"attributes":{"id":"0b6e3c1e-uuid"}}]}"#,
    );
    assert!(index(&doc).instances[0].digest.is_some());
}

#[test]
fn the_provider_loses_its_module_prefix_and_alias() {
    assert_eq!(
        provider_source(r#"module.x.provider["registry.terraform.io/hashicorp/aws"].west"#),
        "registry.terraform.io/hashicorp/aws"
    );
    assert_eq!(
        provider_source("provider.google.eu"),
        "registry.terraform.io/hashicorp/google"
    );
    assert_eq!(
        namespace_type("registry.terraform.io/hashicorp/aws"),
        "hashicorp/aws"
    );
    assert_eq!(namespace_type("aws"), "aws");
}

#[test]
fn deposed_objects_are_left_out() {
    let doc = state(&format!(
        r#"{{"mode":"managed","type":"t","name":"n","provider":"{AWS}","instances":[{{"attributes":{{"id":"new"}}}},{{"deposed":"00000001","attributes":{{"id":"old"}}}}]}}"#
    ));
    let inventory = index(&doc);
    assert_eq!(inventory.instances.len(), 1);
    assert_eq!(inventory.instances[0].address, "t.n");
}

#[test]
fn encrypted_and_other_formats_are_not_indexed() {
    for doc in [
        r#"{"encryption_version":"v0","serial":1,"lineage":"l","payload":"x"}"#,
        r#"{"version":3,"serial":1,"lineage":"l","modules":[]}"#,
        r#"{"version":4,"serial":1,"lineage":"l","resources":{}}"#,
    ] {
        let inventory = index(doc);
        assert!(!inventory.indexed, "{doc}");
        assert!(inventory.instances.is_empty());
    }
    let empty = index(r#"{"version":4,"serial":1,"lineage":"l"}"#);
    assert!(empty.indexed);
    assert!(empty.instances.is_empty());
}

#[test]
fn unknown_modes_and_resources_missing_fields_are_skipped() {
    let doc = state(
        r#"{"mode":"other","type":"t","name":"a","instances":[{}]},{"mode":"managed","name":"b","instances":[{}]},{"mode":"managed","type":"t","name":"c","instances":[{}]}"#,
    );
    let inventory = index(&doc);
    let addresses: Vec<_> = inventory
        .instances
        .iter()
        .map(|i| i.address.as_str())
        .collect();
    assert_eq!(addresses, ["t.c"]);
}

#[test]
fn an_instance_named_twice_is_kept_once() {
    let doc = state(&format!(
        r#"{{"mode":"managed","type":"aws_s3_bucket","name":"b","provider":"{AWS}","instances":[{{"attributes":{{"id":"one"}}}},{{"attributes":{{"id":"two"}}}}]}}"#
    ));
    let inventory = index(&doc);
    assert_eq!(inventory.instances.len(), 1);
    assert_eq!(inventory.instances[0].address, "aws_s3_bucket.b");
}

/// Equal fingerprints mean the same instances kept: whatever the inventory reads moves the
/// fingerprint (an identity, a key and its kind, a provider), what it does not (another
/// attribute, the serial) leaves it, and another org's key gives another.
#[test]
fn the_fingerprint_moves_with_what_the_index_keeps_and_with_nothing_else() {
    let doc = |serial: u64, key: &str, id: &str, provider: &str, tag: &str| {
        format!(
            r#"{{"version":4,"serial":{serial},"lineage":"l","resources":[{{"mode":"managed","type":"aws_x","name":"n","provider":"{provider}","instances":[{{"index_key":{key},"attributes":{{"id":"{id}","tags":{{"team":"{tag}"}}}}}}]}}]}}"#
        )
    };
    let of = |doc: String, key: [u8; 32]| {
        let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
        fingerprint(found.as_ref(), &key).unwrap()
    };
    let base = of(doc(1, "0", "i-1", AWS, "a"), KEY);
    assert_eq!(base.len(), 64);
    assert_eq!(base, of(doc(2, "0", "i-1", AWS, "b"), KEY));
    for other in [
        doc(1, "1", "i-1", AWS, "a"),
        doc(1, r#""0""#, "i-1", AWS, "a"),
        doc(1, "0", "i-2", AWS, "a"),
        doc(1, "0", "i-1", &format!("{AWS}.west"), "a"),
    ] {
        assert_ne!(base, of(other.clone(), KEY), "{other}");
    }
    assert_ne!(base, of(doc(1, "0", "i-1", AWS, "a"), [8; 32]));
    let encrypted = br#"{"encryption_version":"v0","serial":1,"lineage":"l","payload":"x"}"#;
    let (_, found) = sniff_resources(encrypted).unwrap();
    assert_eq!(fingerprint(found.as_ref(), &KEY), None);
}
