"""The token a bridge on the default port keeps across restarts, so the URL the extension was given
once (ws://127.0.0.1:7340/?token=...) keeps working after the script restarts: no pasting again.

It lives in $MXSCOPE_HOME/bridge-token (default ~/.mxscope), readable and writable by its owner
alone, like Jupyter's runtime files. $MXSCOPE_TOKEN or token=... take precedence; delete the file
to get a new one.
"""
from __future__ import annotations

import os
import secrets
from typing import Callable, Optional

HOME_ENV = "MXSCOPE_HOME"
TOKEN_FILE = "bridge-token"


def token_path() -> str:
    return os.path.join(os.environ.get(HOME_ENV) or os.path.join(os.path.expanduser("~"), ".mxscope"), TOKEN_FILE)


def remembered_token(log: Callable[[str], None] = lambda line: None) -> Optional[str]:
    """The remembered token (made on first use); None when the file cannot be read or written."""
    path = token_path()
    try:
        with open(path, encoding="utf-8") as f:
            status = os.fstat(f.fileno())
            if status.st_mode & 0o077 or status.st_uid != os.getuid():
                log(f"{path} is readable by other users or not yours: using a new token for this process "
                    "(chmod 600 it, or delete it to get a new one)")
                return None
            token = f.read().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    except OSError as error:
        log(f"could not read the remembered token {path} ({error}): using a new token for this process")
        return None
    token = secrets.token_urlsafe(24)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(token + "\n")
    except OSError as error:
        log(f"could not remember the token in {path} ({error}): the URL will change when the script restarts")
        return None
    return token
