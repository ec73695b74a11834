//! The one integration test binary: every test runs the real `gosling` binary.

mod support;

// Command line: --help, --version, unknown commands.
mod cli;

// LLM providers against a scripted fake LLM and llmock.
mod fake_llm;
mod llm;
mod llmock;
