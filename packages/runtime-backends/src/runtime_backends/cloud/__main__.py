"""``python -m runtime_backends.cloud serve --port N --device CPU``: serve a device of this machine to CLOUD clients."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from runtime_backends.cloud.limits import Limits
from runtime_backends.cloud.server import DEFAULT_PORT, CloudServer
from runtime_core.config import CLOUD_TOKEN, CLOUDDEV


def _port(text: str) -> int:
    port = int(text)  # argparse turns the ValueError into "invalid _port value"
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0 to 65535; 0 picks a free one)")
    return port


def _parser() -> argparse.ArgumentParser:
    defaults = Limits()
    parser = argparse.ArgumentParser(prog="python -m runtime_backends.cloud",
                                     description="Serve a device of this machine to CLOUD clients (CLOUD=1 HOST=...).")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a server until interrupted",
                           description="Serve one device over HTTP. The token, if any, comes from $CLOUD_TOKEN.")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    serve.add_argument("--device", default=CLOUDDEV.get() or "CPU",
                       help="device to serve (default $CLOUDDEV or CPU)")
    for name, help_text in (("max_body_bytes", "largest request body"),
                            ("max_session_bytes", "bytes of buffers one session may hold"),
                            ("max_sessions", "sessions held at once"),
                            ("idle_timeout_s", "seconds an idle keep-alive connection stays open"),
                            ("session_timeout_s", "seconds after which an idle session is ended and freed")):
        kind = float if name.endswith("_s") else int
        serve.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(defaults, name),
                           help=f"{help_text} (default {getattr(defaults, name)})")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and serve; returns the exit status (2 for bad arguments, 1 when the server cannot start)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        limits = Limits(max_body_bytes=args.max_body_bytes, max_session_bytes=args.max_session_bytes,
                        max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout_s,
                        session_timeout_s=args.session_timeout_s)
        server = CloudServer(args.device, host=args.host, port=args.port, token=CLOUD_TOKEN.get(),
                             limits=limits).start()
    except (ValueError, OSError, RuntimeError) as e:
        print(f"error: cannot start the CLOUD server: {e}", file=sys.stderr)
        return 1
    print(f"serving {server.dev.device} on http://{server.address} (token {'required' if server.token else 'off'}); "
          f"clients: CLOUD=1 HOST={server.address}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
