//! End-to-end test support for fedvol.
