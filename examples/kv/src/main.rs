//! `volt-kv --port 6379`: serve until Ctrl-C.

use clap::Parser;

#[derive(Parser)]
#[command(about = "A Redis-protocol key-value server with pub/sub")]
struct Args {
    /// The port to listen on (loopback only unless --bind says otherwise).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let listener = match tokio::net::TcpListener::bind((args.bind.as_str(), args.port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on {}:{}: {e}", args.bind, args.port);
            std::process::exit(1);
        }
    };
    println!("listening on {}", listener.local_addr().expect("a bound listener has an address"));
    let shutdown = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => println!("Ctrl-C: closing connections"),
            // Without a signal handler, run until killed.
            Err(e) => {
                eprintln!("cannot listen for Ctrl-C: {e}");
                std::future::pending::<()>().await
            }
        }
    };
    kv::run(listener, kv::Db::new(), shutdown).await;
    println!("stopped");
}
