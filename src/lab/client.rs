//! A small HTTP client for the gateway: reset, buy, read the ledger.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use crate::instance::auth::token::{AUDIENCE, Key, Signer};
use crate::model::product::operation::{WindowAction, WindowRequest};
use crate::model::product::{StoreKind, now_ms};
use crate::orders::ledger::Ledger;

/// A gateway (or one instance) and the admin token for it.
#[derive(Clone)]
pub struct Gateway {
    /// Base URL, no trailing slash.
    pub base: String,
    /// Bearer token for resets.
    pub admin_token: String,
    /// Pooled keep-alive connections, shared by all buyers.
    pub http: reqwest::Client,
    /// With instances that take buyer tokens (`buyer_auth = token`): signs
    /// each buyer's token, as a login would hand it out.
    buyers: Option<Arc<Signer>>,
    /// Whether a buy first fetches the buyer's path (`hidden_path`).
    hidden_paths: bool,
}

/// The parts of a `GET /strategies` entry the driver needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct CatalogEntry {
    /// Strategy id.
    pub id: String,
    /// Whether it must never oversell.
    pub safe: bool,
    /// The recipes it takes besides its default, each a row of the
    /// comparison (`zookeeper:read-write`).
    #[serde(default)]
    pub recipes: Vec<String>,
    /// Its own store.
    #[serde(default)]
    pub store: Option<StoreKind>,
    /// The stores it can sell from.
    #[serde(default)]
    pub stores: Vec<StoreKind>,
}

impl CatalogEntry {
    /// The comparison's labels for this strategy: its id, then
    /// `id:recipe` for each other recipe, then, for a database strategy
    /// (its own store PostgreSQL or MySQL), `id@store` for each other
    /// database it runs on: the same mechanism on the other database, a
    /// row of its own.
    pub fn labels(&self) -> Vec<String> {
        let databases = [StoreKind::Postgres, StoreKind::Mysql];
        let others: Vec<String> = match self.store {
            Some(own) if databases.contains(&own) => self
                .stores
                .iter()
                .filter(|s| **s != own && databases.contains(s))
                .map(|s| format!("{}@{}", self.id, s.as_str()))
                .collect(),
            _ => Vec::new(),
        };
        std::iter::once(self.id.clone())
            .chain(self.recipes.iter().map(|r| format!("{}:{r}", self.id)))
            .chain(others)
            .collect()
    }
}

/// What one buy got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuyResult {
    /// 200.
    Ok,
    /// Anything else: the contract's error code, `http_<status>` when the
    /// body was not the contract's, or `transport` when no answer came;
    /// a 429 is `rate_limited:gateway` or `rate_limited:service`.
    Failed(String),
}

/// What a request on an order does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderAction {
    /// `GET /orders/{id}`.
    View,
    /// `POST /orders/{id}/pay`.
    Pay,
    /// `POST /orders/{id}/cancel`.
    Cancel,
}

impl OrderAction {
    fn suffix(self) -> &'static str {
        match self {
            Self::View => "",
            Self::Pay => "/pay",
            Self::Cancel => "/cancel",
        }
    }
}

/// What a request on an order answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderAnswer {
    /// HTTP status; 0 when no answer came.
    pub status: u16,
    /// A 200's order status (`held`, `paid`, `expired`, `sold`), else the
    /// error code (`expired`, `not_held`, …, or `transport`).
    pub said: String,
    /// The instance that answered a 200.
    pub served_by: Option<String>,
}

impl OrderAnswer {
    /// The answer as a history step on `order`: a non-200's code is what
    /// it said.
    pub fn as_step(&self, order: Uuid) -> Answer {
        let mut answer = Answer::step(self.status, &self.said, order);
        if self.status == 200 {
            answer.code = None;
            answer.served_by.clone_from(&self.served_by);
        }
        answer
    }
}

/// The fields of a buy's JSON body the history keeps, read without
/// building a tree (a body that is not the contract's reads as empty): a
/// 200's at the top, a non-200's inside its `error` object.
#[derive(Debug, Default, serde::Deserialize)]
struct Said<'a> {
    #[serde(borrow)]
    order_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    served_by: Option<Cow<'a, str>>,
    stock_left: Option<i64>,
    pay_by_ms: Option<u64>,
    #[serde(borrow)]
    code: Option<Cow<'a, str>>,
    opens_at_ms: Option<u64>,
    #[serde(borrow)]
    error: Option<Box<Said<'a>>>,
}

/// Everything one buy's answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status; 0 when no (whole) answer came.
    pub status: u16,
    /// The error code of a non-200 (see [`BuyResult::Failed`]).
    pub code: Option<String>,
    /// A 200's order id, or the one an `outcome_unknown` names.
    pub order_id: Option<Uuid>,
    /// The instance that sold.
    pub served_by: Option<String>,
    /// The stock left after the sale, where the strategy tells it.
    pub stock_left: Option<i64>,
    /// With `not_started`: when the sale opens (ms since the Unix epoch).
    pub opens_at_ms: Option<u64>,
    /// A hold's due time (ms since the Unix epoch), as its 200 says.
    pub pay_by_ms: Option<u64>,
}

impl Answer {
    /// A step on `order` answered `status` with `code`.
    pub fn step(status: u16, code: &str, order: Uuid) -> Self {
        Self {
            order_id: Some(order),
            ..Self::failed(status, code)
        }
    }

    /// No (whole) answer came: the outcome is unknown.
    pub fn unanswered() -> Self {
        Self::failed(0, "transport")
    }

    fn failed(status: u16, code: &str) -> Self {
        Self {
            status,
            code: Some(code.to_owned()),
            order_id: None,
            served_by: None,
            stock_left: None,
            opens_at_ms: None,
            pay_by_ms: None,
        }
    }

    /// A buy's whole answer: its status, the layer that sent a 429
    /// (`X-Limited-By`), its body.
    pub fn of_reply(status: u16, limited_by: Option<&str>, body: &[u8]) -> Self {
        if let Some(layer) = limited_by {
            // 429s are told apart by the layer that sent them.
            return Self::failed(status, &format!("rate_limited:{layer}"));
        }
        let said: Said = serde_json::from_slice(body).unwrap_or_default();
        if status == 200 {
            return Self {
                status,
                code: None,
                order_id: said.order_id.and_then(|s| s.parse().ok()),
                served_by: said.served_by.map(Cow::into_owned),
                stock_left: said.stock_left,
                opens_at_ms: None,
                pay_by_ms: said.pay_by_ms,
            };
        }
        let error = said.error.unwrap_or_default();
        let code = error
            .code
            .map_or_else(|| format!("http_{status}"), Cow::into_owned);
        Self {
            order_id: error.order_id.and_then(|s| s.parse().ok()),
            opens_at_ms: error.opens_at_ms,
            ..Self::failed(status, &code)
        }
    }

    /// The answer as the driver's tallies count it.
    pub fn result(&self) -> BuyResult {
        match (self.status, &self.code) {
            (200, _) => BuyResult::Ok,
            (_, Some(code)) => BuyResult::Failed(code.clone()),
            (status, None) => BuyResult::Failed(format!("http_{status}")),
        }
    }
}

impl Gateway {
    /// A target with a connection pool sized for `concurrency` buyers.
    pub fn new(base: &str, admin_token: &str, concurrency: usize) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(120))
            .build()?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            admin_token: admin_token.to_owned(),
            http,
            buyers: None,
            hidden_paths: false,
        })
    }

    /// This target, its buyers carrying tokens signed with `key` (for
    /// instances with `buyer_auth = token`; `None`: the header alone).
    pub fn with_buyer_key(mut self, key: Option<&Key>) -> Self {
        self.buyers = key.map(|key| Arc::new(Signer::new(key, AUDIENCE)));
        self
    }

    /// This target, its buys made on the hidden path each buyer fetches
    /// first (`GET /stock/{id}/path`) when `hidden`.
    pub fn with_hidden_paths(mut self, hidden: bool) -> Self {
        self.hidden_paths = hidden;
        self
    }

    /// What signs the buyers' tokens, when the instances take them.
    pub fn buyer_signer(&self) -> Option<&Arc<Signer>> {
        self.buyers.as_ref()
    }

    /// `request` as `user`'s: `X-User-Id`, and with a key the buyer's
    /// token (valid for an hour from now).
    fn as_buyer(&self, request: reqwest::RequestBuilder, user: &str) -> reqwest::RequestBuilder {
        let request = request.header("X-User-Id", user);
        match &self.buyers {
            Some(signer) => request.bearer_auth(signer.token(user, now_ms() / 1000, 3600)),
            None => request,
        }
    }

    /// Creates or resets a product with `body`: a
    /// [`crate::model::product::ResetRequest`], or any JSON (tests send malformed
    /// ones).
    pub async fn reset(&self, id: i64, body: &impl serde::Serialize) -> anyhow::Result<Value> {
        let response = self
            .http
            .put(format!("{}/admin/products/{id}", self.base))
            .bearer_auth(&self.admin_token)
            .json(body)
            .send()
            .await
            .context("resetting a product")?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(status.is_success(), "reset of {id} failed: {status} {text}");
        Ok(serde_json::from_str(&text)?)
    }

    /// Adds `units` to product `id`'s live sale as addition `addition`
    /// (a retry with the same id adds nothing twice): the answer's status
    /// and code (status 0 when none came).
    pub async fn restock(&self, id: i64, units: i64, addition: Uuid) -> Answer {
        let body = crate::model::product::operation::RestockRequest {
            units,
            addition_id: Some(addition),
        };
        let request = self
            .http
            .post(format!("{}/admin/products/{id}/restock", self.base))
            .bearer_auth(&self.admin_token)
            .json(&body);
        operator_answer(request).await
    }

    /// [`Gateway::restock`], the 200's body read: an error for any other
    /// answer.
    pub async fn restock_answer(
        &self,
        id: i64,
        units: i64,
        addition: Uuid,
    ) -> anyhow::Result<crate::sale::operate::Restocked> {
        let body = crate::model::product::operation::RestockRequest {
            units,
            addition_id: Some(addition),
        };
        let response = self
            .http
            .post(format!("{}/admin/products/{id}/restock", self.base))
            .bearer_auth(&self.admin_token)
            .json(&body)
            .send()
            .await
            .context("restocking a product")?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(
            status.is_success(),
            "restock of {id} failed: {status} {text}"
        );
        Ok(serde_json::from_str(&text)?)
    }

    /// Pauses, resumes or closes product `id`'s sale: the answer's status
    /// and code (status 0 when none came).
    pub async fn window(&self, id: i64, action: WindowAction) -> Answer {
        operator_answer(self.window_request(id, action)).await
    }

    /// [`Gateway::window`], the 200's body read: an error for any other
    /// answer.
    pub async fn window_answer(
        &self,
        id: i64,
        action: WindowAction,
    ) -> anyhow::Result<crate::sale::window::WindowMoved> {
        let response = self
            .window_request(id, action)
            .send()
            .await
            .context("moving a sale window")?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(
            status.is_success(),
            "{} of {id} failed: {status} {text}",
            action.as_str()
        );
        Ok(serde_json::from_str(&text)?)
    }

    fn window_request(&self, id: i64, action: WindowAction) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/admin/products/{id}/window", self.base))
            .bearer_auth(&self.admin_token)
            .json(&WindowRequest { action })
    }

    /// One buy as `user`.
    pub async fn buy(&self, id: i64, user: &str) -> BuyResult {
        self.answer(id, user).await.result()
    }

    /// One buy as `user`, with everything the answer said: what a
    /// history records.
    pub async fn answer(&self, id: i64, user: &str) -> Answer {
        self.answer_with(id, user, None).await
    }

    /// [`Gateway::answer`] carrying `reservation` as `X-Reservation`.
    pub async fn answer_with(&self, id: i64, user: &str, reservation: Option<&str>) -> Answer {
        let path = match self.hidden_paths {
            true => match self.buy_path(id, user).await {
                Ok(path) => path,
                Err(refused) => return refused,
            },
            false => format!("/stock/{id}/buy"),
        };
        let mut request = self.as_buyer(self.http.post(format!("{}{path}", self.base)), user);
        if let Some(token) = reservation {
            request = request.header("X-Reservation", token);
        }
        let sent = request.send().await;
        let response = match sent {
            Ok(response) => response,
            Err(_) => return Answer::unanswered(),
        };
        let status = response.status().as_u16();
        let limited_by = response
            .headers()
            .get(crate::model::error::LIMITED_BY)
            .map(|layer| layer.to_str().unwrap_or("unknown").to_owned());
        match response.bytes().await {
            Ok(body) => Answer::of_reply(status, limited_by.as_deref(), &body),
            // The answer was cut off: nobody knows what it said.
            Err(_) => Answer::unanswered(),
        }
    }

    /// `user`'s hidden buy path on product `id`, or the answer that
    /// refused it (`not_started` with its `opens_at_ms`, …).
    async fn buy_path(&self, id: i64, user: &str) -> Result<String, Answer> {
        let url = format!("{}/stock/{id}/path", self.base);
        let Ok(response) = self.as_buyer(self.http.get(url), user).send().await else {
            return Err(Answer::unanswered());
        };
        let status = response.status().as_u16();
        let limited_by = response
            .headers()
            .get(crate::model::error::LIMITED_BY)
            .map(|layer| layer.to_str().unwrap_or("unknown").to_owned());
        let Ok(body) = response.bytes().await else {
            return Err(Answer::unanswered());
        };
        if status != 200 {
            return Err(Answer::of_reply(status, limited_by.as_deref(), &body));
        }
        let issued: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        issued["path"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Answer::of_reply(502, None, &body))
    }

    /// `action` on order `order_id` as `user`: the status, and the order's
    /// `status` (a 200) or the error code.
    pub async fn order(&self, action: OrderAction, order_id: Uuid, user: &str) -> OrderAnswer {
        let url = format!("{}/orders/{order_id}{}", self.base, action.suffix());
        let request = match action {
            OrderAction::View => self.http.get(url),
            OrderAction::Pay | OrderAction::Cancel => self.http.post(url),
        };
        let Ok(response) = self.as_buyer(request, user).send().await else {
            return OrderAnswer {
                status: 0,
                said: "transport".into(),
                served_by: None,
            };
        };
        let status = response.status().as_u16();
        let json: Value = response.json().await.unwrap_or(Value::Null);
        let said = match (json["status"].as_str(), json["error"]["code"].as_str()) {
            (Some(state), _) if status == 200 => state.to_owned(),
            (_, Some(code)) => code.to_owned(),
            _ => format!("http_{status}"),
        };
        let served_by = json["served_by"].as_str().map(str::to_owned);
        OrderAnswer {
            status,
            said,
            served_by,
        }
    }

    /// `POST /admin/reconcile`: every product's drift (or `product`'s),
    /// repaired with `repair`.
    pub async fn reconcile(
        &self,
        repair: bool,
        product: Option<i64>,
    ) -> anyhow::Result<Vec<crate::orders::life::reconcile::Drift>> {
        let mut url = format!("{}/admin/reconcile?repair={repair}", self.base);
        if let Some(id) = product {
            url.push_str(&format!("&product={id}"));
        }
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.admin_token)
            .send()
            .await?;
        let status = response.status();
        let body = response.text().await?;
        anyhow::ensure!(status.is_success(), "reconcile answered {status}: {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// One product's ledger.
    pub async fn ledger(&self, id: i64) -> anyhow::Result<Ledger> {
        self.get(&format!("/stock/{id}")).await
    }

    /// `GET /config`: the instance's settings and the backends'
    /// persistence.
    pub async fn config(&self) -> anyhow::Result<Value> {
        self.get("/config").await
    }

    /// Reserves product `id` for `user` (pre-booking): the token.
    pub async fn reserve(&self, id: i64, user: &str) -> anyhow::Result<String> {
        let response = self
            .as_buyer(
                self.http.post(format!("{}/stock/{id}/reserve", self.base)),
                user,
            )
            .send()
            .await
            .context("reserving")?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(
            status.is_success(),
            "reserving {id} for {user}: {status} {text}"
        );
        let body: Value = serde_json::from_str(&text)?;
        body["token"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("a reservation without a token: {text}"))
    }

    /// The strategy catalogue.
    pub async fn strategies(&self) -> anyhow::Result<Vec<CatalogEntry>> {
        self.get("/strategies").await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(status.is_success(), "GET {path}: {status} {text}");
        serde_json::from_str(&text).with_context(|| format!("GET {path}: parsing {text}"))
    }
}

/// An operator request's status and code, as a history line records it
/// (status 0 when no answer came).
async fn operator_answer(request: reqwest::RequestBuilder) -> Answer {
    let Ok(response) = request.send().await else {
        return Answer::unanswered();
    };
    let status = response.status().as_u16();
    match response.bytes().await {
        Ok(body) => Answer::of_reply(status, None, &body),
        Err(_) => Answer::unanswered(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_from_its_body() {
        let id = "0190d5f0-0000-7000-8000-000000000001";
        let sold = format!(r#"{{"order_id":"{id}","served_by":"i-1","stock_left":3}}"#);
        let answer = Answer::of_reply(200, None, sold.as_bytes());
        assert_eq!(answer.order_id, Some(id.parse().unwrap()));
        assert_eq!(answer.served_by.as_deref(), Some("i-1"));
        assert_eq!(
            (answer.stock_left, answer.result()),
            (Some(3), BuyResult::Ok)
        );
        let unknown = format!(r#"{{"error":{{"code":"outcome_unknown","order_id":"{id}"}}}}"#);
        let answer = Answer::of_reply(502, None, unknown.as_bytes());
        assert_eq!(answer.code.as_deref(), Some("outcome_unknown"));
        assert_eq!(answer.order_id, Some(id.parse().unwrap()));
        let limited = Answer::of_reply(429, Some("gateway"), b"{}");
        assert_eq!(limited.code.as_deref(), Some("rate_limited:gateway"));
        let garbled = Answer::of_reply(500, None, b"<html>");
        assert_eq!(garbled.result(), BuyResult::Failed("http_500".into()));
    }
}
