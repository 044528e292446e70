//! `#[tokio::main]` through the rename: prints the sum `run` computes and the runtime's
//! flavor.

#[tokio::main]
async fn main() {
    let sum = volt_tokio_rename::run(10).await;
    let flavor = tokio::runtime::Handle::current().runtime_flavor();
    println!("sum={sum} flavor={flavor:?}");
}
