//! The authorization code flow: the client identity (configured, Client ID Metadata Document,
//! dynamic registration, reused until refused), PKCE S256, playing the browser for
//! `SignIn::Follow`, the token exchange and refresh.

use super::*;

/// A client gosling registered with an authorization server (dynamic registration), kept
/// beside the tokens and reused by the next sign-in to the same server until it is refused.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct Registration {
    pub(super) client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) client_secret: Option<String>,
    pub(super) auth_method: String,
    /// The loopback redirect registered with it: its port is listened on again.
    pub(super) redirect_uri: String,
}

/// The PKCE S256 challenge of a verifier.
pub fn pkce_challenge(verifier: &str) -> String {
    base64_encode(&gosling_util::sha256(verifier.as_bytes()), true)
}

pub(super) fn random_b64(n: usize) -> String {
    base64_encode(&gosling_util::random_bytes(n), true)
}

pub(super) fn form(pairs: &[(&str, impl AsRef<str>)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v.as_ref()))).collect::<Vec<_>>().join("&")
}

/// Characters of an authorization server's `error_description` repeated in a message.
pub(super) const DESCRIPTION_MAX: usize = 300;

/// A token endpoint's refusal for a message: `: CODE` (`oauth_error_text`) and, with a
/// registered code only, the server's `error_description` — its own words to the person signing
/// in (why the code or the grant was refused) —, capped at `DESCRIPTION_MAX` characters, with
/// every value of `sent` (what the request carried: the code, the verifier, a refresh token, a
/// client secret) blanked out, and escaped for a terminal (`util::printable`). An answer without
/// a registered code (an internal service's error page) stays unrepeated.
pub(super) fn token_refusal_text(v: &Value, sent: &[&str]) -> String {
    let mut text = oauth_error_text(v);
    let description = v.get("error_description").and_then(Value::as_str).map(str::trim).unwrap_or("");
    if oauth_error_code(v).is_none() || description.is_empty() {
        return text;
    }
    let mut d = description.to_string();
    for s in sent.iter().filter(|s| s.len() >= 6) {
        d = d.replace(s, "[redacted]");
    }
    let capped: String = d.chars().take(DESCRIPTION_MAX).collect();
    let more = if capped.len() < d.len() { "…" } else { "" };
    text.push_str(&format!(" (the authorization server says: \"{}{more}\")", gosling_util::printable(&capped)));
    text
}

/// How playing the browser failed: a status other than a redirect or a page, or otherwise.
pub(super) enum FollowError {
    Refused(u16),
    Failed(HttpFailure),
}

/// A failed token request: no answer (keep what we have), or an answer refusing it.
pub(super) enum TokenError {
    Unreachable(HttpFailure),
    /// With the answer's registered OAuth error code, if it had one.
    Refused {
        failure: HttpFailure,
        code: Option<String>,
    },
}

impl TokenError {
    pub(super) fn into_failure(self) -> HttpFailure {
        match self {
            TokenError::Unreachable(f) | TokenError::Refused { failure: f, .. } => f,
        }
    }
}

/// One sign-in waiting for its redirect.
pub(super) struct Flow {
    /// The token record to be: issuer, resource, token endpoint and client, no token yet.
    pub(super) client: Token,
    pub(super) redirect_uri: String,
    pub(super) verifier: String,
    pub(super) state: String,
    /// The authorization server advertised `authorization_response_iss_parameter_supported`:
    /// a redirect without `iss` is refused (RFC 9207 §2.4).
    pub(super) iss_required: bool,
    /// The issuer a redirect's `iss` must equal: the metadata's (which equals the one the
    /// resource metadata named, checked at discovery).
    pub(super) issuer: String,
}

impl Authorizer {
    /// A client identity the extension configures: a pre-registered client, else a Client ID
    /// Metadata Document URL the server supports. `None`: dynamic registration.
    pub(super) fn configured_identity(&self, d: &Discovery) -> Option<Registration> {
        if let Some(id) = &self.settings.client_id {
            let secret = self.settings.client_secret.clone();
            let auth_method = if secret.is_some() { secret_method(&d.meta) } else { "none".into() };
            return Some(Registration {
                client_id: id.clone(),
                client_secret: secret,
                auth_method,
                redirect_uri: String::new(),
            });
        }
        let url = self.settings.client_metadata_url.as_ref()?;
        (d.meta.get("client_id_metadata_document_supported").and_then(Value::as_bool) == Some(true)).then(|| {
            Registration {
                client_id: url.clone(),
                client_secret: None,
                auth_method: "none".into(),
                redirect_uri: String::new(),
            }
        })
    }

    /// The client registered with this server by an earlier sign-in, if any.
    pub(super) fn stored_registration(&self, d: &Discovery) -> Option<Registration> {
        let v = self.settings.store.get(&registration_key(&self.resource_id(), &d.issuer))?;
        serde_json::from_str(&v).ok()
    }

    pub(super) fn forget_registration(&self, d: &Discovery) {
        self.settings.store.put(&registration_key(&self.resource_id(), &d.issuer), None);
    }

    /// Dynamic client registration (RFC 7591) for `redirect_uri`; the client is kept in the
    /// token store for the next sign-in.
    pub(super) fn register(&self, d: &Discovery, redirect_uri: &str) -> Result<Registration, SignInError> {
        let Some(reg) = d.meta.get("registration_endpoint").and_then(Value::as_str) else {
            return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                "the authorization server {} supports neither dynamic client registration nor (a configured) client ID metadata document; register a client with it and set the extension's oauth.client_id (and oauth.client_secret_key naming a stored secret), or set oauth.client_metadata_url",
                d.issuer
            ))));
        };
        self.check_endpoint("registration endpoint", reg)?;
        let supported = strings(&d.meta, "token_endpoint_auth_methods_supported").unwrap_or_default();
        let wanted = ["none", "client_secret_basic", "client_secret_post"]
            .into_iter()
            .find(|m| supported.iter().any(|s| s == m))
            .unwrap_or("none");
        // The redirect is a loopback listener on this machine: a native application
        // (OpenID Connect Dynamic Client Registration §2, which MCP requires since 2026-07-28).
        let body = serde_json::json!({
            "client_name": self.settings.client_name,
            "application_type": "native",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
        });
        let resp = self
            .agent
            .post(reg)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| {
                HttpFailure::OAuth(format!(
                    "dynamic client registration at {} failed: {}",
                    display_host(reg),
                    oauth_io(&e)
                ))
            })?;
        let status = resp.status().as_u16();
        let v = json_body(resp);
        if !(200..300).contains(&status) {
            if d.guessed {
                // No metadata anywhere and no registration at the default path: this server
                // wants other credentials, not OAuth. The caller reports its own 401.
                return Err(SignInError::NotOAuth);
            }
            return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                "dynamic client registration at {} answered {status}{}; register a client by hand and set the extension's oauth.client_id",
                display_host(reg),
                oauth_error_text(&v)
            ))));
        }
        let id = v.get("client_id").and_then(Value::as_str).ok_or_else(|| {
            HttpFailure::OAuth(format!("dynamic client registration at {} returned no client_id", display_host(reg)))
        })?;
        let secret = v.get("client_secret").and_then(Value::as_str).map(str::to_string);
        let auth_method = match v.get("token_endpoint_auth_method").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None if secret.is_some() => secret_method(&d.meta),
            None => "none".into(),
        };
        log::info!("mcp: {}: registered a client with {}", self.extension, d.issuer);
        let r = Registration {
            client_id: id.to_string(),
            client_secret: secret,
            auth_method,
            redirect_uri: redirect_uri.into(),
        };
        match serde_json::to_string(&r) {
            Ok(text) => self.settings.store.put(&registration_key(&self.resource_id(), &d.issuer), Some(&text)),
            Err(e) => log::warn!("mcp: {}: cannot serialize the client registration: {e}", self.extension),
        }
        Ok(r)
    }

    /// The loopback listener and the client to sign in as: the configured client, else the
    /// one registered before (its redirect port listened on again), else a new registration.
    /// The flag says the client is a stored registration (which the server may have forgotten).
    pub(super) fn listener_and_client(
        &self,
        d: &Discovery,
        reuse: bool,
    ) -> Result<(TcpListener, String, Registration, bool), SignInError> {
        let bind = |port: u16| {
            TcpListener::bind(("127.0.0.1", port))
                .map_err(|e| HttpFailure::OAuth(format!("cannot listen on 127.0.0.1 for the sign-in redirect: {e}")))
        };
        let fresh = || -> Result<(TcpListener, String), SignInError> {
            let listener = bind(0)?;
            let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            Ok((listener, format!("http://127.0.0.1:{port}{CALLBACK_PATH}")))
        };
        if let Some(client) = self.configured_identity(d) {
            let (listener, redirect_uri) = fresh()?;
            return Ok((listener, redirect_uri, client, false));
        }
        if let Some(reg) = self.stored_registration(d).filter(|_| reuse) {
            let port = reg.redirect_uri.strip_prefix("http://127.0.0.1:").and_then(|r| r.split('/').next());
            match port.and_then(|p| p.parse::<u16>().ok()).map(bind) {
                Some(Ok(listener)) => return Ok((listener, reg.redirect_uri.clone(), reg, true)),
                _ => log::info!(
                    "mcp: {}: the redirect port of the client registered before is taken; registering another",
                    self.extension
                ),
            }
        }
        let (listener, redirect_uri) = fresh()?;
        let reg = self.register(d, &redirect_uri)?;
        Ok((listener, redirect_uri, reg, false))
    }

    /// Whether the authorization server still knows a stored client: its authorization
    /// endpoint refuses an unknown client with a 4xx page instead of sending the browser on
    /// (RFC 6749 §4.1.2.1 forbids redirecting then), where a person would be stuck.
    pub(super) fn client_refused(&self, url: &str) -> bool {
        if self.check_endpoint("authorization endpoint", url).is_err() {
            return false;
        }
        match self.agent.get(url).call() {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let _ = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec();
                matches!(status, 400 | 401)
            }
            Err(_) => false,
        }
    }

    /// The whole authorization code flow; on success the token is stored. A stored client
    /// the server refuses is forgotten, and a new one registered, once.
    pub(super) fn sign_in(self: &Arc<Self>, ch: &Challenge, previous_scope: Option<&str>) -> Result<(), SignInError> {
        // A background sign-in already waiting for this server's browser: hand out its URL
        // again rather than start another listener (each /agent/resume would).
        let background = matches!(self.settings.sign_in, SignIn::Background { .. });
        if background && previous_scope.is_none() {
            if let Some(url) = pending()
                .get(&self.resource_id())
                .and_then(|(url, until)| (Instant::now() < *until).then(|| url.clone()))
            {
                return Err(HttpFailure::SignInRequired { url }.into());
            }
        }
        let d = self.discover(ch)?;
        if !matches!(self.grant, Grant::AuthorizationCode) {
            return self.machine_sign_in(&d, ch, previous_scope).map_err(SignInError::Failed);
        }
        match self.sign_in_as(&d, ch, previous_scope, true) {
            Err(SignInError::ClientRefused(why)) => {
                log::info!(
                    "mcp: {}: {} refused the client registered before ({why}); registering again",
                    self.extension,
                    d.issuer
                );
                self.forget_registration(&d);
                self.sign_in_as(&d, ch, previous_scope, false)
            }
            r => r,
        }
    }

    pub(super) fn sign_in_as(
        self: &Arc<Self>,
        d: &Discovery,
        ch: &Challenge,
        previous_scope: Option<&str>,
        reuse: bool,
    ) -> Result<(), SignInError> {
        let background = matches!(self.settings.sign_in, SignIn::Background { .. });
        let (listener, redirect_uri, client, reused) = self.listener_and_client(d, reuse)?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let scopes = select_scopes(
            ch.scope.as_deref(),
            &self.settings.scopes,
            d.resource_scopes.as_deref(),
            previous_scope,
            strings(&d.meta, "scopes_supported").as_deref(),
        );
        let verifier = random_b64(32);
        let state = random_b64(16);
        let auth_endpoint = d.meta["authorization_endpoint"].as_str().unwrap_or_default();
        let scope = scopes.join(" ");
        let challenge = pkce_challenge(&verifier);
        let mut params = vec![
            ("response_type", "code"),
            ("client_id", &client.client_id),
            ("redirect_uri", &redirect_uri),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", &state),
        ];
        if !scope.is_empty() {
            params.push(("scope", &scope));
        }
        params.push(("resource", &d.resource));
        let sep = if auth_endpoint.contains('?') { '&' } else { '?' };
        let url = format!("{auth_endpoint}{sep}{}", form(&params));
        if reused && !matches!(self.settings.sign_in, SignIn::Follow) && self.client_refused(&url) {
            return Err(SignInError::ClientRefused("its authorization endpoint answered 4xx".into()));
        }
        let flow = Flow {
            client: Token {
                issuer: d.issuer.clone(),
                resource: d.resource.clone(),
                token_endpoint: d.meta["token_endpoint"].as_str().unwrap_or_default().to_string(),
                client_id: client.client_id,
                client_secret: client.client_secret,
                auth_method: client.auth_method,
                dpop: supports_dpop(&d.meta),
                ..Token::default()
            },
            redirect_uri: redirect_uri.clone(),
            verifier,
            state,
            iss_required: d.meta.get("authorization_response_iss_parameter_supported").and_then(Value::as_bool)
                == Some(true),
            issuer: d.meta.get("issuer").and_then(Value::as_str).unwrap_or(&d.issuer).to_string(),
        };
        let wait = match self.settings.sign_in {
            SignIn::Browser { wait, .. } | SignIn::Background { wait } => wait,
            SignIn::Follow => self.timeout.max(Duration::from_secs(30)),
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let me = Arc::clone(self);
        let key = self.resource_id();
        let my_url = url.clone();
        if background {
            pending().insert(key.clone(), (url.clone(), Instant::now() + wait));
        }
        std::thread::Builder::new()
            .name(format!("oauth-callback-{}", self.extension))
            .spawn(move || {
                let r = me.await_callback(listener, &flow, Instant::now() + wait);
                if background {
                    let mut p = pending();
                    // Done (signed in, refused or timed out): forget it, unless a newer one replaced it.
                    if p.get(&key).is_some_and(|(u, _)| *u == my_url) {
                        p.remove(&key);
                    }
                }
                let _ = tx.send(r);
            })
            .map_err(|e| HttpFailure::OAuth(format!("cannot start the sign-in listener thread: {e}")))?;
        match self.settings.sign_in {
            SignIn::Background { .. } => {
                log::info!(
                    "mcp: {}: sign-in required; waiting for the browser at {}",
                    self.extension,
                    display_host(&url)
                );
                return Err(HttpFailure::SignInRequired { url }.into());
            }
            SignIn::Browser { show, .. } => {
                show(&format!(
                    "Sign in to `{}`: open this URL in a browser on this machine:\n\n  {url}\n\nThe browser comes back to 127.0.0.1:{port}; over SSH, forward it first: ssh -L {port}:127.0.0.1:{port} HOST\n",
                    self.extension
                ));
                open_in_browser(&url);
            }
            SignIn::Follow => {
                if let Err(e) = self.follow(&url, &redirect_uri) {
                    // The listener waits for nobody now: wake it so it gives up at once.
                    let _ = TcpStream::connect(("127.0.0.1", port));
                    return Err(match e {
                        FollowError::Refused(status) if reused => {
                            SignInError::ClientRefused(format!("its authorization endpoint answered {status}"))
                        }
                        FollowError::Refused(status) => SignInError::Failed(HttpFailure::OAuth(format!(
                            "the authorization server answered {status} instead of approving; sign in with a browser (gosling auth NAME)"
                        ))),
                        FollowError::Failed(f) => SignInError::Failed(f),
                    });
                }
            }
        }
        let r = rx.recv_timeout(wait + Duration::from_secs(5)).unwrap_or_else(|_| {
            Err(HttpFailure::OAuth(format!("nobody finished signing in within {wait:?}; run it again")).into())
        });
        match r {
            // Only a stored registration is registered again; a new one refused is an error.
            Err(SignInError::ClientRefused(why)) if !reused => Err(SignInError::Failed(HttpFailure::OAuth(why))),
            r => r,
        }
    }

    /// Plays the browser: GET the authorization URL, then each redirect, until our listener
    /// (`redirect_uri`), whose own answer does not matter here: the exchange reports.
    pub(super) fn follow(&self, url: &str, redirect_uri: &str) -> Result<(), FollowError> {
        let mut next = url.to_string();
        for _ in 0..10 {
            if next.starts_with(redirect_uri) {
                // Our own loopback listener: the one address the checked agent must not refuse.
                let local: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .max_redirects(0)
                    .timeout_global(Some(self.timeout.clamp(Duration::from_secs(5), Duration::from_secs(60))))
                    .proxy(None)
                    .build()
                    .into();
                let _ = local.get(&next).call().map(|r| r.into_body().into_with_config().limit(MAX_BODY).read_to_vec());
                return Ok(());
            }
            self.check_endpoint("authorization endpoint", &next).map_err(FollowError::Failed)?;
            let resp = self.agent.get(&next).call().map_err(|e| {
                FollowError::Failed(HttpFailure::OAuth(format!(
                    "fetching the authorization URL failed: {}",
                    oauth_io(&e)
                )))
            })?;
            let status = resp.status().as_u16();
            let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
            let _ = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec();
            match (status, location) {
                (300..=399, Some(l)) => next = resolve(&next, &l),
                (200..=299, _) => {
                    return Err(FollowError::Failed(HttpFailure::OAuth(format!(
                        "the authorization server shows a page at {} that needs a person (a login or consent form) instead of approving at once; --sign-in follow cannot fill it in: sign in with a browser (gosling auth NAME, without --sign-in follow)",
                        display_host(&next)
                    ))))
                }
                (s, _) => return Err(FollowError::Refused(s)),
            }
        }
        Err(FollowError::Failed(HttpFailure::OAuth("the authorization URL redirected more than 10 times".into())))
    }

    /// POSTs a token request as the client `t` names (its endpoint, id, secret and method),
    /// with a DPoP proof when `t` is DPoP-bound, sent once more with the server's nonce when
    /// it asks for one (RFC 9449 §8).
    pub(super) fn token_request(&self, t: &Token, params: Vec<(&str, String)>) -> Result<Value, TokenError> {
        let endpoint = &t.token_endpoint;
        // A token's refresh goes only to the token endpoint it was issued by, and only if the
        // server may still send us there.
        self.check_endpoint("token endpoint", endpoint).map_err(|f| TokenError::Refused { failure: f, code: None })?;
        let mut attempt = 0;
        loop {
            let (status, nonce, v) = self.token_post(t, params.clone())?;
            if let Some(n) = &nonce {
                self.keep_nonce(Nonce::TokenEndpoint, n);
            }
            let wants_nonce = status == 400 && v.get("error").and_then(Value::as_str) == Some("use_dpop_nonce");
            if t.dpop && wants_nonce && nonce.is_some() && attempt == 0 {
                attempt += 1;
                continue;
            }
            if !(200..300).contains(&status) || v.get("access_token").and_then(Value::as_str).is_none() {
                // What we sent that must never come back in a message: the code, the verifier,
                // the refresh token, an assertion, the client's secret, the tokens we hold.
                let mut sent: Vec<&str> = params
                    .iter()
                    .filter(|(k, _)| !matches!(*k, "grant_type" | "resource" | "redirect_uri" | "client_id" | "scope"))
                    .map(|(_, v)| v.as_str())
                    .collect();
                sent.extend(t.client_secret.as_deref());
                sent.extend(t.refresh_token.as_deref());
                sent.push(&t.access_token);
                return Err(TokenError::Refused {
                    failure: HttpFailure::OAuth(format!(
                        "the token endpoint {} answered {status}{}",
                        display_host(endpoint),
                        token_refusal_text(&v, &sent)
                    )),
                    code: oauth_error_code(&v).map(str::to_string),
                });
            }
            return Ok(v);
        }
    }

    /// One POST of a token request: its status, `DPoP-Nonce` header and JSON body.
    fn token_post(
        &self,
        t: &Token,
        mut params: Vec<(&str, String)>,
    ) -> Result<(u16, Option<String>, Value), TokenError> {
        let endpoint = &t.token_endpoint;
        let mut req = self.agent.post(endpoint).header("Accept", "application/json");
        if t.dpop {
            let proof = self
                .dpop_proof("POST", endpoint, self.nonce(Nonce::TokenEndpoint).as_deref(), None)
                .map_err(|f| TokenError::Refused { failure: f, code: None })?;
            req = req.header("DPoP", proof);
        }
        match (t.auth_method.as_str(), &t.client_secret) {
            ("client_secret_basic", Some(secret)) => {
                let cred =
                    base64_encode(format!("{}:{}", form_encode(&t.client_id), form_encode(secret)).as_bytes(), false);
                req = req.header("Authorization", format!("Basic {cred}"));
                // RFC 6749 lets Basic stand alone, but the authorization servers people run
                // (the Python SDK's, rmcp's) refuse a token request without `client_id`, and
                // every SDK client sends it: so do we.
                params.push(("client_id", t.client_id.clone()));
            }
            ("private_key_jwt", _) => {
                let assertion = self.client_assertion(t).map_err(|f| TokenError::Refused { failure: f, code: None })?;
                params.push(("client_id", t.client_id.clone()));
                params.push(("client_assertion_type", CLIENT_ASSERTION_JWT.to_string()));
                params.push(("client_assertion", assertion));
            }
            ("client_secret_post", Some(secret)) => {
                params.push(("client_id", t.client_id.clone()));
                params.push(("client_secret", secret.clone()));
            }
            // A workload's JWT-bearer grant may name no client at all.
            _ if t.client_id.is_empty() => {}
            _ => params.push(("client_id", t.client_id.clone())),
        }
        let resp = req
            .header("Content-Type", "application/x-www-form-urlencoded")
            .send(form(&params).as_bytes())
            .map_err(|e| {
                TokenError::Unreachable(HttpFailure::OAuth(format!(
                    "the token request to {} failed: {}",
                    display_host(endpoint),
                    oauth_io(&e)
                )))
            })?;
        let status = resp.status().as_u16();
        let nonce = resp.headers().get("dpop-nonce").and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok((status, nonce, json_body(resp)))
    }

    pub(super) fn exchange(&self, flow: &Flow, code: &str) -> Result<(), TokenError> {
        let params = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_string()),
            ("redirect_uri", flow.redirect_uri.clone()),
            ("code_verifier", flow.verifier.clone()),
            ("resource", flow.client.resource.clone()),
        ];
        let v = self.token_request(&flow.client, params)?;
        let token = flow.client.renewed(&v);
        log::info!("mcp: {}: signed in with {}", self.extension, flow.client.issuer);
        self.save(token);
        Ok(())
    }

    pub(super) fn refresh(&self, t: &Token) -> Result<Token, HttpFailure> {
        let Some(rt) = &t.refresh_token else {
            return Err(HttpFailure::OAuth("no refresh token".into()));
        };
        let params = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", rt.clone()),
            ("resource", t.resource.clone()),
        ];
        let v = match self.token_request(t, params) {
            Ok(v) => v,
            Err(TokenError::Refused { failure, code }) => {
                // The refresh token is spent or revoked: forget it so the next 401 signs in;
                // a client the server no longer knows is registered again then.
                self.forget(t);
                if code.as_deref() == Some("invalid_client") {
                    self.settings.store.put(&registration_key(&self.resource_id(), &t.issuer), None);
                }
                return Err(failure);
            }
            // Unreachable for now: keep the token and its refresh token for the next try.
            Err(TokenError::Unreachable(e)) => return Err(e),
        };
        let new = t.renewed(&v);
        log::info!("mcp: {}: refreshed the access token", self.extension);
        self.save(new.clone());
        Ok(new)
    }
}
