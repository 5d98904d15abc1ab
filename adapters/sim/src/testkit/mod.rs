//! Test harnesses shared by the property tests and the fuzz targets.
//! Each takes plain bytes, so proptest and libFuzzer drive the same code.

/// A harness's counts of what its schedules did (each props file's
/// `schedules_exercise_every_path` asserts them): the struct and its sum over runs,
/// written once. Every field is summed with `+=`.
macro_rules! stats {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl core::ops::AddAssign for $name {
            fn add_assign(&mut self, o: Self) {
                $(self.$field += o.$field;)*
            }
        }
    };
}

pub mod cache;
pub mod config;
pub mod delay_queue;
pub mod discovery;
pub mod double_barrier;
pub mod either;
pub mod election;
pub mod group;
pub mod harness;
pub mod inspect;
pub mod lease;
pub mod lock;
pub mod multi_lock;
pub mod naming;
pub mod partitioner;
pub mod queue;
pub mod semaphore;
pub mod server_input;
pub mod session;
pub mod sim_barrier;
pub mod sim_cache;
pub mod sim_config;
pub mod sim_double_barrier;
pub mod sim_election;
pub mod sim_lock;
pub mod sim_naive;
pub mod sim_queue;
pub mod sim_semaphore;
pub mod sim_two_phase;
pub mod sim_value;
pub mod ttl_node;
pub mod two_phase;
pub mod value;
pub mod zk;

/// The end of a run: `Ok`, or `head` and then every problem found, one per line.
pub fn verdict(
    head: &str,
    problems: &[alloc::string::String],
) -> Result<(), alloc::string::String> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(alloc::format!("{head}:\n{}", problems.join("\n")))
}

/// `count` pseudo-random schedules of `len` bytes for the byte-driven harnesses, from
/// one xorshift stream started at `seed` (deterministic: the same schedules every run).
/// The harnesses' "every path is exercised" tests draw from it.
pub fn schedules(seed: u64, count: usize, len: usize) -> impl Iterator<Item = alloc::vec::Vec<u8>> {
    let mut x = seed | 1;
    (0..count).map(move |_| {
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    })
}
