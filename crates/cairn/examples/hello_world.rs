//! Open a database in a directory, write, read, delete, close.
//!
//! `cargo run -p cairn --example hello_world [DIRECTORY]`

fn main() -> Result<(), cairn::Error> {
    let directory = std::env::args_os().nth(1).map_or_else(
        || std::env::temp_dir().join("cairn-hello-world"),
        std::path::PathBuf::from,
    );
    let db = cairn::Db::open(&directory, cairn::Options::default())?;
    db.put("greeting", "hello, world")?;
    let value = db.get("greeting")?.unwrap_or_default();
    println!("greeting = {}", String::from_utf8_lossy(&value));
    db.delete("greeting")?;
    assert_eq!(db.get("greeting")?, None);
    // Close reports errors that dropping the handle would swallow.
    db.close()?;
    println!("database in {}", directory.display());
    Ok(())
}
