//! caching_sha2_password's full authentication where the two legs differ in TLS: qcache
//! turns a cleartext password (TLS client leg) into MySQL's RSA-encrypted form for a plain
//! upstream, and an RSA-encrypted one (plain client leg, with qcache's own key) into
//! cleartext for a TLS upstream. A password never crosses a plain leg unencrypted.

use std::sync::OnceLock;

use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::rand_core::OsRng;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

#[derive(Debug, thiserror::Error)]
pub enum Sha2Error {
    #[error("the server's public key is not a PEM RSA key")]
    BadPublicKey,
    #[error("RSA: {0}")]
    Rsa(#[from] rsa::Error),
    #[error("cannot make qcache's RSA key: {0}")]
    KeyGen(String),
}

/// MySQL XORs the NUL-terminated password with the scramble (repeated) before encrypting,
/// so that a captured ciphertext is bound to one connection's nonce.
fn xor_scramble(data: &mut [u8], scramble: &[u8]) {
    if scramble.is_empty() {
        return;
    }
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= scramble[i % scramble.len()];
    }
}

/// The packet a plain upstream expects after it sent its public key: the password (with
/// its NUL) XOR the scramble, RSA-OAEP (SHA-1) under the server's key.
pub fn encrypt_password(
    pem: &[u8],
    password: &[u8],
    scramble: &[u8],
) -> Result<Vec<u8>, Sha2Error> {
    let text = std::str::from_utf8(pem).map_err(|_| Sha2Error::BadPublicKey)?;
    let text = text.trim_end_matches('\0');
    let key = RsaPublicKey::from_public_key_pem(text)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
        .map_err(|_| Sha2Error::BadPublicKey)?;
    let mut data = password.to_vec();
    if data.last() != Some(&0) {
        data.push(0);
    }
    xor_scramble(&mut data, scramble);
    Ok(key.encrypt(&mut OsRng, Oaep::new::<sha1::Sha1>(), &data)?)
}

/// qcache's own RSA key, offered to plain clients of a TLS upstream: such a client must
/// encrypt its password, and a TLS upstream only takes it in the clear (inside TLS), so
/// qcache decrypts in between. Made once per process, in the background as soon as an
/// upstream TLS context exists ([`prepare`]): generating it takes long enough (and varies
/// enough) that a client's authentication timeout should not have to cover it.
pub struct ProxyKey {
    private: RsaPrivateKey,
    pub pem: String,
}

static KEY: OnceLock<Result<ProxyKey, String>> = OnceLock::new();

fn generate() -> Result<ProxyKey, String> {
    let private = RsaPrivateKey::new(&mut OsRng, 2048).map_err(|e| e.to_string())?;
    let pem = RsaPublicKey::from(&private)
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| e.to_string())?;
    Ok(ProxyKey { private, pem })
}

/// Starts making the key on a thread of its own, unless it exists or is being made.
pub fn prepare() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(|| KEY.get_or_init(generate));
    });
}

pub async fn proxy_key() -> Result<&'static ProxyKey, Sha2Error> {
    if let Some(k) = KEY.get() {
        return k.as_ref().map_err(|e| Sha2Error::KeyGen(e.clone()));
    }
    prepare();
    // get_or_init waits for the thread already making it.
    let k = tokio::task::spawn_blocking(|| KEY.get_or_init(generate))
        .await
        .map_err(|e| Sha2Error::KeyGen(e.to_string()))?;
    k.as_ref().map_err(|e| Sha2Error::KeyGen(e.clone()))
}

impl ProxyKey {
    /// The cleartext password (NUL-terminated) from a client's encrypted packet.
    pub fn decrypt_password(&self, packet: &[u8], scramble: &[u8]) -> Result<Vec<u8>, Sha2Error> {
        // Blinded with fresh randomness: the ciphertext comes from whoever reached the port,
        // and rsa's arithmetic is not constant-time (RUSTSEC-2023-0071, docs/operations.md
        // "Security").
        let mut data =
            self.private
                .decrypt_blinded(&mut OsRng, Oaep::new::<sha1::Sha1>(), packet)?;
        xor_scramble(&mut data, scramble);
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_through_the_proxy_key() {
        let k = proxy_key().await.unwrap();
        let scramble = b"0123456789abcdefghij";
        let enc = encrypt_password(k.pem.as_bytes(), b"s3cret", scramble).unwrap();
        assert_eq!(k.decrypt_password(&enc, scramble).unwrap(), b"s3cret\0");
        assert!(encrypt_password(b"not a key", b"x", scramble).is_err());
    }
}
