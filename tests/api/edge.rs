//! The edge: nginx's leaky bucket and the service's token buckets answer
//! 429 in the contract's shape, counted apart from sales; a client cannot
//! pick its own identity; `/config` shows the limits and no secret.

use std::net::IpAddr;

use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{TestLab, http};

/// Status, code, and `Retry-After` with `X-Limited-By` of one buy.
async fn buy(
    client: &reqwest::Client,
    base: &str,
    product: i64,
    user: &str,
    real_ip: Option<&str>,
) -> (StatusCode, String, Option<(String, String)>) {
    let mut request = client.post(format!("{base}/stock/{product}/buy?user={user}"));
    if let Some(ip) = real_ip {
        request = request
            .header("X-Real-IP", ip)
            .header("X-Forwarded-For", ip);
    }
    let response = request.send().await.expect("buy");
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let limit_headers = (status == StatusCode::TOO_MANY_REQUESTS)
        .then(|| (header("retry-after"), header("x-limited-by")));
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().unwrap_or("").to_owned();
    (status, code, limit_headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_turns_a_flood_away_with_json_429s_and_sells_nothing_extra() {
    let lab = TestLab::start_with(1, &["--gateway-rate", "1", "--gateway-burst", "5"], &[]);
    lab.gateway()
        .reset(601, &json!({"stock": 100, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    let client = http();
    let base = lab.info.gateway_url.clone();
    let results = join_all((0..30).map(|i| {
        let (client, base) = (client.clone(), base.clone());
        async move { buy(&client, &base, 601, &format!("flood-{i}"), None).await }
    }))
    .await;
    let ok = results.iter().filter(|r| r.0 == StatusCode::OK).count() as i64;
    let limited: Vec<_> = results
        .iter()
        .filter(|r| r.0 == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert!(!limited.is_empty(), "{results:?}");
    assert_eq!(
        ok + limited.len() as i64,
        30,
        "only sales and 429s: {results:?}"
    );
    for (_, code, headers) in &limited {
        assert_eq!(code, "rate_limited");
        assert_eq!(
            headers.as_ref(),
            Some(&("1".to_owned(), "gateway".to_owned()))
        );
    }
    // Read behind the gateway: its bucket is empty by now.
    let ledger = lab.instance(0).ledger(601).await.expect("ledger");
    assert_eq!(ledger.sold, ok, "every 200 is an order, no 429 is");
    assert_eq!(ledger.remaining, 100 - ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_limits_each_client_and_trusts_only_its_proxy() {
    let lab = TestLab::start_with(
        1,
        &[],
        &[("SECKILL_RATE_PER_SEC", "1"), ("SECKILL_RATE_BURST", "2")],
    );
    let direct = lab.info.instances[0].url.clone();
    lab.instance(0)
        .reset(602, &json!({"stock": 100, "strategy": "redis-lua"}))
        .await
        .expect("reset");

    // A stranger (127.0.0.2 is not a trusted proxy) cannot escape its bucket
    // by inventing a new X-Real-IP for every request.
    let stranger: IpAddr = "127.0.0.2".parse().unwrap();
    let client = reqwest::Client::builder()
        .no_proxy()
        .local_address(stranger)
        .build()
        .expect("client");
    let mut statuses = Vec::new();
    for i in 0..6 {
        let ip = format!("203.0.113.{i}");
        let (status, code, headers) = buy(&client, &direct, 602, &format!("s{i}"), Some(&ip)).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(code, "rate_limited");
            let (retry_after, layer) = headers.expect("429 headers");
            assert!(!retry_after.is_empty());
            assert_eq!(layer, "service");
        }
        statuses.push(status);
    }
    let limited = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert!(limited >= 3, "burst 2, then 1/s: {statuses:?}");

    // The trusted proxy (127.0.0.1, like nginx) speaks for many clients.
    let proxy = http();
    for i in 0..6 {
        let ip = format!("198.51.100.{i}");
        let (status, _, _) = buy(&proxy, &direct, 602, &format!("p{i}"), Some(&ip)).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "each forwarded client has its own bucket"
        );
    }
    let sold = lab.instance(0).ledger(602).await.expect("ledger").sold;
    let stranger_ok = statuses.iter().filter(|s| **s == StatusCode::OK).count() as i64;
    assert_eq!(sold, stranger_ok + 6, "429s sold nothing");
}

#[tokio::test]
async fn config_shows_the_limits_and_no_secret() {
    let lab = crate::harness::shared();
    let text = http()
        .get(format!("{}/config", lab.info.gateway_url))
        .send()
        .await
        .expect("config")
        .text()
        .await
        .expect("body");
    let config: Value = serde_json::from_str(&text).expect("json");
    assert!(
        config["edge"]["rate_per_sec"].as_u64().is_some(),
        "{config}"
    );
    assert!(
        config["edge"]["max_in_flight"].as_u64().is_some(),
        "{config}"
    );
    assert!(
        !text.contains(&lab.info.admin_token),
        "the admin token must not leak"
    );
}

/// Every (method, path) of the contract, from the instance's own OpenAPI
/// document, with its parameters filled in.
async fn every_route(lab: &TestLab) -> Vec<(Method, String)> {
    let document: Value = http()
        .get(format!("{}/openapi.json", lab.info.instances[0].url))
        .send()
        .await
        .expect("openapi")
        .json()
        .await
        .expect("json");
    let mut routes = Vec::new();
    for (template, item) in document["paths"].as_object().expect("paths") {
        let path = template
            .replace(
                "/orders/{id}",
                "/orders/01a23efb-50d3-70c8-abad-be6d1cd0898a",
            )
            .replace("{id}", "1")
            .replace("{path}", "x");
        for method in item.as_object().expect("methods").keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            routes.push((method, path.clone()));
        }
    }
    assert!(routes.len() >= 19, "{routes:?}");
    routes
}

/// Whether six quick requests on `route` meet a token bucket that says
/// `layer` in `X-Limited-By`.
async fn limited(
    client: &reqwest::Client,
    base: &str,
    route: &(Method, String),
    layer: &str,
) -> bool {
    let mut hit = false;
    for _ in 0..6 {
        let (method, path) = route;
        let answer = client
            .request(method.clone(), format!("{base}{path}?user=walker"))
            .send()
            .await
            .expect("answer");
        hit |= answer.status() == StatusCode::TOO_MANY_REQUESTS
            && answer
                .headers()
                .get("x-limited-by")
                .and_then(|v| v.to_str().ok())
                == Some(layer);
    }
    hit
}

/// The gateway's leaky bucket guards exactly the routes the instance's
/// per-address bucket guards (the buy side: a new buy route that nginx
/// lets through unlimited fails here), and the gateway's own 405 names
/// the methods the instance allows on each path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_limits_and_allows_what_each_route_does() {
    let lab = TestLab::start_with(
        1,
        &["--gateway-rate", "1", "--gateway-burst", "2"],
        &[("SECKILL_RATE_PER_SEC", "1"), ("SECKILL_RATE_BURST", "2")],
    );
    let routes = every_route(&lab).await;
    // 127.0.0.2 is no trusted proxy: the instance keys its bucket on it.
    let stranger = reqwest::Client::builder()
        .no_proxy()
        .local_address("127.0.0.2".parse::<IpAddr>().unwrap())
        .build()
        .expect("client");
    let direct = &lab.info.instances[0].url;
    let gateway = &lab.info.gateway_url;
    let mut by_instance = Vec::new();
    let mut by_gateway = Vec::new();
    for route in &routes {
        if limited(&stranger, direct, route, "service").await {
            by_instance.push(route.clone());
        }
        if limited(&http(), gateway, route, "gateway").await {
            by_gateway.push(route.clone());
        }
    }
    for buy_side in [
        "/stock/1/buy",
        "/stock/1/buy/x",
        "/stock/1/path",
        "/stock/1/reserve",
    ] {
        assert!(
            by_instance.iter().any(|(_, p)| p == buy_side),
            "{buy_side}: {by_instance:?}"
        );
    }
    assert_eq!(by_gateway, by_instance, "the gateway's limited routes");

    // The instance's 405 (to a method no route has) names what each path
    // allows; nginx answers TRACE itself, and must name the same.
    let paths: std::collections::BTreeSet<&String> = routes.iter().map(|(_, p)| p).collect();
    for (i, path) in paths.into_iter().enumerate() {
        let allow = |answer: &reqwest::Response| {
            let mut methods: Vec<String> = answer
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect();
            methods.sort();
            methods
        };
        // An address of its own per path: the buckets above are empty.
        let own = reqwest::Client::builder()
            .no_proxy()
            .local_address(format!("127.0.1.{}", i + 1).parse::<IpAddr>().unwrap())
            .build()
            .expect("client")
            .request(Method::PATCH, format!("{direct}{path}"))
            .send()
            .await
            .expect("PATCH");
        assert_eq!(own.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        let nginx = http()
            .request(Method::TRACE, format!("{gateway}{path}"))
            .send()
            .await
            .expect("TRACE");
        assert_eq!(nginx.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(allow(&nginx), allow(&own), "{path}: Allow");
    }
}
