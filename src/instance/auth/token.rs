//! Signed buyer tokens: a JWT (HS256) whose `sub` is the buyer, checked
//! at the instance before any backend is touched.
//!
//! HS256 rather than EdDSA: the service is the only party that verifies,
//! and the one that issues (a login would, here `seckill tokens`), so
//! nothing gains from a key that verifies without signing; and the check
//! runs on every buy, where an HMAC costs about a microsecond and an
//! Ed25519 verification about a hundred on this machine, more than a
//! whole sale (docs/benchmarks.md, "What buyer tokens cost"). The algorithm is pinned: a token naming any other (`none`,
//! RS256, EdDSA, HS384…) is refused whatever its signature.

use std::path::Path;

use anyhow::Context;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The audience tokens are issued for unless told otherwise.
pub const AUDIENCE: &str = "seckill";
/// Longest token looked at: ours are about 200 bytes; anything far longer
/// is refused before it is decoded.
pub const MAX_TOKEN_LEN: usize = 1024;
/// Clock difference tolerated between the issuer and an instance for
/// `exp` and `nbf`.
const LEEWAY_SECS: u64 = 5;
/// Bytes of a generated key.
const KEY_BYTES: usize = 32;

/// What a buyer token says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The buyer.
    pub sub: String,
    /// Who the token is for ([`AUDIENCE`]).
    pub aud: String,
    /// Not valid before, seconds since the Unix epoch.
    pub nbf: u64,
    /// Not valid from, seconds since the Unix epoch.
    pub exp: u64,
}

/// A buyer-token key: the secret both signing and checking use.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl Key {
    /// A fresh random key.
    pub fn generate() -> Self {
        let mut bytes = vec![0; KEY_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// The key in `path`, as [`Key::save`] writes it (hex on one line).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the buyer key {}", path.display()))?;
        let text = text.trim();
        // Hex is ASCII: anything else would split a character below.
        anyhow::ensure!(
            text.is_ascii() && text.len() >= 32 && text.len() % 2 == 0,
            "{}: a buyer key is at least 16 bytes in hex",
            path.display()
        );
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16))
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{}: not hex", path.display()))?;
        Ok(Self(bytes))
    }

    /// Writes the key to `path`, readable by its owner only.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("writing the buyer key {}", path.display()))?;
        writeln!(file, "{hex}")?;
        Ok(())
    }
}

/// Signs buyer tokens (`seckill tokens`, the race driver, the tests).
pub struct Signer {
    key: EncodingKey,
    audience: String,
}

impl Signer {
    /// A signer with `key` for `audience`.
    pub fn new(key: &Key, audience: &str) -> Self {
        Self {
            key: EncodingKey::from_secret(&key.0),
            audience: audience.to_owned(),
        }
    }

    /// A token for `buyer`, valid from `now_s` for `ttl_secs`.
    pub fn token(&self, buyer: &str, now_s: u64, ttl_secs: u64) -> String {
        self.sign(&Claims {
            sub: buyer.to_owned(),
            aud: self.audience.clone(),
            nbf: now_s,
            exp: now_s + ttl_secs,
        })
    }

    /// `claims` signed as they are (the tests sign odd ones).
    pub fn sign(&self, claims: &Claims) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.key)
            .expect("HS256 over serialisable claims cannot fail")
    }
}

/// Checks buyer tokens at an instance.
pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
}

/// Why a token was refused (the 401's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Longer than [`MAX_TOKEN_LEN`].
    #[error("the token is longer than {MAX_TOKEN_LEN} bytes")]
    TooLong,
    /// Expired.
    #[error("the token has expired")]
    Expired,
    /// Its `nbf` is still ahead.
    #[error("the token is not valid yet")]
    NotYet,
    /// Issued for another audience.
    #[error("the token is for another audience")]
    Audience,
    /// A claim it must have is missing, or its subject is not a buyer id.
    #[error("the token lacks {0}")]
    Missing(&'static str),
    /// Not a JWT, another algorithm, or a signature that does not match.
    #[error("the token is malformed or its signature does not match")]
    Invalid,
}

impl Verifier {
    /// A verifier for tokens signed with `key` for `audience`.
    pub fn new(key: &Key, audience: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[audience]);
        validation.set_required_spec_claims(&["exp", "nbf", "aud", "sub"]);
        // `exp` and `nbf` are judged below on the shared clock, as the
        // sale window is, not on this machine's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        Self {
            key: DecodingKey::from_secret(&key.0),
            validation,
        }
    }

    /// The buyer `token` names, if it is ours, for us, and valid at
    /// `now_s` (the shared clock's seconds).
    pub fn buyer(&self, token: &str, now_s: u64) -> Result<String, Refused> {
        use jsonwebtoken::errors::ErrorKind;
        if token.len() > MAX_TOKEN_LEN {
            return Err(Refused::TooLong);
        }
        let data = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation).map_err(
            |error| match error.kind() {
                ErrorKind::InvalidAudience => Refused::Audience,
                ErrorKind::MissingRequiredClaim(_) => Refused::Missing("a required claim"),
                _ => Refused::Invalid,
            },
        )?;
        let claims = data.claims;
        if now_s >= claims.exp.saturating_add(LEEWAY_SECS) {
            return Err(Refused::Expired);
        }
        if now_s.saturating_add(LEEWAY_SECS) < claims.nbf {
            return Err(Refused::NotYet);
        }
        Ok(claims.sub)
    }
}

#[cfg(test)]
mod tests {
    use super::Key;

    /// A key file of other than hex is refused with its path, whatever
    /// its bytes: a character cut in two by the hex pairs once panicked.
    #[test]
    fn a_key_file_that_is_not_hex_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("buyer.key");
        for text in [format!("a{}a", "é".repeat(15)), "zz".repeat(16)] {
            assert_eq!(text.len(), 32);
            std::fs::write(&path, &text).expect("write");
            let Err(error) = Key::load(&path) else {
                panic!("{text:?} is not a key");
            };
            assert!(error.to_string().contains("buyer.key"), "{error}");
        }
    }
}
