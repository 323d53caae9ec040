//! Shaping: streams, readers and writers held to a rate.
