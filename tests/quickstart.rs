//! The README's quick starts are `examples/quickstart_{tokio,blocking}.rs`, word for word
//! (checked here), and they run as written against a fresh real server: a lock, an
//! election and a queue in each adapter, one after the other on one server (so each also
//! runs on a server the other has used).

mod tokio_quickstart {
    include!("../examples/quickstart_tokio.rs");
    pub fn run() -> Result<(), Error> {
        main()
    }
}

mod blocking_quickstart {
    include!("../examples/quickstart_blocking.rs");
    pub fn run() -> Result<(), Error> {
        main()
    }
}

// The custom-runtime example, as a module: its `main` is the example's, unused here.
#[allow(dead_code)]
#[path = "../examples/custom_runtime.rs"]
mod custom_runtime;

const README: &str = include_str!("../README.md");

#[test]
fn the_readme_quick_starts_are_the_examples_word_for_word() {
    for example in [
        include_str!("../examples/quickstart_tokio.rs"),
        include_str!("../examples/quickstart_blocking.rs"),
    ] {
        let block = format!("```rust,no_run\n{example}```\n");
        assert!(
            README.contains(&block),
            "README.md lacks this example as a block:\n{example}"
        );
    }
}

#[test]
fn the_quick_starts_run_against_a_fresh_server() {
    let server = zk_recipes_testing::TestServer::start().expect("start ZooKeeper");
    // The only test in this binary that reads ZK_ADDR.
    std::env::set_var("ZK_ADDR", server.connect_string());
    tokio_quickstart::run().expect("the tokio quick start");
    blocking_quickstart::run().expect("the blocking quick start");
    tokio_quickstart::run().expect("the tokio quick start, again");
    assert_eq!(
        server.mntr_value("zk_ephemerals_count").expect("mntr"),
        0,
        "the quick starts leave no ephemeral node behind"
    );
}

#[test]
fn the_custom_runtime_example_takes_and_releases_a_lock() {
    let server = zk_recipes_testing::TestServer::start().expect("start ZooKeeper");
    custom_runtime::run(&server.connect_string()).expect("the custom-runtime example");
    assert_eq!(
        server.mntr_value("zk_ephemerals_count").expect("mntr"),
        0,
        "the example leaves no ephemeral node behind"
    );
}
