//! Child processes the lab owns: spawned with their output in a log file,
//! tied to the lab's life, stopped politely and then firmly.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Builds the command that starts a server again, from its own files.
pub type Recipe = Box<dyn Fn() -> Command + Send + Sync>;

/// One child process and where its output goes.
pub struct Managed {
    /// Short name for messages (`redis`, `postgres`, `instance-a`, …).
    pub name: String,
    /// The process; `kill_on_drop` so a dropped lab leaves nothing behind.
    child: Child,
    /// Its stdout and stderr.
    pub log: PathBuf,
    /// How to start it again after a crash, for the servers that can.
    recipe: Option<Recipe>,
}

impl Managed {
    /// Spawns `command`, sending its output to `log`.
    ///
    /// The child also gets SIGTERM when the lab dies without cleaning up
    /// (even by SIGKILL), through the kernel's parent-death signal.
    pub fn spawn(name: &str, command: Command, log: &Path) -> anyhow::Result<Self> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        Self::launch(name, command, out, log, None)
    }

    /// [`Managed::spawn`] for a server that a fault scenario restarts:
    /// `recipe` builds the same command again, which finds the server's
    /// files where the crash left them.
    pub fn restartable(name: &str, recipe: Recipe, log: &Path) -> anyhow::Result<Self> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        Self::launch(name, recipe(), out, log, Some(recipe))
    }

    /// Starts the process again (after it died or was killed), appending
    /// to its log. Fails if it is still running or cannot be restarted.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        let recipe = self
            .recipe
            .take()
            .with_context(|| format!("{} cannot be restarted", self.name))?;
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .with_context(|| format!("{} is still running", self.name))??;
        let out = std::fs::OpenOptions::new().append(true).open(&self.log)?;
        let name = self.name.clone();
        let log = self.log.clone();
        *self = Self::launch(&name, recipe(), out, &log, Some(recipe))?;
        Ok(())
    }

    fn launch(
        name: &str,
        mut command: Command,
        out: File,
        log: &Path,
        recipe: Option<Recipe>,
    ) -> anyhow::Result<Self> {
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true);
        set_parent_death_signal(&mut command);
        let child = command
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", command.as_std().get_program()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
            recipe,
        })
    }

    /// The process id, for the lab's report and for fault injection.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Fails with the tail of the log if the process has already exited.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!(
                "{} exited ({status}); its log ends with:\n{}",
                self.name,
                self.log_tail()
            );
        }
        Ok(())
    }

    /// Polls `ready` until it holds, failing early (with the log) if the
    /// process exits, or after `timeout`.
    pub async fn wait_ready<F, Fut>(
        &mut self,
        timeout: Duration,
        mut ready: F,
    ) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = std::time::Instant::now();
        loop {
            self.ensure_running()?;
            if ready().await {
                return Ok(());
            }
            if started.elapsed() > timeout {
                anyhow::bail!(
                    "{} not ready after {timeout:?}; its log ends with:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Sends a signal (freeze, resume, crash) to the process.
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let pid = self
            .child
            .id()
            .with_context(|| format!("{} has already exited", self.name))?;
        kill(Pid::from_raw(pid as i32), signal)
            .with_context(|| format!("sending {signal} to {}", self.name))
    }

    /// Sends a signal to the process and every process it started, parent
    /// first (so a frozen parent forks no new child meanwhile): for
    /// PostgreSQL, the postmaster and its backends, which each call
    /// `setsid` and so escape a signal to the postmaster's group. SIGSTOP
    /// here freezes the server, SIGKILL crashes it.
    pub fn signal_tree(&self, signal: Signal) -> anyhow::Result<()> {
        let pid = self
            .child
            .id()
            .with_context(|| format!("{} has already exited", self.name))?;
        for pid in tree(pid) {
            // A child that exited meanwhile is no error.
            let _ = kill(Pid::from_raw(pid as i32), signal);
        }
        Ok(())
    }

    /// SIGKILL to the process and every process it started, at once, and
    /// back only once all of them are gone (their files closed): what a
    /// power cut does to a server, before its disk is cut.
    pub async fn kill_tree(&mut self) -> anyhow::Result<()> {
        let Some(pid) = self.child.id() else {
            return Ok(());
        };
        let tree = tree(pid);
        for pid in &tree {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .with_context(|| format!("{} outlived SIGKILL", self.name))??;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tree.iter().any(|pid| alive(*pid)) {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "a process of {} outlived SIGKILL",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub async fn stop(mut self, grace: Duration) {
        if let Some(pid) = self.child.id() {
            let pid = Pid::from_raw(pid as i32);
            // A frozen process would keep the SIGTERM pending forever.
            let _ = kill(pid, Signal::SIGCONT);
            let _ = kill(pid, Signal::SIGTERM);
            if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
                return;
            }
            tracing::warn!(name = %self.name, "did not stop in time; killing");
        }
        let _ = self.child.kill().await;
    }
}

/// The processes whose parent is `pid`, from /proc.
/// `pid` and every process below it.
fn tree(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut next = 0;
    while next < tree.len() {
        tree.extend(children(tree[next]));
        next += 1;
    }
    tree
}

/// `pid` still runs (an exited process awaiting its parent, a zombie,
/// has closed its files already).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            // `pid (comm) state ppid …`: the command may hold spaces or
            // parentheses, so read after its last ')'.
            std::fs::read_to_string(format!("/proc/{candidate}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Asks the kernel to send SIGTERM to the child when the thread that
/// spawned it dies. The lab spawns from runtime worker threads that live as
/// long as the lab, so this fires only when the lab itself is gone.
#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only
    // makes one async-signal-safe system call (prctl); it allocates nothing
    // and touches no locks.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
