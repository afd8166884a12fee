//! fedvol coordinator library.
