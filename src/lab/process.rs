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

/// One child process and where its output goes.
pub struct Managed {
    /// Short name for messages (`redis`, `postgres`, `instance-a`, …).
    pub name: String,
    /// The process; `kill_on_drop` so a dropped lab leaves nothing behind.
    child: Child,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

impl Managed {
    /// Spawns `command`, sending its output to `log`.
    ///
    /// The child also gets SIGTERM when the lab dies without cleaning up
    /// (even by SIGKILL), through the kernel's parent-death signal.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Self> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
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
