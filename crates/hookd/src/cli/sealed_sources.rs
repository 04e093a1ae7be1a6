//! Re-sealing ingest sources under the current master key, beside the endpoint keys (see
//! `master_key::reseal`): a source's provider secrets and token are sealed like endpoint keys,
//! so a source sealed under an older key must move before that key can be dropped.

use hookd_store::{Cursor, IngestSource, PageRequest, Store};
use hookd_vault::Keyring;

/// Sources read per page.
const PAGE: usize = 250;

/// Seals every source not sealed under the keyring's current key under it; how many. Fails on
/// a source sealed under a key the keyring does not hold, naming it.
pub async fn reseal(store: &dyn Store, keyring: &Keyring) -> anyhow::Result<usize> {
    let mut done = 0;
    let mut page = PageRequest {
        limit: PAGE,
        cursor: None,
    };
    loop {
        let sources = store.list_sources(&page).await?;
        for source in &sources.items {
            done += usize::from(reseal_one(store, keyring, source).await?);
        }
        match sources.items.last() {
            Some(last) if sources.has_more => {
                page.cursor = Some(Cursor::After(last.id.to_string()));
            }
            _ => return Ok(done),
        }
    }
}

/// Re-seals `source` if it is sealed under an older key; whether it did. A source changed
/// meanwhile was sealed by the API under the current key: nothing to do.
async fn reseal_one(
    store: &dyn Store,
    keyring: &Keyring,
    source: &IngestSource,
) -> anyhow::Result<bool> {
    if keyring.is_current(&source.sealed) {
        return Ok(false);
    }
    let id = source.id.as_str();
    let clear = keyring.unseal(id, &source.sealed).map_err(|e| {
        anyhow::anyhow!(
            "ingest source {id} cannot be opened: {e}. hookd holds master key(s) {}",
            keyring.ids().join(", ")
        )
    })?;
    let sealed = keyring.seal(id, &clear);
    Ok(store
        .replace_source_sealed(&source.id, &source.sealed, &sealed)
        .await?)
}
