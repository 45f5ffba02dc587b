//! Integration tests: one binary (STYLE.md).
