//! The mounts of a process sandbox: bubblewrap's arguments for a
//! [`ProcessSandbox`], with the program's own files mounted back where the
//! sandbox's empty `/tmp` or a `hide` would cover them.

use std::path::{Component, Path, PathBuf};

use crate::seccomp::SECCOMP_FD;
use crate::{ProcessSandbox, Program};

/// bubblewrap's arguments for `sandbox`: see [`ProcessSandbox`].
///
/// After the fixed base (`/` read-only, `/tmp` and `/dev/shm` empty), the
/// sandbox's own mounts go shallowest first, so the most specific path
/// wins: a `hide` inside a granted directory stays hidden, a `write`
/// inside a hidden one stays writable. Among them are the server's own
/// files that an empty `/tmp` or a `hide` would cover (see [`OwnFiles`]),
/// read-only, or writable where a `write` grant covers them.
pub fn bwrap_args(sandbox: &ProcessSandbox, server: &Program) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/dev/shm",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if sandbox.network {
        args.push("--share-net".into());
    }
    let cwd = server.cwd.clone().or_else(|| std::env::current_dir().ok());
    // Resolved, as bubblewrap does not follow a symlink that the sandbox
    // leaves dangling (one into `/tmp`); one that cannot be resolved is
    // kept as given, and bubblewrap refuses to start.
    let resolved = |dir: &PathBuf| dir.canonicalize().unwrap_or_else(|_| dir.clone());
    // A `hide` that does not exist hides nothing (`~/.ssh` on a machine
    // without one): bubblewrap could not make its mount point in the
    // read-only tree, and would refuse to start.
    let hide: Vec<&PathBuf> = sandbox.hide.iter().filter(|dir| dir.exists()).collect();
    let mut mounts: Vec<Mount> = hide
        .iter()
        .copied()
        .map(resolved)
        .map(Mount::Hide)
        .collect();
    let writable = |path: &Path| {
        sandbox
            .write
            .iter()
            .flat_map(|dir| forms(dir))
            .any(|dir| path.starts_with(dir))
    };
    for mount in OwnFiles::new(sandbox, server).find(server, cwd.as_deref()) {
        mounts.push(match mount {
            Mount::ReadOnly { src, dest } if writable(&src) || writable(&dest) => {
                Mount::Write { src, dest }
            }
            other => other,
        });
    }
    mounts.extend(sandbox.write.iter().map(resolved).map(|dir| Mount::Write {
        src: dir.clone(),
        dest: dir,
    }));
    if !sandbox.git_writable {
        // `.git/hooks/*` and `.git/config` run outside the sandbox at the
        // user's next `git` command: read-only inside a writable directory.
        mounts.extend(
            sandbox
                .write
                .iter()
                .map(resolved)
                .map(|dir| dir.join(".git"))
                .filter(|git| git.exists())
                .map(|git| Mount::ReadOnly {
                    src: git.clone(),
                    dest: git,
                }),
        );
    }
    // A hidden directory inside a directory mounted (back) is hidden there
    // again: deeper, so after it.
    let hidden: Vec<PathBuf> = hide.iter().copied().map(resolved).collect();
    let again: Vec<Mount> = mounts
        .iter()
        .filter_map(Mount::bind)
        .flat_map(|(src, dest)| {
            hidden
                .iter()
                .filter_map(move |h| h.strip_prefix(src).ok().map(|rel| (rel, dest)))
                .filter(|(rel, _)| !rel.as_os_str().is_empty())
                .map(|(rel, dest)| Mount::Hide(dest.join(rel)))
        })
        .collect();
    mounts.extend(again);
    let mut unique: Vec<Mount> = Vec::with_capacity(mounts.len());
    for mount in mounts {
        if !unique.contains(&mount) {
            unique.push(mount);
        }
    }
    // Stable: the same depth keeps hide (and new directories), read-only,
    // write, in config order.
    unique.sort_by_key(|m| (m.dest().components().count(), m.rank()));
    for mount in unique {
        match mount {
            Mount::Hide(dir) => args.extend(["--tmpfs".into(), dir.into_os_string()]),
            Mount::Dir(dir) => args.extend(["--dir".into(), dir.into_os_string()]),
            Mount::ReadOnly { src, dest } => args.extend([
                "--ro-bind".into(),
                src.into_os_string(),
                dest.into_os_string(),
            ]),
            Mount::Write { src, dest } => {
                args.extend(["--bind".into(), src.into_os_string(), dest.into_os_string()]);
            }
        }
    }
    if let Some(cwd) = cwd {
        args.extend(["--chdir".into(), cwd.into_os_string()]);
    }
    args.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
    args
}

/// One of the sandbox's own mounts, after the fixed base.
#[derive(Debug, PartialEq, Eq)]
enum Mount {
    /// An empty directory over `dest`.
    Hide(PathBuf),
    /// An empty directory at `dest` if there is none (one that a path
    /// with `..` goes through).
    Dir(PathBuf),
    /// `src` at `dest`, read-only.
    ReadOnly { src: PathBuf, dest: PathBuf },
    /// `src` at `dest`, writable.
    Write { src: PathBuf, dest: PathBuf },
}

impl Mount {
    fn dest(&self) -> &Path {
        match self {
            Mount::Hide(dest)
            | Mount::Dir(dest)
            | Mount::ReadOnly { dest, .. }
            | Mount::Write { dest, .. } => dest,
        }
    }

    /// A bind mount's source and destination.
    fn bind(&self) -> Option<(&Path, &Path)> {
        match self {
            Mount::ReadOnly { src, dest } | Mount::Write { src, dest } => Some((src, dest)),
            Mount::Hide(_) | Mount::Dir(_) => None,
        }
    }

    /// At the same depth: hide, then read-only, then writable.
    fn rank(&self) -> u8 {
        match self {
            Mount::Hide(_) | Mount::Dir(_) => 0,
            Mount::ReadOnly { .. } => 1,
            Mount::Write { .. } => 2,
        }
    }
}

/// `path` as given and, when it differs, with its symlinks resolved.
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut all = vec![path.to_path_buf()];
    if let Ok(real) = path.canonicalize()
        && real != path
    {
        all.push(real);
    }
    all
}

/// How many `#!` lines are followed from the program (a script run by a
/// script run by a binary).
const SHEBANG_DEPTH: u8 = 2;
/// The most of a `#!` line read.
const SHEBANG_BYTES: u64 = 256;
/// The most of a venv's `pyvenv.cfg` read.
const PYVENV_CFG_BYTES: u64 = 64 * 1024;

/// The server's own files that the sandbox's empty `/tmp` or a `hide`
/// would cover, to mount back read-only: its program's tree (a `bin/` or
/// `.bin/` directory's parent — a venv, a prefix, `node_modules` — else
/// its directory), the same for the file its symlinks lead to, for the
/// interpreter of its `#!` line and for a venv's base interpreter; the
/// directory of its script (the first argument that is a file), other
/// files named in its arguments, and its working directory.
///
/// Paths come from a configuration: ones that do not exist are ignored.
/// Never mounted back: `/tmp`, `HOME`, a directory holding either, or a
/// hidden directory itself; a narrower path is taken instead (the
/// program's directory, then the file alone). A hidden directory inside
/// one mounted back is hidden again ([`bwrap_args`]).
struct OwnFiles {
    /// The directories the sandbox covers, as given and resolved.
    covered: Vec<PathBuf>,
    /// Paths never mounted back whole, nor any directory above them.
    too_wide: Vec<PathBuf>,
    /// Found so far: read-only mounts and directories to make.
    found: Vec<Mount>,
}

impl OwnFiles {
    fn new(sandbox: &ProcessSandbox, server: &Program) -> Self {
        let covered: Vec<PathBuf> = [Path::new("/tmp"), Path::new("/dev/shm")]
            .into_iter()
            .chain(sandbox.hide.iter().map(PathBuf::as_path))
            .flat_map(forms)
            .collect();
        let homes = std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .chain(
                server
                    .env
                    .iter()
                    .filter(|(k, _)| k == "HOME")
                    .map(|(_, v)| PathBuf::from(v)),
            );
        let too_wide = homes
            .chain([PathBuf::from("/tmp")])
            .flat_map(|p| forms(&p))
            .collect();
        OwnFiles {
            covered,
            too_wide,
            found: Vec::new(),
        }
    }

    /// What to mount back for `server`, run in `cwd`.
    fn find(mut self, server: &Program, cwd: Option<&Path>) -> Vec<Mount> {
        let path_var = server
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        let search = Search {
            path_var: path_var.as_deref(),
            cwd,
        };
        if let Some(program) = search.program(&server.command) {
            self.walkable(&program);
            self.program(&program, &search, SHEBANG_DEPTH);
        }
        let mut script = true;
        for arg in &server.args {
            if arg.starts_with('-') {
                continue;
            }
            let Some(path) = search.absolute(Path::new(arg)).filter(|p| p.exists()) else {
                continue;
            };
            self.walkable(&path);
            if !path.is_file() {
                continue;
            }
            let file = path;
            match (script, file.parent()) {
                (true, Some(dir)) => self.first_fitting(&[dir, &file]),
                _ => self.first_fitting(&[&file]),
            }
            script = false;
        }
        if let Some(cwd) = cwd.filter(|c| c.is_dir()) {
            self.walkable(cwd);
            self.first_fitting(&[cwd]);
        }
        self.found
    }

    /// A program's tree, its symlinks' target's, its venv's base
    /// interpreter's and its `#!` interpreter's (`depth` levels deep).
    fn program(&mut self, program: &Path, search: &Search<'_>, depth: u8) {
        let mut files = vec![program.to_path_buf()];
        if let Ok(real) = program.canonicalize()
            && real != program
        {
            files.push(real);
        }
        for file in &files {
            let Some(dir) = file.parent() else { continue };
            match prefix_of(dir) {
                Some(prefix) => self.first_fitting(&[prefix, dir, file]),
                None => self.first_fitting(&[dir, file]),
            }
            if let Some(home) = prefix_of(dir).and_then(venv_home) {
                match prefix_of(&home) {
                    Some(prefix) => self.first_fitting(&[prefix, &home]),
                    None => self.first_fitting(&[&home]),
                }
            }
        }
        if depth > 0
            && let Some(interpreter) = files.last().and_then(|real| search.interpreter(real))
        {
            self.program(&interpreter, search, depth - 1);
        }
    }

    /// Mounts back the first of `candidates` that is not too wide, when
    /// the sandbox covers it.
    fn first_fitting(&mut self, candidates: &[&Path]) {
        let fits = |c: &&&Path| {
            forms(c).iter().all(|form| {
                !self.too_wide.iter().any(|wide| wide.starts_with(form))
                    && !self.covered.contains(form)
            })
        };
        if let Some(chosen) = candidates.iter().find(fits) {
            self.mount_back(chosen);
        }
    }

    /// `path` (resolved) at its resolved place and at the place it is
    /// named by, for each of them the sandbox covers.
    fn mount_back(&mut self, path: &Path) {
        let Ok(real) = path.canonicalize() else {
            return;
        };
        let mut dests = Vec::new();
        if self.covers(&real) {
            dests.push(real.clone());
        }
        let plain = !path.components().any(|c| c == Component::ParentDir);
        if path != real && path.is_absolute() && plain && self.covers(path) {
            dests.push(path.to_path_buf());
        }
        for dest in dests {
            self.add(Mount::ReadOnly {
                src: real.clone(),
                dest,
            });
        }
    }

    /// Makes each directory that `path` goes up from with `..` where the
    /// sandbox covers it: the kernel walks `..` through real directories.
    fn walkable(&mut self, path: &Path) {
        let mut walked = PathBuf::new();
        for part in path.components() {
            if part == Component::ParentDir
                && let Ok(real) = walked.canonicalize()
                && self.covers(&real)
            {
                self.add(Mount::Dir(real));
            }
            walked.push(part);
        }
    }

    /// Whether the sandbox covers `path` (a path inside one it empties).
    fn covers(&self, path: &Path) -> bool {
        self.covered
            .iter()
            .any(|c| path != c && path.starts_with(c))
    }

    fn add(&mut self, mount: Mount) {
        if !self.found.contains(&mount) {
            self.found.push(mount);
        }
    }
}

/// Where the server's program and files are looked for: its `PATH` and
/// working directory.
struct Search<'a> {
    path_var: Option<&'a std::ffi::OsStr>,
    cwd: Option<&'a Path>,
}

impl Search<'_> {
    /// `path`, absolute (relative to the working directory).
    fn absolute(&self, path: &Path) -> Option<PathBuf> {
        if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            self.cwd.map(|cwd| cwd.join(path))
        }
    }

    /// The file `command` runs, as `execvp` finds it.
    fn program(&self, command: &str) -> Option<PathBuf> {
        if command.is_empty() {
            return None;
        }
        if command.contains('/') {
            return self.absolute(Path::new(command)).filter(|p| p.is_file());
        }
        std::env::split_paths(self.path_var?)
            .filter_map(|dir| self.absolute(&dir.join(command)))
            .find(|p| p.is_file())
    }

    /// The interpreter of a script's `#!` line (through `env`, looked up
    /// on the `PATH`).
    fn interpreter(&self, script: &Path) -> Option<PathBuf> {
        let head = read_head(script, SHEBANG_BYTES)?;
        let line = head.strip_prefix(b"#!")?.split(|&b| b == b'\n').next()?;
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let first = Path::new(words.next()?);
        if first.file_name().is_some_and(|name| name == "env") {
            let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
            return self.program(name);
        }
        (first.is_absolute() && first.is_file()).then(|| first.to_path_buf())
    }
}

/// The parent of a `bin/` or `.bin/` directory: the tree its programs
/// need (a venv, an installation prefix, `node_modules`).
fn prefix_of(dir: &Path) -> Option<&Path> {
    matches!(dir.file_name()?.to_str()?, "bin" | ".bin")
        .then(|| dir.parent())
        .flatten()
}

/// The `home` of a venv's `pyvenv.cfg` (the base interpreter's directory).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = read_head(&venv.join("pyvenv.cfg"), PYVENV_CFG_BYTES)?;
    String::from_utf8_lossy(&cfg).lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        let home = PathBuf::from(value.trim());
        (key.trim() == "home" && home.is_absolute() && home.is_dir()).then_some(home)
    })
}

/// At most `limit` bytes from the start of `path`, a regular file.
fn read_head(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    if !path.is_file() {
        return None;
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tempdir under /tmp, which the sandbox empties.
    fn under_tmp() -> tempfile::TempDir {
        tempfile::tempdir_in("/tmp").unwrap()
    }

    fn file(path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.canonicalize().unwrap()
    }

    fn real(path: &Path) -> PathBuf {
        path.canonicalize().unwrap()
    }

    fn server(command: &Path, args: &[&str], cwd: Option<&Path>) -> Program {
        Program {
            command: command.display().to_string(),
            args: args.iter().map(ToString::to_string).collect(),
            env: Vec::new(),
            cwd: cwd.map(Path::to_path_buf),
        }
    }

    /// The bubblewrap arguments as strings.
    fn args(sandbox: &ProcessSandbox, server: &Program) -> Vec<String> {
        bwrap_args(sandbox, server)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Where `flag path path` (`path` mounted at itself) is in `args`.
    fn mount(args: &[String], flag: &str, path: &Path) -> Option<usize> {
        let path = path.display().to_string();
        args.windows(3)
            .position(|w| w[0] == flag && w[1] == path && w[2] == path)
    }

    #[test]
    fn a_venv_and_script_under_tmp_are_mounted_back_read_only_but_not_tmp_or_their_siblings() {
        let dir = under_tmp();
        let base = under_tmp();
        let interpreter = file(&base.path().join("bin/python3"), "");
        let venv = dir.path().join("venv");
        file(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", base.path().join("bin").display()),
        );
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(&interpreter, venv.join("bin/python")).unwrap();
        let script = file(&dir.path().join("app/server.py"), "print()");
        file(&dir.path().join("sibling/secret"), "s");
        let missing = dir.path().join("missing.py").display().to_string();
        let config = server(
            &venv.join("bin/python"),
            &["-u", &script.display().to_string(), &missing],
            Some(Path::new("/")),
        );
        let args = args(&ProcessSandbox::default(), &config);

        let tmp = mount(&args, "--tmpfs", Path::new("/tmp"));
        let venv_at = mount(&args, "--ro-bind", &real(&venv)).expect("the venv");
        assert!(tmp < Some(venv_at), "after the empty /tmp: {args:?}");
        // The venv's base interpreter (its symlink's target, `home`).
        assert!(mount(&args, "--ro-bind", &real(base.path())).is_some());
        assert!(mount(&args, "--ro-bind", &real(&dir.path().join("app"))).is_some());
        assert!(mount(&args, "--ro-bind", &real(dir.path())).is_none());
        assert!(mount(&args, "--ro-bind", Path::new("/tmp")).is_none());
        assert!(
            !args
                .iter()
                .any(|a| a.contains("sibling") || a.contains("missing")),
            "{args:?}"
        );
    }

    #[test]
    fn a_write_grant_inside_or_around_the_servers_tree_stays_writable() {
        let dir = under_tmp();
        let program = file(&dir.path().join("srv/bin/server"), "");
        let out = dir.path().join("srv/out");
        std::fs::create_dir_all(&out).unwrap();
        let config = server(&program, &[], Some(&dir.path().join("srv")));
        let inside = ProcessSandbox {
            write: vec![out.clone()],
            ..ProcessSandbox::default()
        };
        let args1 = args(&inside, &config);
        let tree = mount(&args1, "--ro-bind", &real(&dir.path().join("srv"))).unwrap();
        let grant = mount(&args1, "--bind", &real(&out)).expect("the grant");
        assert!(
            tree < grant,
            "the grant shadows the read-only tree: {args1:?}"
        );

        let around = ProcessSandbox {
            write: vec![dir.path().to_path_buf()],
            ..ProcessSandbox::default()
        };
        let args2 = args(&around, &config);
        let srv = real(&dir.path().join("srv"));
        assert!(mount(&args2, "--ro-bind", &srv).is_none(), "{args2:?}");
        assert!(mount(&args2, "--bind", &srv).is_some(), "{args2:?}");
        assert!(mount(&args2, "--bind", &real(dir.path())).is_some());
    }

    #[test]
    fn a_hidden_directory_that_does_not_exist_is_left_out() {
        let home = under_tmp();
        let server_file = file(&home.path().join("server"), "");
        let config = server(&server_file, &[], Some(Path::new("/")));
        let missing = home.path().join(".ssh");
        let sandbox = ProcessSandbox {
            hide: vec![missing.clone()],
            ..ProcessSandbox::default()
        };
        let args = args(&sandbox, &config);
        assert!(
            !args.iter().any(|a| a == &missing.display().to_string()),
            "no mount point to make for it: {args:?}"
        );
    }

    #[test]
    fn home_and_hidden_directories_are_never_mounted_back_whole() {
        let home = under_tmp();
        let secrets = home.path().join("tools/.secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        let in_home = file(&home.path().join("server"), "");
        let mut config = server(&in_home, &[], Some(Path::new("/")));
        config.env = vec![("HOME".into(), home.path().display().to_string())];
        let hide_home = ProcessSandbox {
            hide: vec![home.path().to_path_buf()],
            ..ProcessSandbox::default()
        };
        let args1 = args(&hide_home, &config);
        assert!(
            mount(&args1, "--ro-bind", &in_home).is_some(),
            "the file alone: {args1:?}"
        );
        assert!(mount(&args1, "--ro-bind", &real(home.path())).is_none());

        // `bin/`'s parent is HOME: its directory instead.
        let in_bin = file(&home.path().join("bin/server"), "");
        config.command = in_bin.display().to_string();
        let args2 = args(&hide_home, &config);
        assert!(
            mount(&args2, "--ro-bind", &real(&home.path().join("bin"))).is_some(),
            "{args2:?}"
        );
        assert!(mount(&args2, "--ro-bind", &real(home.path())).is_none());

        // A hidden directory inside a tree mounted back stays hidden.
        let in_tools = file(&home.path().join("tools/server"), "");
        config.command = in_tools.display().to_string();
        let hide_both = ProcessSandbox {
            hide: vec![home.path().to_path_buf(), secrets.clone()],
            ..ProcessSandbox::default()
        };
        let args3 = args(&hide_both, &config);
        let tools = mount(&args3, "--ro-bind", &real(&home.path().join("tools"))).unwrap();
        let hidden = args3
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == real(&secrets).display().to_string())
            .unwrap();
        assert!(tools < hidden, "{args3:?}");
    }

    #[test]
    fn odd_or_missing_paths_in_a_config_mount_nothing_back() {
        let dir = under_tmp();
        let nothing = dir.path().join("nothing");
        for command in ["", "no-such-program-here", "./nope", "\0", "/tmp/../tmp"] {
            let mut config = server(Path::new(command), &["\0", "", "../..", "/"], None);
            config.cwd = Some(nothing.clone());
            config.env = vec![("PATH".into(), "\0:/nonexistent:".into())];
            let args = args(&ProcessSandbox::default(), &config);
            let binds = args
                .iter()
                .filter(|a| ["--ro-bind", "--bind", "--dir"].contains(&a.as_str()));
            assert_eq!(binds.count(), 1, "only `/`: {command:?}: {args:?}");
        }
    }

    /// What `check` returns on a thread that runs under the sandbox's
    /// seccomp filter (a filter binds its thread and its children only).
    #[test]
    fn a_path_that_goes_up_through_tmp_finds_its_directories() {
        let dir = under_tmp();
        let program = file(&dir.path().join("tools/bin/server"), "");
        let via = dir.path().join("crates/support");
        std::fs::create_dir_all(&via).unwrap();
        let up = via.join("../../tools/bin/server");
        let args = args(
            &ProcessSandbox::default(),
            &server(&up, &[], Some(Path::new("/"))),
        );
        let made = args
            .windows(2)
            .position(|w| w[0] == "--dir" && w[1] == real(&via).display().to_string());
        assert!(made.is_some(), "{args:?}");
        assert!(mount(&args, "--ro-bind", &real(&dir.path().join("tools"))).is_some());
        assert!(program.is_file());
    }
}
