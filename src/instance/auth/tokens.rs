//! `seckill tokens`: signed buyer tokens for load drivers, one `user,token`
//! line per buyer — the CSV JMeter's plans read (`-Jbuyers=FILE`), and what
//! a login would hand each buyer in a real sale. Without a key, the lines
//! carry no token (`user,`): the plans' buyers for instances that take
//! `X-User-Id` (`jmeter/buyers.csv` is that list).

use std::io::Write;
use std::path::PathBuf;

use super::token::{AUDIENCE, Key, Signer};
use crate::model::product::now_ms;

/// `seckill tokens`' flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TokensArgs {
    /// The buyer-token key (`buyer_key_file` of `seckill lab --json`);
    /// without one, the lines carry no token (`buyer_auth = header`).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
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
    let signer = match &args.key_file {
        Some(path) => Some(Signer::new(&Key::load(path)?, &args.audience)),
        None => None,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines(args, signer.as_ref(), now_ms() / 1000)? {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// `jmeter/buyers.csv`, the plans' buyers for instances that take
/// `X-User-Id`: `seckill tokens --users 2000 --prefix jm-`, no key.
pub fn plan_buyers() -> String {
    let args = TokensArgs {
        key_file: None,
        users: 2000,
        prefix: "jm-".into(),
        ttl_secs: 0,
        audience: AUDIENCE.into(),
    };
    let lines = lines(&args, None, 0).expect("jm-N are buyer ids");
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// The `user,token` lines, signed by `signer` valid from `now_s` (no
/// token without one).
fn lines(args: &TokensArgs, signer: Option<&Signer>, now_s: u64) -> anyhow::Result<Vec<String>> {
    (1..=args.users)
        .map(|n| {
            let user = format!("{}{n}", args.prefix);
            super::valid_buyer(user.clone())
                .map_err(|_| anyhow::anyhow!("{user:?} is not a valid buyer id"))?;
            let token = signer.map(|s| s.token(&user, now_s, args.ttl_secs));
            Ok(format!("{user},{}", token.unwrap_or_default()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::auth::token::Verifier;

    #[test]
    fn each_line_is_a_buyer_and_a_token_that_names_it() {
        let key = Key::generate();
        let args = TokensArgs {
            key_file: None,
            users: 3,
            prefix: "u-".into(),
            ttl_secs: 60,
            audience: AUDIENCE.into(),
        };
        let signer = Signer::new(&key, AUDIENCE);
        let printed = lines(&args, Some(&signer), 1_000).expect("lines");
        assert_eq!(printed.len(), 3);
        let verifier = Verifier::new(&key, AUDIENCE);
        for (n, line) in printed.iter().enumerate() {
            let (user, token) = line.split_once(',').expect("user,token");
            assert_eq!(user, format!("u-{}", n + 1));
            assert_eq!(verifier.buyer(token, 1_010).as_deref(), Ok(user));
            assert!(
                verifier.buyer(token, 1_100).is_err(),
                "expired after its ttl"
            );
        }
        let unsigned = lines(&args, None, 1_000).expect("lines");
        assert_eq!(unsigned, ["u-1,", "u-2,", "u-3,"]);
        let bad = TokensArgs {
            prefix: "no spaces ".into(),
            ..args
        };
        assert!(lines(&bad, Some(&signer), 1_000).is_err());
    }
}
