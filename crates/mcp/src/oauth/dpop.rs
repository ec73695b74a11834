//! DPoP (RFC 9449): sender-constrained tokens. When the authorization server signs DPoP tokens
//! with ES256 (`dpop_signing_alg_values_supported`), every token request carries a proof made
//! with this server's key (generated once and kept in the token store beside the tokens), and a
//! DPoP-bound token goes out as `Authorization: DPoP <token>` with a fresh proof (`ath` binds
//! it to the token) on every request. A server's `use_dpop_nonce` answer gives the nonce the
//! next proof carries (the request is sent once more).

use super::*;

/// The store key of a server's DPoP key (PKCS#8, base64; as secret as the tokens).
fn dpop_key_name(resource: &str) -> String {
    format!("oauth-dpop:{resource}")
}

/// Whether the authorization server of `meta` takes DPoP proofs gosling can sign.
pub(super) fn supports_dpop(meta: &Value) -> bool {
    strings(meta, "dpop_signing_alg_values_supported").is_some_and(|algs| algs.iter().any(|a| a == "ES256"))
}

/// `htu`: the URL without its query and fragment (RFC 9449 §4.2).
fn htu(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

impl Authorizer {
    /// This server's DPoP key: the kept one, else a new one (kept).
    fn dpop_key(&self) -> Result<Arc<SigningKey>, HttpFailure> {
        let mut slot = self.dpop_key.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = slot.as_ref() {
            return Ok(Arc::clone(k));
        }
        let name = dpop_key_name(&self.resource_id());
        let kept = self.settings.store.get(&name).and_then(|b64| {
            let key = gosling_util::base64_decode(&b64).and_then(|der| SigningKey::from_pkcs8(der).ok());
            if key.is_none() {
                log::warn!("mcp: {}: the kept DPoP key is damaged; making another", self.extension);
            }
            key
        });
        let key = match kept {
            Some(k) => k,
            None => {
                let k = SigningKey::generate().map_err(HttpFailure::OAuth)?;
                self.settings.store.put(&name, Some(&k.to_base64()));
                k
            }
        };
        let key = Arc::new(key);
        *slot = Some(Arc::clone(&key));
        Ok(key)
    }

    /// A DPoP proof for `htm` to `url`, with the server's last nonce and, for a resource
    /// request, the hash of the access token.
    pub(super) fn dpop_proof(
        &self,
        htm: &str,
        url: &str,
        nonce: Option<&str>,
        access_token: Option<&str>,
    ) -> Result<String, HttpFailure> {
        let key = self.dpop_key()?;
        let mut claims = serde_json::json!({
            "jti": random_b64(16),
            "htm": htm,
            "htu": htu(url),
            "iat": gosling_util::unix_secs(),
        });
        if let Some(n) = nonce {
            claims["nonce"] = Value::from(n);
        }
        if let Some(t) = access_token {
            claims["ath"] = Value::from(base64_encode(&gosling_util::sha256(t.as_bytes()), true));
        }
        key.sign(serde_json::json!({"typ": "dpop+jwt", "jwk": key.public_jwk()}), &claims).map_err(HttpFailure::OAuth)
    }

    /// Keeps the nonce an authorization server (`token_endpoint`) or this MCP server gave.
    pub(super) fn keep_nonce(&self, which: Nonce, nonce: &str) {
        // A nonce is opaque but goes back in a header: printable ASCII only, bounded.
        if nonce.len() > 512 || !nonce.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            log::warn!("mcp: {}: ignoring a DPoP-Nonce that is not a printable token", self.extension);
            return;
        }
        let mut n = self.nonces.lock().unwrap_or_else(|p| p.into_inner());
        match which {
            Nonce::TokenEndpoint => n.0 = Some(nonce.to_string()),
            Nonce::Resource => n.1 = Some(nonce.to_string()),
        }
    }

    pub(super) fn nonce(&self, which: Nonce) -> Option<String> {
        let n = self.nonces.lock().unwrap_or_else(|p| p.into_inner());
        match which {
            Nonce::TokenEndpoint => n.0.clone(),
            Nonce::Resource => n.1.clone(),
        }
    }

    /// The MCP server answered with a `DPoP-Nonce` header: the next proof carries it.
    pub fn resource_nonce(&self, nonce: &str) {
        self.keep_nonce(Nonce::Resource, nonce);
    }

    /// The headers that authorize a request `htm` to `url`: `Authorization` with the access
    /// token (refreshed first when due), and for a DPoP-bound token its proof. Empty: no token
    /// (the server's 401 starts a sign-in).
    pub fn request_headers(&self, htm: &str, url: &str) -> Vec<(&'static str, String)> {
        let Some(token) = self.access_token() else { return Vec::new() };
        let bound = self.current().is_some_and(|t| t.dpop && t.access_token == token);
        if !bound {
            return vec![("Authorization", format!("Bearer {token}"))];
        }
        match self.dpop_proof(htm, url, self.nonce(Nonce::Resource).as_deref(), Some(&token)) {
            Ok(proof) => vec![("Authorization", format!("DPoP {token}")), ("DPoP", proof)],
            Err(e) => {
                log::warn!("mcp: {}: cannot make a DPoP proof: {}", self.extension, Show(&e));
                Vec::new()
            }
        }
    }
}

/// Whose nonce: the authorization server's token endpoint, or the MCP server's.
#[derive(Clone, Copy)]
pub(super) enum Nonce {
    TokenEndpoint,
    Resource,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htu_drops_query_and_fragment() {
        assert_eq!(htu("https://as.example/token?x=1#f"), "https://as.example/token");
        assert_eq!(htu("http://h:1/mcp"), "http://h:1/mcp");
    }

    fn authorizer(store: Arc<MemoryStore>) -> Authorizer {
        let settings = Settings {
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
            client_metadata_url: None,
            client_name: "gosling".into(),
            sign_in: SignIn::Follow,
            store,
        };
        Authorizer::new("http://127.0.0.1:9/mcp", "t", Duration::from_secs(5), settings)
    }

    #[test]
    fn nonces_are_kept_only_when_printable_and_short() {
        let a = authorizer(Arc::new(MemoryStore::default()));
        a.resource_nonce("n-1_x.y");
        assert_eq!(a.nonce(Nonce::Resource).as_deref(), Some("n-1_x.y"));
        for bad in ["a\r\nInjected: 1", "with space", "\u{e9}", &"x".repeat(513)] {
            a.resource_nonce(bad);
            assert_eq!(a.nonce(Nonce::Resource).as_deref(), Some("n-1_x.y"), "{bad:?} was kept");
        }
        assert_eq!(a.nonce(Nonce::TokenEndpoint), None);
        // No token: no Authorization header at all (the server's 401 starts a sign-in).
        assert!(a.request_headers("POST", "http://127.0.0.1:9/mcp").is_empty());
    }

    #[test]
    fn the_key_is_made_once_and_kept_per_server() {
        let store = Arc::new(MemoryStore::default());
        let a = authorizer(store.clone());
        let proof = a.dpop_proof("POST", "http://127.0.0.1:9/token?x=1", Some("n"), Some("tok")).unwrap();
        let parts: Vec<&str> = proof.split('.').collect();
        let claims: Value = serde_json::from_slice(&gosling_util::base64_decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["htu"], "http://127.0.0.1:9/token");
        assert_eq!((claims["htm"].as_str(), claims["nonce"].as_str()), (Some("POST"), Some("n")));
        assert_eq!(claims["ath"], base64_encode(&gosling_util::sha256(b"tok"), true));
        let header: Value = serde_json::from_slice(&gosling_util::base64_decode(parts[0]).unwrap()).unwrap();
        assert!(header["jwk"].get("d").is_none(), "no private part in the proof: {header}");
        // Another authorizer of the same server (a restart) proves with the same key.
        let again = authorizer(store.clone());
        let second = again.dpop_proof("GET", "http://127.0.0.1:9/mcp", None, None).unwrap();
        let h2: Value =
            serde_json::from_slice(&gosling_util::base64_decode(second.split('.').next().unwrap()).unwrap()).unwrap();
        assert_eq!(h2["jwk"], header["jwk"]);
        assert_eq!(store.keys("oauth-dpop:").len(), 1);
    }

    #[test]
    fn dpop_only_with_es256() {
        assert!(supports_dpop(&serde_json::json!({"dpop_signing_alg_values_supported": ["RS256", "ES256"]})));
        assert!(!supports_dpop(&serde_json::json!({"dpop_signing_alg_values_supported": ["RS256"]})));
        assert!(!supports_dpop(&serde_json::json!({})));
    }
}
