//! The key table's storage: counts by key, growth, clearing, memory, and
//! the peers' parts kept aside.

use super::*;

#[test]
fn slots_are_half_a_cache_line() {
    assert_eq!(std::mem::size_of::<CountSlot>(), 32);
    assert_eq!(std::mem::align_of::<CountSlot>(), 32);
}

/// Takes `n` permits of `key`, as a window would.
fn take(t: &mut KeyTable, key: &str, n: u32) {
    for _ in 0..n {
        let big = crate::core::limit::Quota::new(1_000_000, 1.0).unwrap();
        assert!(t.get_or_insert(key).take(big, 0, 1, crate::core::Share::ALONE, 0).is_go());
    }
}

fn own(t: &mut KeyTable, key: &str) -> Option<u32> {
    t.get_mut(key).map(|tally| tally.get().own())
}

#[test]
fn counts_keys_short_and_long_until_cleared() {
    let mut t = KeyTable::new();
    let long = "x".repeat(INLINE + 1);
    for key in ["", "a", "b", &"y".repeat(INLINE), &long] {
        assert!(!t.contains_key(key));
        take(&mut t, key, 2);
        take(&mut t, key, 1);
        assert_eq!(own(&mut t, key), Some(3), "{key:?}");
    }
    assert_eq!(t.len(), 5);
    t.clear();
    assert_eq!(t.len(), 0);
    assert!(!t.contains_key("a") && !t.contains_key(&long));
    assert_eq!(t.get_or_insert("a").get().own(), 0, "a cleared key starts again from 0");
    assert_eq!(t.iter().count(), 1);
}

#[test]
fn growing_keeps_every_count() {
    let mut t = KeyTable::new();
    for i in 0..10_000u32 {
        t.insert(&i.to_string(), Tally::reserved(i));
    }
    assert_eq!(t.len(), 10_000);
    assert!(t.slot_bytes() <= 32 * 32_768, "at most four slots per key");
    for i in 0..10_000u32 {
        assert_eq!(own(&mut t, &i.to_string()), Some(i));
    }
    assert_eq!(t.iter().map(|(_, tally)| u64::from(tally.own())).sum::<u64>(), 49_995_000);
    assert!(!t.contains_key("10000"));
}

#[test]
fn clearing_many_times_never_revives_a_key() {
    let mut t = KeyTable::new();
    take(&mut t, "k", 7);
    t.generation = GENERATIONS - 1; // the next clear wraps around
    take(&mut t, "k", 7);
    t.clear();
    assert_eq!(t.generation, 1);
    assert!(!t.contains_key("k"));
    for _ in 0..3 {
        t.clear();
        assert!(!t.contains_key("k"));
    }
}

#[test]
fn a_peers_part_follows_its_key_through_growth_and_never_outlives_its_slot() {
    let mut t = KeyTable::new();
    take(&mut t, "alone", 1);
    assert!(t.aside.is_empty(), "a locker on its own keeps nothing aside");
    assert!(t.get_or_insert("peered").merge(1, 5));
    for i in 0..1_000u32 {
        take(&mut t, &i.to_string(), 1);
    }
    let peered = t.get("peered").expect("live");
    assert_eq!((peered.heard(), peered.total()), (5, 5), "moved with its key as the table grew");
    assert_eq!(t.get("alone").expect("live").heard(), 0);
    let held: Vec<_> = t.iter().filter(|(_, tally)| tally.heard() > 0).map(|(k, _)| k).collect();
    assert_eq!(held, ["peered"]);
    t.clear();
    // Whichever keys land where "peered" was, none inherits its part.
    for i in 0..1_000u32 {
        let key = format!("k{i}");
        assert_eq!(t.get_or_insert(&key).get().heard(), 0, "{key}");
    }
    assert_eq!(t.get_or_insert("peered").get().total(), 0);
}

#[test]
fn a_whole_tally_put_in_keeps_its_count_and_its_peers_part() {
    let mut t = KeyTable::new();
    let mut whole = Tally::reserved(3);
    assert!(whole.get_mut().merge(2, 4));
    t.insert("short", whole.clone());
    t.insert(&"z".repeat(INLINE + 1), whole);
    for (key, tally) in t.iter() {
        assert_eq!((tally.own(), tally.heard(), tally.touched()), (3, 4, true), "{key}");
    }
    t.insert("short", Tally::reserved(0));
    let short = t.get("short").expect("live");
    assert_eq!((short.own(), short.heard(), short.touched()), (0, 0, false), "replaced whole");
}

/// Fills one slot with `n` short and `n` long keys, then ends it.
fn slot_of(t: &mut KeyTable, n: usize) {
    for i in 0..n {
        t.get_or_insert(&i.to_string());
        t.get_or_insert(&format!("{i:0>36}"));
    }
    t.clear();
}

#[test]
fn a_steady_load_keeps_its_memory_and_a_flood_gives_it_back_at_the_next_slot_change() {
    let mut t = KeyTable::new();
    for _ in 0..3 {
        slot_of(&mut t, 1000);
    }
    let steady = t.heap_bytes();
    assert!(t.slot_bytes() > 0 && steady > t.slot_bytes(), "two full slots in a row keep the table and the map");
    slot_of(&mut t, 1000);
    assert_eq!(t.heap_bytes(), steady, "and nothing is reallocated");
    slot_of(&mut t, 1);
    assert_eq!(t.heap_bytes(), 0, "the first nearly empty slot gives both back");
    assert!(t.is_idle());
    // A flood of one slot after a quiet one: back at its own slot change.
    slot_of(&mut t, 100_000);
    assert_eq!(t.heap_bytes(), 0, "a one-slot flood keeps nothing");
    assert!(t.is_idle());
}
