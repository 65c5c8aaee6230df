"""The one way gridready reads an inventory's files and writes under artifacts/: beneath a root, regular files only,
of bounded size, never through a link that leads out.

Links. Inside an inventory a link that stays inside it is followed (a group_vars file shared by two groups); one that
leads out, at any component, is refused before anything is opened. Under artifacts/ gridready never makes a link,
so any link there is refused, read or write. Without a root (a path an operator named: a flag, a variable) reads
follow links, and writes make the folders above the file as named (links followed) but never write through a link
at the file itself.

Files are opened with O_NONBLOCK and O_NOFOLLOW, every folder on the way with O_NOFOLLOW relative to the one above,
and checked with fstat: a FIFO, device, socket or folder where a file is expected is a one-line error, never a hang.
Writes go to a create-exclusive temp file in the same folder, then a rename, so they never write through a link.
Messages name the path and what is wrong, never anything read from the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
LINK = "a symbolic link, which is never followed here"
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket",
          stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link"}


class UnsafeFile(Exception):
    """`str()` is the message alone (no path); `missing` when nothing is there (callers may treat it as absent)."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _not_regular(mode: int) -> UnsafeFile:
    return UnsafeFile(f"not a regular file ({_kind(mode)}, refused unopened)")


def _os_error(err: OSError) -> UnsafeFile:
    if err.errno == errno.ELOOP:
        return UnsafeFile(f"cannot read: {LINK} (or a loop of links)")
    if err.errno == errno.ENOTDIR:
        return UnsafeFile("cannot read: a folder on the way is not a directory")
    return UnsafeFile(f"cannot read: {err.strerror}", missing=err.errno == errno.ENOENT)


def _parts(path: Path, root: Path | None, follow_inside: bool) -> tuple[str, list[str]]:
    """(real folder to start from, names below it). With a root: a path outside it, or one whose links lead out of
    it, is refused before anything is opened."""
    absolute = os.path.abspath(path)
    if root is None:
        if follow_inside:
            absolute = os.path.realpath(absolute)
        return "/", [p for p in absolute.split("/") if p]
    top = os.path.realpath(root)
    lexical = os.path.relpath(absolute, os.path.abspath(root))
    if lexical == os.pardir or lexical.startswith(os.pardir + os.sep) or os.path.isabs(lexical):
        raise UnsafeFile(f"outside {Path(root).name}/, refused unread")
    if follow_inside:
        real = os.path.realpath(absolute)
        if real != top and not real.startswith(top.rstrip("/") + "/"):
            out = f"a symbolic link out of {Path(root).name}/, refused unread"
            with contextlib.suppress(OSError):  # the kind of what it points to (no open, no read) says more
                mode = os.stat(real).st_mode
                if not stat.S_ISREG(mode):
                    out = f"not a regular file ({_kind(mode)}), reached through {out}"
            raise UnsafeFile(out)
        lexical = os.path.relpath(real, top)
    return top, [p for p in lexical.split("/") if p not in ("", os.curdir)]


def _walk(top: str, names: list[str], create: bool = False) -> int:
    """A descriptor of the folder `top`/`names`, every step opened without following a link (made when `create`;
    the root itself, where the user put it, too)."""
    if create:
        os.makedirs(top, exist_ok=True)
    fd = os.open(top, _DIR)
    try:
        for name in names:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            with contextlib.suppress(FileNotFoundError):  # a link on the way is named as one, not as ENOTDIR
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise UnsafeFile(f"{name}/ on the way is {LINK}")
            nxt = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file(path: Path, root: Path | None, follow_inside: bool) -> int:
    top, names = _parts(path, root, follow_inside)
    if not names:
        raise UnsafeFile("not a regular file (a directory)")
    try:
        parent = _walk(top, names[:-1])
        try:
            info = os.stat(names[-1], dir_fd=parent, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):  # resolved away unless it loops (or a root says links are not followed)
                raise UnsafeFile(f"cannot read: {LINK} (or a loop of links)")
            if not stat.S_ISREG(info.st_mode):  # refused before open: opening a device may act on it
                raise _not_regular(info.st_mode)
            fd = os.open(names[-1], _READ, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as err:
        raise _os_error(err) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _not_regular(info.st_mode)
    return fd


def read_bytes(path: Path, limit: int, root: Path | None = None, follow_inside: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes beneath `root` (see the module's rules on links)."""
    fd = _open_file(Path(path), root, follow_inside)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeFile(f"{size} bytes, more than the {limit} this file may have")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise _os_error(err) from None
    finally:
        os.close(fd)
    if total > limit:
        raise UnsafeFile(f"more than the {limit} bytes this file may have")
    return b"".join(chunks)


def read_optional(path: Path, limit: int, root: Path | None = None, follow_inside: bool = True) -> bytes | None:
    """read_bytes, or None when nothing is at `path` (a dangling link inside the root included)."""
    try:
        return read_bytes(path, limit, root, follow_inside)
    except UnsafeFile as err:
        if err.missing:
            return None
        raise


def kind(path: Path, root: Path | None = None, follow_inside: bool = False) -> str | None:
    """'file', 'dir', another kind's words, or None when missing; links are refused as `read_bytes` refuses them."""
    top, names = _parts(Path(path), root, follow_inside)
    if not names:
        return "dir"
    try:
        parent = _walk(top, names[:-1])
        try:
            mode = os.stat(names[-1], dir_fd=parent, follow_symlinks=False).st_mode
        finally:
            os.close(parent)
    except OSError as err:
        failure = _os_error(err)
        if failure.missing:
            return None
        raise failure from None
    if stat.S_ISLNK(mode) and (root is not None or not follow_inside):
        raise UnsafeFile("a symbolic link, which is never followed here")
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else _kind(mode)


def _operator_file(path: Path) -> tuple[Path, Path]:
    """(the real folder of a file an operator named, made when missing; the file in it)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    real = Path(os.path.realpath(parent))
    return real, real / os.path.basename(os.path.abspath(path))


def _write_parts(target: Path, root: Path | None) -> tuple[str, list[str]]:
    """The folder to walk from and the names beneath it of a file to write: beneath `root`, or, without one, in the
    real folder of a file an operator named."""
    if root is None:
        try:
            root, target = _operator_file(target)
        except OSError as err:
            raise _os_error(err) from None
    return _parts(target, root, follow_inside=False)


def make_dirs(path: Path, root: Path | None = None) -> Path:
    """Create `path` and its parents beneath `root`, refusing a link at any component (without a root: as named)."""
    if root is None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            raise _os_error(err) from None
        return Path(path)
    top, names = _parts(Path(path), root, follow_inside=False)
    try:
        os.close(_walk(top, names, create=True))
    except OSError as err:
        raise _os_error(err) from None
    return Path(path)


@contextlib.contextmanager
def open_atomic(path: Path, root: Path | None = None, mode: int = 0o600,
                durable: bool = True) -> Iterator[BinaryIO]:
    """A create-exclusive temp file in the target's folder (made beneath `root` without following a link), renamed
    over `path` when the block ends without an error (fsynced first unless `durable` is False, removed when it
    raises): a link or file at `path` is replaced, never written through; a folder there is refused."""
    top, names = _write_parts(Path(path), root)
    if not names:
        raise UnsafeFile("not a regular file (a directory)")
    name = names[-1]
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        parent = _walk(top, names[:-1], create=True)
    except OSError as err:
        raise _os_error(err) from None
    try:
        try:
            there = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is not None and stat.S_ISDIR(there.st_mode):
            raise _not_regular(there.st_mode)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                         dir_fd=parent)
        except OSError as err:
            raise UnsafeFile(f"cannot write: {err.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                yield fh
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def write_atomic(path: Path, data: bytes, root: Path | None = None, mode: int = 0o600,
                 durable: bool = True) -> Path:
    """`data` written through open_atomic: a link or file at `path` is replaced, never written through."""
    try:
        with open_atomic(path, root, mode, durable) as fh:
            fh.write(data)
    except OSError as err:
        raise UnsafeFile(f"cannot write: {err.strerror}") from None
    return Path(path)


def open_lock(path: Path, root: Path | None = None) -> int:
    """A read-write descriptor of the lock file at `path` (created when missing), opened without following a link
    and without blocking; anything but a regular file there is refused."""
    top, names = _write_parts(Path(path), root)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        parent = _walk(top, names[:-1], create=True)
        try:
            try:
                info = os.stat(names[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise UnsafeFile(f"{LINK}: nothing is written through it")
            if info is not None and not stat.S_ISREG(info.st_mode):
                raise _not_regular(info.st_mode)
            fd = os.open(names[-1], flags, 0o644, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as err:
        raise _os_error(err) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile("not a regular file")
    return fd
