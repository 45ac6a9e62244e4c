//! A virtual machine for the kernel features this host's kernel lacks
//! (802.1Q, VRF, bonding: ../shared/DESIGN.md section 9): Debian's own
//! kernel, fetched by scripts/setup.sh into [`CACHE`], booted under qemu's
//! software emulation with this machine's root as its own, read-only
//! over virtio-9p beneath a tmpfs (an overlay: the guest writes where it
//! likes, and nothing reaches the host), the kernel's modules in their
//! place. A test hands it a shell script; the script's output and exit
//! status come back. The guest has the host's binaries at the same
//! paths, the project's own included.
//!
//! Software emulation distorts timing: the VM is for correctness
//! (differential tests), never for figures.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where scripts/setup.sh unpacks the VM's kernel package: CACHE/VERSION
/// holds `boot/vmlinuz-VERSION` and `lib/modules/VERSION` (depmod run).
pub const CACHE: &str = "/var/cache/linerate/vm";

/// Modules the initramfs loads to reach the root: 9p over virtio, and
/// overlayfs to write on it. The rest come from the root by modprobe.
const EARLY: [&str; 5] = [
    "fs/netfs/netfs",
    "net/9p/9pnet",
    "net/9p/9pnet_virtio",
    "fs/9p/9p",
    "fs/overlayfs/overlay",
];

/// What the guest printed and how its script ended.
#[derive(Debug)]
pub struct Ran {
    /// The script's exit status.
    pub status: i32,
    /// Its standard output and error.
    pub output: String,
    /// The guest's console (the kernel's and init's lines).
    pub console: String,
}

/// A kernel to boot: its image and the directory its modules are under.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub version: String,
    pub image: PathBuf,
    /// The tree whose lib/modules/VERSION the guest mounts as its own.
    pub tree: PathBuf,
}

/// The VM's kernel, or why there is none here (a test skips with it).
pub fn kernel() -> Result<Kernel, String> {
    for tool in ["qemu-system-x86_64", "busybox", "cpio", "xz"] {
        if !on_path(tool) {
            return Err(format!("no {tool} (scripts/setup.sh installs it)"));
        }
    }
    let versions = std::fs::read_dir(CACHE)
        .map_err(|e| format!("{CACHE}: {e} (scripts/setup.sh fetches the VM's kernel)"))?;
    for v in versions.flatten() {
        let version = v.file_name().to_string_lossy().into_owned();
        let tree = v.path();
        let image = tree.join(format!("boot/vmlinuz-{version}"));
        if image.exists() && tree.join("ready").exists() {
            return Ok(Kernel {
                version,
                image,
                tree,
            });
        }
    }
    Err(format!(
        "{CACHE}: no kernel unpacked (scripts/setup.sh fetches it)"
    ))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| d.join(tool).is_file())
            || Path::new("/usr/sbin").join(tool).is_file()
    })
}

impl Kernel {
    /// Boots the VM, runs `script` (sh) as root in it, and powers it off;
    /// Err when it could not boot or took longer than `timeout`.
    pub fn run(&self, script: &str, timeout: Duration) -> anyhow::Result<Ran> {
        let dir = tempdir()?;
        let share = dir.join("vm");
        std::fs::create_dir_all(&share)?;
        std::fs::write(share.join("run.sh"), script)?;
        let initrd = dir.join("initrd.cpio");
        self.initramfs(&dir.join("initrd"), &initrd)?;
        let append = format!(
            "console=ttyS0 panic=-1 edd=off quiet linerate.modules={}",
            self.tree.display()
        );
        let mut child = Command::new("qemu-system-x86_64")
            .args(["-accel", "tcg", "-m", "2048", "-smp", "1", "-nographic"])
            .args(["-no-reboot", "-nic", "none", "-monitor", "none"])
            .arg("-kernel")
            .arg(&self.image)
            .arg("-initrd")
            .arg(&initrd)
            .args(["-append", &append])
            .arg("-virtfs")
            .arg("local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap")
            .arg("-virtfs")
            .arg(format!(
                "local,path={},mount_tag=vm,security_model=none,multidevs=remap",
                share.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = stdout.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        });
        let t = Instant::now();
        let exited = loop {
            if let Some(st) = child.try_wait()? {
                break Some(st);
            }
            if t.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let console = reader.join().unwrap_or_default();
        let output = std::fs::read_to_string(share.join("out")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        let Some(st) = exited else {
            anyhow::bail!("the VM took more than {timeout:?}; its console:\n{console}");
        };
        let status = console
            .lines()
            // (The firmware's escape sequences may open the line.)
            .find_map(|l| l.split("linerate-vm: exit ").nth(1))
            .and_then(|s| s.trim().parse::<i32>().ok());
        match status {
            Some(status) => Ok(Ran {
                status,
                output,
                console,
            }),
            None => anyhow::bail!(
                "the VM ended ({st}) without running the script; its console:\n{console}"
            ),
        }
    }

    /// The initramfs: busybox, the early modules, uncompressed, and init.
    fn initramfs(&self, root: &Path, out: &Path) -> anyhow::Result<()> {
        for d in [
            "bin", "modules", "proc", "sys", "dev", "host", "vm", "upper", "newroot",
        ] {
            std::fs::create_dir_all(root.join(d))?;
        }
        let busybox = if Path::new("/bin/busybox").exists() {
            "/bin/busybox"
        } else {
            "/usr/bin/busybox"
        };
        std::fs::copy(busybox, root.join("bin/busybox"))?;
        let kernel_dir = self
            .tree
            .join(format!("lib/modules/{}/kernel", self.version));
        for m in EARLY {
            let src = kernel_dir.join(format!("{m}.ko.xz"));
            let name = Path::new(m).file_name().expect("a name").to_string_lossy();
            let o = Command::new("xz").arg("-dc").arg(&src).output()?;
            anyhow::ensure!(
                o.status.success(),
                "xz -dc {}: {}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            std::fs::write(root.join(format!("modules/{name}.ko")), o.stdout)?;
        }
        let init = root.join("init");
        std::fs::write(&init, INIT)?;
        std::fs::set_permissions(&init, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let list = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cd {} && find . | cpio -o -H newc --quiet > {}",
                root.display(),
                out.display()
            ))
            .output()?;
        anyhow::ensure!(
            list.status.success(),
            "cpio: {}",
            String::from_utf8_lossy(&list.stderr)
        );
        Ok(())
    }
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir().join(format!(
        "linerate-vm-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&base)?;
    Ok(base)
}

/// The guest's first process: the root over 9p beneath a tmpfs (/tmp
/// included: a clone there holds the binaries), /run a tmpfs of its own
/// (no host namespaces named there), the kernel's modules at
/// /lib/modules, the script run in it (chroot), its status said on the
/// console, the machine off.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in netfs 9pnet 9pnet_virtio 9p overlay; do
    insmod /modules/$m.ko || echo "linerate-vm: insmod $m failed"
done
modules=$(sed -n 's/.*linerate\.modules=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,ro host /host
mount -t 9p -o trans=virtio,version=9p2000.L vm /vm
mount -t tmpfs tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/u,workdir=/upper/w /newroot
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mount -t bpf bpf /newroot/sys/fs/bpf
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/vm /newroot/lib/modules
mount --bind /vm /newroot/vm
mount --bind /newroot$modules/lib/modules /newroot/lib/modules
chroot /newroot /bin/sh -c 'cd /; export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root; sh /vm/run.sh > /vm/out 2>&1'
echo "linerate-vm: exit $?"
sync
poweroff -f
"#;
