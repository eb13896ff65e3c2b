//! The comparison over hand-made state documents: every shape of address and attribute the
//! answer must tell apart, and never a value in it.

use super::*;

/// A format-4 state of `resources` (JSON array items) and `outputs` (JSON object members).
fn doc(lineage: &str, serial: u64, resources: &str, outputs: &str) -> String {
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"{lineage}","outputs":{{{outputs}}},"resources":[{resources}],"check_results":null}}"#
    )
}

/// One resource with the given instances (JSON objects).
fn resource(
    module: Option<&str>,
    mode: &str,
    kind: &str,
    name: &str,
    instances: &[String],
) -> String {
    let module = module.map_or(String::new(), |m| format!(r#""module":"{m}","#));
    format!(
        r#"{{{module}"mode":"{mode}","type":"{kind}","name":"{name}","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{}]}}"#,
        instances.join(",")
    )
}

/// An instance with `index_key` (raw JSON, or none), `attributes` (a JSON object) and
/// `sensitive` (raw `sensitive_attributes`).
fn instance(index_key: Option<&str>, attributes: &str, sensitive: &str) -> String {
    let key = index_key.map_or(String::new(), |k| format!(r#""index_key":{k},"#));
    format!(
        r#"{{{key}"schema_version":0,"attributes":{attributes},"sensitive_attributes":{sensitive}}}"#
    )
}

fn plain(attributes: &str) -> String {
    instance(None, attributes, "[]")
}

fn summary(doc: &str) -> Summary {
    summarize(doc.as_bytes()).unwrap()
}

/// The comparison of two documents, checked to be the same whether the second side is
/// summarized first or compared as it is read.
fn changes(before: &str, after: &str) -> Comparison {
    let summarized = compare(&summary(before), &summary(after));
    let (facts, streamed) = compare_to(&summary(before), after.as_bytes()).unwrap();
    assert_eq!(streamed, summarized);
    assert_eq!(facts, summary(after).facts);
    summarized
}

fn addresses(list: &[InstanceView]) -> Vec<&str> {
    list.iter().map(|i| i.address.as_str()).collect()
}

/// `address (paths)` of each changed instance.
fn changed(c: &Comparison) -> Vec<String> {
    c.resources
        .changed
        .iter()
        .map(|i| format!("{} ({})", i.instance.address, i.attributes.join(", ")))
        .collect()
}

#[test]
fn an_added_a_changed_and_a_removed_instance() {
    let bucket = resource(
        None,
        "managed",
        "aws_s3_bucket",
        "receipts",
        &[plain(r#"{"bucket":"r"}"#)],
    );
    let role = |policy: &str, team: &str| {
        resource(
            None,
            "managed",
            "aws_iam_role",
            "app",
            &[plain(&format!(
                r#"{{"name":"app","policy":"{policy}","tags":{{"team":"{team}","env":"prod"}}}}"#
            ))],
        )
    };
    let old = resource(
        None,
        "managed",
        "aws_sqs_queue",
        "old",
        &[plain(r#"{"name":"q"}"#)],
    );
    let before = doc("l", 1, &[role("p1", "a"), old].join(","), "");
    let after = doc("l", 2, &[bucket, role("p2", "b")].join(","), "");
    let c = changes(&before, &after);
    assert_eq!(addresses(&c.resources.added), ["aws_s3_bucket.receipts"]);
    assert_eq!(changed(&c), ["aws_iam_role.app (policy, tags.team)"]);
    assert_eq!(addresses(&c.resources.removed), ["aws_sqs_queue.old"]);
    assert_eq!(
        c.counts,
        Counts {
            added: 1,
            changed: 1,
            removed: 1
        }
    );
}

#[test]
fn the_same_document_changes_nothing_however_its_keys_are_ordered() {
    let a = doc(
        "l",
        1,
        &resource(
            None,
            "managed",
            "t",
            "x",
            &[plain(r#"{"a":1,"b":{"c":[1,2]}}"#)],
        ),
        r#""o":{"value":"v","type":"string"}"#,
    );
    let b = doc(
        "l",
        1,
        &resource(
            None,
            "managed",
            "t",
            "x",
            &[plain(r#"{"b":{"c":[1,2]},"a":1}"#)],
        ),
        r#""o":{"type":"string","value":"v"}"#,
    );
    let c = changes(&a, &b);
    assert!(
        c.resources.changed.is_empty() && c.outputs.changed.is_empty(),
        "{c:?}"
    );
    assert_eq!(
        c.counts,
        Counts {
            added: 0,
            changed: 0,
            removed: 0
        }
    );
}

#[test]
fn modules_and_data_sources_are_part_of_the_address() {
    let data = resource(
        Some("module.net[\\\"eu\\\"]"),
        "data",
        "aws_ami",
        "base",
        &[plain(r#"{"id":"ami-1"}"#)],
    );
    let root = resource(
        None,
        "data",
        "aws_ami",
        "base",
        &[plain(r#"{"id":"ami-1"}"#)],
    );
    let nested = resource(
        Some("module.a.module.b"),
        "managed",
        "aws_vpc",
        "main",
        &[plain(r#"{"cidr":"10.0.0.0/16"}"#)],
    );
    let c = changes(
        &doc("l", 1, &root, ""),
        &doc("l", 2, &[root.clone(), data, nested].join(","), ""),
    );
    assert_eq!(
        addresses(&c.resources.added),
        [
            "module.a.module.b.aws_vpc.main",
            r#"module.net["eu"].data.aws_ami.base"#
        ]
    );
    let added = &c.resources.added[1].parts;
    assert_eq!(added.module.as_deref(), Some(r#"module.net["eu"]"#));
    assert_eq!(added.mode, "data");
    assert!(c.resources.changed.is_empty());
}

#[test]
fn count_and_for_each_keys_are_numbers_and_strings() {
    let counted = |n: usize| {
        let instances: Vec<String> = (0..n)
            .map(|i| instance(Some(&i.to_string()), &format!(r#"{{"i":{i}}}"#), "[]"))
            .collect();
        resource(None, "managed", "aws_instance", "web", &instances)
    };
    let each = |keys: &[&str], v: &str| {
        let instances: Vec<String> = keys
            .iter()
            .map(|k| {
                instance(
                    Some(&format!(r#""{k}""#)),
                    &format!(r#"{{"v":"{v}"}}"#),
                    "[]",
                )
            })
            .collect();
        resource(None, "managed", "aws_iam_user", "u", &instances)
    };
    let before = doc(
        "l",
        1,
        &[counted(2), each(&["alice", "bob"], "1")].join(","),
        "",
    );
    let after = doc(
        "l",
        2,
        &[counted(3), each(&["alice", "carol"], "1")].join(","),
        "",
    );
    let c = changes(&before, &after);
    assert_eq!(
        addresses(&c.resources.added),
        [r#"aws_iam_user.u["carol"]"#, "aws_instance.web[2]"]
    );
    assert_eq!(
        addresses(&c.resources.removed),
        [r#"aws_iam_user.u["bob"]"#]
    );
    assert_eq!(
        c.resources.added[1].parts.index_key,
        Some(IndexKey::Number(2))
    );
    assert_eq!(
        c.resources.added[0].parts.index_key,
        Some(IndexKey::Text("carol".into()))
    );
    let json = serde_json::to_value(&c.resources.added).unwrap();
    assert_eq!(json[0]["index_key"], "carol");
    assert_eq!(json[1]["index_key"], 2);
}

/// An instance that moved from `count` to `for_each` (or between keys) is another address:
/// the old one is removed and the new one added, even with the same attributes.
#[test]
fn instances_moving_between_index_keys_are_removed_and_added() {
    let attributes = r#"{"name":"db"}"#;
    let before = doc(
        "l",
        1,
        &resource(
            None,
            "managed",
            "aws_db",
            "main",
            &[instance(Some("0"), attributes, "[]")],
        ),
        "",
    );
    let after = doc(
        "l",
        2,
        &resource(
            None,
            "managed",
            "aws_db",
            "main",
            &[instance(Some(r#""primary""#), attributes, "[]")],
        ),
        "",
    );
    let c = changes(&before, &after);
    assert_eq!(addresses(&c.resources.removed), ["aws_db.main[0]"]);
    assert_eq!(addresses(&c.resources.added), [r#"aws_db.main["primary"]"#]);
    assert!(c.resources.changed.is_empty());
}

#[test]
fn nested_attributes_are_named_down_three_levels() {
    let one = |v: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "aws_sg",
                "x",
                &[plain(&format!(
                    r#"{{"ingress":[{{"from_port":{v},"cidr":["10/8"]}}],"tags":{{"kubernetes.io/role":"{v}","team":"x"}},"deep":{{"a":{{"b":{{"c":"{v}"}}}}}},"same":{{"k":1}}}}"#
                ))],
            ),
            "",
        )
    };
    let c = changes(&one("1"), &one("2"));
    assert_eq!(
        changed(&c),
        [r#"aws_sg.x (deep.a.b, ingress[0].from_port, tags["kubernetes.io/role"])"#]
    );
}

#[test]
fn a_list_that_changes_length_is_named_as_a_whole() {
    let one = |list: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "aws_sg",
                "x",
                &[plain(&format!(
                    r#"{{"ingress":{list},"egress":[{{"port":1}}]}}"#
                ))],
            ),
            "",
        )
    };
    let c = changes(
        &one(r#"[{"port":22}]"#),
        &one(r#"[{"port":22},{"port":443}]"#),
    );
    assert_eq!(changed(&c), ["aws_sg.x (ingress)"]);
    let c = changes(&one(r#"[{"port":22},{"port":443}]"#), &one("[]"));
    assert_eq!(changed(&c), ["aws_sg.x (ingress)"]);
}

#[test]
fn attributes_that_appear_or_go_and_values_that_change_type_are_named() {
    let one = |attributes: &str| {
        doc(
            "l",
            1,
            &resource(None, "managed", "t", "x", &[plain(attributes)]),
            "",
        )
    };
    let c = changes(
        &one(r#"{"a":1,"gone":2,"t":{"k":1}}"#),
        &one(r#"{"a":1,"new":2,"t":[1]}"#),
    );
    assert_eq!(changed(&c), ["t.x (gone, new, t)"]);
}

#[test]
fn sensitive_attributes_are_marked_and_named_only_as_a_whole() {
    let marks =
        r#"[[{"type":"get_attr","value":"password"}],[{"type":"get_attr","value":"secrets"}]]"#;
    let one = |password: &str, key: &str, name: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "aws_db",
                "main",
                &[instance(
                    None,
                    &format!(
                        r#"{{"name":"{name}","password":"{password}","secrets":{{"{key}":"v"}}}}"#
                    ),
                    marks,
                )],
            ),
            "",
        )
    };
    let c = changes(&one("hunter2", "k1", "db"), &one("hunter3", "k2", "db"));
    let db = &c.resources.changed[0];
    assert_eq!(
        db.attributes,
        ["password", "secrets"],
        "no key below a sensitive value"
    );
    assert_eq!(db.sensitive, ["password", "secrets"]);
    assert!(db.sensitive_only);
    let c = changes(&one("hunter2", "k1", "db"), &one("hunter3", "k1", "db2"));
    let db = &c.resources.changed[0];
    assert_eq!(db.attributes, ["name", "password"]);
    assert_eq!(db.sensitive, ["password"]);
    assert!(!db.sensitive_only);
}

#[test]
fn an_attribute_becoming_sensitive_changes_its_instance() {
    let one = |marks: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "aws_db",
                "main",
                &[instance(None, r#"{"password":"p"}"#, marks)],
            ),
            "",
        )
    };
    let c = changes(
        &one("[]"),
        &one(r#"[[{"type":"get_attr","value":"password"}]]"#),
    );
    let db = &c.resources.changed[0];
    assert!(db.attributes.is_empty());
    assert_eq!(db.other, ["sensitive_attributes"]);
    assert!(!db.sensitive_only);
}

#[test]
fn other_fields_of_an_instance_are_named_when_they_change() {
    let one = |status: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "t",
                "x",
                &[format!(
                    r#"{{"schema_version":0,{status}"attributes":{{"a":1}},"dependencies":["t.y"]}}"#
                )],
            ),
            "",
        )
    };
    let c = changes(&one(""), &one(r#""status":"tainted","#));
    assert_eq!(c.resources.changed[0].other, ["status"]);
}

#[test]
fn deposed_objects_have_their_own_address() {
    let with_deposed = resource(
        None,
        "managed",
        "aws_instance",
        "x",
        &[
            plain(r#"{"id":"new"}"#),
            r#"{"deposed":"00000001","schema_version":0,"attributes":{"id":"old"}}"#.to_owned(),
        ],
    );
    let c = changes(&doc("l", 1, "", ""), &doc("l", 2, &with_deposed, ""));
    assert_eq!(
        addresses(&c.resources.added),
        ["aws_instance.x", "aws_instance.x (deposed object 00000001)"]
    );
}

#[test]
fn outputs_added_removed_changed_and_becoming_sensitive() {
    let before = doc(
        "l",
        1,
        "",
        r#""kept":{"value":"a","type":"string"},"changes":{"value":1,"type":"number"},"hides":{"value":"x","type":"string"},"gone":{"value":"g","type":"string","sensitive":true}"#,
    );
    let after = doc(
        "l",
        2,
        "",
        r#""kept":{"value":"a","type":"string"},"changes":{"value":2,"type":"number"},"hides":{"value":"x","type":"string","sensitive":true},"new":{"value":"n","type":"string","sensitive":true}"#,
    );
    let c = changes(&before, &after);
    assert_eq!(
        c.outputs.added,
        [OutputView {
            name: "new".into(),
            sensitive: true
        }]
    );
    assert_eq!(
        c.outputs.removed,
        [OutputView {
            name: "gone".into(),
            sensitive: true
        }]
    );
    assert_eq!(
        c.outputs.changed,
        [
            ChangedOutput {
                name: "changes".into(),
                sensitive: false,
                was_sensitive: false,
                value_changed: true
            },
            ChangedOutput {
                name: "hides".into(),
                sensitive: true,
                was_sensitive: false,
                value_changed: false
            },
        ]
    );
}

#[test]
fn an_empty_state_and_no_state_at_all() {
    let empty = doc("l", 1, "", "");
    let full = doc(
        "l",
        2,
        &resource(None, "managed", "t", "x", &[plain(r#"{"a":1}"#)]),
        r#""o":{"value":1,"type":"number"}"#,
    );
    let c = changes(&empty, &full);
    assert_eq!(
        c.counts,
        Counts {
            added: 1,
            changed: 0,
            removed: 0
        }
    );
    let c = changes(&full, &empty);
    assert_eq!(
        c.counts,
        Counts {
            added: 0,
            changed: 0,
            removed: 1
        }
    );
    assert_eq!(c.outputs.removed.len(), 1);
    let c = compare(&Summary::default(), &summary(&full));
    assert_eq!(c.counts.added, 1, "the first version adds everything");
    let c = compare(&summary(&empty), &summary(&empty));
    assert!(c.resources.added.is_empty() && c.outputs.added.is_empty());
}

/// Another lineage is compared all the same; the summaries say which each side is.
#[test]
fn different_lineages_are_compared_and_told_apart() {
    let a = summary(&doc(
        "one",
        3,
        &resource(None, "managed", "t", "x", &[plain(r#"{"a":1}"#)]),
        "",
    ));
    let b = summary(&doc(
        "two",
        1,
        &resource(None, "managed", "t", "x", &[plain(r#"{"a":2}"#)]),
        "",
    ));
    assert_eq!(
        (a.facts.lineage.as_deref(), a.facts.serial),
        (Some("one"), Some(3))
    );
    assert_eq!(
        (
            b.facts.lineage.as_deref(),
            b.facts.terraform_version.as_deref()
        ),
        (Some("two"), Some("1.11.4"))
    );
    assert_eq!(changed(&compare(&a, &b)), ["t.x (a)"]);
}

#[test]
fn no_value_appears_in_the_answer() {
    let secret = "s3cr3t-planted-7f1e";
    let marks = r#"[[{"type":"get_attr","value":"password"}]]"#;
    let one = |v: &str| {
        doc(
            "l",
            1,
            &resource(
                None,
                "managed",
                "aws_db",
                "main",
                &[instance(
                    None,
                    &format!(
                        r#"{{"password":"{v}","note":"{v}","list":["{v}"],"map":{{"k":"{v}"}}}}"#
                    ),
                    marks,
                )],
            ),
            &format!(r#""pw":{{"value":"{v}","type":"string","sensitive":true}}"#),
        )
    };
    let c = changes(&one("x"), &one(secret));
    let text = serde_json::to_string(&c).unwrap();
    assert!(
        text.contains("password") && text.contains("\"pw\""),
        "{text}"
    );
    assert!(!text.contains(secret) && !text.contains("s3cr3t"), "{text}");
    let c = changes(&one(secret), &one("y"));
    assert!(!serde_json::to_string(&c).unwrap().contains(secret));
}

#[test]
fn only_format_4_and_readable_versions_are_compared() {
    let v3 = summarize(br#"{"version":3,"serial":1,"lineage":"l","modules":[]}"#).unwrap();
    assert!(matches!(
        check_format(7, &v3.facts),
        Err(Refusal::CannotCompare { version: 7, reason }) if reason.contains("format 3")
    ));
    assert!(check_format(7, &summary(&doc("l", 1, "", "")).facts).is_ok());
    assert!(summarize(b"[1]").is_err());
    assert!(
        summarize(br#"{"version":4,"resources":[{"instances":[{"attributes":{"a":tru}}]}]}"#)
            .is_err()
    );
}

#[test]
fn unexpected_shapes_are_compared_as_they_are() {
    let odd = r#"{"version":4,"serial":1,"lineage":"l","outputs":[],"resources":[7,{"type":"t","name":"x","instances":{"no":"list"}},{"type":"t","name":"y","instances":[{"attributes":"flat"}]}]}"#;
    let s = summary(odd);
    assert_eq!(s.instances.len(), 1);
    assert!(s.outputs.is_empty());
}

/// One `aws_thing.main` whose `attributes` (a JSON object) carry `marks`.
fn marked(attributes: &str, marks: &str) -> String {
    doc(
        "l",
        1,
        &resource(
            None,
            "managed",
            "aws_thing",
            "main",
            &[instance(None, attributes, marks)],
        ),
        "",
    )
}

/// The changed paths of the one changed instance, and which of them are sensitive.
fn paths(c: &Comparison) -> (Vec<&str>, Vec<&str>) {
    let one = &c.resources.changed[0];
    (
        one.attributes.iter().map(String::as_str).collect(),
        one.sensitive.iter().map(String::as_str).collect(),
    )
}

#[test]
fn a_marked_map_key_is_matched_as_the_member_it_is_in_the_document() {
    let marks = r#"[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"secret","type":"string"}}],[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"kubernetes.io/token","type":"string"}}]]"#;
    let one = |secret: &str, token: &str, team: &str| {
        marked(
            &format!(
                r#"{{"tags":{{"secret":"{secret}","kubernetes.io/token":"{token}","team":"{team}"}}}}"#
            ),
            marks,
        )
    };
    let c = changes(&one("s1", "t1", "a"), &one("s2", "t2", "b"));
    assert_eq!(
        paths(&c),
        (
            vec![r#"tags["kubernetes.io/token"]"#, "tags.secret", "tags.team"],
            vec![r#"tags["kubernetes.io/token"]"#, "tags.secret"]
        )
    );
    let c = changes(&one("s1", "t1", "a"), &one("s2", "t1", "a"));
    assert_eq!(paths(&c), (vec!["tags.secret"], vec!["tags.secret"]));
    assert!(c.resources.changed[0].sensitive_only);
}

#[test]
fn marks_inside_lists_and_nested_objects_are_matched() {
    let marks = r#"[[{"type":"get_attr","value":"rule"},{"type":"index","value":{"value":1,"type":"number"}},{"type":"get_attr","value":"key"}]]"#;
    let one = |key: &str, port: u64| {
        marked(
            &format!(r#"{{"rule":[{{"key":"k0","port":1}},{{"key":"{key}","port":{port}}}]}}"#),
            marks,
        )
    };
    let c = changes(&one("a", 1), &one("b", 2));
    assert_eq!(
        paths(&c),
        (vec!["rule[1].key", "rule[1].port"], vec!["rule[1].key"])
    );
}

#[test]
fn a_value_named_whole_that_holds_a_mark_is_sensitive() {
    // The map becomes a list: compared as a whole, and what it holds was marked.
    let marks = r#"[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"secret","type":"string"}}]]"#;
    let c = changes(
        &marked(r#"{"tags":{"secret":"s","team":"t"},"name":"n"}"#, marks),
        &marked(r#"{"tags":["s"],"name":"m"}"#, marks),
    );
    assert_eq!(paths(&c), (vec!["name", "tags"], vec!["tags"]));
    assert!(!c.resources.changed[0].sensitive_only);
}

#[test]
fn marks_below_a_dynamic_attribute_are_matched_through_its_value_wrapper() {
    // As Terraform 1.11 and 1.15 store `terraform_data` with
    // `input = { secret = var.secret, team = "t" }`: the mark names `input.secret`, the
    // document holds `input.value.secret`; a map's key and a tuple's element likewise.
    let object = r#"[[{"type":"get_attr","value":"input"},{"type":"get_attr","value":"secret"}]]"#;
    let one = |secret: &str| {
        marked(
            &format!(
                r#"{{"id":"i","input":{{"value":{{"secret":"{secret}","team":"t"}},"type":["object",{{"secret":"string","team":"string"}}]}},"output":{{"value":{{"secret":"{secret}","team":"t"}},"type":["object",{{"secret":"string","team":"string"}}]}}}}"#
            ),
            object,
        )
    };
    let c = changes(&one("s1"), &one("s2"));
    // Terraform marks only `input`: `output` carries the same value unmarked in its state.
    assert_eq!(
        paths(&c),
        (
            vec!["input.value.secret", "output.value.secret"],
            vec!["input.value.secret"]
        )
    );

    let map = r#"[[{"type":"get_attr","value":"input"},{"type":"index","value":{"value":"secret","type":"string"}}]]"#;
    let c = changes(
        &marked(
            r#"{"input":{"value":{"secret":"s1","team":"t"},"type":["map","string"]}}"#,
            map,
        ),
        &marked(
            r#"{"input":{"value":{"secret":"s2","team":"t"},"type":["map","string"]}}"#,
            map,
        ),
    );
    assert_eq!(
        paths(&c),
        (vec!["input.value.secret"], vec!["input.value.secret"])
    );

    let tuple = r#"[[{"type":"get_attr","value":"input"},{"type":"index","value":{"value":0,"type":"number"}}]]"#;
    let c = changes(
        &marked(
            r#"{"input":{"value":["s1","b"],"type":["tuple",["string","string"]]}}"#,
            tuple,
        ),
        &marked(
            r#"{"input":{"value":["s2","b"],"type":["tuple",["string","string"]]}}"#,
            tuple,
        ),
    );
    assert_eq!(paths(&c), (vec!["input.value[0]"], vec!["input.value[0]"]));
}

#[test]
fn an_object_that_only_looks_like_a_wrapper_keeps_its_own_marks() {
    // A provider's nested object of `type` and `value`, its `value` marked.
    let marks = r#"[[{"type":"get_attr","value":"setting"},{"type":"get_attr","value":"value"}]]"#;
    let c = changes(
        &marked(r#"{"setting":{"type":"a","value":"s1"}}"#, marks),
        &marked(r#"{"setting":{"type":"b","value":"s2"}}"#, marks),
    );
    assert_eq!(
        paths(&c),
        (vec!["setting.type", "setting.value"], vec!["setting.value"])
    );
}
