//! The route table: the single source of truth for the local server, the Lambda functions
//! and the SAM template. `LOCK`/`UNLOCK` are local-only: API Gateway cannot route them.

use crate::domain::lock::MAX_LOCK_BYTES;
use crate::service::Limits;

/// Which handler answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    StateRead,
    StateWrite,
    Lock,
    Unlock,
    List,
    Show,
    Versions,
    Download,
    Import,
    Rollback,
    ForceUnlock,
    Delete,
    StateAudit,
    OrgAudit,
    Permissions,
    SetPermissions,
    OpenApi,
    Mint,
    RunEnd,
    StepGone,
}

/// One route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    /// The path with `{name}` parameters, as API Gateway's route keys write it.
    pub path: &'static str,
    pub handler: Handler,
    /// The Lambda function (route group) that serves it.
    pub function: &'static str,
    /// Only the local server and the container serve it.
    pub local_only: bool,
}

/// Bodies on routes other than state, import and lock are limited to 1 MiB.
pub const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

impl Route {
    /// Whether the route needs credentials at all (only the API description does not).
    pub fn needs_credentials(&self) -> bool {
        self.handler != Handler::OpenApi
    }

    /// A route of the platform's runs API, which takes a platform token only.
    pub fn is_runs(&self) -> bool {
        matches!(
            self.handler,
            Handler::Mint | Handler::RunEnd | Handler::StepGone
        )
    }

    /// A backend route (state, lock) accepts Basic as well as Bearer credentials.
    pub fn is_backend(&self) -> bool {
        matches!(
            self.handler,
            Handler::StateRead | Handler::StateWrite | Handler::Lock | Handler::Unlock
        )
    }

    /// The largest body this route accepts, refused as it arrives.
    pub fn body_limit(&self, limits: &Limits) -> u64 {
        match self.handler {
            Handler::StateWrite | Handler::Import => limits.max_state_bytes,
            Handler::Lock | Handler::Unlock => MAX_LOCK_BYTES as u64,
            _ => DEFAULT_BODY_LIMIT,
        }
    }
}

const fn route(
    method: &'static str,
    path: &'static str,
    handler: Handler,
    function: &'static str,
) -> Route {
    Route {
        method,
        path,
        handler,
        function,
        local_only: false,
    }
}

const fn local(
    method: &'static str,
    path: &'static str,
    handler: Handler,
    function: &'static str,
) -> Route {
    Route {
        method,
        path,
        handler,
        function,
        local_only: true,
    }
}

/// Every route the service answers.
pub static ROUTES: &[Route] = &[
    route(
        "GET",
        "/api/tf-states/{name}/state",
        Handler::StateRead,
        "state-read",
    ),
    route(
        "POST",
        "/api/tf-states/{name}/state",
        Handler::StateWrite,
        "state-write",
    ),
    route("POST", "/api/tf-states/{name}/lock", Handler::Lock, "lock"),
    local("LOCK", "/api/tf-states/{name}/lock", Handler::Lock, "lock"),
    route(
        "DELETE",
        "/api/tf-states/{name}/lock",
        Handler::Unlock,
        "lock",
    ),
    local(
        "UNLOCK",
        "/api/tf-states/{name}/lock",
        Handler::Unlock,
        "lock",
    ),
    route("GET", "/api/tf-states", Handler::List, "list"),
    route("GET", "/api/tf-states/{name}", Handler::Show, "list"),
    route(
        "GET",
        "/api/tf-states/{name}/versions",
        Handler::Versions,
        "versions",
    ),
    route(
        "GET",
        "/api/tf-states/{name}/versions/{version}/content",
        Handler::Download,
        "download",
    ),
    route(
        "POST",
        "/api/tf-states/{name}/import",
        Handler::Import,
        "import",
    ),
    route(
        "POST",
        "/api/tf-states/{name}/rollback",
        Handler::Rollback,
        "rollback",
    ),
    route(
        "POST",
        "/api/tf-states/{name}/force-unlock",
        Handler::ForceUnlock,
        "admin",
    ),
    route("DELETE", "/api/tf-states/{name}", Handler::Delete, "admin"),
    route(
        "GET",
        "/api/tf-states/{name}/audit",
        Handler::StateAudit,
        "audit",
    ),
    route("GET", "/api/audit", Handler::OrgAudit, "audit"),
    route("GET", "/api/org/permissions", Handler::Permissions, "admin"),
    route(
        "PUT",
        "/api/org/permissions",
        Handler::SetPermissions,
        "admin",
    ),
    route("GET", "/api/openapi.json", Handler::OpenApi, "list"),
    route(
        "POST",
        "/api/runs/{run}/tf-state-tokens",
        Handler::Mint,
        "runs",
    ),
    route("POST", "/api/runs/{run}/end", Handler::RunEnd, "runs"),
    route(
        "POST",
        "/api/runs/{run}/steps/{step}/gone",
        Handler::StepGone,
        "runs",
    ),
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

/// Matches a method and raw path (percent-encoding left as is: a `%` in a name is refused
/// by the name check, so an encoded slash can never become a path). `/api/tf-states/` is
/// answered like `/api/tf-states`, never redirected.
pub fn find_route<'a>(method: &str, path: &'a str) -> RouteMatch<'a> {
    let path = if path.len() > 1 {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    let mut allowed = Vec::new();
    for route in ROUTES {
        let Some(params) = match_path(route.path, path) else {
            continue;
        };
        if route.method == method {
            return RouteMatch::Found { route, params };
        }
        allowed.push(route.method);
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

    fn found(method: &str, path: &str) -> (Handler, Vec<(&'static str, String)>) {
        match find_route(method, path) {
            RouteMatch::Found { route, params } => (
                route.handler,
                params.into_iter().map(|(k, v)| (k, v.to_owned())).collect(),
            ),
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn backend_routes_take_post_and_lock_verbs() {
        assert_eq!(
            found("GET", "/api/tf-states/net/state").0,
            Handler::StateRead
        );
        assert_eq!(
            found("POST", "/api/tf-states/net/state").1,
            vec![("name", "net".into())]
        );
        assert_eq!(found("POST", "/api/tf-states/net/lock").0, Handler::Lock);
        assert_eq!(found("LOCK", "/api/tf-states/net/lock").0, Handler::Lock);
        assert_eq!(
            found("DELETE", "/api/tf-states/net/lock").0,
            Handler::Unlock
        );
        assert_eq!(
            found("UNLOCK", "/api/tf-states/net/lock").0,
            Handler::Unlock
        );
    }

    #[test]
    fn the_list_answers_with_and_without_a_trailing_slash() {
        assert_eq!(found("GET", "/api/tf-states").0, Handler::List);
        assert_eq!(found("GET", "/api/tf-states/").0, Handler::List);
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
                allowed: vec!["POST", "LOCK", "DELETE", "UNLOCK"]
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
