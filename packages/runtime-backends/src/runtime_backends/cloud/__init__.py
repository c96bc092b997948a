"""CLOUD backend: a device of another process or machine, reached over HTTP with the reference system's protocol.

Modules: ``protocol`` (request types), ``framing`` (the batch body's blobs), ``literal`` (the safe request-list
decoder), ``limits`` (server bounds), ``session`` (running a batch on the server), ``http_server`` (h11 on asyncio),
``server`` (``CloudServer``), ``renderers`` (the ``GET /renderer`` answer), ``client`` (the HTTP link), ``remote`` (the
client's batch queue), ``device`` (``CloudDevice``, the entry point). ``python -m runtime_backends.cloud serve`` runs a
server.
"""
