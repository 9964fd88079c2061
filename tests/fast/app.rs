//! The router in-process, on the shared lab's backends.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use clap::Parser;
use seckill::instance::http::{AppState, router};
use seckill::instance::serve::{ServeArgs, prepare};
use seckill::sale::memory::Memory;
use serde_json::Value;
use tower::ServiceExt;

use crate::harness::TestLab;

/// The backends-only lab shared by every test of this binary.
pub fn lab() -> &'static TestLab {
    static LAB: OnceLock<TestLab> = OnceLock::new();
    LAB.get_or_init(|| TestLab::start(0))
}

/// `seckill serve`'s flags, parsed as the binary would.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

/// A router wired to the lab's backends, as one instance would build it
/// (pools are per test: each test has its own runtime).
pub async fn app() -> Router {
    app_with(&[]).await
}

/// [`app`] with extra `seckill serve` flags.
pub async fn app_with(extra: &[&str]) -> Router {
    app_on(&lab().info.redis_url, extra).await
}

/// [`app_with`] on the Redis at `redis_url` instead of the lab's (the
/// lab's other backends): for a test that faults a Redis of its own.
pub async fn app_on(redis_url: &str, extra: &[&str]) -> Router {
    let info = &lab().info;
    let redlock = info.redlock_urls.join(",");
    let Serve { args } = Serve::parse_from(
        [
            "serve",
            "--redis-url",
            redis_url,
            "--database-url",
            &info.postgres_url,
            "--redlock-urls",
            &redlock,
            "--zookeeper",
            &info.zookeeper,
            "--etcd",
            &info.etcd,
            "--mysql-url",
            &info.mysql_url,
            "--admin-token",
            &info.admin_token,
            "--instance",
            "in-process",
        ]
        .into_iter()
        .chain(extra.iter().copied()),
    );
    let backends = prepare(&args).await.expect("backends");
    router(AppState::new(
        backends,
        "in-process".into(),
        seckill::instance::http::Credentials {
            admin_token: args.admin_token.clone(),
            buyers: seckill::instance::auth::Identify::new(&args.auth).expect("buyer auth"),
        },
        seckill::sale::reservation::Reservations::new(None, &args.admin_token),
        args.edge,
        Arc::new(Memory::default()),
        seckill::model::telemetry::install(),
    ))
}

/// A request's answer: status, headers and the body as JSON (or as a
/// string when it is not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The contract's error code, or a placeholder that matches nothing.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>")
    }
}

/// Sends one request through the router, from 127.0.0.1 (the buy route's
/// token buckets key on the peer address).
pub async fn call(
    app: &Router,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(json) => {
            request = request.header("content-type", "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let mut request = request.body(body).expect("request");
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        headers,
        body,
    }
}

/// Resets product `id` through the admin route (must succeed).
pub async fn reset(app: &Router, id: i64, body: Value) {
    let token = format!("Bearer {}", lab().info.admin_token);
    let path = format!("/admin/products/{id}");
    let answer = call(
        app,
        Method::PUT,
        &path,
        &[("authorization", &token)],
        Some(body),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

/// One buy by `user`.
pub async fn buy(app: &Router, id: i64, user: &str) -> Answer {
    let path = format!("/stock/{id}/buy");
    call(app, Method::POST, &path, &[("x-user-id", user)], None).await
}
