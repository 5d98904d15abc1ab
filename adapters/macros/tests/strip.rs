//! `#[blocking]` removes `.await` in macro arguments too (`assert_eq!(f().await, x)`
//! in a scenario written once): they are tokens, not parsed expressions.

use zk_recipes_macros::blocking;

/// An `async fn` of the async form, already blocking here.
fn answer(x: u32) -> u32 {
    x
}

#[blocking]
async fn awaits_in_macros() -> usize {
    assert_eq!(answer(1).await, 1);
    let v: Vec<u32> = vec![answer(2).await, answer(3).await].into_iter().collect();
    assert!(matches!(answer(4).await, 4), "{}", answer(5).await);
    format!("{}{}", answer(6).await, (answer(7).await)).len() + v.len()
}

#[test]
fn awaits_in_macro_arguments_are_removed() {
    assert_eq!(awaits_in_macros(), 4);
}
