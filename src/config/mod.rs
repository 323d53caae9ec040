//! Rules from a YAML file, in the envoy-ratelimit style (feature `config`).
