"""Running a job's ranks as an unprivileged account: `run --user NAME` (docs/privilege.md).

nearmetal itself stays root; nm-supervise (supervise/) starts the launcher, and so every
rank, as the account (its uid, gid and supplementary groups, its HOME, USER and LOGNAME),
while its front and keeper stay root and can end every process of the job. What the
account cannot reach — the nearmetal home under a 0700 /root, with its images, kernels,
staged libraries and Apptainer — is shown to the job at its own path through a mount
namespace of the job's own (a tmpfs over the unreachable directory, the needed paths bound
read-only into it); nothing on disk changes and no permission is loosened.

Whether a runtime can start an image format unprivileged, and what it then needs of this
machine, is declared by each runtime (`Runtime.unprivileged`: format -> names of NEEDS); the
refusals below are derived from those declarations, never from runtime names.
"""

import os

from .errors import NearmetalError

# How to create an account for nearmetal (docs/privilege.md): never done by default.
CREATE_HINT = "bash scripts/setup.sh --create-user {name}"
SUGGESTED = "nmuser"
# Variables of the caller's (root's) environment that would point the account's tools at
# root's files: removed from the launcher's environment. Open MPI's run-as-root consent is
# not needed by an account.
ROOT_ONLY_ENV = ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                 "DBUS_SESSION_BUS_ADDRESS", "MAIL", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class Account:
    """An account the ranks run as: name, uid, gid, supplementary groups, home."""

    __slots__ = ("name", "uid", "gid", "groups", "home")

    def __init__(self, name, uid, gid, groups=(), home="/"):
        self.name, self.uid, self.gid, self.home = name, uid, gid, home
        self.groups = tuple(sorted({gid, *groups}))

    def env(self):
        """The launcher's (and so the ranks') identity variables."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}

    def as_option(self):
        """nm-supervise --as UID:GID:G1,G2,..."""
        return f"{self.uid}:{self.gid}:{','.join(map(str, self.groups))}"

    def __repr__(self):
        return f"Account({self.name}, uid={self.uid}, gid={self.gid})"


def name_problem(name):
    """Why `name` cannot be an account name (one line, without the option), or None."""
    text = str(name)
    if text.isdigit():
        return "give the account's name, not a uid"
    if (not text or len(text) > 32 or not set(text) <= _NAME_CHARS or text[0] in "-."
            or text[0].isdigit()):
        return ("not an account name (letters, digits, '.', '_' and '-', at most 32, starting with a letter "
                "or '_')")
    return None


def check_name(name):
    """A one-line error unless `name` can be an account name."""
    why = name_problem(name)
    if why:
        shown = str(name)[:40].encode("unicode_escape").decode()
        raise NearmetalError(f"--user {shown}: {why}" if str(name).isdigit() else f"--user '{shown}': {why}")


def lookup(name):
    """The Account `name` on this machine (pwd, groups from the group database); None: no such account."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    try:
        groups = os.getgrouplist(name, entry.pw_gid)
    except OSError:
        groups = [entry.pw_gid]
    return Account(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir or "/")


def account(name, find=lookup, euid=None):
    """The checked Account for --user NAME: it exists, is not root, and this process can switch to it."""
    check_name(name)
    found = find(name)
    if found is None:
        raise NearmetalError(f"--user {name}: no such account (create one with: {CREATE_HINT.format(name=name)})")
    if found.uid == 0:
        raise NearmetalError(f"--user {name}: {name} is uid 0 (root): to run as root, give no --user")
    if (os.geteuid() if euid is None else euid) != 0:
        raise NearmetalError(f"--user needs root; run as {name} instead")
    return found


# -- what an account needs of this machine ----------------------------------------------------

class Facts:
    """The few facts the checks read from this machine (tests pass their own)."""

    def stat(self, path):
        """os.stat(path), or None when it does not exist or cannot be read."""
        try:
            return os.stat(path)
        except OSError:
            return None

    def read(self, path):
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return None


def permits(st, acct, want):
    """Whether `acct` has the access `want` ("r", "w", "x", combined) by st's mode bits
    (owner, else group, else other; ACLs are not read)."""
    if st.st_uid == acct.uid:
        shift = 6
    elif st.st_gid in acct.groups:
        shift = 3
    else:
        shift = 0
    bits = {"r": 4, "w": 2, "x": 1}
    return all((st.st_mode >> shift) & bits[c] for c in want)


def _mode(st):
    import pwd

    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return f"{st.st_mode & 0o7777:04o} {owner}"


def _userns(acct, facts):
    limit = (facts.read("/proc/sys/user/max_user_namespaces") or "1").strip()
    if limit == "0":
        return "user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0)"
    for knob in ("/proc/sys/kernel/unprivileged_userns_clone",):
        value = facts.read(knob)
        if value is not None and value.strip() == "0":
            return f"unprivileged user namespaces are disabled ({knob} is 0)"
    return None


def _fuse(acct, facts):
    st = facts.stat("/dev/fuse")
    if st is None:
        return "there is no /dev/fuse (its image files are mounted through FUSE when unprivileged)"
    if not permits(st, acct, "rw"):
        return (f"/dev/fuse is {_mode(st)}, so {acct.name} cannot mount FUSE file systems "
                f"(its image files are mounted through FUSE when unprivileged)")
    return None


def subid_ranges(text, acct):
    """The (start, count) ranges /etc/subuid or /etc/subgid text gives `acct` (by name or uid)."""
    out = []
    for line in (text or "").splitlines():
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (acct.name, str(acct.uid)) and parts[1].isdigit() and parts[2].isdigit():
            out.append((int(parts[1]), int(parts[2])))
    return out


def _subids(acct, facts):
    missing = [f for f in ("/etc/subuid", "/etc/subgid") if not subid_ranges(facts.read(f), acct)]
    if missing:
        return (f"{acct.name} has no range in {' and '.join(missing)} (its user namespace maps the image's "
                f"users through them): {CREATE_HINT.format(name=acct.name)} adds them")
    return None


# A need's name (what a runtime declares) -> its check: None when met, else why not.
NEEDS = {"userns": _userns, "fuse": _fuse, "subids": _subids}

def format_words(fmt):
    from .image import formats

    return formats.get(fmt).words(plural=True)


def format_of(c):
    """The image format a resolved container component starts from (image/formats names)."""
    return c.runtime.start_format(c.image_format)


def runtime_problem(runtime, fmt, acct, facts):
    """Why `runtime` cannot start `fmt` images as `acct` here (one line), or None."""
    what = format_words(fmt)
    declared = runtime.unprivileged_needs()
    if fmt not in declared:
        can = ", ".join(format_words(f) for f in declared)
        return (f"{runtime.binary} cannot start {what} as an unprivileged account"
                + (f" (it starts {can} that way)" if can else " (it needs root)"))
    for need in declared[fmt]:
        why = NEEDS[need](acct, facts)
        if why:
            return f"{runtime.binary} cannot start {what} as {acct.name}: {why}"
    return None


def check(components, acct, facts, cwd):
    """One-line errors for what cannot run as `acct`, before anything starts."""
    first = components[0]
    if not first.scheduler.job_is_child:
        raise NearmetalError(f"--user runs jobs on this machine only (the {first.scheduler.name} scheduler starts "
                             f"ranks as the submitting user): submit as {acct.name} instead")
    from . import networks

    why = networks.get(first.network).account_problem()
    if why:
        raise NearmetalError(f"--user with network {first.network} is not supported: {why}")
    for c in components:
        if c.runtime is None:
            continue
        why = runtime_problem(c.runtime, format_of(c), acct, facts)
        if why:
            raise NearmetalError(f"--user {acct.name}: {why}; run as root (no --user) or choose another image or runtime")
    if first.workdir is None:
        st = facts.stat(cwd)
        if st is None or not permits(st, acct, "x") or _blocked(cwd, acct, facts):
            raise NearmetalError(f"--user {acct.name}: the current directory {cwd} is not reachable by {acct.name}: "
                                 f"give --workdir DIR (a directory {acct.name} can write)")


def check_devices(acct, devices, facts):
    """`--gpus` with `--user`: every device node the ranks open must be readable and writable
    by the account (the driver's default is 0666; a site may limit them to a group, e.g.
    video): a one-line refusal naming the node, its mode and the fix otherwise."""
    for node in devices:
        st = facts.stat(node)
        if st is not None and not permits(st, acct, "rw"):
            import grp

            try:
                group = grp.getgrgid(st.st_gid).gr_name
            except KeyError:
                group = str(st.st_gid)
            fix = (f"add {acct.name} to group {group}" if st.st_gid != 0 else
                   "give the nodes the driver's default mode 0666 (nvidia module option NVreg_DeviceFileMode)")
            raise NearmetalError(f"--gpus with --user {acct.name}: {node} is {_mode(st)} (group {group}), so "
                                 f"{acct.name} cannot open it: {fix}, or run as root (no --user)")


def _blocked(path, acct, facts, start="/"):
    """The first directory from `start` down to path's parent that acct cannot search, or None."""
    dirs, cur = [start], start
    rel = os.path.relpath(os.path.dirname(path), start)
    for part in ([] if rel == "." else rel.split("/")):
        cur = os.path.join(cur, part)
        dirs.append(cur)
    for d in dirs:
        st = facts.stat(d)
        if st is None or not permits(st, acct, "x"):
            return d
    return None


def _shown_mode(facts, path):
    st = facts.stat(path)
    return _mode(st) if st is not None else "missing"


def view(acct, wanted, facts):
    """(masks, shows) that make each (path, writable) of `wanted` reachable by acct at its own
    path: a mask is the first directory on the way that acct cannot search (a tmpfs covers it in
    the job's mount namespace), a show a path bound there, [(path, writable)]. A path the account
    could not use even then (its own mode) is a one-line error saying what to change."""
    masks, shows, reached = [], [], []
    for path, rw in sorted(wanted, key=lambda w: (len(w[0]), w[0])):
        path = os.path.normpath(path)
        outer = next((q for q, _ in reached if path.startswith(q.rstrip("/") + "/")), None)
        mask = _blocked(path, acct, facts, start=outer or "/")
        if mask is not None and (outer is not None or mask == "/"):
            raise NearmetalError(f"--user {acct.name}: {acct.name} cannot reach {path}: {mask} is "
                                 f"{_shown_mode(facts, mask)} (make it searchable by {acct.name}, e.g. chmod o+x "
                                 f"{mask}; nearmetal does not change it)")
        st = facts.stat(path)
        want = ("rw" if rw else "r") + ("x" if st is not None and _is_dir(st) else "")
        if st is None or not permits(st, acct, want):
            how = "writable" if rw else "readable"
            raise NearmetalError(f"--user {acct.name}: {path} is not {how} by {acct.name} ({_shown_mode(facts, path)}): make it {how} "
                                 f"by {acct.name}, or run as root (nearmetal does not change it)")
        if mask is not None:
            if mask not in masks:
                masks.append(mask)
            shows.append((path, rw))
        elif outer is not None and rw and (outer, False) in shows:
            shows.append((path, rw))  # writable inside a read-only show: bound over it
        reached.append((path, rw))
    return masks, shows


def _is_dir(st):
    import stat

    return stat.S_ISDIR(st.st_mode)


def wanted_paths(components, argv, env, home):
    """(path, writable) the job must reach: the nearmetal home when the launch names it, the
    images (those inside the home are checked on their way from it), the working directory
    and the inputs bound into it."""
    wanted = []
    if any(home in a for a in argv) or any(home in v for v in env.values()):
        wanted.append((home, False))
    for c in components:
        if c.runtime is not None and c.image is not None:
            from .image import formats

            fmt = format_of(c)
            source = c.image.location(fmt) if formats.get(fmt).layout != "storage" else None
            if source:
                wanted.append((str(source), False))
        wanted += [(str(src), False) for src, _ in c.workdir_binds]
    if components[0].workdir:
        wanted.append((components[0].workdir, True))
    return list(dict.fromkeys(wanted))


def environ(acct, env):
    """`env` for a process run as acct: the caller's root-only variables removed, acct's identity set."""
    out = {k: v for k, v in env.items() if k not in ROOT_ONLY_ENV}
    out.update(acct.env())
    return out


def supervise_options(acct, masks=(), shows=()):
    """nm-supervise's options that run the job as acct with that view."""
    out = ["--as", acct.as_option()]
    for m in masks:
        out += ["--mask", m]
    for path, rw in shows:
        out += ["--show-rw" if rw else "--show", path]
    return out


def notes(acct, masks, shows, cwd_writable=True, cwd=None):
    out = [f"as {acct.name} (uid {acct.uid}, gid {acct.gid}): the launcher and every rank; nearmetal's "
           f"supervisor stays root and ends the job's whole tree"]
    if masks:
        shown = ", ".join(f"{p} ({'read-write' if rw else 'read-only'})" for p, rw in shows)
        out.append(f"as {acct.name}: the job's own mount namespace covers {', '.join(masks)} with an empty tmpfs "
                   f"and shows {shown} there at the same path; nothing changes outside the job")
    if not cwd_writable:
        out.append(f"as {acct.name}: the working directory {cwd} is not writable by {acct.name}: output files there "
                   f"fail (give --workdir DIR)")
    return out
