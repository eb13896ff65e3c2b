//! The request an API Gateway HTTP API (payload v2, `$default` stage) delivers, built from a
//! plain HTTP request's parts: what the local server and the container make of each request
//! off their socket, so the handlers see exactly what they see on Lambda. Tests build their
//! in-process requests here too. No I/O.

use std::collections::HashMap;

use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayV2httpRequestContext, ApiGatewayV2httpRequestContextHttpDescription,
};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::http::request::Parts;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};

use super::routes::Route;

/// The v2 request for `route` with its matched path `params`, from `parts` (method, URI,
/// headers) and the body's bytes.
pub fn request(
    route: &Route,
    parts: Parts,
    params: &[(&'static str, &str)],
    body: Vec<u8>,
) -> Request {
    let query: QueryMap = parts.uri.query().unwrap_or("").parse().unwrap_or_default();
    let path_parameters: HashMap<String, String> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = Some(format!("{} {}", route.method, route.path));
    context.stage = Some("$default".into());
    let mut description = ApiGatewayV2httpRequestContextHttpDescription::default();
    description.method = parts.method.clone();
    description.path = Some(parts.uri.path().to_owned());
    description.protocol = Some("HTTP/1.1".into());
    context.http = description;
    let mut request = lambda_http::http::Request::new(self::body(body));
    *request.method_mut() = parts.method;
    *request.uri_mut() = parts.uri;
    *request.headers_mut() = parts.headers;
    request
        .with_path_parameters(path_parameters)
        .with_query_string_parameters(query)
        .with_request_context(RequestContext::ApiGatewayV2(context))
}

/// A body's bytes as API Gateway delivers them: none is `Body::Empty`. The local server
/// sets this on a request it admitted on its headers alone, once the body is read.
pub fn body(bytes: Vec<u8>) -> Body {
    if bytes.is_empty() {
        Body::Empty
    } else {
        Body::Binary(bytes)
    }
}
