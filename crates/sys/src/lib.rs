//! The few OS calls std does not offer: signals and parent-death tracking for children, the
//! file descriptor limit, non-blocking pipes and `poll`, non-dumpability, the child subreaper
//! and its orphans, `openat2`-style path resolution that never leaves a directory, and the
//! kernel's confinement of a child (namespaces, limits, Landlock: `sandbox`).
//!
//! This is the only module allowed `unsafe`; each block is one libc call with its
//! arguments checked above it. Unix only, like the rest of the process handling.
#![allow(unsafe_code)]
//!
//! The root declares the modules and re-exports their items at the crate's top level.

mod beneath;
mod cgroup;
mod children;
mod fd;
mod sandbox;
mod shutdown;
mod this_process;
mod watch;

pub use beneath::{mkdirs_beneath, open_beneath, remove_tree_at, unlink_beneath};
pub use cgroup::{pids_cgroup_base, PidsCgroup};
pub use children::{
    become_subreaper, descendants, end_orphans, environ_has, exited_unreaped, forget_child, kill_group, orphans,
    processes, spawn_contained, spawn_tied, terminate_group, Orphan,
};
pub use fd::{poll_fd, poll_fds, raise_fd_limit, set_nonblocking, shutdown_write, Ready};
pub use sandbox::{probe, spawn_confined, Confined, Confinement, Limits, Network, Probe};
pub use shutdown::{install_shutdown_handler, shutdown_requested, wait_shutdown};
pub use this_process::{euid, make_non_dumpable, owner_alive, owner_tag, start_time};
pub use watch::{DirChanges, DirWatch};
