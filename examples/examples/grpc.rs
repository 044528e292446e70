//! A tonic gRPC service on Volt, and a client that calls it.
//!
//! ```sh
//! cargo run --release -p volt-examples --example grpc -- serve                 # 127.0.0.1:50051
//! cargo run --release -p volt-examples --example grpc -- client --name Ada     # in another terminal
//! cargo run --release -p volt-examples --example grpc -- client --count 5
//! ```
//!
//! The service (`proto/greeter.proto`) has a unary call, `SayHello`, and a server stream,
//! `Count`. The server is served by `volt::hyper::serve` (gRPC is HTTP/2 with prior
//! knowledge); the client is tonic's generated client over hyper-util's client on Volt.
//! Neither needs a Tokio runtime. `serve` stops on Ctrl-C, letting open calls finish
//! within 5 s (a second Ctrl-C exits at once). The client gives up on a server that does
//! not answer within 10 s.

use clap::{Parser, Subcommand};
use volt_examples::greeter::{CountRequest, HelloRequest};

/// A gRPC greeter on Volt: serve it, or call it.
#[derive(Parser, Debug)]
#[command(name = "grpc")]
struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Serve the greeter.
    Serve {
        /// The address to serve on.
        #[arg(long, default_value = "127.0.0.1:50051")]
        addr: String,
        /// Worker threads (default: the available parallelism).
        #[arg(long)]
        workers: Option<usize>,
    },
    /// Call a running greeter: `SayHello`, then a `Count` stream.
    Client {
        /// The server's address.
        #[arg(long, default_value = "127.0.0.1:50051")]
        addr: String,
        /// The name to greet.
        #[arg(long, default_value = "Volt")]
        name: String,
        /// How many replies to ask `Count` for.
        #[arg(long, default_value_t = 3)]
        count: u32,
    },
}

fn main() {
    let args = Args::parse();
    let result = match args.mode {
        Mode::Serve { addr, workers } => serve(&addr, workers),
        Mode::Client { addr, name, count } => client(addr, name, count),
    };
    if let Err(e) = result {
        eprintln!("grpc: {e}");
        std::process::exit(1);
    }
}

fn serve(addr: &str, workers: Option<usize>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut builder = volt::runtime::Builder::new();
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    let rt = builder.build()?;
    // Ctrl-C and SIGTERM complete this future; a second one exits at once.
    let signal = volt_examples::shutdown_signal()?;
    rt.block_on(async {
        let listener = volt::net::TcpListener::bind(addr).await?;
        println!("grpc: serving volt.examples.greeter.Greeter on {}", listener.local_addr()?);
        volt_examples::grpc::serve(listener, signal).await
    })?;
    println!("grpc: stopped");
    Ok(())
}

fn client(addr: String, name: String, count: u32) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let rt = volt::runtime::Builder::new().worker_threads(1).build()?;
    rt.block_on(async move {
        // A server that accepts and never answers (a wrong port, a stuck process) is an
        // error after this long, not a hang.
        const WAIT: std::time::Duration = std::time::Duration::from_secs(10);
        let no_answer = || format!("{addr} did not answer within {} s", WAIT.as_secs());
        let mut client = volt_examples::grpc::client(&addr)?;
        let reply =
            volt::time::timeout(WAIT, client.say_hello(HelloRequest { name })).await.map_err(|_| no_answer())??;
        println!("SayHello: {}", reply.into_inner().message);
        let call = client.count(CountRequest { count, interval_ms: 100 });
        let mut stream = volt::time::timeout(WAIT, call).await.map_err(|_| no_answer())??.into_inner();
        while let Some(reply) = volt::time::timeout(WAIT, stream.message()).await.map_err(|_| no_answer())?? {
            println!("Count: {}", reply.n);
        }
        Ok(())
    })
}
