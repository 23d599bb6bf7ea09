//! Eight threads increment one counter through `Db::increment`, an atomic read-modify-write
//! that takes no lock: none of the 8000 increments is lost.
//!
//! `cargo run -p cairn --example concurrent_counter`

use std::sync::Arc;

fn main() -> Result<(), cairn::Error> {
    let db = Arc::new(cairn::Db::open("/counter", cairn::Options::in_memory())?);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> Result<(), cairn::Error> {
                for _ in 0..1000 {
                    db.increment("hits", 1)?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread
            .join()
            .map_err(|_| cairn::Error::Internal("a thread panicked".into()))??;
    }
    let hits = db.get("hits")?.unwrap_or_default();
    println!("hits = {}", String::from_utf8_lossy(&hits));
    assert_eq!(hits, b"8000");
    Ok(())
}
