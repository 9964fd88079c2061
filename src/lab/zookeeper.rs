//! A throw-away ZooKeeper (Debian's `zookeeper` package) in standalone
//! mode, with a short tick so that a dead client's session — and its
//! ephemeral lock nodes — ends within seconds instead of ~30 s.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::process::Managed;

/// Debian's jars; `zookeeper.jar`'s manifest pulls in the rest.
const JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-simple.jar",
];

/// Writes `zoo.cfg` under `dir` and starts the server on `port`, its
/// snapshots and transaction log in `data` (where a restart finds them).
pub fn start(dir: &Path, data: &Path, port: u16) -> anyhow::Result<Managed> {
    anyhow::ensure!(
        Path::new(JARS[0]).exists(),
        "{} not found; install Debian's zookeeper package (scripts/deps.sh does)",
        JARS[0]
    );
    std::fs::create_dir_all(dir)?;
    std::fs::create_dir_all(data)?;
    // tickTime 200 ms: sessions may be 0.4 s to 4 s; instances ask for 2 s.
    let config = format!(
        "tickTime=200\n\
         initLimit=10\n\
         syncLimit=5\n\
         minSessionTimeout=400\n\
         maxSessionTimeout=4000\n\
         dataDir={}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok\n",
        data.display()
    );
    std::fs::write(dir.join("zoo.cfg"), config)?;
    let mut classpath = vec![dir.display().to_string()];
    classpath.extend(
        JARS.iter()
            .filter(|j| Path::new(j).exists())
            .map(|j| j.to_string()),
    );
    let (classpath, config) = (classpath.join(":"), dir.join("zoo.cfg"));
    let recipe = move || {
        let mut command = Command::new("java");
        command
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(&classpath)
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&config);
        command
    };
    Managed::restartable("zookeeper", Box::new(recipe), &dir.join("zookeeper.log"))
}

/// `ruok` answered with `imok`.
pub async fn ready(port: u16) -> bool {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream.write_all(b"ruok").await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        Some(answer == "imok")
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Some(true))
    )
}
