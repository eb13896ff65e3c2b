//! The unit tests of `inventory`, beside it so that the file holds its code alone.

use super::*;
use crate::domain::document::sniff_resources;

const KEY: [u8; 32] = [7; 32];

fn index(doc: &str) -> StateInventory {
    index_under(doc, &KEY)
}

fn index_under(doc: &str, key: &[u8; 32]) -> StateInventory {
    let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
    let tags = found.as_ref().map(|f| tags_of(f, key));
    inventory_of(3, found.as_ref().zip(tags.as_ref()), key)
}

fn state(resources: &str) -> String {
    format!(r#"{{"version":4,"serial":1,"lineage":"l","resources":[{resources}]}}"#)
}

const AWS: &str = r#"provider[\"registry.terraform.io/hashicorp/aws\"]"#;

#[test]
fn addresses_are_printed_as_terraform_prints_them_and_sorted() {
    let doc = state(&format!(
        r#"{{"module":"module.a[\"k\"]","mode":"managed","type":"aws_x","name":"y","provider":"module.a.{AWS}.west","instances":[{{"index_key":0,"attributes":{{"arn":"arn:i"}}}},{{"index_key":1}}]}},
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
    assert_eq!(&*first.module, r#"module.a["k"]"#);
    assert_eq!(first.mode, Mode::Managed);
    assert_eq!(&*first.resource_type, "aws_x");
    assert_eq!(&*first.provider, "registry.terraform.io/hashicorp/aws");
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
fn identity_is_declared_then_arn_then_self_link_then_id_then_name() {
    let of = |kind: &str, instance: &str| {
        let doc = state(&format!(
            r#"{{"mode":"managed","type":"{kind}","name":"n","provider":"{AWS}","instances":[{instance}]}}"#
        ));
        index(&doc).instances[0].digest.clone()
    };
    let one =
        |attributes: &str| of("google_x", &format!(r#"{{"attributes":{attributes}}}"#)).unwrap();
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
    // The provider's declared identity first, whatever the attributes, its members in any
    // order; never equal to an attribute's.
    let declared = |identity: &str| {
        of(
            "aws_iam_role",
            &format!(r#"{{"attributes":{{"arn":"A","id":"I"}},"identity":{identity}}}"#),
        )
        .unwrap()
    };
    let role = declared(r#"{"account_id":"1","name":"r"}"#);
    assert_eq!(role, declared(r#"{"name":"r","account_id":"1"}"#));
    assert_ne!(role, declared(r#"{"account_id":"2","name":"r"}"#));
    assert_ne!(
        role,
        of("aws_iam_role", r#"{"attributes":{"arn":"A"}}"#).unwrap()
    );
    assert_eq!(
        declared("{}"),
        of("aws_iam_role", r#"{"attributes":{"arn":"A"}}"#).unwrap(),
        "an empty identity is none"
    );
}

/// An `id` or a `name` identifies an object only for the types where it is the same from
/// anywhere: elsewhere it names one within a cluster, an account or a region.
#[test]
fn an_id_or_name_identifies_only_where_it_is_global() {
    let of = |kind: &str, attributes: &str| {
        let doc = state(&format!(
            r#"{{"mode":"managed","type":"{kind}","name":"n","provider":"{AWS}","instances":[{{"attributes":{attributes}}}]}}"#
        ));
        index(&doc).instances[0].digest.clone()
    };
    for kind in [
        "terraform_data",
        "aws_s3_bucket",
        "azurerm_resource_group",
        "google_project",
    ] {
        assert!(of(kind, r#"{"id":"x"}"#).is_some(), "{kind}");
        assert!(of(kind, r#"{"name":"x"}"#).is_some(), "{kind}");
    }
    for kind in [
        "kubernetes_namespace",
        "aws_instance",
        "helm_release",
        "azure_x",
        "googlex",
    ] {
        assert_eq!(of(kind, r#"{"id":"x","name":"y"}"#), None, "{kind}");
        assert!(of(kind, r#"{"arn":"x","id":"y"}"#).is_some(), "{kind}");
    }
}

#[test]
fn the_digest_is_keyed_and_covers_the_type() {
    let doc = |kind: &str| {
        state(&format!(
            r#"{{"mode":"managed","type":"{kind}","name":"n","provider":"{AWS}","instances":[{{"attributes":{{"arn":"same"}}}}]}}"#
        ))
    };
    let under = |key: [u8; 32]| index_under(&doc("t"), &key).instances[0].digest.clone();
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
            r#"{{"mode":"managed","type":"t","name":"n","provider":"provider[\"{source}\"]","instances":[{{"attributes":{{"arn":"x"}}}}]}}"#
        ));
        let inventory = index(&doc);
        assert_eq!(&*inventory.instances[0].provider, source);
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
    // The document's first is the one kept, as it always was: its identity is "one".
    let first = index(&state(&format!(
        r#"{{"mode":"managed","type":"aws_s3_bucket","name":"b","provider":"{AWS}","instances":[{{"attributes":{{"id":"one"}}}}]}}"#
    )));
    assert_eq!(inventory.instances[0].digest, first.instances[0].digest);
}

/// Each provider is worked out once a document: resources that take turns between a
/// provider of shared objects and a local one each keep their own source and identity rule.
#[test]
fn resources_taking_turns_between_providers_keep_their_own() {
    let random = r#"module.m.provider[\"registry.terraform.io/hashicorp/random\"]"#;
    let resources: Vec<String> = (0..6)
        .map(|i| {
            let provider = if i % 2 == 0 { AWS } else { random };
            format!(
                r#"{{"mode":"managed","type":"t{i}","name":"n","provider":"{provider}","instances":[{{"attributes":{{"arn":"x{i}"}}}}]}}"#
            )
        })
        .collect();
    let inventory = index(&state(&resources.join(",")));
    assert_eq!(inventory.instances.len(), 6);
    for (i, instance) in inventory.instances.iter().enumerate() {
        assert_eq!(instance.address, format!("t{i}.n"));
        if i % 2 == 0 {
            assert_eq!(&*instance.provider, "registry.terraform.io/hashicorp/aws");
            assert!(instance.digest.is_some(), "{}", instance.address);
        } else {
            assert_eq!(
                &*instance.provider,
                "registry.terraform.io/hashicorp/random"
            );
            assert_eq!(instance.digest, None, "{}", instance.address);
        }
    }
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
        fingerprint(tags_of(&found.unwrap(), &key).as_slice(), &key)
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
}

fn tags(doc: &str) -> (Found, ResourceTags) {
    let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
    let found = found.unwrap();
    let tags = tags_of(&found, &KEY);
    (found, tags)
}

fn resource(name: &str, id: &str) -> String {
    format!(
        r#"{{"mode":"managed","type":"aws_s3_bucket","name":"{name}","provider":"{AWS}","instances":[{{"index_key":0,"attributes":{{"id":"{id}"}}}},{{"index_key":1}}]}}"#
    )
}

/// A resource's tag is its own: the same wherever it lies and whatever lies beside it, and
/// another for any field the inventory reads of it, or under another org's key.
#[test]
fn a_tag_belongs_to_its_resource_alone() {
    let (a, b, c) = (resource("a", "x"), resource("b", "y"), resource("c", "z"));
    let first = tags(&state(&format!("{a},{b}"))).1.as_slice().to_vec();
    let second = tags(&state(&format!("{c},{b},{a}"))).1.as_slice().to_vec();
    assert_eq!(first.len(), 2);
    assert_eq!((first[0], first[1]), (second[2], second[1]));
    assert_ne!(second[0], first[0]);
    let (_, moved) = tags(&state(&resource("a", "x2")));
    assert_ne!(moved.as_slice()[0], first[0], "an identity is read");
    let (found, _) = tags(&state(&a));
    assert_ne!(tags_of(&found, &[8; 32]).as_slice()[0], first[0]);
    assert_eq!(
        fingerprint(&first, &KEY),
        fingerprint(tags(&state(&format!("{a},{b}"))).1.as_slice(), &KEY)
    );
    assert_ne!(fingerprint(&first, &KEY), fingerprint(&second, &KEY));
}

/// What a save sends over an entry (the instances of the resources whose tags are new),
/// with the entry's rows of the resources still there, is the whole entry it would have
/// sent: for a resource added, one removed, one changed and one kept.
#[test]
fn the_new_resources_instances_with_the_kept_rows_make_the_whole_entry() {
    let (a, b, c) = (resource("a", "x"), resource("b", "y"), resource("c", "z"));
    let before = state(&format!("{a},{b},{c}"));
    let after = state(&format!(
        "{},{c},{}",
        resource("a", "x2"),
        resource("d", "w")
    ));
    let entry = index(&before);
    let (found, now) = tags(&after);
    let built = instances_of(&found, &now, entry.tags.as_ref().unwrap(), &KEY).unwrap();
    let addresses: Vec<&str> = built.iter().map(|i| i.address.as_str()).collect();
    assert_eq!(
        addresses,
        [
            "aws_s3_bucket.a[0]",
            "aws_s3_bucket.a[1]",
            "aws_s3_bucket.d[0]",
            "aws_s3_bucket.d[1]"
        ]
    );
    let kept = TagSet::of(now.as_slice());
    let mut patched: Vec<Instance> = entry
        .instances
        .into_iter()
        .filter(|i| kept.contains(i.resource))
        .chain(built)
        .collect();
    patched.sort_by(|x, y| x.address.cmp(&y.address));
    let whole = index(&after);
    assert_eq!(patched, whole.instances);
    assert_eq!(whole.tags.as_deref(), Some(now.as_slice()));
}

/// Two resources that share a module, mode, type and name may name one address: such a
/// document is only ever indexed whole, and an entry in which two resources did name one
/// address holds no tags, so its next save replaces it whole too.
#[test]
fn resources_that_may_share_an_address_are_indexed_whole() {
    let twice = state(&format!("{},{}", resource("a", "x"), resource("a", "y")));
    let (found, now) = tags(&twice);
    assert_eq!(instances_of(&found, &now, &[], &KEY), None);
    let entry = index(&twice);
    assert_eq!(entry.tags, None);
    assert_eq!(entry.instances.len(), 2, "each address once");
    let once = index(&state(&resource("a", "x")));
    assert_eq!(once.tags.map(|t| t.len()), Some(1));
    let (_, found) =
        sniff_resources(br#"{"encryption_version":"v0","serial":1,"lineage":"l","payload":"x"}"#)
            .unwrap();
    let none = ResourceTags {
        tags: Vec::new(),
        names: Vec::new(),
    };
    let unread = inventory_of(3, found.as_ref().map(|f| (f, &none)), &KEY);
    assert_eq!((unread.indexed, unread.tags), (false, None));
}

#[test]
fn an_order_is_applied_in_place_along_its_cycles() {
    // Two cycles (0 2 4) and (1 3), and a fixed point.
    let mut items = vec!['a', 'b', 'c', 'd', 'e', 'f'];
    let mut order = vec![2, 3, 4, 1, 0, 5];
    super::in_order(&mut items, &mut order);
    assert_eq!(items, ['c', 'd', 'e', 'b', 'a', 'f']);
    let mut seed = 7u64;
    for n in [0usize, 1, 2, 17, 1000] {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (seed >> 33) as usize % (i + 1));
        }
        let expected: Vec<usize> = order.clone();
        let mut items: Vec<usize> = (0..n).collect();
        super::in_order(&mut items, &mut order);
        assert_eq!(items, expected);
    }
}

#[test]
fn an_address_is_made_in_the_room_it_needs() {
    let doc = state(
        r#"{"module":"module.m","mode":"data","type":"aws_ami","name":"base","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{"index_key":-12,"attributes":{}},{"index_key":0,"attributes":{}},{"index_key":"k","attributes":{}},{"index_key":1000,"attributes":{}}]},
           {"mode":"managed","type":"aws_vpc","name":"v","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{"attributes":{}}]}"#,
    );
    for instance in index(&doc).instances {
        assert_eq!(
            instance.address.capacity(),
            instance.address.len(),
            "{}",
            instance.address
        );
    }
}
