//! The trust policy through the real binary (issue 13 §2, §3): launchers run registry packages
//! only, no interpreter runs inline code, containers stay in their image, code-loading
//! environment variables are refused, the same decision on every path.
