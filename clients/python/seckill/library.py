"""The Functions library (functions/seckill.lua) as the client installs it:
`python -m seckill functions install|status`.

Where the Lua source comes from, first found: `--file`, $SECKILL_LIBRARY,
the copy a built package carries (seckill/seckill.lua: a wheel, an sdist, a
non-editable `pip install`; setup.py copies functions/seckill.lua there at
build time), then functions/seckill.lua of the repository this package sits
in (clients/python/seckill -> ../../../functions: an editable install).

`plan()` is the decision, plain: install, upgrade, leave as is, or refuse a
downgrade without `force`."""

from __future__ import annotations

import os
import re
from typing import Any, Optional, Tuple

from .backend import LIBRARY_NAME, library_loaded, parse_version, version_args

PACKAGED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'seckill.lua')
REPO_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'functions', 'seckill.lua')

_VERSION = re.compile(r"^local\s+VERSION\s*=\s*'([0-9.]+)'", re.M)


class LibraryError(RuntimeError):
    pass


def source_path(path: Optional[str] = None) -> str:
    given = path or os.environ.get('SECKILL_LIBRARY')
    if given:
        if not os.path.exists(given):
            raise LibraryError('no library file at %s' % given)
        return given
    for p in (PACKAGED_FILE, REPO_FILE):
        if os.path.exists(p):
            return p
    raise LibraryError('no library file: this package carries none (%s) and sits outside the '
                       'repository (%s); name the file with --file path/to/functions/seckill.lua '
                       '(or $SECKILL_LIBRARY)' % (PACKAGED_FILE, REPO_FILE))


def source_version(code: str) -> str:
    """The VERSION the Lua source declares."""
    m = _VERSION.search(code)
    if not m:
        raise LibraryError("the library source declares no `local VERSION = '...'`")
    return m.group(1)


def plan(loaded: Optional[str], new: str, force: bool = False,
         same_code: bool = False) -> Tuple[str, str]:
    """(action, message); action is 'load' or 'keep', or LibraryError for a
    downgrade without `force`. `loaded`: the server's version (None: none)."""
    if loaded is None:
        return 'load', 'installed seckill %s' % new
    old_v, new_v = parse_version(loaded), parse_version(new)
    if new_v < old_v and not force:
        raise LibraryError('the server has seckill %s, newer than %s: refusing to downgrade '
                           '(--force to do it anyway)' % (loaded, new))
    if new_v == old_v and same_code:
        return 'keep', 'seckill %s already loaded, unchanged' % new
    if new_v > old_v:
        return 'load', 'upgraded seckill %s -> %s' % (loaded, new)
    if new_v < old_v:
        return 'load', 'downgraded seckill %s -> %s (--force)' % (loaded, new)
    return 'load', 'reloaded seckill %s (the code differed)' % new


def _code(function_list: Any) -> Optional[str]:
    for lib in function_list or ():
        d = lib if isinstance(lib, dict) else dict(zip(lib[0::2], lib[1::2]))
        if d.get('library_name') == LIBRARY_NAME:
            return d.get('library_code')
    return None


def loaded_version(r: Any) -> Optional[str]:
    """The version the server's library answers (seckill_version), or None
    when no seckill library is loaded."""
    libs = r.execute_command('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME)
    if not library_loaded(libs):
        return None
    v = r.execute_command(*version_args())
    return v.decode() if isinstance(v, bytes) else str(v)


def install(r: Any, path: Optional[str] = None, force: bool = False) -> Tuple[str, str]:
    """Loads the library (FUNCTION LOAD REPLACE) unless the same version and
    code is there; refuses a downgrade without `force`. (action, message)."""
    with open(source_path(path)) as f:
        code = f.read()
    new = source_version(code)
    loaded = loaded_version(r)
    same = False
    if loaded is not None:
        libs = r.execute_command('FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', LIBRARY_NAME)
        same = _code(libs) == code
    action, message = plan(loaded, new, force, same)
    if action == 'load':
        r.execute_command('FUNCTION', 'LOAD', 'REPLACE', code)
    return action, message


__all__ = ['LibraryError', 'PACKAGED_FILE', 'REPO_FILE', 'source_path', 'source_version', 'plan',
           'loaded_version', 'install']
