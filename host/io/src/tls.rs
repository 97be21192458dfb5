//! TLS for every HTTP client the host builds (object stores, plugin downloads, OCI registries):
//! rustls with the *ring* crypto provider, installed once per process before the first client.
//! reqwest is built without a provider of its own (`rustls-no-provider`) so the host does not
//! compile aws-lc-sys, a C library that takes minutes to build.

use std::sync::Once;

/// Installs ring as rustls's process-wide crypto provider. Idempotent; a provider installed
/// earlier by an embedding program is kept.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means a provider is already installed, which is what we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_provider_is_installed_and_a_second_call_is_harmless() {
        super::install_crypto_provider();
        super::install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
