use super::*;

const DIGEST: &str = "00ff10a0b1c2d3e4f5060708090a0b0c0d0e0f101112131415161718191a1b1c";

fn instance(address: &str, module: &str, digest: Option<&str>, mode: Mode, tag: u64) -> Instance {
    Instance {
        address: address.into(),
        module: module.into(),
        mode,
        resource_type: "aws_vpc".into(),
        provider: "registry.terraform.io/hashicorp/aws".into(),
        digest: digest.map(str::to_owned),
        resource: ResourceTag(tag),
    }
}

/// Rows of every shape: prefixed and not, managed and data, a digest in the index's form,
/// one in another form and none, runs of one resource and a resource met again.
fn every_shape() -> Vec<Instance> {
    let net = "module.net[\"é\"]";
    vec![
        instance(
            "module.net[\"é\"].aws_vpc.a[0]",
            net,
            Some(DIGEST),
            Mode::Managed,
            1,
        ),
        instance(
            "module.net[\"é\"].aws_vpc.a[1]",
            net,
            Some(DIGEST),
            Mode::Managed,
            1,
        ),
        instance(
            "module.net[\"é\"].data.aws_vpc.b",
            net,
            None,
            Mode::Data,
            u64::MAX,
        ),
        instance("data.aws_vpc.b", "", None, Mode::Data, 2),
        instance("aws_vpc.c", "", Some(""), Mode::Managed, 3),
        instance(
            "aws_vpc.d",
            "",
            Some(&DIGEST.to_uppercase()),
            Mode::Managed,
            1,
        ),
        // A row whose address does not start as its module and type say (only a damaged
        // document's could), kept whole.
        instance("somewhere.else", net, Some("ab12"), Mode::Managed, 4),
        instance("aws_vpc.", "", None, Mode::Managed, 5),
    ]
}

/// The first layout's bytes, as the release before the packed one recorded them.
fn first_layout_bytes(instances: &[Instance]) -> Vec<u8> {
    let mut out = Vec::new();
    let text = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for i in instances {
        out.extend_from_slice(&i.resource.0.to_le_bytes());
        out.push(u8::from(i.mode == Mode::Data));
        text(&mut out, &i.address);
        text(&mut out, &i.module);
        text(&mut out, &i.resource_type);
        text(&mut out, &i.provider);
        match &i.digest {
            Some(d) => text(&mut out, d),
            None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    out
}

#[test]
fn rows_come_back_as_they_went_in() {
    let instances = every_shape();
    let refs: Vec<&Instance> = instances.iter().collect();
    assert_eq!(instances_of(&instances_bytes(&refs)), Some(instances));
    assert_eq!(instances_of(&instances_bytes(&[])), Some(Vec::new()));
    assert_eq!(instances_of(&[]), Some(Vec::new()));
}

#[test]
fn rows_recorded_in_the_first_layout_still_read() {
    let instances = every_shape();
    assert_eq!(
        instances_of(&first_layout_bytes(&instances)),
        Some(instances)
    );
}

#[test]
fn a_state_of_shared_names_packs_to_a_fraction() {
    let instances: Vec<Instance> = (0..1000)
        .map(|n| {
            let module = format!("module.m{}", n % 7);
            let address = format!("{module}.aws_vpc.r_{n}[{n}]");
            instance(&address, &module, Some(DIGEST), Mode::Managed, n)
        })
        .collect();
    let refs: Vec<&Instance> = instances.iter().collect();
    let packed = instances_bytes(&refs).len();
    let first = first_layout_bytes(&instances).len();
    // Each row: flags, tag, three indexes, the name and key, the digest's 32 bytes.
    assert!(packed * 3 < first, "packed {packed} bytes against {first}");
}

/// Where the first row starts in packed bytes: after the mark, the names and the count.
fn first_row(bytes: &[u8]) -> usize {
    let mut reader = Reader(&bytes[MARK.len()..]);
    for _ in 0..reader.number().unwrap() {
        reader.text().unwrap();
    }
    reader.number().unwrap();
    bytes.len() - reader.0.len()
}

#[test]
fn damaged_bytes_are_refused_not_misread() {
    let instances = every_shape();
    let refs: Vec<&Instance> = instances.iter().collect();
    let bytes = instances_bytes(&refs);
    for cut in 1..bytes.len() {
        assert_eq!(instances_of(&bytes[..cut]), None, "cut at {cut}");
    }
    let mut one_more = bytes.clone();
    one_more.push(0);
    assert_eq!(instances_of(&one_more), None);
    let row = first_row(&bytes);
    let mut unknown_flag = bytes.clone();
    unknown_flag[row] |= 0x80;
    assert_eq!(instances_of(&unknown_flag), None);
    let mut both_digests = bytes.clone();
    both_digests[row] |= DIGEST_BYTES | DIGEST_TEXT;
    assert_eq!(instances_of(&both_digests), None);
    let mut no_resource_before = bytes.clone();
    no_resource_before[row] |= SAME_RESOURCE;
    assert_eq!(instances_of(&no_resource_before), None);
    let mut unknown_name = bytes.clone();
    unknown_name[row + 1 + 8] = 0x7f;
    assert_eq!(instances_of(&unknown_name), None);
    let mut too_many_names = bytes.clone();
    too_many_names[MARK.len()] = 0x7f;
    assert_eq!(instances_of(&too_many_names), None);
    let mut endless_number = MARK.to_vec();
    endless_number.extend_from_slice(&[0xff; 11]);
    assert_eq!(instances_of(&endless_number), None);
    let mut not_utf8 = MARK.to_vec();
    not_utf8.extend_from_slice(&[1, 1, 0xff, 0]);
    assert_eq!(instances_of(&not_utf8), None);
    let first = first_layout_bytes(&instances);
    // The first layout has no count: a cut between rows reads as fewer.
    for cut in 1..first_layout_bytes(&instances[..1]).len() {
        assert_eq!(
            instances_of(&first[..cut]),
            None,
            "first layout cut at {cut}"
        );
    }
    let mut bad_mode = first;
    bad_mode[8] = 2;
    assert_eq!(instances_of(&bad_mode), None);
}

#[test]
fn only_lowercase_hex_digits_make_a_raw_digest() {
    assert_eq!(
        raw_digest(DIGEST).map(|raw| crate::ids::hex(&raw)),
        Some(DIGEST.into())
    );
    for byte in 0..=127u8 {
        let digit = byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte);
        for at in [0, 1, 63] {
            let mut text = DIGEST.as_bytes().to_vec();
            text[at] = byte;
            let text = String::from_utf8(text).unwrap();
            assert_eq!(raw_digest(&text).is_some(), digit, "{byte:#x} at {at}");
        }
    }
    assert_eq!(raw_digest(&DIGEST[..62]), None);
    assert_eq!(raw_digest(&format!("{DIGEST}0")), None);
    // A non-ASCII character in the place of two digits.
    assert_eq!(raw_digest(&format!("é{}", &DIGEST[2..])), None);
}
