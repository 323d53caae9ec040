//! The server layer: answers 429 with rate-limit headers.
