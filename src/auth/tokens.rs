//! `seckill tokens`: signed buyer tokens for load drivers, one `user,token`
//! line per buyer — the CSV JMeter's plans read, and what a login would
//! hand each buyer in a real sale.

use std::io::Write;
use std::path::PathBuf;

use super::token::{AUDIENCE, Key, Signer};
use crate::product::now_ms;

/// `seckill tokens`' flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TokensArgs {
    /// The buyer-token key (`buyer_key_file` of `seckill lab --json`).
    #[arg(long)]
    pub key_file: PathBuf,
    /// How many buyers.
    #[arg(long, default_value_t = 1000)]
    pub users: u64,
    /// Buyer ids are this prefix and a number from 1.
    #[arg(long, default_value = "user-")]
    pub prefix: String,
    /// How long each token is valid, from now.
    #[arg(long, default_value_t = 3600)]
    pub ttl_secs: u64,
    /// The audience the instances expect.
    #[arg(long, default_value = AUDIENCE)]
    pub audience: String,
}

/// Prints the lines.
pub fn run(args: &TokensArgs) -> anyhow::Result<()> {
    let signer = Signer::new(&Key::load(&args.key_file)?, &args.audience);
    let now_s = now_ms() / 1000;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for n in 1..=args.users {
        let user = format!("{}{n}", args.prefix);
        super::valid_buyer(user.clone())
            .map_err(|_| anyhow::anyhow!("{user:?} is not a valid buyer id"))?;
        writeln!(out, "{user},{}", signer.token(&user, now_s, args.ttl_secs))?;
    }
    out.flush()?;
    Ok(())
}
