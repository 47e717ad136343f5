"""Start the server from a notebook (whose running loop `uvicorn.run()` refuses): a thread, its own loop."""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from chatlab.serve.app import AppOptions, Engine


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class ServerHandle:
    url: str  # e.g. http://127.0.0.1:8000/v1, what OpenAI clients take as base_url
    app: "FastAPI"
    server: "uvicorn.Server" = field(repr=False)
    thread: threading.Thread = field(repr=False)

    @property
    def base(self) -> str:
        return self.url.removesuffix("/v1")

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> "ServerHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(engine: "Engine", host: str = "127.0.0.1", port: int | None = None,
                 *, log_level: str = "warning", **app_options: Unpack["AppOptions"]) -> ServerHandle:
    """Serve `engine` on host:port in a background thread; port None = a free one."""
    import uvicorn

    from chatlab.serve.app import create_app  # it imports fastapi at its top

    port = port or free_port(host)
    app = create_app(engine, **app_options)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"chatlab-serve-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive():
            raise ChatlabError(f"the server could not start on {host}:{port} (is the port in use? "
                               "pick another with port=...)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise ChatlabError(f"the server did not start on {host}:{port} within 30 s")
        time.sleep(0.02)
    shown = f"[{host}]" if ":" in host else host
    return ServerHandle(url=f"http://{shown}:{port}/v1", app=app, server=server, thread=thread)
