"""CLOUD backend: a device of another process or machine, reached over HTTP with the reference system's protocol.

Subpackages: ``wire`` (request types, body framing, the safe request-list reader, renderer descriptions), ``client``
(the HTTP link, the batch queue, ``CloudDevice`` -- the entry point -- and a server started for the process) and
``server`` (``CloudServer``: HTTP transport, session workers, batches, compile sandbox, memory budget). The client never
imports the server. ``python -m runtime_backends.cloud serve`` runs a server; ``docs/cloud.md`` describes it all.
"""
