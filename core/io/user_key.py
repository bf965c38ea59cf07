"""This user's key: a private file whose HMACs tell what djx wrote for itself to read back (the stats
it vouches for, a run's resume state, the LLaVA fields of a record it converted) from what anyone
else wrote. `$XDG_DATA_HOME/djx/stats.key` (~/.local/share), made on first use, 0600 in a 0700
folder of this user; when it cannot be had safely, `problem` says why, naming the file."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from dataclasses import dataclass, field

KEY_BYTES = 32


@dataclass(frozen=True)
class UserKey:
    key: bytes = field(repr=False)  # b"" when it cannot be had safely
    path: str
    problem: str = ""  # why there is no key and what to do, the file named ("" when there is one)


def user_key(home: str | None = None) -> UserKey:
    """This user's key, made on first use; UserKey(b"", path, why) when it is unusable."""
    base = home or os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    folder, path = os.path.join(base, "djx"), os.path.join(base, "djx", "stats.key")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        why = _unsafe(os.lstat(folder), "folder")
        if why:
            return UserKey(b"", path, f"the key's folder {folder} {why}; {_fix(why, folder)}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(KEY_BYTES))
        except FileExistsError:
            pass
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return UserKey(b"", path, f"the key file {path} is a symlink; {_fix('', path)}")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            key = f.read()
    except OSError as e:
        return UserKey(b"", path, f"the key file {path} cannot be read or made ({e.strerror or e})")
    why = _unsafe(st, "file") or (f"holds {len(key)} bytes, fewer than {KEY_BYTES}" if len(key) < KEY_BYTES else "")
    return UserKey(b"", path, f"the key file {path} {why}; {_fix(why, path)}") if why else UserKey(key, path)


def _fix(why: str, path: str) -> str:
    """What to do about an unusable key file or folder."""
    if why.startswith("has mode"):
        return f"chmod go= {path}" + ("" if os.path.isdir(path) else ", or remove it and djx makes a new one")
    return "remove it and djx makes a new one"


def _unsafe(st: os.stat_result, kind: str) -> str:
    """Why a key file or its folder cannot be trusted to be this user's secret ("" when it can)."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not (stat.S_ISDIR if kind == "folder" else stat.S_ISREG)(st.st_mode):
        return f"is not a {kind}"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o} (others may {'enter' if kind == 'folder' else 'read'} it)"
    return ""


def mac(key: bytes, obj) -> str | None:
    """HMAC-SHA256 of `obj` as canonical JSON; None when there is no key or `obj` is not JSON."""
    if not key:
        return None
    try:
        body = json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def signed(key: bytes, obj, sig) -> bool:
    """Whether `sig` is this key's HMAC of `obj`."""
    want = mac(key, obj)
    return want is not None and isinstance(sig, str) and hmac.compare_digest(want, sig)
