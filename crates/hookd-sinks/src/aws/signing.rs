//! SigV4 for one request, by `aws-sigv4` (the AWS SDKs' own signer), at the time of hookd's
//! clock rather than the system's, so the signing time is the one the engine decides.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningParams,
    SigningSettings, UriPathNormalizationMode, sign,
};
use hookd_core::Timestamp;

use super::client::Call;
use crate::SinkError;

/// The headers that sign `call` (`authorization`, `x-amz-date`, and for S3
/// `x-amz-content-sha256`).
pub(super) fn headers<'a>(
    call: &Call,
    params: impl Into<SigningParams<'a>>,
) -> Result<Vec<(String, String)>, SinkError> {
    let signable = SignableRequest::new(
        call.method.as_str(),
        call.url.as_str(),
        call.headers
            .iter()
            .map(|(name, value)| (*name, value.as_str())),
        SignableBody::Bytes(&call.body),
    )
    .map_err(|error| SinkError::Config(format!("signing: {error}")))?;
    let (instructions, _) = sign(signable, &params.into())
        .map_err(|error| SinkError::Config(format!("signing: {error}")))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

/// S3 signs its paths as sent (no normalising, no second encoding) and the payload's hash as a
/// header; the other services use the defaults.
pub(super) fn settings(service: &str) -> SigningSettings {
    let mut settings = SigningSettings::default();
    if service == "s3" {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    }
    settings
}

/// `at` as the signer's clock type.
pub(super) fn system_time(at: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(at.as_millis()).unwrap_or(0))
}
