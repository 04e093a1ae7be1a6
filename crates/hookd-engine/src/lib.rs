pub mod http;
pub mod ssrf;
