"""keywatch.aio: keywatch for asyncio programs.

- :class:`Engine`: handlers may be coroutines (``@engine.on(...) async def ...``), and
  ``async for event in engine.events(...)`` pulls events. Built on deferred
  completion (kw_event_hold).
- :class:`Client`: the methods of keywatch.Client as coroutines; concurrent calls are
  pipelined by one worker thread per client.

See docs/python.md ("asyncio").
"""

from .client import Client
from .engine import Engine, EventStream

__all__ = ["Client", "Engine", "EventStream"]
