// `sqlx::migrate!` embeds migrations/postgres/ at build time; a new file there must rebuild.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
