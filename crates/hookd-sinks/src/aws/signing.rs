//! SigV4 for one request, by `aws-sigv4` (the AWS SDKs' own signer), at the time of hookd's
//! clock rather than the system's, so the signing time is the one the engine decides.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use hookd_core::Timestamp;

use super::client::Call;
use crate::SinkError;

/// The headers that sign `call` to `service` in `region` with `credentials` at `at`
/// (`authorization`, `x-amz-date`, and for S3 `x-amz-content-sha256`).
pub(super) fn headers(
    call: &Call,
    service: &str,
    region: &str,
    credentials: &Credentials,
    at: Timestamp,
) -> Result<Vec<(String, String)>, SinkError> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(system_time(at))
        .settings(settings(service))
        .build()
        .map_err(signing_error)?;
    let signable = SignableRequest::new(
        call.method.as_str(),
        call.url.as_str(),
        call.headers
            .iter()
            .map(|(name, value)| (*name, value.as_str())),
        SignableBody::Bytes(&call.body),
    )
    .map_err(signing_error)?;
    let (instructions, _) = sign(signable, &params.into())
        .map_err(signing_error)?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

fn signing_error(error: impl std::fmt::Display) -> SinkError {
    SinkError::Config(format!("signing: {error}"))
}

/// S3 signs its paths as sent (no normalising, no second encoding) and the payload's hash as a
/// header; the other services use the defaults.
fn settings(service: &str) -> SigningSettings {
    let mut settings = SigningSettings::default();
    if service == "s3" {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    }
    settings
}

/// `at` as the signer's clock type.
fn system_time(at: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(at.as_millis()).unwrap_or(0))
}
