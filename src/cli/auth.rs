//! `gosling auth NAME`: sign in to a configured Streamable HTTP extension from a terminal.
//!
//! Prints the authorization URL (and opens it with the desktop's opener when there is a
//! desktop), waits for the browser's redirect to a one-shot listener on 127.0.0.1, and stores
//! the tokens in the secrets store, where the server finds them. Over SSH, forward the
//! printed redirect port (`ssh -L PORT:127.0.0.1:PORT`) or open the URL on the remote host.
//! Exit 0 when signed in (or when the server needs no sign-in), 1 with the error, 2 for usage.

use crate::config::{config_dir, ProcessEnv};
use crate::extensions::config::ExtensionStore;
use crate::extensions::config::{name_to_key, Kind};
use crate::extensions::runtime::{oauth_settings, SecretsTokens};
use crate::mcp::oauth::{Authorizer, SignIn};
use crate::store::config_store::ConfigStore;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage: gosling auth [--sign-in browser|follow] NAME";

pub fn main(args: &[String]) -> ExitCode {
    let mut sign_in = SignIn::Browser { wait: super::probe::BROWSER_WAIT };
    let mut name = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--sign-in" => {
                sign_in = match rest.next().map(String::as_str) {
                    Some("browser") => SignIn::Browser { wait: super::probe::BROWSER_WAIT },
                    Some("follow") => SignIn::Follow,
                    _ => return usage("--sign-in takes browser or follow"),
                };
            }
            "-h" | "--help" => {
                println!("{USAGE}\nsigns in to a configured streamable_http extension and stores its tokens");
                return ExitCode::SUCCESS;
            }
            a if a.starts_with('-') => return usage(&format!("unknown option {a:?}")),
            a if name.is_none() => name = Some(a.to_string()),
            a => return usage(&format!("unexpected argument {a:?}")),
        }
    }
    let Some(name) = name else { return usage("name the extension to sign in to") };
    match run(&name, sign_in) {
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
    Store(crate::store::atomic::Error),
    NoSuchExtension { name: String, config: std::path::PathBuf },
    NotHttp { name: String, kind: &'static str },
    OwnAuthorization(String),
    Settings(crate::extensions::runtime::ActivateError),
    SignIn(crate::mcp::error::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(e) => write!(f, "{e}"),
            Error::NoSuchExtension { name, config } => write!(
                f,
                "no extension {name:?} in {}; add it first (gosling install, or POST /config/extensions)",
                config.display()
            ),
            Error::NotHttp { name, kind } => {
                write!(f, "extension {name:?} has type `{kind}`; only streamable_http extensions sign in with OAuth")
            }
            Error::OwnAuthorization(name) => write!(
                f,
                "extension {name:?} sets its own Authorization header; remove it from the extension's headers to sign in with OAuth"
            ),
            Error::Settings(e) => write!(f, "{e}"),
            Error::SignIn(e) => write!(f, "{e}"),
        }
    }
}

fn run(name: &str, sign_in: SignIn) -> Result<String, Error> {
    let dir = config_dir(&ProcessEnv);
    let store = Arc::new(ConfigStore::open(&dir).map_err(Error::Store)?);
    let key = name_to_key(name);
    let entry = store
        .extension(&key)
        .map_err(Error::Store)?
        .ok_or_else(|| Error::NoSuchExtension { name: name.to_string(), config: store.config_path().to_path_buf() })?;
    let Kind::StreamableHttp { uri, headers, .. } = &entry.config.kind else {
        return Err(Error::NotHttp { name: name.to_string(), kind: entry.config.type_name() });
    };
    if headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
        return Err(Error::OwnAuthorization(name.to_string()));
    }
    let secret = |k: &str| store.get_secret(k).ok().flatten().or_else(|| std::env::var(k).ok());
    let settings = oauth_settings(&entry.config, &secret, Arc::new(SecretsTokens(store.clone())), sign_in)
        .map_err(Error::Settings)?;
    let timeout = Duration::from_secs(entry.config.timeout_secs().max(1));
    let auth = Arc::new(Authorizer::new(uri, entry.config.name(), timeout, settings));
    let signed_in = auth.sign_in_now().map_err(|failure| {
        Error::SignIn(crate::mcp::error::Error::Http {
            extension: entry.config.name().to_string(),
            url: uri.clone(),
            failure,
        })
    })?;
    Ok(if signed_in {
        format!("signed in to {name}; the tokens are stored in {}", dir.join("secrets.json").display())
    } else {
        format!("{name} ({uri}) did not ask for a sign-in; nothing to do")
    })
}
