//! Whole numbers in the request bodies the handlers parse. JSON has one kind of number, and
//! JSON Schema 2020-12 (which the OpenAPI document uses) counts `2.0` as the integer 2, so
//! a client whose JSON library writes `2.0` is sending what the document allows. A state
//! document is not read here: its bytes are stored as sent, for tools that read `serial`
//! as an integer literal, so the state check keeps refusing `2.0` there. Also the one
//! reading of a page's `limit` from a query string, for every paged route.

use lambda_http::{Request, RequestExt};
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

use super::error::HttpError;

/// `limit` from the query: 1 to `max`, `default` when absent.
///
/// # Errors
/// `InvalidRequest` naming the range, for anything but a whole number in it.
pub fn page_limit(req: &Request, default: usize, max: usize) -> Result<usize, HttpError> {
    match req.query_string_parameters().first("limit") {
        None => Ok(default),
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                HttpError::InvalidRequest(format!("limit must be a whole number from 1 to {max}"))
            }),
    }
}

/// 2^64: every whole `f64` below it is a `u64`, exactly.
const TWO_TO_THE_64: f64 = 18_446_744_073_709_551_616.0;

/// The value as a whole number that fits a u64, written with or without a zero fraction.
pub fn whole(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => of_number(n),
        _ => None,
    }
}

fn of_number(n: &Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..TWO_TO_THE_64).contains(f))
            // In range and whole: the conversion is exact.
            .map(|f| f as u64)
    })
}

/// `#[serde(deserialize_with = "whole_u64")]`: a field that is a whole number.
pub fn whole_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = Number::deserialize(d)?;
    of_number(&n).ok_or_else(|| {
        serde::de::Error::custom(format!("{n} is not a whole number from 0 to {}", u64::MAX))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_zero_fraction_is_the_same_number() {
        assert_eq!(whole(&json!(2)), Some(2));
        assert_eq!(whole(&json!(2.0)), Some(2));
        assert_eq!(whole(&json!(u64::MAX)), Some(u64::MAX));
        let parsed: Value = serde_json::from_str("1e3").unwrap();
        assert_eq!(whole(&parsed), Some(1000));
        // Read exactly: one step off, 2^51 - 1 would have a fraction of one half.
        let parsed: Value = serde_json::from_str("2251799813685247.0").unwrap();
        assert_eq!(whole(&parsed), Some(2_251_799_813_685_247));
    }

    #[test]
    fn fractions_negatives_and_out_of_range_are_not() {
        for v in [json!(2.5), json!(-1), json!(-1.0), json!("2"), json!(null)] {
            assert_eq!(whole(&v), None, "{v}");
        }
        let huge: Value = serde_json::from_str("18446744073709551616.0").unwrap();
        assert_eq!(whole(&huge), None);
        let huge: Value = serde_json::from_str("1e20").unwrap();
        assert_eq!(whole(&huge), None);
    }

    #[test]
    fn a_field_takes_either_spelling() {
        #[derive(serde::Deserialize)]
        struct Body {
            #[serde(deserialize_with = "whole_u64")]
            version: u64,
        }
        let b: Body = serde_json::from_str(r#"{"version": 7.0}"#).unwrap();
        assert_eq!(b.version, 7);
        assert!(serde_json::from_str::<Body>(r#"{"version": 7.5}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"version": "7"}"#).is_err());
    }
}
