//! Unit tests of `inline_keys`: against `HashMap` as the model, through
//! growth, removal with wrap-around and shrinking.

use std::collections::HashMap;

use super::*;

#[test]
fn keys_inline_and_long_are_found_changed_and_listed() {
    let mut m = InlineKeys::<u64>::new();
    let long = "a key longer than twenty-three bytes";
    for (i, k) in ["", "a", "abcdefghijklmnopqrstuvw", long].iter().enumerate() {
        assert_eq!(m.get(k), None);
        *m.get_or_insert(k) += i as u64 + 1;
    }
    assert_eq!(m.len(), 4);
    assert_eq!((m.get(""), m.get("abcdefghijklmnopqrstuvw"), m.get(long)), (Some(&1), Some(&3), Some(&4)));
    *m.get_mut("a").unwrap() = 20;
    let mut all: Vec<_> = m.iter().map(|(k, v)| (k.to_owned(), *v)).collect();
    all.sort();
    assert_eq!(all[1], ("a".to_owned(), 20));
    assert!(m.contains_key(long) && !m.contains_key("b"));
    assert_eq!(std::mem::size_of::<Slot<u64>>(), 32, "two slots to a cache line");
}

#[test]
fn retain_removes_what_it_is_told_keeps_the_rest_reachable_and_gives_memory_back() {
    let mut m = InlineKeys::<u64>::new();
    for i in 0..10_000u64 {
        m.insert(&format!("k{i}"), i);
    }
    let full = m.heap_bytes();
    m.retain(|_, v| *v % 100 == 0);
    assert_eq!(m.len(), 100);
    assert!((0..10_000u64).all(|i| m.get(&format!("k{i}")) == (i % 100 == 0).then_some(&i)));
    assert!(m.heap_bytes() * 8 <= full, "a flood's memory comes back: {} of {full}", m.heap_bytes());
    m.retain(|_, _| false);
    assert!(m.is_empty() && m.iter().next().is_none());
    assert_eq!(m.heap_bytes(), 0, "an empty map holds nothing");
    m.insert("again", 1);
    assert_eq!(m.get("again"), Some(&1));
}

proptest::proptest! {
    /// Any mix of inserts, changes and removals leaves the map holding
    /// exactly what a `HashMap` holds; few keys in a small table make long
    /// probe runs that wrap round its end.
    #[test]
    fn it_holds_what_a_hash_map_holds(ops in proptest::collection::vec((0u8..4, 0u16..48, 0u64..5), 1..400)) {
        let mut m = InlineKeys::<u64>::new();
        let mut model = HashMap::new();
        for (op, key, value) in ops {
            let key = if key < 40 { format!("{key}") } else { format!("{key} is a long key past the inline bytes") };
            match op {
                0 | 1 => {
                    m.insert(&key, value);
                    model.insert(key, value);
                }
                2 => {
                    if let Some(v) = m.get_mut(&key) {
                        *v += 1;
                    }
                    if let Some(v) = model.get_mut(&key) {
                        *v += 1;
                    }
                }
                _ => {
                    m.retain(|_, v| *v != value);
                    model.retain(|_, v| *v != value);
                }
            }
            proptest::prop_assert_eq!(m.len(), model.len());
        }
        for (k, v) in &model {
            proptest::prop_assert_eq!(m.get(k), Some(v));
        }
        let listed: HashMap<String, u64> = m.iter().map(|(k, v)| (k.to_owned(), *v)).collect();
        proptest::prop_assert_eq!(listed, model);
    }
}
