//! Views of the route table evaluated at compile time, so that a binary links only what it
//! serves: one Lambda function's rows ([`lambda_group`]), what those rows need of storage
//! and keys ([`GroupNeeds`]), and every row without its handler ([`FACTS`]) for the readers
//! that describe or refuse routes but answer none. Nothing here matches a request.

use super::handler::Credentials;
use super::routes::{BodyLimit, Keyed, Need, Route, ROUTES};

/// How many rows the Lambda function `function` serves: its own, less the local-only ones.
pub const fn lambda_group_len(function: &str) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < ROUTES.len() {
        if serves(&ROUTES[i], function) {
            count += 1;
        }
        i += 1;
    }
    count
}

/// The rows the Lambda function `function` serves, in table order; `N` is
/// [`lambda_group_len`]. Evaluated in a `const`, it makes the binary reference those rows'
/// handlers and no others.
///
/// # Panics
/// At compile time, for a function that serves no row or an `N` that is not its count.
pub const fn lambda_group<const N: usize>(function: &str) -> [Route; N] {
    assert!(N > 0, "no row of the route table names this function");
    let mut rows = [ROUTES[0]; N];
    let (mut i, mut n) = (0, 0);
    while i < ROUTES.len() {
        if serves(&ROUTES[i], function) {
            assert!(n < N, "the group's length is not its count of rows");
            rows[n] = ROUTES[i];
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "the group's length is not its count of rows");
    rows
}

const fn serves(route: &Route, function: &str) -> bool {
    !route.local_only && same(route.function, function)
}

/// What a group's rows need beyond the catalog, from their `needs`: a function whose rows
/// need neither is built without the S3 client and without any key service's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupNeeds {
    /// Some row reads or stores a blob.
    pub blobs: bool,
    /// Some row opens or seals content, or reports the key in use.
    pub keys: bool,
}

impl GroupNeeds {
    pub const fn of(rows: &[Route]) -> GroupNeeds {
        let mut needs = GroupNeeds {
            blobs: false,
            keys: false,
        };
        let mut i = 0;
        while i < rows.len() {
            let mut j = 0;
            while j < rows[i].needs.len() {
                match rows[i].needs[j] {
                    Need::GetBlob | Need::PutBlob => needs.blobs = true,
                    Need::UnwrapKey | Need::NewDataKey | Need::DescribeKey => needs.keys = true,
                    Need::GetRecord
                    | Need::PutRecord
                    | Need::DeleteRecord
                    | Need::QueryRecords
                    | Need::BatchGetRecords => {}
                }
                j += 1;
            }
            i += 1;
        }
        needs
    }
}

/// A row without its handler: what describing a route or refusing a request for it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteFacts {
    pub method: &'static str,
    pub path: &'static str,
    pub function: &'static str,
    pub local_only: bool,
    pub body: BodyLimit,
    pub credentials: Credentials,
    /// For a local-only row, the method of the row it answers as: the row before it on the
    /// same path that every front door serves (the table's order says so; a test holds the
    /// two rows to one handler).
    pub same_as: Option<&'static str>,
}

impl Keyed for RouteFacts {
    fn method(&self) -> &'static str {
        self.method
    }
    fn path(&self) -> &'static str {
        self.path
    }
    fn local_only(&self) -> bool {
        self.local_only
    }
}

/// Every row of [`ROUTES`], in order, without its handler. A binary that reads only this
/// links no handler.
pub static FACTS: [RouteFacts; ROUTES.len()] = facts();

const fn facts<const N: usize>() -> [RouteFacts; N] {
    let mut out = [fact(0); N];
    let mut i = 0;
    while i < N {
        out[i] = fact(i);
        i += 1;
    }
    out
}

const fn fact(i: usize) -> RouteFacts {
    let r = &ROUTES[i];
    RouteFacts {
        method: r.method,
        path: r.path,
        function: r.function,
        local_only: r.local_only,
        body: r.body,
        credentials: r.handler.credentials(),
        same_as: if r.local_only { same_as(i) } else { None },
    }
}

/// The method of the nearest row before row `i` on its path that is not local-only.
const fn same_as(i: usize) -> Option<&'static str> {
    let mut j = i;
    while j > 0 {
        j -= 1;
        let r = &ROUTES[j];
        if !r.local_only && same(r.path, ROUTES[i].path) {
            return Some(r.method);
        }
    }
    None
}

/// `a == b`, which `str` does not offer in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a group's table was built from: the rows of the runtime table a function serves.
    fn rows_of(function: &str) -> Vec<(&'static str, &'static str)> {
        ROUTES
            .iter()
            .filter(|r| r.function == function && !r.local_only)
            .map(|r| (r.method, r.path))
            .collect()
    }

    fn keyed(rows: &[Route]) -> Vec<(&'static str, &'static str)> {
        rows.iter().map(|r| (r.method, r.path)).collect()
    }

    /// What the rows' needs say, counted at run time.
    fn needs_of(function: &str) -> GroupNeeds {
        let needs: Vec<Need> = ROUTES
            .iter()
            .filter(|r| r.function == function && !r.local_only)
            .flat_map(|r| r.needs.iter().copied())
            .collect();
        GroupNeeds {
            blobs: needs
                .iter()
                .any(|n| matches!(n, Need::GetBlob | Need::PutBlob)),
            keys: needs
                .iter()
                .any(|n| matches!(n, Need::UnwrapKey | Need::NewDataKey | Need::DescribeKey)),
        }
    }

    /// Each group as a binary builds it (in a `const`), beside the table read at run time.
    #[test]
    fn a_group_holds_exactly_its_functions_rows_and_needs_what_they_say() {
        const LOCK: [Route; lambda_group_len("lock")] = lambda_group("lock");
        const LIST: [Route; lambda_group_len("list")] = lambda_group("list");
        const AUDIT: [Route; lambda_group_len("audit")] = lambda_group("audit");
        const READ: [Route; lambda_group_len("state-read")] = lambda_group("state-read");
        const WRITE: [Route; lambda_group_len("state-write")] = lambda_group("state-write");
        const APPS: [Route; lambda_group_len("apps")] = lambda_group("apps");
        for (function, rows) in [
            ("lock", &LOCK[..]),
            ("list", &LIST),
            ("audit", &AUDIT),
            ("state-read", &READ),
            ("state-write", &WRITE),
            ("apps", &APPS),
        ] {
            assert_eq!(keyed(rows), rows_of(function), "{function}");
            assert_eq!(GroupNeeds::of(rows), needs_of(function), "{function}");
        }
        assert_eq!(
            keyed(&LOCK),
            [
                ("POST", "/api/tf-states/{name}/lock"),
                ("DELETE", "/api/tf-states/{name}/lock")
            ],
            "LOCK and UNLOCK are the local server's only"
        );
        let (nothing, all) = (
            GroupNeeds {
                blobs: false,
                keys: false,
            },
            GroupNeeds {
                blobs: true,
                keys: true,
            },
        );
        assert_eq!(GroupNeeds::of(&LOCK), nothing);
        assert_eq!(GroupNeeds::of(&LIST), nothing);
        assert_eq!(
            GroupNeeds::of(&AUDIT),
            GroupNeeds {
                blobs: false,
                keys: true
            },
            "the key report reads which key is in use, no content"
        );
        assert_eq!(GroupNeeds::of(&READ), all);
        assert_eq!(GroupNeeds::of(&WRITE), all);
    }

    #[test]
    fn every_function_of_the_table_has_a_group_of_its_rows() {
        for function in ROUTES.iter().map(|r| r.function) {
            assert_eq!(lambda_group_len(function), rows_of(function).len());
        }
    }

    #[test]
    fn the_facts_are_the_rows_without_their_handlers() {
        assert_eq!(FACTS.len(), ROUTES.len());
        for (fact, row) in FACTS.iter().zip(ROUTES) {
            assert_eq!(
                (fact.method, fact.path, fact.function),
                (row.method, row.path, row.function)
            );
            assert_eq!((fact.local_only, fact.body), (row.local_only, row.body));
            assert_eq!(fact.credentials, row.handler.credentials());
        }
    }

    /// A local-only row answers as the row its `same_as` names: the same handler.
    #[test]
    fn a_local_only_row_names_the_row_with_its_handler() {
        for (fact, row) in FACTS.iter().zip(ROUTES) {
            let Some(method) = fact.same_as else {
                assert!(!row.local_only, "{} {}", row.method, row.path);
                continue;
            };
            let alias = ROUTES
                .iter()
                .find(|r| r.method == method && r.path == row.path)
                .unwrap();
            assert_eq!(alias.handler.name(), row.handler.name(), "{}", row.method);
        }
    }
}
