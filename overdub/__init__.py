"""overdub: run ordinary Python inside a context that sees every call and operator it makes.

A Python take on Julia's Cassette.jl.  See ``docs/concepts.md`` for the mental model.
"""

from ._active import current_context
from ._context import Context, can_recurse, is_opaque, opaque, overdub, recurse
from ._rewrite import embed
from ._tagging import Tagged, TagError, carries_tags, has_metadata, metadata, tag, untag

__all__ = ["Context", "overdub", "recurse", "can_recurse", "opaque", "is_opaque", "embed",
           "current_context",
           "tag", "untag", "metadata", "has_metadata", "Tagged", "TagError", "carries_tags"]
