//! The client layer: waits for permits and backs off when the server says so.
