//! Buyer identity with `buyer_auth = token`, from outside, through nginx:
//! every credential that is not a valid token of ours for a buyer gets
//! 401 with the contract's JSON body before anything is sold; a valid one
//! buys as its subject whatever the headers say; nothing of it is logged
//! at error level.

use std::sync::OnceLock;

use futures::future::join_all;
use hmac::{Hmac, KeyInit, Mac};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::harness::{Race, TestLab, http, race_on};
use seckill::instance::auth::token::{AUDIENCE, Claims, Key, Signer};
use seckill::race::driver::drained_ledger;

/// Each buyer's bucket in the lab: a burst of this many buys…
const BURST: u64 = 5;
/// …refilled at this many per second.
const RATE: u64 = 2;

/// A lab whose instance takes tokens only, with a tight bucket per buyer
/// (one instance, so that the bucket a buyer meets is always the same).
/// The tests run side by side on it: each names buyers of its own, or
/// they would share buckets.
fn lab() -> &'static TestLab {
    static LAB: OnceLock<TestLab> = OnceLock::new();
    LAB.get_or_init(|| {
        TestLab::start_with(
            1,
            &["--buyer-auth", "token"],
            &[
                ("SECKILL_BUYER_RATE_PER_SEC", &RATE.to_string()),
                ("SECKILL_BUYER_RATE_BURST", &BURST.to_string()),
            ],
        )
    })
}

fn key() -> Key {
    lab().info.buyer_key().expect("a key").expect("token mode")
}

fn now_s() -> u64 {
    seckill::model::product::now_ms() / 1000
}

fn claims(sub: &str) -> Claims {
    Claims {
        sub: sub.to_owned(),
        aud: AUDIENCE.to_owned(),
        nbf: now_s(),
        exp: now_s() + 600,
    }
}

/// `header.payload.signature` by hand, the signature an HS256 MAC of the
/// first two with `secret` (or `signature` as given).
fn by_hand(header: &Value, payload: &Value, secret: Option<&[u8]>, signature: &str) -> String {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let signed = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(payload.to_string().as_bytes())
    );
    let signature = match secret {
        Some(secret) => {
            let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any length");
            mac.update(signed.as_bytes());
            b64(&mac.finalize().into_bytes())
        }
        None => signature.to_owned(),
    };
    format!("{signed}.{signature}")
}

/// The lab key's bytes, as the key file holds them in hex.
fn secret() -> Vec<u8> {
    let path = lab().info.buyer_key_file.clone().expect("a key file");
    let hex = std::fs::read_to_string(path).expect("readable");
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Product `id` reset with `stock` units, one per buyer.
async fn product(id: i64, stock: i64) {
    lab()
        .gateway()
        .reset(
            id,
            &json!({"stock": stock, "strategy": "redis-lua", "per_user_limit": 1}),
        )
        .await
        .expect("reset");
}

/// Product `id` reset with `stock` units and no per-buyer limit.
async fn product_unlimited(id: i64, stock: i64) {
    lab()
        .gateway()
        .reset(id, &json!({"stock": stock, "strategy": "redis-lua"}))
        .await
        .expect("reset");
}

/// `POST /stock/{id}/buy` with `authorization` (the whole header value)
/// and `X-User-Id: user`: status and body.
async fn buy(id: i64, authorization: Option<&str>, user: Option<&str>) -> (u16, Value) {
    let mut request = http().post(format!("{}/stock/{id}/buy", lab().info.gateway_url));
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    if let Some(user) = user {
        request = request.header("X-User-Id", user);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The product's orders (once the writer has stored them all) and its
/// stock counter.
async fn sold(id: i64) -> (i64, i64) {
    let ledger = drained_ledger(&lab().gateway(), id).await.expect("ledger");
    (ledger.sold, ledger.remaining)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn every_bad_credential_is_401_and_sells_nothing() {
    const ID: i64 = 2601;
    product(ID, 100).await;
    let other_key = Signer::new(&Key::generate(), AUDIENCE);
    let ours = Signer::new(&key(), AUDIENCE);
    let secret = secret();
    let hs = |alg: Algorithm, claims: &Claims| {
        jsonwebtoken::encode(
            &Header::new(alg),
            claims,
            &EncodingKey::from_secret(&secret),
        )
        .expect("signed")
    };
    let payload = serde_json::to_value(claims("mallory")).expect("json");
    let mut swapped = ours.sign(&claims("mallory"));
    let last = swapped.pop().expect("a signature");
    swapped.push(if last == 'A' { 'B' } else { 'A' });
    let forged_payload = {
        // alice's valid token with its payload replaced by mallory's.
        let alice = ours.sign(&claims("alice"));
        let parts: Vec<&str> = alice.split('.').collect();
        let mallory = ours.sign(&claims("mallory"));
        let theirs: Vec<&str> = mallory.split('.').collect();
        format!("{}.{}.{}", parts[0], theirs[1], parts[2])
    };
    let odd = |edit: &dyn Fn(&mut Claims)| {
        let mut c = claims("mallory");
        edit(&mut c);
        ours.sign(&c)
    };
    let without = |field: &str| {
        let mut p = payload.clone();
        p.as_object_mut().expect("object").remove(field);
        by_hand(
            &json!({"alg": "HS256", "typ": "JWT"}),
            &p,
            Some(&secret),
            "",
        )
    };
    let cases: Vec<(&str, Option<String>)> = vec![
        ("no Authorization", None),
        ("Basic scheme", Some("Basic bWFsbG9yeTpwdw==".into())),
        ("Bearer and nothing", Some("Bearer ".into())),
        ("not a JWT", Some(bearer("abc"))),
        ("two parts", Some(bearer("eyJhbGciOiJIUzI1NiJ9.e30"))),
        (
            "signed with another key",
            Some(bearer(&other_key.sign(&claims("mallory")))),
        ),
        ("a signature byte changed", Some(bearer(&swapped))),
        (
            "another payload under alice's signature",
            Some(bearer(&forged_payload)),
        ),
        (
            "expired",
            Some(bearer(&odd(&|c| {
                c.nbf = now_s() - 7200;
                c.exp = now_s() - 3600;
            }))),
        ),
        (
            "not valid yet",
            Some(bearer(&odd(&|c| {
                c.nbf = now_s() + 3600;
                c.exp = now_s() + 7200;
            }))),
        ),
        (
            "another audience",
            Some(bearer(&odd(&|c| c.aud = "other-shop".into()))),
        ),
        (
            "empty subject",
            Some(bearer(&odd(&|c| c.sub = String::new()))),
        ),
        (
            "a subject that is no buyer id",
            Some(bearer(&odd(&|c| c.sub = "a b/c".into()))),
        ),
        (
            "a subject of 65 characters",
            Some(bearer(&odd(&|c| c.sub = "m".repeat(65)))),
        ),
        ("no sub", Some(bearer(&without("sub")))),
        ("no exp", Some(bearer(&without("exp")))),
        ("no aud", Some(bearer(&without("aud")))),
        ("no nbf", Some(bearer(&without("nbf")))),
        (
            "alg none",
            Some(bearer(&by_hand(
                &json!({"alg": "none", "typ": "JWT"}),
                &payload,
                None,
                "",
            ))),
        ),
        (
            "alg NONE with a signature",
            Some(bearer(&by_hand(
                &json!({"alg": "NONE"}),
                &payload,
                None,
                "c2ln",
            ))),
        ),
        (
            "HS384 with our key",
            Some(bearer(&hs(Algorithm::HS384, &claims("mallory")))),
        ),
        (
            "HS512 with our key",
            Some(bearer(&hs(Algorithm::HS512, &claims("mallory")))),
        ),
        (
            "RS256 named over our HMAC",
            Some(bearer(&by_hand(
                &json!({"alg": "RS256"}),
                &payload,
                Some(&secret),
                "",
            ))),
        ),
        (
            "EdDSA named over our HMAC",
            Some(bearer(&by_hand(
                &json!({"alg": "EdDSA"}),
                &payload,
                Some(&secret),
                "",
            ))),
        ),
        (
            "a token of 2 KiB",
            Some(bearer(&odd(&|c| c.sub = format!("m{}", "x".repeat(2048))))),
        ),
    ];
    for (what, authorization) in &cases {
        let (status, body) = buy(ID, authorization.as_deref(), Some("mallory")).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    // Beyond nginx's header buffers: its own 400, in the same JSON shape.
    let huge = bearer(&"a".repeat(20 * 1024));
    let (status, body) = buy(ID, Some(&huge), Some("mallory")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    assert_eq!(
        sold(ID).await,
        (0, 100),
        "nothing sold to {} bad credentials",
        cases.len() + 1
    );
    assert_no_errors_logged();
}

#[tokio::test]
async fn a_valid_token_buys_as_its_subject_whatever_the_headers_say() {
    const ID: i64 = 2602;
    product(ID, 10).await;
    let signer = Signer::new(&key(), AUDIENCE);
    let alice = bearer(&signer.token("alice", now_s(), 600));
    let (status, body) = buy(ID, Some(&alice), Some("bob")).await;
    assert_eq!(status, 200, "{body}");
    let order = body["order_id"].as_str().expect("an order").to_owned();
    // The order is alice's: bob cannot see it, alice can.
    let view = |token: String| {
        let url = format!("{}/orders/{order}", lab().info.gateway_url);
        async move {
            http()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("answer")
        }
    };
    let bob_token = signer.token("bob", now_s(), 600);
    assert_eq!(
        view(bob_token.clone()).await.status(),
        StatusCode::FORBIDDEN
    );
    let alice_view = view(signer.token("alice", now_s(), 600)).await;
    assert_eq!(alice_view.status(), StatusCode::OK);
    // A fresh id in the header or the query does not dodge alice's limit.
    let (status, body) = buy(ID, Some(&alice), Some("alice-2")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("limit_reached")),
        "{body}"
    );
    let url = format!("{}/stock/{ID}/buy?user=alice-3", lab().info.gateway_url);
    let by_query = http()
        .post(url)
        .header("Authorization", &alice)
        .send()
        .await
        .expect("answer");
    assert_eq!(by_query.status(), StatusCode::CONFLICT);
    // bob's limit was not used up in his name: his own token buys.
    let (status, body) = buy(ID, Some(&bearer(&bob_token)), None).await;
    assert_eq!(status, 200, "{body}");
    // The scheme is case-insensitive (RFC 7235).
    let carol = format!("bearer {}", signer.token("carol", now_s(), 600));
    assert_eq!(buy(ID, Some(&carol), None).await.0, 200);
    assert_eq!(sold(ID).await, (3, 7));
    assert_no_errors_logged();
}

#[tokio::test]
async fn every_route_for_a_buyer_wants_a_token() {
    const ID: i64 = 2603;
    product(ID, 10).await;
    let base = &lab().info.gateway_url;
    let order = "0190d5f0-0000-7000-8000-000000000001";
    let requests = [
        http().post(format!("{base}/stock/{ID}/reserve")),
        http().get(format!("{base}/orders/{order}")),
        http().post(format!("{base}/orders/{order}/pay")),
        http().post(format!("{base}/orders/{order}/cancel")),
    ];
    for request in requests {
        let response = request
            .header("X-User-Id", "mallory")
            .send()
            .await
            .expect("answer");
        let url = response.url().to_string();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{url}");
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["error"]["code"], "unauthorized", "{url}: {body}");
    }
    // What does not act for a buyer stays open.
    let config = lab().gateway().config().await.expect("config");
    assert_eq!(config["buyer_auth"], "token", "{config}");
}

#[tokio::test]
async fn one_buyer_on_many_connections_is_held_to_its_bucket_while_others_buy() {
    const ID: i64 = 2604;
    const FLOOD: usize = 40;
    product_unlimited(ID, 1000).await;
    let signer = Signer::new(&key(), AUDIENCE);
    let mallory = bearer(&signer.token("mallory", now_s(), 600));
    // The sale is under way: the instance knows the product (its live
    // view counts answers only for products it knows, so that made-up ids
    // cannot grow it).
    let first = bearer(&signer.token("other-first", now_s(), 600));
    assert_eq!(buy(ID, Some(&first), None).await.0, 200);
    let started = std::time::Instant::now();
    // Mallory on 40 connections at once, each naming a fresh X-User-Id;
    // ten others buy once each meanwhile.
    let flood = (0..FLOOD).map(|n| {
        let mallory = mallory.clone();
        async move {
            let url = format!("{}/stock/{ID}/buy", lab().info.gateway_url);
            let response = http()
                .post(url)
                .header("Authorization", mallory)
                .header("X-User-Id", format!("fresh-{n}"))
                .send()
                .await
                .expect("an answer");
            let limited_by = response.headers().get("x-limited-by").cloned();
            let retry_after = response.headers().get("retry-after").cloned();
            (response.status().as_u16(), limited_by, retry_after)
        }
    });
    let others = (0..10).map(|n| {
        let token = bearer(&signer.token(&format!("other-{n}"), now_s(), 600));
        async move { buy(ID, Some(&token), None).await.0 }
    });
    let (flood, others) = tokio::join!(join_all(flood), join_all(others));
    let elapsed = started.elapsed().as_secs_f64();
    assert!(others.iter().all(|s| *s == 200), "the others: {others:?}");
    let bought = flood.iter().filter(|(s, ..)| *s == 200).count() as u64;
    let limited: Vec<_> = flood.iter().filter(|(s, ..)| *s == 429).collect();
    assert_eq!(bought + limited.len() as u64, FLOOD as u64, "{flood:?}");
    // The bucket held a burst and refilled at RATE while the flood ran.
    let allowed = BURST + (elapsed * RATE as f64).ceil() as u64;
    assert!(
        (BURST..=allowed).contains(&bought),
        "{bought} sold in {elapsed:.2} s: {flood:?}"
    );
    for (_, by, retry_after) in &limited {
        assert_eq!(by.as_ref().and_then(|v| v.to_str().ok()), Some("buyer"));
        let wait: u64 = retry_after
            .as_ref()
            .expect("Retry-After")
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(wait >= 1, "Retry-After {wait}");
    }
    assert_eq!(
        sold(ID).await,
        (bought as i64 + 11, 1000 - bought as i64 - 11)
    );
    // Counted in /metrics and in the live view.
    let instance = &lab().info.instances[0].url;
    let metrics = http()
        .get(format!("{instance}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rejected = metrics
        .lines()
        .find(|l| l.starts_with("seckill_rejected_total{reason=\"buyer_rate_limited\"}"))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .expect("the buyer-bucket series");
    assert!(
        rejected >= limited.len() as f64,
        "{rejected} < {}",
        limited.len()
    );
    // The live view: each instance publishes its counts once a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let counted = live_rate_limited(ID).await;
        if counted == limited.len() as u64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "live view counted {counted} of {}",
            limited.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The 429s of the buyer bucket the live view counted for `id`.
async fn live_rate_limited(id: i64) -> u64 {
    let live: Value = http()
        .get(format!("{}/live", lab().info.gateway_url))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    let index = live["outcomes"]
        .as_array()
        .and_then(|o| o.iter().position(|o| o == "rate_limited"))
        .expect("rate_limited is an outcome");
    live["products"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["ledger"]["id"] == id)
        .flat_map(|p| {
            p["minute"]["instances"]
                .as_object()
                .cloned()
                .unwrap_or_default()
        })
        .map(|(_, counts)| counts[index].as_u64().unwrap_or(0))
        .sum()
}

/// No line of the instances' logs is at error level.
fn assert_no_errors_logged() {
    for instance in &lab().info.instances {
        let log = lab().info.dir.join(format!("{}.log", instance.name));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let errors: Vec<&str> = text.lines().filter(|l| l.contains("ERROR")).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", log.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_with_tokens_gives_the_verdicts_it_gives_with_headers() {
    let tokens = lab();
    let headers = crate::harness::shared();
    // 20 ms of work in the section: the unlocked strategy oversells on
    // every run, the others never do.
    let settings = json!({"work_ms": 20});
    for (offset, strategy, oversells) in [
        (0, "naive", true),
        (1, "redis-lua", false),
        (2, "db-atomic", false),
    ] {
        let mut verdicts = Vec::new();
        for (lab, product) in [(tokens, 2610 + offset), (headers, 2620 + offset)] {
            let race = Race::crowd(product, strategy, settings.clone());
            let row = race_on(&lab.audit(), &lab.gateway(), race).await;
            let unknown_or_refused: u64 = row
                .errors
                .iter()
                .filter(|(code, _)| !["sold_out", "busy"].contains(&code.as_str()))
                .map(|(_, n)| n)
                .sum();
            assert_eq!(unknown_or_refused, 0, "{strategy}: {row:?}");
            verdicts.push(row.oversold > 0);
        }
        assert_eq!(
            verdicts,
            [oversells, oversells],
            "{strategy}: tokens, headers"
        );
    }
}

/// `method` on `path` at the gateway as the holder of `token`: status and
/// body.
async fn as_holder(method: reqwest::Method, path: &str, token: &str) -> (u16, Value) {
    let url = format!("{}{path}", lab().info.gateway_url);
    let request = http().request(method, url).bearer_auth(token);
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET /stock/{id}/path` as the holder of `token`.
async fn path_of(id: i64, token: &str) -> (u16, Value) {
    as_holder(reqwest::Method::GET, &format!("/stock/{id}/path"), token).await
}

/// `POST {path}` as the holder of `token`.
async fn buy_on(path: &str, token: &str) -> (u16, Value) {
    as_holder(reqwest::Method::POST, path, token).await
}

#[tokio::test]
async fn a_hidden_path_product_sells_only_on_its_buyers_one_time_path() {
    const ID: i64 = 2630;
    const OTHER: i64 = 2631;
    let hidden = json!({"stock": 10, "strategy": "redis-lua", "hidden_path": true});
    for id in [ID, OTHER] {
        lab().gateway().reset(id, &hidden).await.expect("reset");
    }
    let signer = Signer::new(&key(), AUDIENCE);
    let token = |buyer: &str| signer.token(buyer, now_s(), 600);
    let bad_path = |(status, body): (u16, Value), what: &str| {
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (403, Some("bad_path")),
            "{what}: {body}"
        );
    };
    // The plain path is closed.
    bad_path(
        buy(ID, Some(&bearer(&token("path-carol"))), None).await,
        "plain path",
    );
    // Alice's path: hers, once.
    let (status, issued) = path_of(ID, &token("path-alice")).await;
    assert_eq!(status, 200, "{issued}");
    let path = issued["path"].as_str().expect("a path").to_owned();
    assert!(path.starts_with(&format!("/stock/{ID}/buy/")), "{path}");
    bad_path(
        buy_on(&path, &token("path-bob")).await,
        "another buyer's path",
    );
    assert_eq!(buy_on(&path, &token("path-alice")).await.0, 200);
    bad_path(buy_on(&path, &token("path-alice")).await, "a replayed path");
    // Not on another product, not malformed, not made up.
    let elsewhere = path.replace(&format!("/stock/{ID}/"), &format!("/stock/{OTHER}/"));
    bad_path(
        buy_on(&elsewhere, &token("path-alice")).await,
        "another product's path",
    );
    bad_path(
        buy_on(&format!("/stock/{ID}/buy/abc"), &token("path-dave")).await,
        "malformed",
    );
    // Expired: signed as an instance would have 20 s ago.
    let keys = seckill::sale::reservation::Reservations::new(None, &lab().info.admin_token);
    let epoch = lab().gateway().ledger(ID).await.expect("ledger").epoch;
    let old = seckill::sale::hidden::issue(
        &keys,
        ID,
        epoch,
        "path-erin",
        seckill::model::product::now_ms() - 20_000,
    );
    bad_path(
        buy_on(
            &format!("/stock/{ID}/buy/{}", old.token),
            &token("path-erin"),
        )
        .await,
        "expired",
    );
    // From before a reset.
    let (_, issued) = path_of(OTHER, &token("path-frank")).await;
    let before = issued["path"].as_str().expect("a path").to_owned();
    lab().gateway().reset(OTHER, &hidden).await.expect("reset");
    bad_path(
        buy_on(&before, &token("path-frank")).await,
        "a path from before a reset",
    );
    // A retry after a lost answer, with the first use's Idempotency-Key,
    // gets that order back; another key on the same path does not buy.
    let (_, issued) = path_of(ID, &token("path-hana")).await;
    let hana = issued["path"].as_str().expect("a path").to_owned();
    let keyed = |key: &'static str| {
        let url = format!("{}{hana}", lab().info.gateway_url);
        let request = http()
            .post(url)
            .bearer_auth(token("path-hana"))
            .header("Idempotency-Key", key);
        async move { request.send().await.expect("an answer") }
    };
    let first = keyed("path-hana-1").await;
    assert_eq!(first.status(), StatusCode::OK);
    let first: Value = first.json().await.expect("JSON");
    let again = keyed("path-hana-1").await;
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
    let again: Value = again.json().await.expect("JSON");
    assert_eq!(again["order_id"], first["order_id"]);
    assert_eq!(keyed("path-hana-2").await.status(), StatusCode::FORBIDDEN);
    assert_eq!(sold(ID).await, (2, 8), "alice's sale and hana's, once");
    assert_eq!(sold(OTHER).await, (0, 10));
    // No path for a product that sells on its plain one, none before the
    // opening.
    product(2632, 10).await;
    let (status, body) = path_of(2632, &token("path-gina")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("no_path")),
        "{body}"
    );
    let later = json!({"stock": 10, "strategy": "redis-lua", "hidden_path": true,
                       "opens_at_ms": seckill::model::product::now_ms() + 600_000});
    lab().gateway().reset(2633, &later).await.expect("reset");
    let (status, body) = path_of(2633, &token("path-gina")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("not_started")),
        "{body}"
    );
    assert_no_errors_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_on_hidden_paths_sells_exactly_the_stock() {
    let settings = json!({"hidden_path": true, "work_ms": 1});
    let race = Race::crowd(2640, "redis-lua", settings);
    let row = race_on(&lab().audit(), &lab().gateway(), race).await;
    assert_eq!((row.sold, row.oversold), (row.initial, 0), "{row:?}");
    assert!(row.errors.keys().all(|code| code == "sold_out"), "{row:?}");
}

/// A retry with its first use's Idempotency-Key after the hidden path
/// expired (what a client does after nginx's own 502/504, which carries no
/// order id) is answered its order, not 403 `bad_path`; a new key on the
/// expired path is still refused and buys nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_its_hidden_path_expired_is_answered_its_order() {
    const ID: i64 = 2650;
    let hidden = json!({"stock": 10, "strategy": "redis-lua", "hidden_path": true});
    lab().gateway().reset(ID, &hidden).await.expect("reset");
    let epoch = lab().gateway().ledger(ID).await.expect("ledger").epoch;
    // Issued as an instance would have 9.5 s ago: 500 ms of life left.
    let keys = seckill::sale::reservation::Reservations::new(None, &lab().info.admin_token);
    let issued_at = seckill::model::product::now_ms() - 9_500;
    let path = seckill::sale::hidden::issue(&keys, ID, epoch, "late-ivy", issued_at);
    let token = Signer::new(&key(), AUDIENCE).token("late-ivy", now_s(), 600);
    let keyed = |key: &'static str| {
        let url = format!("{}/stock/{ID}/buy/{}", lab().info.gateway_url, path.token);
        let request = http()
            .post(url)
            .bearer_auth(&token)
            .header("Idempotency-Key", key);
        async move { request.send().await.expect("an answer") }
    };
    let first = keyed("ivy-1").await;
    assert_eq!(first.status(), StatusCode::OK);
    let first: Value = first.json().await.expect("JSON");
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    let again = keyed("ivy-1").await;
    assert_eq!(again.status(), StatusCode::OK);
    let again: Value = again.json().await.expect("JSON");
    assert_eq!(again["order_id"], first["order_id"], "{again}");
    assert_eq!(keyed("ivy-2").await.status(), StatusCode::FORBIDDEN);
    assert_eq!(sold(ID).await, (1, 9));
}
