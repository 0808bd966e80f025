//! `MIGRATOR` embeds the files of `migrations/` when this crate is built: a migration added
//! to the folder must rebuild it, which cargo does not know without being told.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
