//! Kueue's flavor assignment, reproduced as a pure function.
