use crate::support::{gosling, TempDir};

#[test]
fn help_and_version() {
    let home = TempDir::new("cli");
    let out = gosling(&home).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("gosling agent"));
    let out = gosling(&home).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("gosling {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_command_is_usage_error() {
    let home = TempDir::new("cli");
    let out = gosling(&home).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command \"frobnicate\""));
}
