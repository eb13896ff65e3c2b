//! The route table: the single source of truth for the local server, the Lambda functions
//! and the SAM template. A row holds every fact about its route (method, path, function,
//! body limit, storage needs, credentials and handler), so nothing else matches on routes;
//! adding one is a row, a handler and a service function, and the tests say what follows
//! (the OpenAPI document, the template's routes and grants). Matching a request to a row is
//! all this file decides. `LOCK`/`UNLOCK` are local-only: API Gateway cannot route them.

use super::handler::Handler;
use super::{
    admin, app_changes, app_reads, deleted, identity, inventory, list, lock, manage, outputs,
    protection, runs, state, trust, workload,
};
use crate::domain::lock::MAX_LOCK_BYTES;
use crate::service::Limits;

/// One route: one row of [`ROUTES`], every fact about it in one place.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    /// The path with `{name}` parameters, as API Gateway's route keys write it.
    pub path: &'static str,
    /// The Lambda function (route group) that serves it.
    pub function: &'static str,
    /// Only the local server and the container serve it.
    pub local_only: bool,
    /// The largest body it accepts.
    pub body: BodyLimit,
    /// What its handler calls on storage and the key service; a function is granted the
    /// calls of its routes and nothing else (the template test holds the grants to this).
    pub needs: &'static [Need],
    /// Who may call it (the variant) and what answers them (the function).
    pub handler: Handler,
}

/// A row is its method and path: no two rows share both, so that identifies it.
impl PartialEq for Route {
    fn eq(&self, other: &Self) -> bool {
        (self.method, self.path) == (other.method, other.path)
    }
}

impl Eq for Route {}

/// The largest body a route accepts, refused as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimit {
    /// A state: `HEGEMONY_TF_STATE_MAX_BYTES` (clamped on Lambda, whose 413 names the ceiling).
    State,
    /// A lock document: [`MAX_LOCK_BYTES`].
    Lock,
    /// Any other body: [`DEFAULT_BODY_LIMIT`].
    OneMib,
}

/// Bodies on routes other than state, import and lock are limited to 1 MiB.
pub const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

impl Route {
    /// The largest body this route accepts, refused as it arrives.
    pub fn body_limit(&self, limits: &Limits) -> u64 {
        match self.body {
            BodyLimit::State => limits.max_state_bytes,
            BodyLimit::Lock => MAX_LOCK_BYTES as u64,
            BodyLimit::OneMib => DEFAULT_BODY_LIMIT,
        }
    }
}

/// One kind of call a handler makes on storage (the catalog's records, the blob store) or
/// on the key service. Named for the port's operation, not for any cloud's: each adapter
/// decides what it takes to serve one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Read one record by its key: every route with credentials reads its token's.
    GetRecord,
    /// Write a record: a commit, an audit entry, a token.
    PutRecord,
    /// Remove a record: a commit that releases a lock or settles a pending blob.
    DeleteRecord,
    /// Read a range of records: a list, versions, an audit page, a run's items.
    QueryRecords,
    /// Read many records by key at once: a run's tokens; the org's settings with the state's
    /// record, before a change to a state or a read of its content decides.
    BatchGetRecords,
    /// Read a stored blob.
    GetBlob,
    /// Store a new blob.
    PutBlob,
    /// Unwrap a data key, to open stored content.
    UnwrapKey,
    /// Make a new data key, to seal new content.
    NewDataKey,
    /// Read which key (and key version) wraps new data keys: the key report's "behind".
    DescribeKey,
}

use Need::*;

/// The API description: nothing at all.
const NOTHING: &[Need] = &[];
/// Reading records by key: the token's, the org's allocation.
const RECORD: &[Need] = &[GetRecord];
/// Listing and reading records.
const LOOKUP: &[Need] = &[GetRecord, QueryRecords];
/// Counting versions by key, beside the key in use.
const KEY_REPORT: &[Need] = &[GetRecord, QueryRecords, DescribeKey];
/// Changing records, never content.
const RECORDS: &[Need] = &[GetRecord, PutRecord, DeleteRecord];
/// Changing a state's record, never content: the org's settings read with the record.
const CHANGE: &[Need] = &[GetRecord, BatchGetRecords, PutRecord, DeleteRecord];
/// Changing a state's record after counting its versions: a delete that keeps the state.
const CHANGE_COUNTING: &[Need] = &[
    GetRecord,
    BatchGetRecords,
    PutRecord,
    DeleteRecord,
    QueryRecords,
];
/// Opening the latest content.
const OPEN: &[Need] = &[GetRecord, BatchGetRecords, GetBlob, UnwrapKey];
/// Opening content (or two, to compare them), audited.
const OPEN_AUDITED: &[Need] = &[GetRecord, PutRecord, GetBlob, UnwrapKey];
/// Opening a state's version, audited: the org's settings read with the record.
const OPEN_VERSION: &[Need] = &[GetRecord, BatchGetRecords, PutRecord, GetBlob, UnwrapKey];
/// Sealing and committing new content.
const SEAL: &[Need] = &[GetRecord, PutRecord, DeleteRecord, PutBlob, NewDataKey];
/// Sealing a state's new version: the org's settings read with the record, and its
/// inventory key (docs/inventory.md) unwrapped to index the version.
const SEAL_STATE: &[Need] = &[
    GetRecord,
    BatchGetRecords,
    PutRecord,
    DeleteRecord,
    PutBlob,
    UnwrapKey,
    NewDataKey,
];
/// Bringing a deleted state back: records changed, its latest version opened to index it
/// (the org's inventory key unwrapped, or made at its first indexed version).
const RESTORE: &[Need] = &[
    GetRecord,
    PutRecord,
    DeleteRecord,
    GetBlob,
    UnwrapKey,
    NewDataKey,
];
/// Opening old content and sealing it again as a new version.
const RESEAL: &[Need] = &[
    GetRecord,
    BatchGetRecords,
    PutRecord,
    DeleteRecord,
    GetBlob,
    PutBlob,
    UnwrapKey,
    NewDataKey,
];
/// Changing records after reading a range of them: an app state's archive deletion reads its
/// neighbours; a trust policy's change reads the org's policies, a protected state's the
/// policies it names.
const RECORDS_LOOKUP: &[Need] = &[GetRecord, PutRecord, DeleteRecord, QueryRecords];
/// A workload's exchange: the policies naming its issuer read, its session's token stored.
const EXCHANGE: &[Need] = &[GetRecord, PutRecord, QueryRecords];
/// The runs API (and a workload session's end): runs, their tokens and holds.
const RUNS: &[Need] = &[
    GetRecord,
    PutRecord,
    DeleteRecord,
    QueryRecords,
    BatchGetRecords,
];

use BodyLimit::{Lock, OneMib, State};
use Handler::{Backend, Bearer, IdToken, Open, Platform};

const fn route(
    method: &'static str,
    path: &'static str,
    function: &'static str,
    body: BodyLimit,
    needs: &'static [Need],
    handler: Handler,
) -> Route {
    Route {
        method,
        path,
        function,
        local_only: false,
        body,
        needs,
        handler,
    }
}

const fn local(
    method: &'static str,
    path: &'static str,
    function: &'static str,
    body: BodyLimit,
    needs: &'static [Need],
    handler: Handler,
) -> Route {
    Route {
        method,
        path,
        function,
        local_only: true,
        body,
        needs,
        handler,
    }
}

/// Every route the service answers, one row each (DESIGN section 3). `local` rows are served
/// by the local server and the container only.
#[rustfmt::skip]
pub static ROUTES: &[Route] = &[
    //    method    path                                                function       body    needs         handler
    route("GET",    "/api/tf-states/{name}/state",                      "state-read",  OneMib, OPEN,         Backend(&state::read)),
    route("POST",   "/api/tf-states/{name}/state",                      "state-write", State,  SEAL_STATE,   Backend(&state::write)),
    route("POST",   "/api/tf-states/{name}/lock",                       "lock",        Lock,   CHANGE,       Backend(&lock::lock)),
    local("LOCK",   "/api/tf-states/{name}/lock",                       "lock",        Lock,   CHANGE,       Backend(&lock::lock)),
    route("DELETE", "/api/tf-states/{name}/lock",                       "lock",        Lock,   CHANGE,       Backend(&lock::unlock)),
    local("UNLOCK", "/api/tf-states/{name}/lock",                       "lock",        Lock,   CHANGE,       Backend(&lock::unlock)),
    route("GET",    "/api/tf-states",                                   "list",        OneMib, LOOKUP,       Bearer(&list::list)),
    route("GET",    "/api/tf-states/",                                  "list",        OneMib, LOOKUP,       Bearer(&list::list)),
    route("GET",    "/api/tf-states/{name}",                            "list",        OneMib, LOOKUP,       Bearer(&list::show)),
    route("GET",    "/api/resources",                                   "list",        OneMib, LOOKUP,       Bearer(&inventory::search)),
    route("GET",    "/api/resources/conflicts",                         "list",        OneMib, LOOKUP,       Bearer(&inventory::conflicts)),
    route("GET",    "/api/overview",                                    "list",        OneMib, LOOKUP,       Bearer(&inventory::overview)),
    route("GET",    "/api/tf-states/{name}/versions",                   "versions",    OneMib, LOOKUP,       Bearer(&list::versions)),
    route("GET",    "/api/tf-states/{name}/versions/{version}/content", "download",    OneMib, OPEN_VERSION, Bearer(&manage::download)),
    route("GET",    "/api/tf-states/{name}/versions/{version}/changes", "download",    OneMib, OPEN_VERSION, Bearer(&manage::compare)),
    route("GET",    "/api/tf-states/{name}/outputs",                    "download",    OneMib, OPEN,         Bearer(&outputs::outputs)),
    route("GET",    "/api/tf-states/{name}/outputs/state",              "download",    OneMib, OPEN,         Backend(&outputs::consumer_state)),
    route("POST",   "/api/tf-states/{name}/import",                     "import",      State,  SEAL_STATE,   Bearer(&manage::import)),
    route("POST",   "/api/tf-states/{name}/rollback",                   "rollback",    OneMib, RESEAL,       Bearer(&manage::rollback)),
    route("POST",   "/api/tf-states/{name}/force-unlock",               "admin",       OneMib, CHANGE,       Bearer(&manage::force_unlock)),
    route("DELETE", "/api/tf-states/{name}",                            "admin",       OneMib, CHANGE_COUNTING, Bearer(&manage::delete)),
    route("GET",    "/api/deleted-states",                              "admin",       OneMib, LOOKUP,       Bearer(&deleted::list)),
    route("POST",   "/api/deleted-states/{id}/restore",                 "rollback",    OneMib, RESTORE,      Bearer(&deleted::restore)),
    route("DELETE", "/api/deleted-states/{id}",                         "admin",       OneMib, RECORDS,      Bearer(&deleted::purge)),
    route("GET",    "/api/tf-states/{name}/audit",                      "audit",       OneMib, LOOKUP,       Bearer(&admin::state_audit)),
    route("GET",    "/api/audit",                                       "audit",       OneMib, LOOKUP,       Bearer(&admin::org_audit)),
    route("GET",    "/api/keys",                                        "audit",       OneMib, KEY_REPORT,   Bearer(&admin::keys)),
    route("GET",    "/api/org/permissions",                             "admin",       OneMib, RECORDS,      Bearer(&admin::permissions)),
    route("PUT",    "/api/org/permissions",                             "admin",       OneMib, RECORDS,      Bearer(&admin::set_permissions)),
    route("GET",    "/api/org/trust-policies",                          "admin",       OneMib, LOOKUP,       Bearer(&trust::list)),
    route("POST",   "/api/org/trust-policies",                          "admin",       OneMib, RECORDS_LOOKUP, Bearer(&trust::create)),
    route("GET",    "/api/org/trust-policies/{name}",                   "admin",       OneMib, LOOKUP,       Bearer(&trust::show)),
    route("PUT",    "/api/org/trust-policies/{name}",                   "admin",       OneMib, RECORDS_LOOKUP, Bearer(&trust::replace)),
    route("DELETE", "/api/org/trust-policies/{name}",                   "admin",       OneMib, RECORDS_LOOKUP, Bearer(&trust::delete)),
    route("GET",    "/api/org/protected-states",                        "admin",       OneMib, RECORD,       Bearer(&protection::list)),
    route("GET",    "/api/org/protected-states/{pattern}",              "admin",       OneMib, RECORD,       Bearer(&protection::show)),
    route("PUT",    "/api/org/protected-states/{pattern}",              "admin",       OneMib, RECORDS_LOOKUP, Bearer(&protection::put)),
    route("DELETE", "/api/org/protected-states/{pattern}",              "admin",       OneMib, RECORDS,      Bearer(&protection::delete)),
    route("POST",   "/api/oidc/exchange",                               "oidc",        OneMib, EXCHANGE,     IdToken(&workload::exchange)),
    route("DELETE", "/api/oidc/session",                                "oidc",        OneMib, RUNS,         Bearer(&workload::end_session)),
    route("GET",    "/api/whoami",                                      "list",        OneMib, RECORD,       Bearer(&identity::whoami)),
    route("GET",    "/api/openapi.json",                                "list",        OneMib, NOTHING,      Open),
    route("GET",    "/api/apps",                                        "apps",        OneMib, LOOKUP,       Bearer(&app_reads::list)),
    route("GET",    "/api/apps/{name}",                                 "apps",        OneMib, LOOKUP,       Bearer(&app_reads::show)),
    route("POST",   "/api/apps/{name}/lock",                            "apps",        Lock,   RECORDS,      Bearer(&app_changes::lock)),
    route("GET",    "/api/apps/{name}/locks/{lock_id}",                 "apps",        OneMib, RECORD,       Bearer(&app_reads::change)),
    route("PUT",    "/api/apps/{name}/locks/{lock_id}/files/{file}",    "apps",        State,  SEAL,         Bearer(&app_changes::upload)),
    route("GET",    "/api/apps/{name}/locks/{lock_id}/files/{file}",    "apps",        OneMib, OPEN_AUDITED, Bearer(&app_reads::change_file)),
    route("POST",   "/api/apps/{name}/locks/{lock_id}/seal",            "apps",        OneMib, RECORDS,      Bearer(&app_changes::seal)),
    route("POST",   "/api/apps/{name}/locks/{lock_id}/unlock",          "apps",        OneMib, RECORDS,      Bearer(&app_changes::unlock)),
    route("GET",    "/api/apps/{name}/files/{file}",                    "apps",        OneMib, OPEN_AUDITED, Bearer(&app_reads::newest_file)),
    route("GET",    "/api/apps/{name}/archives",                        "apps",        OneMib, LOOKUP,       Bearer(&app_reads::archives)),
    route("GET",    "/api/apps/{name}/archives/{commit_id}",            "apps",        OneMib, RECORD,       Bearer(&app_reads::archive)),
    route("GET",    "/api/apps/{name}/archives/{commit_id}/files/{file}", "apps",      OneMib, OPEN_AUDITED, Bearer(&app_reads::archive_file)),
    route("DELETE", "/api/apps/{name}/archives/{commit_id}",            "apps",        OneMib, RECORDS_LOOKUP, Bearer(&app_reads::delete_archive)),
    route("POST",   "/api/apps/{name}/force-unlock",                    "apps",        OneMib, RECORDS,      Bearer(&app_changes::force_unlock)),
    route("POST",   "/api/runs/{run}/tf-state-tokens",                  "runs",        OneMib, RUNS,         Platform(&runs::mint)),
    route("POST",   "/api/runs/{run}/end",                              "runs",        OneMib, RUNS,         Platform(&runs::end)),
    route("POST",   "/api/runs/{run}/steps/{step}/gone",                "runs",        OneMib, RUNS,         Platform(&runs::gone)),
];

/// The outcome of matching a request against the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteMatch<'a> {
    Found {
        route: &'static Route,
        params: Vec<(&'static str, &'a str)>,
    },
    /// The path exists, but not for this method.
    MethodNotAllowed {
        allowed: Vec<&'static str>,
    },
    NotFound,
}

/// Matches a method and raw path against the table (percent-encoding left as is: a `%` in a
/// name is refused by the name check, so an encoded slash can never become a path). A
/// trailing slash is part of the path, as it is to API Gateway: `/api/tf-states/` has a row
/// of its own, so the template routes it too and it is answered, never redirected.
pub fn find_route<'a>(method: &str, path: &'a str) -> RouteMatch<'a> {
    let mut allowed = Vec::new();
    for route in ROUTES {
        let Some(params) = match_path(route.path, path) else {
            continue;
        };
        if route.method == method {
            return RouteMatch::Found { route, params };
        }
        // `Allow` names what every front door answers, as the OpenAPI document does: the
        // local-only verbs are described there in words, and a 405 stays the same everywhere.
        if !route.local_only {
            allowed.push(route.method);
        }
    }
    if allowed.is_empty() {
        RouteMatch::NotFound
    } else {
        RouteMatch::MethodNotAllowed { allowed }
    }
}

fn match_path<'a>(pattern: &'static str, path: &'a str) -> Option<Vec<(&'static str, &'a str)>> {
    let mut params = Vec::new();
    let mut segments = path.split('/');
    for want in pattern.split('/') {
        let got = segments.next()?;
        match want.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            Some(param) if !got.is_empty() => params.push((param, got)),
            Some(_) => return None,
            None if want == got => {}
            None => return None,
        }
    }
    segments.next().is_none().then_some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler a request finds, as `Credentials(module::function)`, and its parameters.
    fn found(method: &str, path: &str) -> (String, Vec<(&'static str, String)>) {
        match find_route(method, path) {
            RouteMatch::Found { route, params } => (
                format!("{:?}", route.handler).replace("hegemony_state::http::", ""),
                params.into_iter().map(|(k, v)| (k, v.to_owned())).collect(),
            ),
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn backend_routes_take_post_and_lock_verbs() {
        assert_eq!(
            found("GET", "/api/tf-states/net/state").0,
            "Backend(state::read)"
        );
        assert_eq!(
            found("POST", "/api/tf-states/net/state").1,
            vec![("name", "net".into())]
        );
        assert_eq!(
            found("POST", "/api/tf-states/net/lock").0,
            "Backend(lock::lock)"
        );
        assert_eq!(
            found("LOCK", "/api/tf-states/net/lock").0,
            "Backend(lock::lock)"
        );
        assert_eq!(
            found("DELETE", "/api/tf-states/net/lock").0,
            "Backend(lock::unlock)"
        );
        assert_eq!(
            found("UNLOCK", "/api/tf-states/net/lock").0,
            "Backend(lock::unlock)"
        );
    }

    #[test]
    fn a_consumer_reads_outputs_state_as_a_backend_and_nothing_else_there() {
        assert_eq!(
            found("GET", "/api/tf-states/net/outputs/state").0,
            "Backend(outputs::consumer_state)"
        );
        assert_eq!(
            found("GET", "/api/tf-states/net/outputs").0,
            "Bearer(outputs::outputs)"
        );
        for method in ["POST", "LOCK", "DELETE", "PUT"] {
            assert_eq!(
                find_route(method, "/api/tf-states/net/outputs/state"),
                RouteMatch::MethodNotAllowed {
                    allowed: vec!["GET"]
                },
                "{method}"
            );
        }
        assert_eq!(
            find_route("GET", "/api/tf-states/net/outputs/lock"),
            RouteMatch::NotFound
        );
    }

    #[test]
    fn the_list_answers_with_and_without_a_trailing_slash() {
        assert_eq!(found("GET", "/api/tf-states").0, "Bearer(list::list)");
        assert_eq!(found("GET", "/api/tf-states/").0, "Bearer(list::list)");
    }

    #[test]
    fn unknown_paths_and_methods() {
        assert_eq!(find_route("GET", "/api/nope"), RouteMatch::NotFound);
        assert_eq!(
            find_route("GET", "/api/tf-states//state"),
            RouteMatch::NotFound
        );
        assert_eq!(
            find_route("GET", "/api/tf-states/a/b/state"),
            RouteMatch::NotFound
        );
        assert_eq!(
            find_route("PUT", "/api/tf-states/net/lock"),
            RouteMatch::MethodNotAllowed {
                allowed: vec!["POST", "DELETE"]
            }
        );
    }

    #[test]
    fn encoded_slashes_stay_inside_one_segment() {
        assert_eq!(
            found("GET", "/api/tf-states/a%2Fb/state").1,
            vec![("name", "a%2Fb".into())]
        );
    }

    /// DESIGN section 3: Basic (and step tokens) on the backend routes, state and lock,
    /// only; the platform's token on the runs API only; no credentials for the description;
    /// a CI job's ID token on the exchange only (DESIGN section 16).
    #[test]
    fn each_route_takes_the_credentials_design_gives_it() {
        for r in ROUTES {
            let backend = r.path.starts_with("/api/tf-states/")
                && (r.path.ends_with("/state") || r.path.ends_with("/lock"));
            let runs = r.path.starts_with("/api/runs/");
            let expected = match (backend, runs, r.path) {
                (_, _, "/api/openapi.json") => "Open",
                (_, _, "/api/oidc/exchange") => "IdToken",
                (true, _, _) => "Backend",
                (_, true, _) => "Platform",
                _ => "Bearer",
            };
            let got = format!("{:?}", r.handler);
            assert!(got.starts_with(expected), "{} {}: {got}", r.method, r.path);
        }
    }

    /// A state's limit for the bodies that carry a state or an app state's file, 16 KiB for
    /// lock documents, 1 MiB for every other body.
    #[test]
    fn each_route_takes_the_body_limit_of_what_it_carries() {
        for r in ROUTES {
            let expected = match (r.method, r.path.rsplit('/').next()) {
                ("POST", Some("state" | "import")) | ("PUT", Some("{file}")) => BodyLimit::State,
                (_, Some("lock")) => BodyLimit::Lock,
                _ => BodyLimit::OneMib,
            };
            assert_eq!(r.body, expected, "{} {}", r.method, r.path);
        }
    }

    #[test]
    fn only_lock_verbs_are_local_only() {
        let local: Vec<_> = ROUTES
            .iter()
            .filter(|r| r.local_only)
            .map(|r| r.method)
            .collect();
        assert_eq!(local, vec!["LOCK", "UNLOCK"]);
    }
}
