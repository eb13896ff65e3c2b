//! The bytes a recorded change holds its rows in. A commit writes and flushes them with the
//! entry, so their size is the commit's: 2,019 rows of a 2 MiB state laid out whole (every
//! address, module, type and provider, the digest in hex) took 384 KB, and a SQLite commit
//! of that flushed in 1.2 ms at p50 where one of 80 KB took 0.25 ms. So each module, type
//! and provider is named once, in a table at the head, and a row points into it (a state's
//! thousands of rows share a few); an address is kept as what follows its module and type
//! (its name and key), which is all it adds to them; a digest as its 32 bytes; a resource's
//! tag once for a run of its rows. The same rows take about 120 KB.
//!
//! The layout is marked at the head. Rows a release before it recorded (waiting in a
//! catalog when the server was upgraded) have no mark and are read in their own layout,
//! which could not start with it: its ninth byte is a row's mode, 0 or 1.

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::inventory::{Instance, Mode, ResourceTag};

/// The head of the packed layout; its last byte is 0xFF, which the first layout's ninth
/// byte never is.
const MARK: &[u8; 9] = b"hs-rows2\xff";

/// A row's flags: a data source's.
const DATA: u8 = 1;
/// Its resource is the row before's (no tag follows).
const SAME_RESOURCE: u8 = 2;
/// Its address is its module, `.`, `data.` for a data source, its type and `.` (the
/// prefix), then what is kept.
const SHORT_ADDRESS: u8 = 4;
/// Its digest follows as 32 bytes (hex as the index holds it).
const DIGEST_BYTES: u8 = 8;
/// Its digest follows as text (one that is not 64 lowercase hex digits, kept as it is).
const DIGEST_TEXT: u8 = 16;
const FLAGS: u8 = DATA | SAME_RESOURCE | SHORT_ADDRESS | DIGEST_BYTES | DIGEST_TEXT;

/// The rows in the packed layout: the mark, the number of names and each name (a length
/// and its bytes), the number of rows (so that bytes cut short between two rows are refused
/// too), then each row: its flags, its tag unless `SAME_RESOURCE`, the indexes of
/// its module, type and provider among the names, its address (or what follows its prefix)
/// and its digest, as the flags say. Every number is LEB128.
pub(super) fn instances_bytes(instances: &[&Instance]) -> Vec<u8> {
    let mut names = Names::default();
    let mut rows = Vec::with_capacity(instances.len() * 64);
    let mut last: Option<ResourceTag> = None;
    for &i in instances {
        let [module, resource_type, provider] = [
            names.index(&i.module, 0),
            names.index(&i.resource_type, 1),
            names.index(&i.provider, 2),
        ];
        let rest = after_prefix(i);
        let digest = i.digest.as_deref().map(|d| (d, raw_digest(d)));
        let mut flags = 0;
        if i.mode == Mode::Data {
            flags |= DATA;
        }
        if last == Some(i.resource) {
            flags |= SAME_RESOURCE;
        }
        if rest.is_some() {
            flags |= SHORT_ADDRESS;
        }
        match digest {
            Some((_, Some(_))) => flags |= DIGEST_BYTES,
            Some((_, None)) => flags |= DIGEST_TEXT,
            None => {}
        }
        rows.push(flags);
        if last != Some(i.resource) {
            rows.extend_from_slice(&i.resource.0.to_le_bytes());
        }
        last = Some(i.resource);
        for index in [module, resource_type, provider] {
            number(&mut rows, index);
        }
        text(&mut rows, rest.unwrap_or(&i.address));
        match digest {
            Some((_, Some(raw))) => rows.extend_from_slice(&raw),
            Some((d, None)) => text(&mut rows, d),
            None => {}
        }
    }
    let table: usize = names.list.iter().map(|n| n.len() + 2).sum();
    let mut out = Vec::with_capacity(MARK.len() + 5 + table + rows.len());
    out.extend_from_slice(MARK);
    number(&mut out, names.list.len());
    for name in &names.list {
        text(&mut out, name);
    }
    number(&mut out, instances.len());
    out.extend_from_slice(&rows);
    out
}

/// The rows of [`instances_bytes`], or of the first layout; `None` where the bytes are
/// neither.
pub(super) fn instances_of(bytes: &[u8]) -> Option<Vec<Instance>> {
    match bytes.strip_prefix(MARK.as_slice()) {
        Some(packed) => packed_rows(packed),
        None => first_layout(bytes),
    }
}

/// The names of a packed change, each once, by first use.
#[derive(Default)]
struct Names<'a> {
    list: Vec<&'a str>,
    index: HashMap<&'a str, usize>,
    /// The last name each field took, and its index: rows in address order mostly repeat
    /// the row before's, which is cheaper to compare than to hash.
    last: [Option<(&'a str, usize)>; 3],
}

impl<'a> Names<'a> {
    fn index(&mut self, name: &'a str, field: usize) -> usize {
        if let Some((last, i)) = self.last[field] {
            if last == name {
                return i;
            }
        }
        let next = self.list.len();
        let i = *self.index.entry(name).or_insert(next);
        if i == next {
            self.list.push(name);
        }
        self.last[field] = Some((name, i));
        i
    }
}

/// What follows the instance's address prefix (module, `.`, `data.` for a data source,
/// type and `.`), when the address has that prefix.
fn after_prefix(i: &Instance) -> Option<&str> {
    let mut rest = i.address.as_str();
    if !i.module.is_empty() {
        rest = rest.strip_prefix(&*i.module)?.strip_prefix('.')?;
    }
    if i.mode == Mode::Data {
        rest = rest.strip_prefix("data.")?;
    }
    rest.strip_prefix(&*i.resource_type)?.strip_prefix('.')
}

/// The address of an instance whose prefix was left out.
fn with_prefix(module: &str, mode: Mode, resource_type: &str, rest: &str) -> String {
    let mut address = String::with_capacity(module.len() + resource_type.len() + rest.len() + 7);
    if !module.is_empty() {
        address.push_str(module);
        address.push('.');
    }
    if mode == Mode::Data {
        address.push_str("data.");
    }
    address.push_str(resource_type);
    address.push('.');
    address.push_str(rest);
    address
}

/// The 32 bytes of a digest in the index's form (64 lowercase hex digits); `None` for any
/// other text, which is kept as it is. Each digit is looked up, not matched: a digest's
/// digits are random, so a match on their ranges mispredicted about one digit in three, and
/// the 129,000 digits of a 2,019-instance change took about 0.7 ms of its commit that way.
fn raw_digest(digest: &str) -> Option<[u8; 32]> {
    let digits: &[u8; 64] = digest.as_bytes().try_into().ok()?;
    let mut raw = [0u8; 32];
    // Every digit's value is at most 15: any bit above those marks a byte that is not one.
    let mut seen = 0u8;
    for (byte, pair) in raw.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (DIGIT[usize::from(pair[0])], DIGIT[usize::from(pair[1])]);
        seen |= high | low;
        *byte = (high << 4) | low;
    }
    (seen <= 0x0f).then_some(raw)
}

/// Each byte's value as a lowercase hex digit, and `NOT_A_DIGIT` for every other byte.
const DIGIT: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

const NOT_A_DIGIT: u8 = 0xff;

/// The rows of the packed layout, from after its mark.
fn packed_rows(bytes: &[u8]) -> Option<Vec<Instance>> {
    let mut reader = Reader(bytes);
    let count = reader.number()?;
    // Each name takes a byte at least: a count past what is left is damage, not a size to
    // make room for.
    if count > reader.0.len() {
        return None;
    }
    // Each name made once and shared by the rows that name it.
    let names = (0..count)
        .map(|_| reader.text().map(Arc::<str>::from))
        .collect::<Option<Vec<_>>>()?;
    let name = |reader: &mut Reader<'_>| names.get(reader.number()?).cloned();
    let rows = reader.number()?;
    // Each row takes five bytes at least: likewise.
    if rows > reader.0.len() {
        return None;
    }
    let mut instances = Vec::with_capacity(rows);
    let mut last: Option<ResourceTag> = None;
    while !reader.0.is_empty() {
        let flags = reader.take(1)?[0];
        if flags & !FLAGS != 0 || flags & (DIGEST_BYTES | DIGEST_TEXT) == DIGEST_BYTES | DIGEST_TEXT
        {
            return None;
        }
        let resource = if flags & SAME_RESOURCE != 0 {
            last?
        } else {
            ResourceTag(u64::from_le_bytes(reader.take(8)?.try_into().ok()?))
        };
        last = Some(resource);
        let mode = if flags & DATA != 0 {
            Mode::Data
        } else {
            Mode::Managed
        };
        let (module, resource_type, provider) =
            (name(&mut reader)?, name(&mut reader)?, name(&mut reader)?);
        let kept = reader.text()?;
        let address = if flags & SHORT_ADDRESS != 0 {
            with_prefix(&module, mode, &resource_type, kept)
        } else {
            kept.to_owned()
        };
        let digest = if flags & DIGEST_BYTES != 0 {
            Some(crate::ids::hex(reader.take(32)?))
        } else if flags & DIGEST_TEXT != 0 {
            Some(reader.text()?.to_owned())
        } else {
            None
        };
        instances.push(Instance {
            address,
            module,
            mode,
            resource_type,
            provider,
            digest,
            resource,
        });
    }
    (instances.len() == rows).then_some(instances)
}

/// The first layout: each row as its tag (8 bytes), its mode (1), then its address,
/// module, type, provider and digest, each a 4-byte length and its bytes (the digest's
/// length `u32::MAX` when it has none).
fn first_layout(bytes: &[u8]) -> Option<Vec<Instance>> {
    let mut reader = Reader(bytes);
    let mut instances = Vec::new();
    while !reader.0.is_empty() {
        let resource = ResourceTag(u64::from_le_bytes(reader.take(8)?.try_into().ok()?));
        let mode = match reader.take(1)?[0] {
            0 => Mode::Managed,
            1 => Mode::Data,
            _ => return None,
        };
        instances.push(Instance {
            address: reader.fixed_text()?,
            module: reader.fixed_text()?.into(),
            mode,
            resource_type: reader.fixed_text()?.into(),
            provider: reader.fixed_text()?.into(),
            digest: reader.maybe_fixed_text()?,
            resource,
        });
    }
    Some(instances)
}

/// Appends `n` as LEB128.
fn number(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends a text as its length and its bytes.
fn text(out: &mut Vec<u8>, s: &str) {
    number(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// What is left of the bytes being decoded.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    /// A LEB128 number; `None` past `usize` or the bytes' end.
    fn number(&mut self) -> Option<usize> {
        let mut n: usize = 0;
        for shift in (0..usize::BITS).step_by(7) {
            let byte = self.take(1)?[0];
            let part = usize::from(byte & 0x7f);
            if part.checked_shl(shift)? >> shift != part {
                return None;
            }
            n |= part << shift;
            if byte & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn text(&mut self) -> Option<&'a str> {
        let n = self.number()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn fixed_length(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn fixed_text(&mut self) -> Option<String> {
        let n = self.fixed_length()?;
        self.fixed_string(n)
    }

    /// A text, or `None` inside when its length is `u32::MAX`.
    fn maybe_fixed_text(&mut self) -> Option<Option<String>> {
        match self.fixed_length()? {
            u32::MAX => Some(None),
            n => self.fixed_string(n).map(Some),
        }
    }

    fn fixed_string(&mut self, n: u32) -> Option<String> {
        let bytes = self.take(usize::try_from(n).ok()?)?;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests;
