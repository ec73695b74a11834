//! `gosling auth NAME|URL`: sign in to a Streamable HTTP extension from a terminal — one in
//! the config by name, or any server by its URL (the tokens are then found by every extension
//! with that `uri`). `--forget` forgets the server's tokens and client registration instead.
//!
//! Prints the authorization URL (and opens it with the desktop's opener when there is a
//! desktop), waits for the browser's redirect to a one-shot listener on 127.0.0.1, and stores
//! the tokens in the secrets store, where the server finds them. Over SSH, forward the
//! printed redirect port (`ssh -L PORT:127.0.0.1:PORT`) or open the URL on the remote host.
//! Exit 0 when signed in (or when the server needs no sign-in), 1 with the error, 2 for usage.

use gosling_extensions::config::{name_to_key, Kind};
use gosling_extensions::config::{ExtensionConfig, ExtensionStore};
use gosling_extensions::runtime::{oauth_authorizer, SecretsTokens};
use gosling_mcp::oauth::SignIn;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage: gosling auth [--sign-in browser|follow] [--forget] NAME|URL";

pub fn main(open: &crate::Opener, args: &[String]) -> ExitCode {
    let mut sign_in = super::probe::browser();
    let mut name = None;
    let mut forget = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--sign-in" => {
                sign_in = match rest.next().map(String::as_str) {
                    Some("browser") => super::probe::browser(),
                    Some("follow") => SignIn::Follow,
                    _ => return usage("--sign-in takes browser or follow"),
                };
            }
            "--forget" => forget = true,
            "-h" | "--help" => {
                println!("{USAGE}\nsigns in to a streamable_http extension (configured, or by URL) and stores its tokens;\n--forget forgets its tokens and client registration");
                return ExitCode::SUCCESS;
            }
            a if a.starts_with('-') => return usage(&format!("unknown option {a:?}")),
            a if name.is_none() => name = Some(a.to_string()),
            a => return usage(&format!("unexpected argument {a:?}")),
        }
    }
    let Some(name) = name else { return usage("name the extension (or give the URL) to sign in to") };
    match run(open, &name, sign_in, forget) {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gosling auth: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(e: &str) -> ExitCode {
    eprintln!("gosling auth: {e}; {USAGE}");
    ExitCode::from(2)
}

/// Why `gosling auth NAME` did not sign in; each says what to do.
#[derive(Debug)]
enum Error {
    Store(gosling_store::atomic::Error),
    NoSuchExtension {
        name: String,
        config: std::path::PathBuf,
    },
    NotHttp {
        name: String,
        kind: &'static str,
    },
    OwnAuthorization(String),
    /// Reading the extension, or its sign-in settings.
    Extensions(gosling_extensions::Error),
    SignIn(gosling_mcp::error::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(e) => write!(f, "{e}"),
            Error::NoSuchExtension { name, config } => write!(
                f,
                "no extension {name:?} in {}; add it first (gosling install, or POST /config/extensions), or give the server's URL",
                config.display()
            ),
            Error::NotHttp { name, kind } => {
                write!(f, "extension {name:?} has type `{kind}`; only streamable_http extensions sign in with OAuth")
            }
            Error::OwnAuthorization(name) => write!(
                f,
                "extension {name:?} sets its own Authorization header; remove it from the extension's headers to sign in with OAuth"
            ),
            Error::Extensions(e) => write!(f, "{e}"),
            Error::SignIn(e) => write!(f, "{e}"),
        }
    }
}

fn run(open: &crate::Opener, name: &str, sign_in: SignIn, forget: bool) -> Result<String, Error> {
    let store = Arc::new(open.store().map_err(Error::Store)?);
    let key = name_to_key(name);
    let config = match store.extension(&key).map_err(Error::Extensions)? {
        Some(entry) => entry.config,
        // A server not (yet) in the config: by its URL, with no OAuth settings of its own.
        None if name.starts_with("http://") || name.starts_with("https://") => {
            ExtensionConfig::from_value(serde_json::json!({"type": "streamable_http", "name": "remote", "uri": name}))
                .map_err(|e| Error::Extensions(gosling_extensions::Error::invalid_config(e)))?
        }
        None => {
            return Err(Error::NoSuchExtension { name: name.to_string(), config: store.config_path().to_path_buf() })
        }
    };
    let Kind::StreamableHttp { uri, headers, .. } = &config.kind else {
        return Err(Error::NotHttp { name: name.to_string(), kind: config.type_name() });
    };
    if headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
        return Err(Error::OwnAuthorization(name.to_string()));
    }
    // The rules of an activation: the secrets store only (never this process's environment),
    // never one of gosling's own secrets, and only a secret mapped to this extension.
    let secret = |k: &str| {
        gosling_extensions::consent::may_read(&config, k).then(|| store.get_secret(k).ok().flatten()).flatten()
    };
    let timeout = Duration::from_secs(config.timeout_secs().max(1));
    let auth = oauth_authorizer(&config, uri, timeout, &secret, Arc::new(SecretsTokens(store.clone())), sign_in)
        .map_err(Error::Extensions)?;
    let auth = Arc::new(auth);
    if forget {
        let n = auth.forget_all();
        return Ok(if n == 0 {
            format!("nothing was stored for {name} ({uri})")
        } else {
            format!(
                "forgot the sign-in of {name} ({uri}): {n} stored record(s) removed; the next request signs in again"
            )
        });
    }
    let signed_in = auth.sign_in_now().map_err(|failure| {
        Error::SignIn(gosling_mcp::error::Error::Http {
            extension: config.name().to_string(),
            url: uri.clone(),
            failure,
        })
    })?;
    Ok(if signed_in {
        format!("signed in to {name}; the tokens are stored in {}", open.config_dir().join("secrets.json").display())
    } else {
        format!("{name} ({uri}) did not ask for a sign-in; nothing to do")
    })
}
