//! The [`crate::source::ChunkSource`] implementations: a mapped local directory, object storage
//! and HTTP, and a disk-cache decorator.

#[cfg(feature = "remote")]
pub(crate) mod cached;
pub(crate) mod local;
#[cfg(feature = "remote")]
pub(crate) mod object;
