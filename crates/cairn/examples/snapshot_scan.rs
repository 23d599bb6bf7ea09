//! A snapshot keeps a consistent view while writes go on: scan it forwards and backwards, by
//! range and by prefix, and compare with the latest state.
//!
//! `cargo run -p cairn --example snapshot_scan`

fn keys(
    pairs: impl Iterator<Item = cairn::Result<(Vec<u8>, Vec<u8>)>>,
) -> Result<Vec<String>, cairn::Error> {
    pairs
        .map(|pair| pair.map(|(key, _)| String::from_utf8_lossy(&key).into_owned()))
        .collect()
}

fn main() -> Result<(), cairn::Error> {
    let db = cairn::Db::open("/scan", cairn::Options::in_memory())?;
    for user in ["ada", "alan", "barbara", "grace"] {
        db.put(format!("user:{user}"), "active")?;
    }
    let snapshot = db.snapshot();
    db.delete("user:alan")?;
    db.put("user:edsger", "active")?;

    println!(
        "at the snapshot: {:?}",
        keys(db.prefix_at(&snapshot, "user:")?)?
    );
    println!("latest:          {:?}", keys(db.prefix("user:")?)?);
    let descending = keys(db.range_at(&snapshot, "user:a".."user:c")?)?;
    println!(
        "a..c, reversed:  {:?}",
        descending.iter().rev().collect::<Vec<_>>()
    );
    let newest_first: Vec<String> = keys(db.prefix("user:")?)?.into_iter().rev().collect();
    assert_eq!(newest_first.first().map(String::as_str), Some("user:grace"));
    assert_eq!(keys(db.range_at(&snapshot, "user:".."user;")?)?.len(), 4);
    Ok(())
}
