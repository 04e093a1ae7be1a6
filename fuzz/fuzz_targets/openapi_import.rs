//! An OpenAPI import's reading of `specRaw` must never panic or overflow the stack, and what it
//! reads must stay within its bounds: text (JSON or YAML, aliases and `$ref`s included) becomes
//! a value that nests no deeper than JSON can be read back at, with every `$ref` of the
//! document resolved within the import's budget.
#![no_main]

use hookd_core::openapi::{self, RefBudget};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(document) = openapi::parse(text) else {
        return;
    };
    let written = serde_json::to_string(&document).expect("a JSON value writes");
    serde_json::from_str::<serde_json::Value>(&written).expect("what was read reads back");
    let mut budget = RefBudget::default();
    let _ = openapi::resolve(&document, &document, &mut budget);
});
