//! A buy path bots cannot hit early: a product with `hidden_path` does not
//! sell on `POST /stock/{id}/buy`. Inside its sale window an identified
//! buyer gets a path of its own from `GET /stock/{id}/path`, and buys on
//! it once, within [`PATH_TTL_MS`].
//!
//! The path's last segment is `{expires_ms}-{nonce}-{mac}`: the MAC (the
//! reservations' key, [`Reservations::sign_bytes`]) binds the product, its
//! reset's epoch, the buyer, the expiry and a random nonce, so a path
//! cannot be made without the key, lent to another buyer, used on another
//! product or after a reset, or kept past its expiry; the instance checks
//! all of it without a backend. Once: the buy marks the nonce used in
//! Redis (`SET NX` with the path's remaining life) before it sells, so a
//! replay is refused — one round trip, on such products only.

use rand::RngCore;

use crate::sale::reservation::Reservations;

/// How long a path may be bought on after it was handed out.
pub const PATH_TTL_MS: u64 = 10_000;

/// A path handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The last segment of `POST /stock/{id}/buy/{token}`.
    pub token: String,
    /// Until when it may be bought on (ms since the Unix epoch, the
    /// shared clock).
    pub expires_at_ms: u64,
}

/// A path that checked out: its nonce, to be marked used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valid {
    /// The path's own random part.
    pub nonce: String,
    /// Until when it may be bought on.
    pub expires_at_ms: u64,
}

/// A path for `buyer` on `product` as reset at `epoch`, from `now_ms` on.
pub fn issue(keys: &Reservations, product: i64, epoch: i64, buyer: &str, now_ms: u64) -> Issued {
    let mut nonce = [0u8; 8];
    rand::rng().fill_bytes(&mut nonce);
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let expires_at_ms = now_ms + PATH_TTL_MS;
    let mac = keys.sign_bytes(&message(product, epoch, buyer, expires_at_ms, &nonce));
    Issued {
        token: format!("{expires_at_ms}-{nonce}-{mac}"),
        expires_at_ms,
    }
}

/// Whether `token` is a path of `buyer`'s on `product` at `epoch`, still
/// valid at `now_ms`; why not, otherwise.
pub fn check(
    keys: &Reservations,
    token: &str,
    (product, epoch, buyer): (i64, i64, &str),
    now_ms: u64,
) -> Result<Valid, &'static str> {
    let mut parts = token.splitn(3, '-');
    let (Some(expires), Some(nonce), Some(mac)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not a buy path");
    };
    let Ok(expires_at_ms) = expires.parse::<u64>() else {
        return Err("not a buy path");
    };
    if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("not a buy path");
    }
    if !keys.verifies(&message(product, epoch, buyer, expires_at_ms, nonce), mac) {
        return Err("this path is not this buyer's for this product and reset");
    }
    if now_ms >= expires_at_ms {
        return Err("this path has expired: get a new one from GET /stock/{id}/path");
    }
    Ok(Valid {
        nonce: nonce.to_owned(),
        expires_at_ms,
    })
}

/// What a path signs: a tag, the numbers at fixed width, the nonce, then
/// the buyer.
fn message(product: i64, epoch: i64, buyer: &str, expires_at_ms: u64, nonce: &str) -> Vec<u8> {
    let mut message = b"seckill buy path\0".to_vec();
    message.extend_from_slice(&product.to_be_bytes());
    message.extend_from_slice(&epoch.to_be_bytes());
    message.extend_from_slice(&expires_at_ms.to_be_bytes());
    message.extend_from_slice(nonce.as_bytes());
    message.extend_from_slice(buyer.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_holds_for_its_buyer_product_reset_and_life_only() {
        let keys = Reservations::new(None, "admin");
        let path = issue(&keys, 7, 3, "alice", 1_000);
        let at = |now| check(&keys, &path.token, (7, 3, "alice"), now);
        assert_eq!(at(1_000).map(|v| v.expires_at_ms), Ok(1_000 + PATH_TTL_MS));
        assert!(at(1_000 + PATH_TTL_MS).is_err(), "expired");
        assert!(
            check(&keys, &path.token, (7, 3, "bob"), 1_000).is_err(),
            "lent"
        );
        assert!(
            check(&keys, &path.token, (8, 3, "alice"), 1_000).is_err(),
            "another product"
        );
        assert!(
            check(&keys, &path.token, (7, 4, "alice"), 1_000).is_err(),
            "before a reset"
        );
        let other = Reservations::new(None, "another admin token");
        assert!(
            check(&other, &path.token, (7, 3, "alice"), 1_000).is_err(),
            "another key"
        );
        // A later expiry written over a valid path breaks its MAC.
        let (_, rest) = path.token.split_once('-').expect("three parts");
        let stretched = format!("{}-{rest}", path.expires_at_ms + 60_000);
        assert!(
            check(&keys, &stretched, (7, 3, "alice"), 1_000).is_err(),
            "stretched"
        );
        for junk in ["", "x", "1-2-3", "1-zzzzzzzzzzzzzzzz-00"] {
            assert!(
                check(&keys, junk, (7, 3, "alice"), 1_000).is_err(),
                "{junk:?}"
            );
        }
        assert_ne!(
            issue(&keys, 7, 3, "alice", 1_000),
            path,
            "a fresh nonce each time"
        );
    }
}
