//! System adaptive protection (Sentinel's system rule).
