//! Compact JWS (RFC 7515) with ES256 (ECDSA P-256 and SHA-256, `ring`): the signed JWT a
//! client authenticates with (`private_key_jwt`, RFC 7523 §2.2) and DPoP proofs (RFC 9449).
//! Keys are PKCS#8 documents: read from a PEM `PRIVATE KEY` block, or generated here.

use gosling_util::{base64_decode, base64_encode};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

/// An ES256 private key.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(ES256, private)")
    }
}

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

impl SigningKey {
    /// A P-256 key from a PEM `PRIVATE KEY` (PKCS#8) block, as `openssl genpkey -algorithm EC
    /// -pkeyopt ec_paramgen_curve:P-256` writes it. Errors say what to give instead, never
    /// the key.
    pub fn from_pem(pem: &str) -> Result<SigningKey, String> {
        let body = pem
            .split_once(PEM_BEGIN)
            .and_then(|(_, rest)| rest.split_once(PEM_END))
            .map(|(b, _)| b)
            .ok_or_else(|| {
                if pem.contains("BEGIN EC PRIVATE KEY") {
                    "the key is a SEC1 `EC PRIVATE KEY`; convert it to PKCS#8: openssl pkcs8 -topk8 -nocrypt -in KEY"
                        .to_string()
                } else {
                    format!("expected a PEM {PEM_BEGIN} block (PKCS#8, P-256)")
                }
            })?;
        let der = base64_decode(body).ok_or("the PEM key's base64 is damaged")?;
        SigningKey::from_pkcs8(der)
    }

    /// A P-256 key from its PKCS#8 DER.
    pub fn from_pkcs8(der: Vec<u8>) -> Result<SigningKey, String> {
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &SystemRandom::new()).map_err(|e| {
                format!("the key is not a P-256 PKCS#8 private key with its public key ({e}); ES256 needs one")
            })?;
        Ok(SigningKey { pair, pkcs8: der })
    }

    /// A new random P-256 key.
    pub fn generate() -> Result<SigningKey, String> {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|e| format!("cannot generate a P-256 key: {e}"))?;
        SigningKey::from_pkcs8(doc.as_ref().to_vec())
    }

    /// The PKCS#8 DER, base64 (for the token store; secret).
    pub fn to_base64(&self) -> String {
        base64_encode(&self.pkcs8, false)
    }

    /// The public key as a JWK (RFC 7518 §6.2.1): `kty`, `crv`, `x`, `y`, members in the
    /// order RFC 7638 hashes them.
    pub fn public_jwk(&self) -> Value {
        // The uncompressed point: 0x04, then x and y, 32 bytes each.
        let p = self.pair.public_key().as_ref();
        json!({
            "crv": "P-256",
            "kty": "EC",
            "x": base64_encode(&p[1..33], true),
            "y": base64_encode(&p[33..65], true),
        })
    }

    /// The JWK thumbprint (RFC 7638), base64url.
    pub fn thumbprint(&self) -> String {
        let jwk = self.public_jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap_or(""),
            jwk["y"].as_str().unwrap_or("")
        );
        base64_encode(&gosling_util::sha256(canonical.as_bytes()), true)
    }

    /// A compact JWS of `claims` with `header` (to which `alg` ES256 is added).
    pub fn sign(&self, header: Value, claims: &Value) -> Result<String, String> {
        let mut header = header;
        if let Some(h) = header.as_object_mut() {
            h.insert("alg".into(), Value::from("ES256"));
        }
        let input = format!(
            "{}.{}",
            base64_encode(header.to_string().as_bytes(), true),
            base64_encode(claims.to_string().as_bytes(), true)
        );
        let sig =
            self.pair.sign(&SystemRandom::new(), input.as_bytes()).map_err(|e| format!("ES256 signing failed: {e}"))?;
        Ok(format!("{input}.{}", base64_encode(sig.as_ref(), true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    #[test]
    fn signatures_verify_with_the_published_key() {
        let k = SigningKey::generate().unwrap();
        let jws = k.sign(json!({"typ": "dpop+jwt", "jwk": k.public_jwk()}), &json!({"jti": "1"})).unwrap();
        let parts: Vec<&str> = jws.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value = serde_json::from_slice(&base64_decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["typ"], "dpop+jwt");
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        point.extend(base64_decode(jwk["x"].as_str().unwrap()).unwrap());
        point.extend(base64_decode(jwk["y"].as_str().unwrap()).unwrap());
        let sig = base64_decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .expect("the signature verifies");
        // Kept and read back: the same key.
        let again = SigningKey::from_pkcs8(base64_decode(&k.to_base64()).unwrap()).unwrap();
        assert_eq!(again.public_jwk(), k.public_jwk());
        assert_eq!(again.thumbprint(), k.thumbprint());
    }

    #[test]
    fn keys_that_are_not_pkcs8_p256_are_refused_with_what_to_do() {
        let e = SigningKey::from_pem("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----").unwrap_err();
        assert!(e.contains("openssl pkcs8 -topk8"), "{e}");
        let e = SigningKey::from_pem("nonsense").unwrap_err();
        assert!(e.contains("PKCS#8"), "{e}");
        let e = SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----").unwrap_err();
        assert!(e.contains("P-256"), "{e}");
    }

    #[test]
    fn thumbprint_of_rfc7638_example_shape() {
        // The thumbprint hashes exactly the required members in lexicographic order.
        let k = SigningKey::generate().unwrap();
        let jwk = k.public_jwk();
        let canonical =
            serde_json::to_string(&json!({"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"], "y": jwk["y"]}))
                .unwrap();
        assert_eq!(k.thumbprint(), base64_encode(&gosling_util::sha256(canonical.as_bytes()), true));
    }
}
