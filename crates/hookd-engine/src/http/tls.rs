//! The TLS configuration every client of a sender shares.
//!
//! Certificates are verified against the platform's roots (and any extra roots the operator
//! trusts). Loading those roots reads and parses the system bundle, tens of millions of
//! instructions; so it is done once when the sender is built, and every client (each endpoint
//! origin's, and each one that replaces another at the end of the connection lifetime) uses
//! the same configuration.

use std::sync::Arc;

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls_platform_verifier::Verifier;

use super::BuildError;

/// Verifies against the platform's roots and `extra_roots` (PEM bundles); offers HTTP/1.1 by
/// ALPN, the only protocol deliveries speak.
pub(super) fn client_config(extra_roots: &[Vec<u8>]) -> Result<Arc<ClientConfig>, BuildError> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let extra = extra_roots
        .iter()
        .map(|pem| CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(BuildError::Roots)?;
    let verifier = Verifier::new_with_extra_roots(extra.into_iter().flatten(), provider.clone())
        .map_err(BuildError::Tls)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(BuildError::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
