//! Where the settings are read: procfs and sysfs under a root, `/` on the
//! machine itself, or a tree copied from one (the tests' fixtures), so
//! that every check reads files and nothing else.
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    /// The running machine's procfs and sysfs.
    pub fn machine() -> Root {
        Root::at("/")
    }

    /// A tree whose `proc/` and `sys/` stand for the machine's.
    pub fn at(dir: impl Into<PathBuf>) -> Root {
        Root { dir: dir.into() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel.trim_start_matches('/'))
    }

    /// A file's content, trimmed; Err: why it could not be read (absent
    /// here: the kernel has no such setting, or the module is not
    /// loaded).
    pub fn read(&self, rel: &str) -> Result<String, String> {
        match std::fs::read_to_string(self.path(rel)) {
            Ok(s) => Ok(s.trim().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err("not present".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A file's content as a number; Err: why it could not be read, or
    /// that it is not one.
    pub fn number(&self, rel: &str) -> Result<u64, String> {
        self.read(rel)?
            .parse::<u64>()
            .map_err(|_| format!("{rel}: not a number"))
    }

    /// The names in a directory, sorted (empty if it is absent).
    pub fn list(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn exists(&self, rel: &str) -> bool {
        Path::exists(&self.path(rel))
    }
}
