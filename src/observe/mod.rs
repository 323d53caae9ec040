//! Observability: events, metrics and tracing.
