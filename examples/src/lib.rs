//! Example programs for Volt; see `examples/`.
