//! The OpenAPI document of the contract (`GET /openapi.json`), generated
//! from the code: each handler's `#[utoipa::path]` describes its route,
//! parameters and answers; the ground types derive their schemas; the
//! router ([`super::routes`]) registers the routes and collects their
//! descriptions in one pass, so a route cannot be served undescribed.
//!
//! What no single handler can say is added here: the answers of the layers
//! in front of every handler (the gateway, load shedding, the request
//! timeout), the admin token's scheme, and the catalogue's strategy ids in
//! the reset body (the product layer does not know the catalogue). And one
//! correction: the reset body is drawn as serde reads it (one object).

use utoipa::openapi::schema::{AdditionalProperties, Object, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{
    Components, Content, Header, OpenApi, Ref, RefOr, Response, ResponseBuilder, Responses,
};
use utoipa::{Modify, OpenApi as _};

use crate::stock::strategy::Catalogue;

/// The name the admin route's `security` requirement refers to.
const ADMIN_TOKEN: &str = "admin_token";
/// The name the buyer routes' `security` alternative refers to.
const BUYER_TOKEN: &str = "buyer_token";

/// What the derive can say up front: the title, the tags, and the admin
/// token's scheme.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "seckill",
        description = "A flash-sale inventory backend: buy one unit under the product's \
                       strategy, read the ledger (sold against stock, oversold, lost updates), \
                       reset products. Instances and the nginx gateway in front of them serve \
                       the same paths; failures answer {\"error\":{\"code\":…,\"message\":…}}."
    ),
    tags(
        (name = "sale", description = "Buying"),
        (name = "orders", description = "An order after the sale: a hold paid, cancelled or expired (products with `pay_within_ms`)"),
        (name = "ledger", description = "Sold against stock, counted from durable orders"),
        (name = "admin", description = "Creating and resetting products (bearer token)"),
        (name = "meta", description = "Catalogue, health, metrics, configuration, this document"),
    ),
    modifiers(&AdminToken)
)]
struct Base;

/// Declares the bearer schemes: the admin token `PUT /admin/…` requires,
/// and the buyer token the buyer routes take with `buyer_auth = token`.
struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, doc: &mut OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            ADMIN_TOKEN,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        let mut buyer = Http::new(HttpAuthScheme::Bearer);
        buyer.bearer_format = Some("JWT".into());
        buyer.description = Some(
            "a signed buyer token (HS256; `sub` the buyer), required when the instances run \
             with `buyer_auth = token`; then `X-User-Id` and `?user=` are ignored"
                .into(),
        );
        components.add_security_scheme(BUYER_TOKEN, SecurityScheme::Http(buyer));
    }
}

/// The document the routes start from.
pub(super) fn base() -> OpenApi {
    Base::openapi()
}

/// The whole document, as `GET /openapi.json` serves it.
pub fn openapi() -> OpenApi {
    let mut doc = super::routes(None).into_openapi();
    add_edge_answers(&mut doc);
    let components = doc.components.get_or_insert_with(Default::default);
    flatten(components, "ResetRequest");
    list_strategies(components, &Catalogue::new());
    doc
}

/// Answers any route can get from the layers in front of its handler,
/// added where the route does not describe that status itself: nginx's own
/// error pages (400 for a request line or headers it refuses, 429 from its
/// per-address connection cap, 502 when no instance answered) and the
/// instance's load shedding and request timeout (503 `busy`).
fn add_edge_answers(doc: &mut OpenApi) {
    let edge = [
        (
            "400",
            error(
                "`bad_request` from the gateway: a malformed or oversized request line or headers",
                &[],
            ),
        ),
        (
            "429",
            error(
                "`rate_limited` by the gateway: too many connections from this address",
                &[
                    ("Retry-After", Type::Integer, "seconds"),
                    ("X-Limited-By", Type::String, "`gateway` or `service`"),
                ],
            ),
        ),
        (
            "502",
            error(
                "from the gateway: no instance answered in time (for a buy, the sale may \
                 or may not have happened: retry with the same Idempotency-Key)",
                &[("Retry-After", Type::Integer, "seconds")],
            ),
        ),
        (
            "503",
            error(
                "`busy`: the instance is shedding load or the request timed out, or the \
                 gateway is overloaded; nothing was done, retry",
                &[("Retry-After", Type::Integer, "seconds")],
            ),
        ),
    ];
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            add_missing(&mut operation.responses, &edge);
        }
    }
}

/// Adds each `(status, answer)` the responses do not already have.
fn add_missing(responses: &mut Responses, answers: &[(&str, Response)]) {
    for (status, answer) in answers {
        responses
            .responses
            .entry((*status).to_owned())
            .or_insert_with(|| RefOr::T(answer.clone()));
    }
}

/// A failure answer: the contract's error body, with `headers` (name,
/// value type, description).
fn error(description: &str, headers: &[(&str, Type, &str)]) -> Response {
    let body = Content::new(Some(Ref::from_schema_name("ErrorBody")));
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/json", body);
    for (name, value, what) in headers {
        let header = Header::builder()
            .schema(Object::with_type(value.clone()))
            .description(Some(*what))
            .build();
        response = response.header(*name, header);
    }
    response.build()
}

/// Draws a struct with a `#[serde(flatten)]` field as the one object serde
/// reads: the derive draws it as an `allOf` of its own fields and the
/// flattened struct's, and when either denies unknown fields (the reset
/// body and its settings both do) no body satisfies both halves. The
/// merged object has every property, both `required` lists, and denies
/// anything else, as serde does.
fn flatten(components: &mut Components, name: &str) {
    let Some(RefOr::T(Schema::AllOf(all))) = components.schemas.get(name) else {
        return;
    };
    let mut merged = Object::with_type(Type::Object);
    merged.description.clone_from(&all.description);
    for part in &all.items {
        let object = match part {
            RefOr::T(Schema::Object(object)) => object,
            RefOr::Ref(reference) => {
                let target = reference
                    .ref_location
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                match components.schemas.get(target) {
                    Some(RefOr::T(Schema::Object(object))) => object,
                    _ => panic!("{name}: flattened {target} is not an object schema"),
                }
            }
            _ => panic!("{name}: cannot flatten an allOf part that is not an object"),
        };
        merged.properties.extend(object.properties.clone());
        merged.required.extend(object.required.iter().cloned());
    }
    merged.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
    components
        .schemas
        .insert(name.to_owned(), RefOr::T(Schema::Object(merged)));
}

/// Lists the catalogue's ids as the enum of the reset body's `strategy`.
fn list_strategies(components: &mut Components, catalogue: &Catalogue) {
    if let Some(RefOr::T(Schema::Object(reset))) = components.schemas.get_mut("ResetRequest")
        && let Some(RefOr::T(Schema::Object(strategy))) = reset.properties.get_mut("strategy")
    {
        strategy.enum_values = Some(catalogue.ids().into_iter().map(Into::into).collect());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::model::error::ErrorCode;

    fn document() -> Value {
        serde_json::to_value(openapi()).expect("the document serializes")
    }

    /// `(METHOD path)` of every operation.
    fn operations(doc: &Value) -> BTreeSet<String> {
        let paths = doc["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                let methods = item.as_object().expect("a path item");
                methods
                    .keys()
                    .map(move |m| format!("{} {path}", m.to_uppercase()))
            })
            .collect()
    }

    #[test]
    fn every_route_of_the_contract_is_described() {
        let expected: BTreeSet<String> = [
            "POST /stock/{id}/buy",
            "GET /stock/{id}/path",
            "POST /stock/{id}/buy/{path}",
            "POST /stock/{id}/reserve",
            "GET /orders/{id}",
            "POST /orders/{id}/pay",
            "POST /orders/{id}/cancel",
            "GET /stock/{id}",
            "GET /report",
            "GET /live",
            "PUT /admin/products/{id}",
            "POST /admin/reconcile",
            "POST /admin/products/{id}/restock",
            "POST /admin/products/{id}/window",
            "GET /strategies",
            "GET /healthz",
            "GET /readyz",
            "GET /metrics",
            "GET /config",
            "GET /",
            "GET /openapi.json",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(operations(&document()), expected);
    }

    #[test]
    fn every_reference_resolves() {
        fn refs<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(target)) = map.get("$ref") {
                        found.push(target);
                    }
                    map.values().for_each(|v| refs(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
                _ => {}
            }
        }
        let doc = document();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("unexpected reference {target}"));
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "{target} does not resolve"
            );
        }
    }

    #[test]
    fn the_error_codes_are_the_listed_ones() {
        let doc = document();
        let code = &doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"];
        assert_eq!(code["$ref"], "#/components/schemas/ErrorCode", "{code}");
        let codes = &doc["components"]["schemas"]["ErrorCode"]["enum"];
        let names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes, &serde_json::json!(names));
    }

    #[test]
    fn every_operation_has_the_edge_answers() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                for status in ["200", "400", "429", "502", "503"] {
                    assert!(
                        operation["responses"][status].is_object(),
                        "{method} {path} does not describe {status}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_reset_body_is_one_object_naming_the_catalogue() {
        let doc = document();
        let reset = &doc["components"]["schemas"]["ResetRequest"];
        assert_eq!(reset["type"], "object");
        assert_eq!(reset["additionalProperties"], false);
        for knob in [
            "stock",
            "strategy",
            "work_ms",
            "lease_ms",
            "store",
            "per_user_limit",
        ] {
            assert!(reset["properties"][knob].is_object(), "no {knob}: {reset}");
        }
        let ids: Vec<&str> = Catalogue::new().ids();
        assert_eq!(
            reset["properties"]["strategy"]["enum"],
            serde_json::json!(ids)
        );
    }

    #[test]
    fn the_admin_route_asks_for_the_declared_token() {
        let doc = document();
        let scheme = &doc["components"]["securitySchemes"][ADMIN_TOKEN];
        assert_eq!(scheme["scheme"], "bearer");
        let security = &doc["paths"]["/admin/products/{id}"]["put"]["security"];
        assert_eq!(security, &serde_json::json!([{ ADMIN_TOKEN: [] }]));
    }
}
