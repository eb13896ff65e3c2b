//! The route table seen by one Lambda function, read at run time: the rows it serves
//! ([`serves`]) and what they need of storage and keys ([`GroupNeeds`]). Every function's
//! binary links the whole table; it answers its own rows and builds only the clients they
//! call. Nothing here matches a request.

use super::handler::Credentials;
use super::routes::{Need, Route, ROUTES};

/// Whether the Lambda function `function` serves `route`: its own rows, less the local-only
/// ones (API Gateway cannot route their methods).
pub fn serves(route: &Route, function: &str) -> bool {
    route.function == function && !route.local_only
}

/// The rows the Lambda function `function` serves, in table order.
pub fn rows(function: &str) -> impl Iterator<Item = &'static Route> + '_ {
    ROUTES.iter().filter(move |r| serves(r, function))
}

/// What a function's rows need beyond the catalog, from their `needs`: a function whose rows
/// need neither is built without the S3 client and without any key service's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupNeeds {
    /// Some row reads or stores a blob.
    pub blobs: bool,
    /// Some row opens or seals content, or reports the key in use.
    pub keys: bool,
    /// Some row verifies an OpenID Connect ID token, fetching its issuer's keys.
    pub issuers: bool,
}

impl GroupNeeds {
    /// Every part: what the container front door, which serves every row, is built with.
    pub const ALL: GroupNeeds = GroupNeeds {
        blobs: true,
        keys: true,
        issuers: true,
    };

    /// What the rows of the Lambda function `function` need.
    pub fn of(function: &str) -> GroupNeeds {
        let needs = || rows(function).flat_map(|r| r.needs.iter());
        GroupNeeds {
            blobs: needs().any(|n| matches!(n, Need::GetBlob | Need::PutBlob)),
            keys: needs()
                .any(|n| matches!(n, Need::UnwrapKey | Need::NewDataKey | Need::DescribeKey)),
            issuers: rows(function).any(|r| r.handler.credentials() == Credentials::IdToken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(function: &str) -> Vec<(&'static str, &'static str)> {
        rows(function).map(|r| (r.method, r.path)).collect()
    }

    #[test]
    fn a_function_serves_its_rows_and_needs_what_they_say() {
        assert_eq!(
            keyed("lock"),
            [
                ("POST", "/api/tf-states/{name}/lock"),
                ("DELETE", "/api/tf-states/{name}/lock")
            ],
            "LOCK and UNLOCK are the local server's only"
        );
        assert_eq!(
            keyed("state-read"),
            [("GET", "/api/tf-states/{name}/state")]
        );
        let nothing = GroupNeeds {
            blobs: false,
            keys: false,
            issuers: false,
        };
        for function in ["lock", "list", "versions", "admin", "runs"] {
            assert_eq!(GroupNeeds::of(function), nothing, "{function}");
        }
        assert_eq!(
            GroupNeeds::of("audit"),
            GroupNeeds {
                blobs: false,
                keys: true,
                issuers: false,
            },
            "the key report reads which key is in use, no content"
        );
        let content = GroupNeeds {
            issuers: false,
            ..GroupNeeds::ALL
        };
        for function in [
            "state-read",
            "state-write",
            "download",
            "import",
            "rollback",
            "apps",
        ] {
            assert_eq!(GroupNeeds::of(function), content, "{function}");
        }
        assert_eq!(
            GroupNeeds::of("oidc"),
            GroupNeeds {
                blobs: false,
                keys: false,
                issuers: true,
            },
            "the exchange fetches issuers' keys, and opens no content"
        );
    }

    #[test]
    fn a_name_no_row_gives_serves_nothing_and_needs_nothing() {
        assert_eq!(keyed("lokc"), Vec::<(&str, &str)>::new());
        assert_eq!(
            GroupNeeds::of("lokc"),
            GroupNeeds {
                blobs: false,
                keys: false,
                issuers: false,
            }
        );
    }
}
