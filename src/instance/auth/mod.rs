//! Who is buying: the buyer of a request on every route that acts for a
//! buyer (buy, reserve, an order's view, payment and cancellation),
//! established once, before any backend is touched, by the instance's
//! `buyer_auth`.
//!
//! `header` trusts `X-User-Id` (or `?user=`): the demo, and load plans
//! that set ids. `token` takes the buyer from a signed token
//! (`Authorization: Bearer`, [`token`]) and ignores the header, so that
//! nobody can buy in another's name, use up another's limit, or dodge its
//! own with a fresh id per request. Everything keyed by buyer downstream
//! reads the [`Buyer`] this puts in the request.

pub mod token;
pub mod tokens;

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::Query;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Uri};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::model::error::ApiError;
use crate::model::product::truncate;
use token::{Key, Verifier};

/// Longest buyer id accepted.
pub const MAX_BUYER_LEN: usize = 64;

/// How an instance knows who is buying.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BuyerAuth {
    /// `X-User-Id` or `?user=`, believed as sent.
    #[default]
    Header,
    /// A signed token's subject; the header is ignored.
    Token,
}

impl BuyerAuth {
    /// Its name, as the flag and the environment spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::Token => "token",
        }
    }
}

/// The instance's buyer identity settings.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// How buyers are identified.
    #[arg(long, env = "SECKILL_BUYER_AUTH", value_enum, default_value_t)]
    pub buyer_auth: BuyerAuth,
    /// The buyer-token key (hex, one line; `seckill lab --buyer-auth
    /// token` makes one), required with `--buyer-auth token`.
    #[arg(
        long,
        env = "SECKILL_BUYER_KEY_FILE",
        required_if_eq("buyer_auth", "token")
    )]
    pub buyer_key_file: Option<PathBuf>,
    /// The audience buyer tokens must name.
    #[arg(long, env = "SECKILL_BUYER_AUDIENCE", default_value = token::AUDIENCE)]
    pub buyer_audience: String,
}

/// The verified (or, with `header`, declared) buyer of a request.
#[derive(Debug, Clone)]
pub struct Buyer(pub String);

/// How this instance identifies buyers, ready to check requests.
#[derive(Clone)]
pub enum Identify {
    /// `X-User-Id` or `?user=`.
    Header,
    /// A bearer token checked with this verifier.
    Token(Arc<Verifier>),
}

impl Identify {
    /// From the instance's settings: loads the key for `token`.
    pub fn new(args: &AuthArgs) -> anyhow::Result<Self> {
        Ok(match args.buyer_auth {
            BuyerAuth::Header => Self::Header,
            BuyerAuth::Token => {
                let path = args
                    .buyer_key_file
                    .as_deref()
                    .ok_or_else(|| anyhow::anyhow!("--buyer-auth token needs --buyer-key-file"))?;
                let key = Key::load(path)?;
                Self::Token(Arc::new(Verifier::new(&key, &args.buyer_audience)))
            }
        })
    }

    /// The mode, for `/config`.
    pub fn mode(&self) -> BuyerAuth {
        match self {
            Self::Header => BuyerAuth::Header,
            Self::Token(_) => BuyerAuth::Token,
        }
    }

    /// The buyer of a request with `headers` to `uri`, at `now_s` on the
    /// shared clock (a token's `exp` and `nbf`).
    pub fn buyer(&self, headers: &HeaderMap, uri: &Uri, now_s: u64) -> Result<String, ApiError> {
        match self {
            Self::Header => declared(headers, uri),
            Self::Token(verifier) => {
                let token = bearer(headers)?;
                let buyer = verifier
                    .buyer(token, now_s)
                    .map_err(|refused| ApiError::Unauthorized(refused.to_string()))?;
                valid_buyer(buyer).map_err(|_| {
                    ApiError::Unauthorized("the token's subject is not a buyer id".into())
                })
            }
        }
    }
}

/// `?user=`, the declared buyer for clients that cannot set a header
/// (with `buyer_auth = header`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserQuery {
    /// The buyer, when there is no `X-User-Id` header.
    #[param(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._:@-]+$")]
    pub user: Option<String>,
}

/// The buyer id from `X-User-Id` (preferred) or `?user=`. A malformed
/// `?user=` is refused even beside a header, rather than silently ignored.
fn declared(headers: &HeaderMap, uri: &Uri) -> Result<String, ApiError> {
    let from_query = match uri.query() {
        Some(_) => Query::<UserQuery>::try_from_uri(uri)?.0.user,
        None => None,
    };
    let from_query = from_query.map(valid_buyer).transpose()?;
    match headers.get("x-user-id") {
        Some(value) => valid_buyer(
            value
                .to_str()
                .map_err(|_| ApiError::BadRequest("X-User-Id must be printable ASCII".into()))?
                .to_owned(),
        ),
        None => from_query.ok_or_else(|| {
            ApiError::BadRequest("a buyer is required: X-User-Id header or ?user=".into())
        }),
    }
}

/// The token of `Authorization: Bearer <token>`: the buyer's, and the
/// admin's (one parser, so both take the scheme in any case).
pub fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(AUTHORIZATION).ok_or_else(|| {
        ApiError::Unauthorized("a buyer token is required: Authorization: Bearer <token>".into())
    })?;
    // The scheme is case-insensitive (RFC 7235 §2.1).
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or_else(|| ApiError::Unauthorized("Authorization must be Bearer <token>".into()))
}

/// `raw` if it is a well-formed buyer id: 1 to 64 characters of
/// `A-Z a-z 0-9 . _ : @ -`, so it is safe in logs, keys and CSV.
pub fn valid_buyer(raw: String) -> Result<String, ApiError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "._:@-".contains(c);
    if raw.is_empty() || raw.len() > MAX_BUYER_LEN || !raw.chars().all(valid_char) {
        return Err(ApiError::BadRequest(format!(
            "buyer id must be 1 to {MAX_BUYER_LEN} characters of A-Z a-z 0-9 . _ : @ -, got {:?}",
            truncate(&raw, 40)
        )));
    }
    Ok(raw)
}
