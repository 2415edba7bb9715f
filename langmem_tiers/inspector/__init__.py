"""The memory inspector: a local web page and JSON API over one memory deployment.

``langmem-tiers serve --path FOLDER`` (or a ``postgresql://`` URL) starts it on
127.0.0.1 with an access token printed in the URL, as Jupyter does. Pages show each
session's timeline by tier, the rolling summary, a query box that runs ``context()``
(what the model would receive, ``explain()`` and every recall hit with its score
parts), the user's memories, and actions (remember, forget with confirmation, export).
The JSON API (``/api/...``, schema at ``/api/openapi.json``) lets agents in other
languages or processes share the memory over HTTP under the same token and scope rules.

Needs the ``inspector`` extra: ``pip install 'langmem-tiers[inspector]'``.
"""

from langmem_tiers.inspector.settings import InspectorSettings

__all__ = ["InspectorSettings"]
