//! Pre-booking: a product with `prebooking` sells only to buyers holding a
//! reservation, which they get from `POST /stock/{id}/reserve` before the
//! sale opens.
//!
//! A reservation is a token, `HMAC-SHA256(key, product, reset epoch,
//! buyer)` in hex, that no one without the key can make: the instances
//! check it on the buy path with no backend round trip, and nothing is
//! stored per reservation. It names one buyer of one product, so it
//! cannot be lent to another buyer; it names the reset's epoch, so a
//! reset voids every reservation made before it. Every instance must hold
//! the same key (`SECKILL_RESERVATION_KEY`, or derived from the admin
//! token they already share).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Signs and checks reservations.
#[derive(Clone)]
pub struct Reservations {
    key: Vec<u8>,
}

impl Reservations {
    /// Reservations signed with `key`, or, without one, with a key derived
    /// from the admin token (so a lab or compose needs no new secret; a
    /// deployment that hands the admin token to more people than it
    /// trusts with reservations sets its own key).
    pub fn new(key: Option<&str>, admin_token: &str) -> Self {
        let key = match key {
            Some(key) if !key.is_empty() => key.as_bytes().to_vec(),
            _ => mac(admin_token.as_bytes(), b"seckill reservation key").to_vec(),
        };
        Self { key }
    }

    /// The token for `buyer` on `product` as reset at `epoch`.
    pub fn sign(&self, product: i64, epoch: i64, buyer: &str) -> String {
        self.sign_bytes(&message(product, epoch, buyer))
    }

    /// Whether `token` is `buyer`'s reservation of `product` at `epoch`
    /// (compared in constant time).
    pub fn holds(&self, token: &str, product: i64, epoch: i64, buyer: &str) -> bool {
        self.verifies(&message(product, epoch, buyer), token)
    }

    /// `message` signed with this key, in hex: a reservation, or what a
    /// buy path carries (the buy-path module).
    pub fn sign_bytes(&self, message: &[u8]) -> String {
        mac(&self.key, message)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `hex` is `message` signed with this key (in constant time).
    pub fn verifies(&self, message: &[u8], hex: &str) -> bool {
        let Some(bytes) = unhex(hex) else {
            return false;
        };
        let Ok(mut check) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return false;
        };
        check.update(message);
        check.verify_slice(&bytes).is_ok()
    }
}

/// What a token signs: a tag, the two numbers at fixed width, then the
/// buyer, so no two different reservations read the same.
fn message(product: i64, epoch: i64, buyer: &str) -> Vec<u8> {
    let mut message = b"seckill reservation\0".to_vec();
    message.extend_from_slice(&product.to_be_bytes());
    message.extend_from_slice(&epoch.to_be_bytes());
    message.extend_from_slice(buyer.as_bytes());
    message
}

fn mac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Lower- or upper-case hex; `None` for anything else.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_for_its_buyer_product_and_epoch_only() {
        let signer = Reservations::new(None, "admin");
        let token = signer.sign(7, 3, "alice");
        assert_eq!(token.len(), 64);
        assert!(signer.holds(&token, 7, 3, "alice"));
        assert!(signer.holds(&token.to_uppercase(), 7, 3, "alice"));
        assert!(!signer.holds(&token, 7, 3, "bob"), "lent to another buyer");
        assert!(!signer.holds(&token, 8, 3, "alice"), "another product");
        assert!(!signer.holds(&token, 7, 4, "alice"), "made before a reset");
        let other = Reservations::new(None, "another admin token");
        assert!(!other.holds(&token, 7, 3, "alice"), "another key");
        let mut forged = token.clone();
        forged.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
        assert!(!signer.holds(&forged, 7, 3, "alice"));
        for junk in ["", "zz", "abc", &"0".repeat(64)] {
            assert!(!signer.holds(junk, 7, 3, "alice"), "{junk:?}");
        }
    }

    #[test]
    fn a_key_of_its_own_overrides_the_derived_one() {
        let derived = Reservations::new(None, "admin");
        let own = Reservations::new(Some("k"), "admin");
        assert_ne!(derived.sign(1, 1, "u"), own.sign(1, 1, "u"));
        assert_eq!(
            derived.sign(1, 1, "u"),
            Reservations::new(Some(""), "admin").sign(1, 1, "u")
        );
    }
}
