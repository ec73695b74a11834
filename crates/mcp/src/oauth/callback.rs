//! The one-shot loopback listener the browser is redirected to (`state` checked, bounded
//! head, deadline), and the desktop opener.

use super::*;

/// Reads one HTTP request head (at most 16 KiB, all of it before `until`) and returns its
/// target.
pub(super) fn read_request_target(stream: &TcpStream, until: Instant) -> Option<String> {
    let mut reader = BufReader::new(std::io::Read::take(stream, 16 << 10));
    // Each read may wait only for what is left of the time.
    let time_left = || {
        let left = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).ok()
    };
    let mut line = String::new();
    time_left()?;
    reader.read_line(&mut line).ok()?; // wait: bounded by the read timeout set just above
    let mut parts = line.split_whitespace();
    let (is_get, target) = (parts.next()? == "GET", parts.next()?.to_string());
    // The header lines, up to the blank line or the end.
    loop {
        line.clear();
        time_left()?;
        // wait: bounded by the read timeout set just above
        if !matches!(reader.read_line(&mut line), Ok(n) if n > 0 && !line.trim().is_empty()) {
            break;
        }
    }
    is_get.then_some(target)
}

pub(super) fn respond(mut stream: TcpStream, status: u16, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>gosling sign-in</title><p>{}</p>",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// Opens `url` with the desktop's opener when there is a desktop (argv, never a shell).
pub fn open_in_browser(url: &str) {
    let cmd = if cfg!(target_os = "macos") {
        "open"
    } else if gosling_config::settings::has_display(&gosling_config::ProcessEnv) {
        "xdg-open"
    } else {
        return;
    };
    let spawned = std::process::Command::new(cmd)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reap it on a thread so no zombie is left behind.
        Ok(mut child) => {
            // wait: the opener (xdg-open and the like) returns at once
            let _ = std::thread::Builder::new().name("opener".into()).spawn(move || child.wait());
        }
        Err(e) => log::debug!("mcp: cannot run {cmd}: {e}"),
    }
}

impl Authorizer {
    /// Waits for the redirect with our `state`, exchanges the code, stores the token, then
    /// answers the browser.
    pub(super) fn await_callback(
        &self,
        listener: TcpListener,
        flow: &Flow,
        deadline: Instant,
    ) -> Result<(), SignInError> {
        let _ = listener.set_nonblocking(true);
        loop {
            // wait: the listener is non-blocking; the loop checks the deadline
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(SignInError::Failed(HttpFailure::OAuth(
                            "nobody finished signing in in time; run it again".into(),
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => {
                    return Err(SignInError::Failed(HttpFailure::OAuth(format!("the sign-in listener failed: {e}"))))
                }
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
            // The head must come whole within 10 s, and before the sign-in's deadline: a client
            // trickling a byte at a time cannot hold the listener past either.
            let Some(target) = read_request_target(&stream, deadline.min(Instant::now() + Duration::from_secs(10)))
            else {
                continue;
            };
            if !target.starts_with(CALLBACK_PATH) {
                respond(stream, 404, "Not found");
                continue;
            }
            let q = query_params(&target);
            let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if get("state").as_deref() != Some(flow.state.as_str()) {
                respond(stream, 400, "This sign-in link is stale or forged (state does not match); start again.");
                continue;
            }
            if let Some(err) = get("error") {
                respond(stream, 400, "Sign-in was refused; you can close this tab.");
                let code = known_error_code(&err).unwrap_or("an unrecognised error");
                return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                    "the authorization server refused the sign-in: {code}"
                ))));
            }
            // RFC 9207: the redirect names the authorization server that sent it, compared
            // character for character with the issuer we sent the person to (no URL
            // normalization, §2.4); a mix-up attack answers with another server's code.
            match get("iss") {
                Some(iss) if iss != flow.issuer => {
                    respond(
                        stream,
                        400,
                        "Sign-in was answered by another authorization server; you can close this tab.",
                    );
                    return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                        "the sign-in redirect names the authorization server {} but the sign-in went to {}; refusing it (a mix-up attack, or a misconfigured authorization server)",
                        display_host(&iss),
                        flow.issuer
                    ))));
                }
                None if flow.iss_required => {
                    respond(
                        stream,
                        400,
                        "The redirect lacks the issuer its authorization server promised; you can close this tab.",
                    );
                    return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                        "the authorization server {} promises an iss parameter on its redirect but sent none; refusing the sign-in (RFC 9207)",
                        flow.issuer
                    ))));
                }
                _ => {}
            }
            let Some(code) = get("code") else {
                respond(stream, 400, "The redirect carries no code.");
                continue;
            };
            return match self.exchange(flow, &code) {
                Ok(()) => {
                    respond(stream, 200, "Signed in. You can close this tab and return to gosling.");
                    Ok(())
                }
                Err(e) => {
                    let client_refused =
                        matches!(&e, TokenError::Refused { code: Some(c), .. } if c == "invalid_client");
                    let f = e.into_failure();
                    respond(stream, 500, &format!("Signing in failed: {}", Show(&f)));
                    match f {
                        HttpFailure::OAuth(why) if client_refused => Err(SignInError::ClientRefused(why)),
                        f => Err(SignInError::Failed(f)),
                    }
                }
            };
        }
    }
}
