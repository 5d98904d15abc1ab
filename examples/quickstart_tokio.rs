use zk_recipes_tokio::{connect, Error, Options};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let server = std::env::var("ZK_ADDR").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let zk = connect(&server, Options::default()).await?;

    // Lock: held until released or the session is lost. Missing parents are created.
    let guard = zk.lock("/app/locks/reindex").acquire().await?;
    println!("lock held, fencing token {}", guard.fencing_token());
    guard.release().await?;

    // Leader election: act as leader between `elected()` and the next Suspended or Lost.
    let mut me = zk.election("/app/election", "node-1").join().await?;
    let token = me.elected().await?;
    println!("leading with fencing token {token}: {}", me.is_leader());
    me.close().await?;

    // Queue: every item is taken once, in order.
    let mut jobs = zk.queue("/app/jobs");
    jobs.put("job-1").await?;
    let item = jobs.take().await?;
    println!("took {:?}", item.data);

    zk.close().await;
    Ok(())
}
