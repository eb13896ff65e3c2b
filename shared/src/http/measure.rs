//! A request's measures, taken where it is answered (the local server, the container door,
//! a Lambda function): its route's pattern from the route table (never the path a client
//! sent, whose names would make a label without bound), its method, its status, how long it
//! took, and for an error answer its code and a 503's cause, read from the [`Refused`] the
//! answer carries. Reported to the app's metrics; nothing here picks a status.

use std::time::Instant;

use lambda_http::{Body, Response};

use super::error::Refused;
use super::routes::Route;
use crate::ports::RequestMeasure;
use crate::service::App;

/// The route label of a request that matched no row: a page, a 404, a 405.
pub const UNROUTED: &str = "unrouted";

/// Reports `response` to a request for `route` (`None`: no row matched) with `method`,
/// begun at `started`.
pub fn measure(
    app: &App,
    route: Option<&Route>,
    method: &str,
    response: &Response<Body>,
    started: Instant,
) {
    let refused = response.extensions().get::<Refused>();
    app.metrics.request(&RequestMeasure {
        route: route.map_or(UNROUTED, |route| route.path),
        method: route.map_or_else(|| method_label(method), |route| route.method),
        status: response.status().as_u16(),
        seconds: started.elapsed().as_secs_f64(),
        refusal: refused.map(|refused| refused.code.as_str()),
        fault: refused.and_then(|refused| refused.fault),
    });
}

/// A method no row has, from a closed set: a client may send any token as a method.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "LOCK" => "LOCK",
        "UNLOCK" => "UNLOCK",
        _ => "other",
    }
}
