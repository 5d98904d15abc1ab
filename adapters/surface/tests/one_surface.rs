//! The two forms are one source; the only places they may differ are marked
//! `#[only_async]` / `#[only_blocking]`. This check keeps that list short and
//! deliberate: a trait impl that exists in one call form only (`Future` for a watch,
//! `Iterator` for event handles), and `lead`, whose work is a future in one form and a
//! closure on the caller's thread in the other. Any other item marked so fails here,
//! so a new method cannot exist in one adapter and not the other by accident.

use std::fs;

#[test]
fn the_forms_differ_only_where_marked_and_allowed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut marked = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim();
            if t != "#[only_async]" && t != "#[only_blocking]" {
                continue;
            }
            // The item's first line after the attribute and its doc comments.
            let item = lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("///") && !l.starts_with("#["))
                .unwrap_or("");
            marked.push((
                path.file_name().unwrap().to_string_lossy().into_owned(),
                t.to_string(),
                item.to_string(),
            ));
        }
    }
    let allowed = |item: &String| {
        item.starts_with("impl std::future::Future for ")
            || (item.starts_with("impl") && item.contains(" Iterator for "))
            || item.starts_with("pub async fn lead<")
            || item.starts_with("pub fn lead(")
    };
    let strays: Vec<_> = marked
        .iter()
        .filter(|(_, _, item)| !allowed(item))
        .collect();
    assert!(
        strays.is_empty(),
        "items in one form only, not on the allowed list: {strays:?}"
    );
    // The allowed ones are there (the check is not vacuous).
    assert!(marked.iter().any(|(_, _, i)| i.contains("Iterator for")));
    assert!(marked
        .iter()
        .any(|(_, _, i)| i.starts_with("pub async fn lead<")));
}
