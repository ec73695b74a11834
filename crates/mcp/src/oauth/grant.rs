//! The grants that need no person at a browser (the MCP authorization extensions):
//! OAuth client credentials (`io.modelcontextprotocol/oauth-client-credentials`: a client
//! secret, or a JWT signed with the client's key, RFC 7523 §2.2), workload identity federation
//! (the RFC 7523 JWT-bearer grant with a token the platform issues to the workload), and
//! enterprise-managed authorization (`io.modelcontextprotocol/enterprise-managed-authorization`:
//! the person's ID token exchanged at the enterprise identity provider for an identity
//! assertion grant (RFC 8693), which the JWT-bearer grant turns into an access token).
//!
//! Each runs where the authorization code flow would (a 401, discovery first) and stores its
//! token the same way; none has a refresh token: an expired token is asked for again. A
//! refused grant is reported, never retried with another grant.

use super::*;
use std::sync::Arc;

pub const GRANT_CLIENT_CREDENTIALS: &str = "client_credentials";
pub const GRANT_JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const CLIENT_ASSERTION_JWT: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
pub const TOKEN_TYPE_ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
pub const TOKEN_TYPE_ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// Reads a token the platform or the identity provider issued (read again for every grant:
/// workload tokens rotate). The error says what to fix.
pub type TokenSource = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// How the client gets its access token.
#[derive(Clone, Default)]
pub enum Grant {
    /// A person signs in with a browser (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// `client_credentials` as the configured client: its secret (`Settings::client_secret`)
    /// or its signing key (`Authorizer::with_client_key`).
    ClientCredentials,
    /// Workload identity federation: the JWT-bearer grant with the workload's token.
    JwtBearer { assertion: TokenSource },
    /// Enterprise-managed authorization: `id_token` exchanged at `idp_token_endpoint` (as
    /// `idp_client_id`, with `idp_client_secret` if the IdP wants one) for an identity assertion
    /// grant, then the JWT-bearer grant with it as the configured client.
    EnterpriseManaged {
        idp_token_endpoint: String,
        idp_client_id: String,
        idp_client_secret: Option<String>,
        id_token: TokenSource,
    },
}

impl Grant {
    pub fn name(&self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => GRANT_CLIENT_CREDENTIALS,
            Grant::JwtBearer { .. } => "jwt_bearer",
            Grant::EnterpriseManaged { .. } => "enterprise_managed",
        }
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn fetch(source: &TokenSource, what: &str) -> Result<String, HttpFailure> {
    source().map_err(|e| HttpFailure::OAuth(format!("cannot read the {what}: {e}")))
}

impl Authorizer {
    /// The configured client as a token record for `d`'s token endpoint (no token yet).
    fn machine_client(&self, d: &Discovery) -> Result<Token, HttpFailure> {
        let client_id = self.settings.client_id.clone();
        let auth_method = if self.client_key.is_some() {
            "private_key_jwt".to_string()
        } else if self.settings.client_secret.is_some() {
            secret_method(&d.meta)
        } else {
            "none".to_string()
        };
        if client_id.is_none() && !matches!(self.grant, Grant::JwtBearer { .. }) {
            return Err(HttpFailure::OAuth(format!(
                "the {} grant needs the client registered with {}: set the extension's oauth.client_id",
                self.grant.name(),
                d.issuer
            )));
        }
        Ok(Token {
            issuer: d.issuer.clone(),
            resource: d.resource.clone(),
            token_endpoint: d.meta["token_endpoint"].as_str().unwrap_or_default().to_string(),
            client_id: client_id.unwrap_or_default(),
            client_secret: self.settings.client_secret.clone(),
            auth_method,
            dpop: supports_dpop(&d.meta),
            ..Token::default()
        })
    }

    /// Gets a token with the configured machine grant; on success it is stored.
    pub(super) fn machine_sign_in(
        &self,
        d: &Discovery,
        ch: &Challenge,
        previous_scope: Option<&str>,
    ) -> Result<(), HttpFailure> {
        let client = self.machine_client(d)?;
        let scope = select_scopes(
            ch.scope.as_deref(),
            &self.settings.scopes,
            d.resource_scopes.as_deref(),
            previous_scope,
            strings(&d.meta, "scopes_supported").as_deref(),
        )
        .join(" ");
        let mut params = match &self.grant {
            Grant::AuthorizationCode => return Err(HttpFailure::OAuth("not a machine grant".into())),
            Grant::ClientCredentials => vec![("grant_type", GRANT_CLIENT_CREDENTIALS.to_string())],
            Grant::JwtBearer { assertion } => vec![
                ("grant_type", GRANT_JWT_BEARER.to_string()),
                ("assertion", fetch(assertion, "workload identity token")?),
            ],
            Grant::EnterpriseManaged { idp_token_endpoint, idp_client_id, idp_client_secret, id_token } => {
                let jag =
                    self.identity_assertion(d, &scope, idp_token_endpoint, idp_client_id, idp_client_secret, id_token)?;
                vec![("grant_type", GRANT_JWT_BEARER.to_string()), ("assertion", jag)]
            }
        };
        params.push(("resource", d.resource.clone()));
        if !scope.is_empty() {
            params.push(("scope", scope));
        }
        let v = self.token_request(&client, params).map_err(TokenError::into_failure)?;
        let mut token = client.renewed(&v);
        // No refresh token is ever used for these: the grant itself is asked again.
        token.refresh_token = None;
        log::info!("mcp: {}: got a token from {} ({} grant)", self.extension, d.issuer, self.grant.name());
        self.save(token);
        Ok(())
    }

    /// Enterprise-managed authorization, step one: the identity provider exchanges the ID
    /// token for an identity assertion grant (ID-JAG) for this authorization server and
    /// resource (RFC 8693).
    fn identity_assertion(
        &self,
        d: &Discovery,
        scope: &str,
        idp_token_endpoint: &str,
        idp_client_id: &str,
        idp_client_secret: &Option<String>,
        id_token: &TokenSource,
    ) -> Result<String, HttpFailure> {
        let idp = Token {
            token_endpoint: idp_token_endpoint.to_string(),
            client_id: idp_client_id.to_string(),
            client_secret: idp_client_secret.clone(),
            auth_method: if idp_client_secret.is_some() { "client_secret_basic" } else { "none" }.to_string(),
            ..Token::default()
        };
        let audience = d.meta.get("issuer").and_then(Value::as_str).unwrap_or(&d.issuer).to_string();
        let mut params = vec![
            ("grant_type", GRANT_TOKEN_EXCHANGE.to_string()),
            ("requested_token_type", TOKEN_TYPE_ID_JAG.to_string()),
            ("subject_token", fetch(id_token, "ID token for the enterprise identity provider")?),
            ("subject_token_type", TOKEN_TYPE_ID_TOKEN.to_string()),
            ("audience", audience),
            ("resource", d.resource.clone()),
        ];
        if !scope.is_empty() {
            params.push(("scope", scope.to_string()));
        }
        let v = self.token_request(&idp, params).map_err(|e| match e.into_failure() {
            HttpFailure::OAuth(why) => {
                HttpFailure::OAuth(format!("the identity provider's token exchange failed: {why}"))
            }
            f => f,
        })?;
        if v.get("issued_token_type").and_then(Value::as_str).is_some_and(|t| t != TOKEN_TYPE_ID_JAG) {
            return Err(HttpFailure::OAuth(format!(
                "the identity provider {} issued another kind of token than an identity assertion grant ({TOKEN_TYPE_ID_JAG})",
                display_host(idp_token_endpoint)
            )));
        }
        Ok(v["access_token"].as_str().unwrap_or_default().to_string())
    }

    /// The signed JWT this client authenticates with at `t`'s token endpoint (RFC 7523 §2.2,
    /// `aud` the authorization server's issuer), fresh for each request.
    pub(super) fn client_assertion(&self, t: &Token) -> Result<String, HttpFailure> {
        let Some(key) = &self.client_key else {
            return Err(HttpFailure::OAuth(
                "the client authenticates with private_key_jwt but has no signing key; set the extension's oauth.client_assertion_key".into(),
            ));
        };
        let now = gosling_util::unix_secs();
        let claims = serde_json::json!({
            "iss": t.client_id,
            "sub": t.client_id,
            "aud": t.issuer,
            "iat": now,
            "exp": now + 60,
            "jti": random_b64(16),
        });
        key.sign(serde_json::json!({"typ": "JWT"}), &claims).map_err(HttpFailure::OAuth)
    }
}
