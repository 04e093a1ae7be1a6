//! The e-mail notice options of `hookd serve`, turned into the notices' configuration.

use hookd_engine::NoticeConfig;

#[derive(Debug, clap::Args)]
pub struct NoticeOptions {
    /// SMTP server for e-mail notices to customers (an endpoint disabled by hookd, a message
    /// given up on), sent to the address in the endpoint's or application's metadata
    /// `notifyEmail`: `smtps://user:password@host` (TLS, port 465),
    /// `smtp://user:password@host?tls=required` (STARTTLS, 587), or `smtp://host:25` (plain,
    /// for a relay nearby; no password). Without it, no e-mail is sent.
    #[arg(long, env = "HOOKD_SMTP_URL", hide_env_values = true, value_hint = clap::ValueHint::Url)]
    smtp_url: Option<String>,
    /// The notices' sender: `notices@example.com` or `Example <notices@example.com>`.
    #[arg(long, env = "HOOKD_SMTP_FROM")]
    smtp_from: Option<String>,
    /// Most notices one address gets in any hour; past it they are skipped (and counted in
    /// `hookd_notices_total{result="rate_limited"}`).
    #[arg(long, env = "HOOKD_NOTICES_PER_HOUR", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    notices_per_hour: u64,
}

impl NoticeOptions {
    /// The notices' configuration, `None` when no SMTP server is given, or what is missing.
    pub fn config(&self) -> anyhow::Result<Option<NoticeConfig>> {
        match (&self.smtp_url, &self.smtp_from) {
            (None, None) => Ok(None),
            (Some(smtp_url), Some(from)) => Ok(Some(NoticeConfig {
                smtp_url: smtp_url.clone(),
                from: from.clone(),
                per_address_per_hour: usize::try_from(self.notices_per_hour).unwrap_or(usize::MAX),
            })),
            (Some(_), None) => anyhow::bail!("--smtp-url needs --smtp-from, the notices' sender"),
            (None, Some(_)) => anyhow::bail!("--smtp-from needs --smtp-url"),
        }
    }
}
