"""File handling under ember.save / ember.load: atomic writes that leave nothing
behind when the writer is killed, files that get the permissions other writers give,
and reads that refuse what is not a regular file instead of blocking on it.

Writing.  On Linux the bytes go to an unnamed file in the destination's folder
(``O_TMPFILE``), which gets a name (``linkat`` through ``/proc/self/fd``) only once
it is complete and fsync'ed: a writer killed before that leaves nothing on disk,
the kernel frees the inode with the last descriptor.  Where that is unavailable
(other systems, file systems without ``O_TMPFILE``, no ``/proc``) the bytes go to a
named temporary file ``.NAME.HOST-PID-RANDOM.ember-tmp``; every save first removes
such files whose writer (same host, PID checked) is dead.  Either way the finished
file is renamed over the destination, so a crash leaves the old checkpoint or the
new one, never a torn one.

Permissions.  A new file gets ``0666 & ~umask`` (0644 under umask 022), as
``open()`` gives; a file that is overwritten keeps its permission bits, as
``open(path, "wb")`` (and so ``torch.save``) keeps them.
"""
import errno
import hashlib
import os
import re
import secrets
import socket
import stat

_TMP_SUFFIX = ".ember-tmp"
_TMP_NAME = re.compile(r"^\..*\.([0-9a-f]{8})-([0-9]+)-[0-9a-f]{8}\.ember-tmp$")
# set to False to force the named-temporary-file path (tests; systems where linkat misbehaves)
USE_UNNAMED = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")


def _host_tag():
    return hashlib.blake2s(socket.gethostname().encode(), digest_size=4).hexdigest()


def _pid_alive(pid):
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder):
    """Remove the named temporary files that dead ember writers on this host left
    in `folder`.  Files of live writers, of other hosts and anything not named like
    ember's temporaries are left alone.  Never raises."""
    if os.name != "posix":   # os.kill(pid, 0) is not a liveness test elsewhere
        return
    host, me = _host_tag(), os.getpid()
    try:
        entries = os.scandir(folder)
    except OSError:
        return
    with entries:
        for entry in entries:
            if not entry.name.endswith(_TMP_SUFFIX):
                continue
            m = _TMP_NAME.match(entry.name)
            if m is None or m.group(1) != host:
                continue
            pid = int(m.group(2))
            if pid == me or _pid_alive(pid):
                continue
            try:
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
            except OSError:
                pass


def _temp_name(folder, base):
    name = f".{base}.{_host_tag()}-{os.getpid()}-{secrets.token_hex(4)}{_TMP_SUFFIX}"
    return os.path.join(folder, name)


def _open_unnamed(folder):
    """A descriptor of an unnamed file in `folder`, or None where unsupported."""
    if not USE_UNNAMED:
        return None
    try:
        return os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None      # this file system (or kernel) cannot: use a named file
        raise


def _fsync_folder(folder):
    try:        # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _kept_mode(path):
    """The permission bits of the regular file at `path`, or None (a new file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat.S_IMODE(st.st_mode) & 0o777 if stat.S_ISREG(st.st_mode) else None


def write_atomically(path, write):
    """Call ``write(fileobj)`` to produce the file `path`, atomically (see the module
    docstring).  `write` may be called twice (if naming the unnamed file fails)."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    mode = _kept_mode(path)
    remove_stale_temporaries(folder)
    fd = _open_unnamed(folder)
    if fd is not None:
        try:
            with os.fdopen(fd, "wb") as out:
                _fill(out, write, mode)
                tmp = _name_unnamed(out.fileno(), path, folder, base)
            if tmp is not None:
                _replace(tmp, path)
            _fsync_folder(folder)
            return
        except _LinkFailed:
            pass             # no usable /proc link: write again, to a named file
    tmp = _temp_name(folder, base)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            _fill(out, write, mode)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _replace(tmp, path)
    _fsync_folder(folder)


class _LinkFailed(Exception):
    pass


def _fill(out, write, mode):
    write(out)
    out.flush()
    if mode is not None and hasattr(os, "fchmod"):
        os.fchmod(out.fileno(), mode)
    os.fsync(out.fileno())


def _name_unnamed(fd, path, folder, base):
    """Give the unnamed file a name: `path` itself when it does not exist yet (None
    returned), else a temporary name to rename over it (returned)."""
    src = f"/proc/self/fd/{fd}"
    try:
        os.link(src, path)
        return None
    except FileExistsError:
        pass
    except OSError as exc:
        raise _LinkFailed() from exc
    tmp = _temp_name(folder, base)
    try:
        os.link(src, tmp)
    except OSError as exc:
        raise _LinkFailed() from exc
    return tmp


def _replace(tmp, path):
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(p):
    try:
        os.unlink(p)
    except OSError:
        pass


def _kind(mode):
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _refuse(path, mode):
    what = _kind(mode)
    msg = f"ember.load: {path!s} is {what}, not a regular file; checkpoints are read from files"
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, msg, str(path))
    raise ValueError(msg)


def open_regular(path):
    """Open `path` for binary reading; refuse at once (never block) what is not a
    regular file: directories (IsADirectoryError), FIFOs, devices, sockets
    (ValueError).  Returns ``(file object, size in bytes)``."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        _refuse(path, st.st_mode)
    # O_NONBLOCK: should the path become a FIFO between the stat and the open, the
    # open returns at once and the fstat below refuses it
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _refuse(path, st.st_mode)
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise
