//! The error type of the layer's service and body, in a module of its own that imports
//! nothing, so every part of the crate can name it without importing the layer.

/// The error type of the layer's service and body (tonic reads a [`tonic::Status`]
/// out of it, including the timeout details).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
