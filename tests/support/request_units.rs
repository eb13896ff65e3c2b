//! What the AWS calls a relay saw would cost on AWS: DynamoDB read and write request units
//! worked out from the sizes of the items each call read or wrote, by DynamoDB's published
//! rules, and the bytes put into S3. moto answers a fixed `ConsumedCapacity` whatever the
//! item, so the units are computed here from what went over the wire instead.
//!
//! The rules (DynamoDB developer guide, "read and write operations"): an item's size is the
//! sum of its attribute names' and values' lengths; a strongly consistent read costs one
//! unit per 4 KB of each item (rounded up per item, or over the whole page for a `Query`),
//! an eventually consistent one half that; a write costs one unit per 1 KB of the larger
//! of the item before and after, twice that inside a transaction (a `ConditionCheck` too);
//! each global secondary index an item is in costs a standard write of the item again.
//! A read is charged for the whole item even when a projection leaves attributes out, so
//! the size of an item last seen whole (written through the relay, or read without a
//! projection) is used when it is larger than what came back.

use std::collections::HashMap;

use base64::Engine;
use serde_json::{Map, Value};

/// Request units and S3 bytes, summed over calls. Read units are kept in halves so an
/// eventually consistent read is counted exactly.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    pub read_halves: u64,
    pub write: u64,
    pub s3_bytes_put: u64,
}

impl Units {
    pub fn add(&mut self, other: Units) {
        self.read_halves += other.read_halves;
        self.write += other.write;
        self.s3_bytes_put += other.s3_bytes_put;
    }

    pub fn read(&self) -> f64 {
        self.read_halves as f64 / 2.0
    }
}

/// The attributes that put an item in one of the table's sparse indexes.
const INDEX_KEYS: &[&str] = &["sweep_pk", "list_pk"];

/// The largest size seen of each item, by table and key, across calls.
#[derive(Default)]
pub struct Sizes(HashMap<String, usize>);

impl Sizes {
    /// The keys an item is known by: its table, partition and sort key, and its table and
    /// sort key alone, for a page whose projection left the partition key out (the query
    /// named it).
    fn keys(table: &str, item: &Map<String, Value>) -> [String; 2] {
        let sk = item.get("sk").map(Value::to_string).unwrap_or_default();
        match item.get("pk") {
            Some(pk) => [format!("{table}|{pk}|{sk}"), format!("{table}||{sk}")],
            None => [format!("{table}||{sk}"), format!("{table}||{sk}")],
        }
    }

    /// An item seen: its size remembered when larger than the one known; the larger
    /// returned, the size to charge.
    fn seen(&mut self, table: &str, item: &Map<String, Value>) -> usize {
        let size = item_size(item).max(self.known(table, item));
        self.set(table, item, size);
        size
    }

    fn set(&mut self, table: &str, item: &Map<String, Value>, size: usize) {
        for key in Self::keys(table, item) {
            self.0.insert(key, size);
        }
    }

    fn known(&self, table: &str, key: &Map<String, Value>) -> usize {
        let [full, _] = Self::keys(table, key);
        self.0.get(&full).copied().unwrap_or(0)
    }

    fn forget(&mut self, table: &str, key: &Map<String, Value>) {
        for key in Self::keys(table, key) {
            self.0.remove(&key);
        }
    }
}

/// The units one DynamoDB call cost, from its operation (`GetItem`, ...), request and
/// answer (both JSON); a failed call (no parseable answer) costs nothing here.
pub fn dynamodb(operation: &str, request: &Value, answer: &Value, sizes: &mut Sizes) -> Units {
    let mut units = Units::default();
    let table = |v: &Value| v["TableName"].as_str().unwrap_or_default().to_owned();
    let consistent = |v: &Value| v["ConsistentRead"].as_bool().unwrap_or(false);
    match operation {
        "GetItem" => {
            if let Some(item) = answer["Item"].as_object() {
                let size = sizes.seen(&table(request), item);
                units.read_halves += read_halves(size, consistent(request));
            }
        }
        "BatchGetItem" => {
            for (name, items) in answer["Responses"].as_object().into_iter().flatten() {
                let strong = consistent(&request["RequestItems"][name]);
                for item in items.as_array().into_iter().flatten() {
                    let Some(item) = item.as_object() else {
                        continue;
                    };
                    units.read_halves += read_halves(sizes.seen(name, item), strong);
                }
            }
        }
        "Query" | "Scan" => {
            let name = table(request);
            let total: usize = answer["Items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .map(|item| sizes.seen(&name, item))
                .sum();
            // An empty page still costs the minimum read.
            units.read_halves += read_halves(total.max(1), consistent(request));
        }
        "PutItem" => units.write += put(&table(request), request, sizes, 1),
        "UpdateItem" => units.write += update(&table(request), request, sizes, 1),
        "DeleteItem" => {
            units.write += change(&table(request), &request["Key"], sizes, 1);
            if let Some(key) = request["Key"].as_object() {
                sizes.forget(&table(request), key);
            }
        }
        "BatchWriteItem" => {
            for (name, writes) in request["RequestItems"].as_object().into_iter().flatten() {
                for write in writes.as_array().into_iter().flatten() {
                    if write.get("PutRequest").is_some() {
                        let mut put_request = write["PutRequest"].clone();
                        put_request["TableName"] = Value::String(name.clone());
                        units.write += put(name, &put_request, sizes, 1);
                    } else {
                        units.write += change(name, &write["DeleteRequest"]["Key"], sizes, 1);
                    }
                }
            }
        }
        "TransactWriteItems" if answer.get("__type").is_none() => {
            for action in request["TransactItems"].as_array().into_iter().flatten() {
                if let Some(p) = action.get("Put") {
                    units.write += put(&table(p), p, sizes, 2);
                } else if let Some(u) = action.get("Update") {
                    units.write += update(&table(u), u, sizes, 2);
                } else if let Some(d) = action.get("Delete") {
                    units.write += change(&table(d), &d["Key"], sizes, 2);
                    if let Some(key) = d["Key"].as_object() {
                        sizes.forget(&table(d), key);
                    }
                } else if let Some(c) = action.get("ConditionCheck") {
                    units.write += change(&table(c), &c["Key"], sizes, 2);
                }
            }
        }
        _ => {}
    }
    units
}

/// A put: the larger of the item before and after, `factor` units a KB, plus a standard
/// write of the item to each sparse index it is in.
fn put(table: &str, request: &Value, sizes: &mut Sizes, factor: u64) -> u64 {
    let Some(item) = request["Item"].as_object() else {
        return 0;
    };
    let size = item_size(item);
    let charged = size.max(sizes.known(table, item));
    sizes.set(table, item, size);
    let indexed = INDEX_KEYS.iter().filter(|k| item.contains_key(**k)).count() as u64;
    factor * write_units(charged) + indexed * write_units(size)
}

/// An update: the larger of the item before (as last seen) and after, `factor` units a
/// KB. The item after is estimated as its key and the names and values the update sets;
/// an update that sets or removes the inline content is taken to rewrite the item, any
/// other to keep what it had beside what it sets.
fn update(table: &str, request: &Value, sizes: &mut Sizes, factor: u64) -> u64 {
    let Some(key) = request["Key"].as_object() else {
        return 0;
    };
    let names: usize = request["ExpressionAttributeNames"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, name)| name.as_str())
        .map(str::len)
        .sum();
    let values: usize = request["ExpressionAttributeValues"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, value)| value_size(value))
        .sum();
    let after = item_size(key) + names + values;
    let before = sizes.known(table, key);
    let expression = request["UpdateExpression"].as_str().unwrap_or_default();
    let rewrites = expression.contains("#body") || expression.contains("REMOVE");
    sizes.set(table, key, if rewrites { after } else { after.max(before) });
    let indexed = INDEX_KEYS
        .iter()
        .filter(|k| {
            request["ExpressionAttributeNames"]
                .as_object()
                .is_some_and(|names| names.values().any(|n| n == **k))
        })
        .count() as u64;
    factor * write_units(after.max(before)) + indexed * write_units(after)
}

/// A delete or condition check of an item known by its key: charged at the item's
/// size as last seen (at least one unit).
fn change(table: &str, key: &Value, sizes: &Sizes, factor: u64) -> u64 {
    let size = key.as_object().map_or(0, |key| sizes.known(table, key));
    factor * write_units(size)
}

fn write_units(size: usize) -> u64 {
    size.div_ceil(1024).max(1) as u64
}

fn read_halves(size: usize, strongly_consistent: bool) -> u64 {
    let units = size.div_ceil(4096).max(1) as u64;
    if strongly_consistent {
        units * 2
    } else {
        units
    }
}

/// An item's size as DynamoDB counts it: each attribute's name plus its value.
pub fn item_size(item: &Map<String, Value>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

/// A typed value's size: strings by their UTF-8 bytes, binaries by their decoded bytes,
/// numbers by about one byte per two digits plus one, and one byte for each element of a
/// list or map beyond its contents, plus three for the container.
fn value_size(value: &Value) -> usize {
    let Some((kind, inner)) = value.as_object().and_then(|v| v.iter().next()) else {
        return 0;
    };
    match kind.as_str() {
        "S" => inner.as_str().map_or(0, str::len),
        "N" => inner.as_str().map_or(0, |n| n.len().div_ceil(2) + 1),
        "B" => inner.as_str().map_or(0, |b| {
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_or(b.len(), |bytes| bytes.len())
        }),
        "BOOL" | "NULL" => 1,
        "SS" | "NS" | "BS" | "L" => {
            3 + inner
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    1 + if kind == "L" {
                        value_size(v)
                    } else {
                        v.as_str().map_or(0, str::len)
                    }
                })
                .sum::<usize>()
        }
        "M" => {
            3 + inner
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, v)| 1 + name.len() + value_size(v))
                .sum::<usize>()
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_item_is_its_names_and_values() {
        let item = json!({"pk": {"S": "ORG#a"}, "body": {"B": "AAEC"}, "rev": {"N": "12"}});
        assert_eq!(item_size(item.as_object().unwrap()), 2 + 5 + 4 + 3 + 3 + 2);
    }

    #[test]
    fn a_transactional_put_is_two_units_a_kilobyte_and_one_per_index() {
        let mut sizes = Sizes::default();
        let big = "x".repeat(1500);
        let request = json!({"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}, "sk": {"S": "b"}, "rec": {"S": big}}}},
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "c"}, "sk": {"S": "d"}, "sweep_pk": {"S": "p"}}}},
        ]});
        let units = dynamodb("TransactWriteItems", &request, &json!({}), &mut sizes);
        assert_eq!(units.write, 2 * 2 + (2 + 1));
        // A consistent read of the first, projected down to its key, is charged whole.
        let read = json!({"TableName": "t", "ConsistentRead": true});
        let answer = json!({"Item": {"pk": {"S": "a"}, "sk": {"S": "b"}}});
        let units = dynamodb("GetItem", &read, &answer, &mut sizes);
        assert_eq!(units.read_halves, 2);
    }
}
